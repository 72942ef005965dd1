package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/go-rpcrdma/rpcrdma/internal/trace"
)

const traceUsage = `usage: rpcrdma trace [flags] FILE

Decodes a pcap or pcapng capture (optionally gzip-compressed; FILE "-" reads
standard input) layer by layer: TCP (reassembled per connection, both
directions, with retransmissions, reordering and gaps handled), MPA Request
and Reply (RFC 5044, the RFC 6581 IRD/ORD word, RFC 8797 private data),
FPDUs (CRC checked and markers removed as the handshake negotiated), DDP and
RDMAP (every opcode, both Terminate layouts), untagged Send messages
reassembled across FPDUs, RPC-over-RDMA Version One and Two headers with
their chunk lists, and the ONC RPC call or reply header.

A connection is decoded when its first bytes are an MPA Request or Reply, or
when it uses a port given with --port.

Text output: one line per MPA frame, FPDU, gap or undecodable run:
  FRAME sSTREAM DIR LAYER | LAYER | ...
where FRAME holds the message's last byte, STREAM numbers TCP connections
from 0, DIR is i>r (from the side that sent the SYN) or r>i, and each LAYER
is that layer's compact form. Errors end the line as "| error: ...".

JSON output (--json): one object per line with keys
  frame, time, stream, dir, src, dst, offset, length,
  kind ("mpa-frame", "fpdu", "gap", "error", "incomplete"),
  mpa   {type: "request"|"reply", rev, marker_flag, crc_flag, reject_flag,
         enhanced, pd_length, ird, ord, p2p, rtr, private_data (hex),
         rpcrdma_pd {rinv, send_size, recv_size}}
        or {type: "fpdu", ulpdu_length, crc, crc_ok, markers}, or null,
  ddp   {tagged, last, dv, stag, to | qn, msn, mo} or null,
  rdmap {rv, opcode, inval_stag, payload_length, rtr, read_request {sink_stag,
         sink_to, size, src_stag, src_to}, terminate {layer, etype, code,
         cause, hdrct, layout, segment_length, ddp_header}} or null,
and when present
  message {length, fragments, first_frame}   (the Send this FPDU completed)
  rpcrdma {xid, vers, credits, proc ("RDMA_MSG", ...),
           reads [{position, handle, length, offset}],
           writes [[{handle, length, offset}]], reply [{...}] or null,
           align, thresh, err {code, low, high}, opttype, optinfo_length;
           only xid, vers, credits when the rest did not decode}
  rpc     {xid, msg_type ("CALL"|"REPLY"), rpcvers, prog, vers, proc, cred,
           verf | stat, accept_stat, reject_stat, auth_stat, low, high}
  error   every error found in the message, joined by "; ".
Numbers are JSON numbers. A summary goes to standard error.

flags:
`

// cmdTrace runs `rpcrdma trace [flags] FILE`; args excludes "trace".
func cmdTrace(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("trace", "trace [flags] FILE", stderr)
	asJSON := fs.Bool("json", false, "print one JSON object per line instead of text")
	crc := fs.Bool("crc", false, "assume FPDUs carry a CRC where no MPA handshake says (with --port); otherwise the handshake decides")
	var ports []uint16
	fs.Func("port", "decode TCP port `N` as iWARP even without an MPA handshake at the start (repeatable, or comma-separated)", func(s string) error {
		for f := range strings.SplitSeq(s, ",") {
			p, err := strconv.ParseUint(strings.TrimSpace(f), 10, 16)
			if err != nil || p == 0 {
				return fmt.Errorf("%q is not a TCP port", f)
			}
			ports = append(ports, uint16(p))
		}
		return nil
	})
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), traceUsage)
		fs.PrintDefaults()
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "rpcrdma trace: want one capture file")
		return errUsage
	}
	name := fs.Arg(0)
	var r *trace.Reader
	var err error
	if name == "-" {
		r, err = trace.NewReader(os.Stdin)
	} else {
		r, err = trace.Open(name)
	}
	if err != nil {
		return err
	}
	defer r.Close()

	w := bufio.NewWriter(stdout)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	var werr error
	emit := func(ev *trace.Event) {
		if werr != nil {
			return
		}
		if *asJSON {
			werr = enc.Encode(ev)
		} else {
			_, werr = fmt.Fprintln(w, ev)
		}
	}
	st, err := trace.Decode(r, trace.Options{Ports: ports, CRC: *crc}, emit)
	if ferr := w.Flush(); werr == nil {
		werr = ferr
	}
	fmt.Fprintf(stderr, "%d frames, %d TCP connections (%d iWARP), %d messages, %d with errors; %d gaps (%d bytes), %d retransmissions, %d out of order\n",
		st.Frames, st.Streams, st.IWARP, st.Events, st.Errors, st.Gaps, st.GapBytes, st.Retransmissions, st.OutOfOrder)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return werr
}
