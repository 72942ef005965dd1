package iwarp

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/ddp"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp/mpa"
	"github.com/go-rpcrdma/rpcrdma/rdma/rdmatest"
)

// TestChunkedStream has a raw peer send RDMA Writes of odd lengths and a
// Send in chunks that end anywhere: inside headers, payloads and
// trailers, exactly where a payload ends, or with several FPDUs in one
// chunk. The reader's vectored reads (payload and what follows it in one
// system call) must place every payload exactly, write nothing else into
// the region, check the CRC, and account for every byte (rxDone).
func TestChunkedStream(t *testing.T) {
	lens := []int{1, 2, 3, 4, 5, 100, 1500, 4093, 6000}
	modes := []struct {
		name  string
		chunk int  // bytes per write; 0: the whole stream at once
		split bool // write each FPDU in two, split where its payload ends
	}{
		{"bytes", 1, false}, {"3", 3, false}, {"29", 29, false}, {"1000", 1000, false},
		{"4099", 4099, false}, {"whole", 0, false}, {"payload-end", 0, true},
	}
	for _, crc := range []bool{false, true} {
		for _, mode := range modes {
			name := "crc=off/" + mode.name
			if crc {
				name = "crc=on/" + mode.name
			}
			t.Run(name, func(t *testing.T) {
				rdmatest.CheckGoroutines(t)
				p := newProvider(t, Options{})
				r, c, _ := connectRaw(t, p, true, crc, rdma.ConnConfig{})
				if runtime.GOOS == "linux" && c.cr.vr == nil {
					t.Fatal("no vectored reads on a TCP socket")
				}
				const canary = 0xa5
				m := alloc(t, c, 16<<10, rdma.AccessRemoteWrite)
				mem := m.Bytes()
				for i := range mem {
					mem[i] = canary
				}
				want := bytes.Repeat([]byte{canary}, len(mem))
				postRecv(t, c, 1, 64)

				var fpdus [][]byte
				var ends []int // where each FPDU's payload ends, within it
				off := 7
				for i, n := range lens {
					data := make([]byte, n)
					for j := range data {
						data[j] = byte(i*31 + j*7 + 1)
					}
					copy(want[off:], data)
					seg := ddp.Segment{Header: ddp.Tagged(ddp.OpRDMAWrite, true, uint32(m.STag()), m.TO()+uint64(off)), Payload: data}
					fpdus = append(fpdus, mpa.AppendFPDU(nil, crc, seg.Append(nil)))
					ends = append(ends, mpa.LengthFieldLen+ddp.TaggedHeaderLen+n)
					off += n + 5
				}
				seg := ddp.Segment{Header: ddp.Untagged(ddp.OpSend, true, ddp.QNSend, r.nextMSN(0), 0), Payload: []byte("done")}
				fpdus = append(fpdus, mpa.AppendFPDU(nil, crc, seg.Append(nil)))
				ends = append(ends, mpa.LengthFieldLen+ddp.UntaggedHeaderLen+4)

				switch {
				case mode.split:
					for i, f := range fpdus {
						r.write(f[:ends[i]])
						time.Sleep(time.Millisecond) // let the reader stop there
						r.write(f[ends[i]:])
					}
				default:
					stream := bytes.Join(fpdus, nil)
					k := mode.chunk
					if k == 0 {
						k = len(stream)
					}
					for len(stream) > 0 {
						n := min(k, len(stream))
						r.write(stream[:n])
						stream = stream[n:]
					}
				}
				cs := rdmatest.WaitN(t, rdmatest.Config{Timeout: rawTimeout}, c, 1)
				rdmatest.Want(t, cs[0], 1, rdma.OpRecv, rdma.StatusSuccess, 4)
				if !bytes.Equal(mem, want) {
					for i := range mem {
						if mem[i] != want[i] {
							t.Fatalf("region byte %d is %#x, want %#x", i, mem[i], want[i])
						}
					}
				}
				// Every byte read was an FPDU handled: rxDone catches up
				// with the socket count, stash and buffer included.
				deadline := time.Now().Add(rawTimeout)
				for c.rxDone.Load() != c.cr.n.Load() && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				if done, n := c.rxDone.Load(), c.cr.n.Load(); done != n {
					t.Errorf("rxDone %d, bytes read %d", done, n)
				}
				if err := c.Err(); err != nil {
					t.Fatalf("connection ended: %v", err)
				}
			})
		}
	}
}

// TestChunkedBadCRC corrupts the CRC of an RDMA Write whose trailer
// arrives split across writes and together with the next FPDU: the
// reader must still catch it.
func TestChunkedBadCRC(t *testing.T) {
	for _, chunk := range []int{1, 3, 1000, 0} {
		t.Run(fmt.Sprint("chunk=", chunk), func(t *testing.T) {
			rdmatest.CheckGoroutines(t)
			p := newProvider(t, Options{})
			r, c, _ := connectRaw(t, p, true, true, rdma.ConnConfig{})
			m := alloc(t, c, 8<<10, rdma.AccessRemoteWrite)
			seg := ddp.Segment{Header: ddp.Tagged(ddp.OpRDMAWrite, true, uint32(m.STag()), m.TO()), Payload: bytes.Repeat([]byte{7}, 4093)}
			b := mpa.AppendFPDU(nil, true, seg.Append(nil))
			b[len(b)-2] ^= 0x10
			next := ddp.Segment{Header: ddp.Tagged(ddp.OpRDMAWrite, true, uint32(m.STag()), m.TO()+5000), Payload: []byte("next")}
			b = mpa.AppendFPDU(b, true, next.Append(nil))
			k := chunk
			if k == 0 {
				k = len(b)
			}
			for len(b) > 0 {
				n := min(k, len(b))
				r.write(b[:n])
				b = b[n:]
			}
			r.expectTerminate(ddp.CauseMPACRC, nil, 0)
			wantTerm(t, waitEnd(t, c), ddp.CauseMPACRC, false)
		})
	}
}
