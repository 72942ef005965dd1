package capture

import (
	"reflect"
	"testing"
)

// TestMPARecords: each iwarp_mpa layer starts a record, which the DDP and
// RDMAP layer after it fill too; the first value of a field wins; the CRC
// verdict comes from the display text; other layers' fields are left out.
func TestMPARecords(t *testing.T) {
	pdml := []byte(`<pdml><packet>
<proto name="geninfo"><field name="num" show="7"/></proto>
<proto name="tcp"><field name="tcp.srcport" show="4000"/></proto>
<proto name="iwarp_mpa"><field name="iwarp_mpa.ulpdulength" show="28"/>
<field name="iwarp_mpa.crc_check" show="0x81cf973f" showname="CRC check: 0x81cf973f (Good CRC32)"/></proto>
<proto name="iwarp_ddp_rdmap"><field name="iwarp_rdma.opcode" show="3"/><field name="iwarp_rdma.opcode" show="4"/></proto>
<proto name="rpcordma"><field name="rpcordma.xid" show="1"/></proto>
<proto name="iwarp_mpa"><field name="iwarp_mpa.ulpdulength" show="12"/></proto>
</packet></pdml>`)
	want := []MPARecord{
		{Frame: 7, SrcPort: "4000", Fields: map[string]string{"iwarp_mpa.ulpdulength": "28", "iwarp_mpa.crc_check": "0x81cf973f", "crc_verdict": "Good CRC32", "iwarp_rdma.opcode": "3"}},
		{Frame: 7, SrcPort: "4000", Fields: map[string]string{"iwarp_mpa.ulpdulength": "12"}},
	}
	if got := MPARecords(pdml); !reflect.DeepEqual(got, want) {
		t.Errorf("MPARecords:\n got %+v\nwant %+v", got, want)
	}
}
