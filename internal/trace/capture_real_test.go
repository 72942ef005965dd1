package trace

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
)

// Real iWARP captures: the 2008 IBM Zurich software iWARP set and a
// Windows Server 2012 SMB-Direct capture from the Wireshark wiki, kept
// beside the repository checkout (tests run in this package's directory)
// and used when present, and the Linux siw RPC-over-RDMA captures of the
// repository's lab (lab/README.md), kept in testdata/lab: the guest's NFS
// client mounting from a responder of ours (guest-client.pcap) and our
// requester calling knfsd (host-server.pcap).
const (
	sharedCaptures = "../../../shared/testdata/captures"
	labCaptures    = "testdata/lab"
)

// realCaptures returns the capture files, extracting the tarballs into a
// temporary directory; archive members are named like the ddp package's
// capture test names them (directory separators become "_").
func realCaptures(t *testing.T) []string {
	t.Helper()
	archives, _ := filepath.Glob(filepath.Join(sharedCaptures, "*.gz"))
	lab, _ := filepath.Glob(filepath.Join(labCaptures, "*.pcap"))
	if len(lab) == 0 {
		t.Fatalf("no captures in %s", labCaptures)
	}
	if len(archives) == 0 {
		t.Logf("no captures in %s: only the lab's are decoded", sharedCaptures)
	}
	tmp := t.TempDir()
	var files []string
	for _, a := range archives {
		if !strings.HasSuffix(a, ".tar.gz") {
			files = append(files, a) // a gzip-compressed capture: read as it is
			continue
		}
		fs, err := untar(a, tmp)
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		files = append(files, fs...)
	}
	files = append(files, lab...)
	slices.Sort(files)
	return files
}

func untar(archive, dir string) ([]string, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	var paths []string
	tr := tar.NewReader(zr)
	for {
		hd, err := tr.Next()
		if err == io.EOF {
			return paths, nil
		}
		if err != nil {
			return nil, err
		}
		if hd.Typeflag != tar.TypeReg {
			continue
		}
		out := filepath.Join(dir, strings.ReplaceAll(filepath.Clean(hd.Name), "/", "_"))
		b, err := io.ReadAll(io.LimitReader(tr, 64<<20))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(out, b, 0o600); err != nil {
			return nil, err
		}
		paths = append(paths, out)
	}
}

// realCaptureExpect is what is known about a capture beyond "every message
// decodes without error".
type realCaptureExpect struct {
	gaps int // holes the capture has
	// markerErrors: the 2008 IBM software iWARP stack misplaces markers
	// (their positions drift by 4 bytes per FPDU; see the mpa package's
	// Markers and the ddp package's capture test). A conformant receiver
	// rejects the stream with an MPA marker error at the first FPDU long
	// enough to hold a non-leading marker, once per direction, and we
	// stop decoding that direction there.
	markerErrors int
	noFPDUs      bool // the capture is an MPA handshake only
	rpcrdma      bool // RPC-over-RDMA traffic: headers must decode
}

var realExpect = map[string]realCaptureExpect{
	// Windows SMB-Direct: the responder's 20 bytes after the Reply are
	// not in the capture (tshark: "previous segment not captured").
	"smb-direct-man-in-the-middle-02-reassemble-frames9.pcap.gz": {gaps: 1},
	"iwarp_rdma_read_write_long_run_mrkr":                        {markerErrors: 2},
	// MPA Request/Reply with every C/M combination, and a rejection.
	"iwarp_connect_C00_M00":        {noFPDUs: true},
	"iwarp_connect_C00_M11":        {noFPDUs: true},
	"iwarp_connect_C11_M00":        {noFPDUs: true},
	"iwarp_connect_C11_M11":        {noFPDUs: true},
	"iwarp_connect_C00_M00_reject": {noFPDUs: true},
	"guest-client.pcap":            {rpcrdma: true},
	"host-server.pcap":             {rpcrdma: true},
}

// TestRealCaptures decodes every real capture: every message must decode
// without error, except what realExpect lists.
func TestRealCaptures(t *testing.T) {
	for _, path := range realCaptures(t) {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			want := realExpect[name]
			r, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var fpdus, headers, rpcs, markerErrors int
			st, err := Decode(r, Options{}, func(e *Event) {
				switch {
				case e.Kind == KindError && errors.Is(e.Err, mpa.ErrMarker) && want.markerErrors > 0:
					markerErrors++
					return
				case e.Err != nil:
					t.Errorf("%s", e)
				case e.Kind == KindFPDU:
					fpdus++
					if e.DDP == nil {
						t.Errorf("%s: no DDP segment", e)
					}
				case e.Kind == KindIncomplete || e.Kind == KindError:
					t.Errorf("%s", e)
				}
				if e.RPCRDMA != nil {
					headers++
				}
				if e.RPC != nil {
					rpcs++
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if st.IWARP == 0 || st.Streams != st.IWARP {
				t.Errorf("%d of %d TCP connections decoded as iWARP", st.IWARP, st.Streams)
			}
			if (fpdus == 0) != want.noFPDUs {
				t.Errorf("%d FPDUs", fpdus)
			}
			if st.Gaps != want.gaps || markerErrors != want.markerErrors {
				t.Errorf("%d gaps, %d marker errors; want %d, %d", st.Gaps, markerErrors, want.gaps, want.markerErrors)
			}
			if want.rpcrdma && (headers == 0 || rpcs == 0) {
				t.Errorf("%d RPC-over-RDMA headers, %d RPC headers", headers, rpcs)
			}
			t.Logf("%d frames, %d FPDUs, %d RPC-over-RDMA headers, %d RPC headers, %d gaps", st.Frames, fpdus, headers, rpcs, st.Gaps)
		})
	}
}
