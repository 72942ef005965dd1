package capture

import (
	"bytes"
	"encoding/xml"
	"strconv"
	"strings"
)

// An MPARecord is one MPA frame or FPDU in tshark's PDML output (-T pdml):
// the first "show" value of each field of its MPA, DDP and RDMAP layers,
// by field name, and "crc_verdict", the text tshark gives the CRC check
// only in its display name. Frame is the number of the frame it is in,
// SrcPort that frame's TCP source port.
type MPARecord struct {
	Frame   int
	SrcPort string
	Fields  map[string]string
}

// MPARecords returns the MPA records of tshark's PDML output, in the
// order it printed them. It stops at the end of the output or at the
// first XML it cannot read.
func MPARecords(pdml []byte) []MPARecord {
	var recs []MPARecord
	var frame int
	var port string
	var cur map[string]string // the record being filled, nil outside MPA/DDP
	dec := xml.NewDecoder(bytes.NewReader(pdml))
	for {
		tok, err := dec.Token()
		if err != nil {
			return recs
		}
		el, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		attr := func(n string) string {
			for _, a := range el.Attr {
				if a.Name.Local == n {
					return a.Value
				}
			}
			return ""
		}
		switch el.Name.Local {
		case "packet":
			frame, port, cur = 0, "", nil
		case "proto":
			switch attr("name") {
			case "iwarp_mpa":
				cur = map[string]string{}
				recs = append(recs, MPARecord{Frame: frame, SrcPort: port, Fields: cur})
			case "iwarp_ddp_rdmap":
			default:
				cur = nil
			}
		case "field":
			name, show := attr("name"), attr("show")
			switch {
			case name == "num" && frame == 0:
				frame, _ = strconv.Atoi(show)
			case name == "tcp.srcport":
				port = show
			}
			if cur == nil {
				break
			}
			if _, dup := cur[name]; !dup {
				cur[name] = show
			}
			if name == "iwarp_mpa.crc_check" {
				sn := attr("showname")
				if i, j := strings.LastIndex(sn, "("), strings.LastIndex(sn, ")"); i >= 0 && j > i {
					cur["crc_verdict"] = sn[i+1 : j]
				}
			}
		}
	}
}
