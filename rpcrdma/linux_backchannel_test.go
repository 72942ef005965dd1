package rpcrdma_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/internal/lab"
	"github.com/go-rpcrdma/rpcrdma/rdma/iwarp"
	"github.com/go-rpcrdma/rpcrdma/rpc"
	"github.com/go-rpcrdma/rpcrdma/rpcrdma"
	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// NFSv4.1 (RFC 8881) as far as opening a session with a backchannel.
const (
	nfs4OpClose           = 4
	nfs4OpDelegReturn     = 8
	nfs4OpGetFH           = 10
	nfs4OpOpen            = 18
	nfs4OpPutFH           = 22
	nfs4OpPutRootFH       = 24
	nfs4OpExchangeID      = 42
	nfs4OpCreateSession   = 43
	nfs4OpDestroySession  = 44
	nfs4OpSequence        = 53
	nfs4OpDestroyClientID = 57
	nfs4OpReclaimComplete = 58

	openShareRead     = 0x1   // OPEN4_SHARE_ACCESS_READ
	openWantReadDeleg = 0x100 // OPEN4_SHARE_ACCESS_WANT_READ_DELEG

	nfs4ErrGrace = 10013 // NFS4ERR_GRACE

	openDelegateNone    = 0 // open_delegation_type4
	openDelegateRead    = 1
	openDelegateNoneExt = 3
	wnd4Contention      = 1 // why_no_delegation4
	wnd4Resource        = 2

	cbCompound    = 1  // CB_COMPOUND
	cbOpRecall    = 4  // OP_CB_RECALL
	cbOpRecallAny = 8  // OP_CB_RECALL_ANY
	cbOpSequence  = 11 // OP_CB_SEQUENCE

	createSessionConnBackChan = 0x2 // CREATE_SESSION4_FLAG_CONN_BACK_CHAN

	seq4CBPathDown        = 0x001 // SEQ4_STATUS_CB_PATH_DOWN
	seq4CBPathDownSession = 0x200 // SEQ4_STATUS_CB_PATH_DOWN_SESSION
	seq4BackchannelFault  = 0x400 // SEQ4_STATUS_BACKCHANNEL_FAULT

	cbProg = 0x40000000 // the callback program number we give knfsd
)

// compound41 sends an NFSv4.1 COMPOUND of the given operations, each its
// opcode followed by its arguments, and returns the decoder at the first
// operation's result after checking the COMPOUND's status.
func compound41(t *testing.T, cli *rpc.Client, ops ...[]byte) *rpc.BodyDecoder {
	t.Helper()
	status, n, d := compound41Status(t, cli, ops...)
	if d.Err() != nil || status != 0 || n != uint32(len(ops)) {
		t.Fatalf("COMPOUND of %d operations: status %d, %d results, %v", len(ops), status, n, d.Err())
	}
	return d
}

// compound41Status is compound41 returning the COMPOUND's status and
// number of results instead of checking them.
func compound41Status(t *testing.T, cli *rpc.Client, ops ...[]byte) (status, n uint32, d *rpc.BodyDecoder) {
	t.Helper()
	var a rpc.Body
	a.XDR = xdr.AppendString(a.XDR, "")               // tag
	a.XDR = xdr.AppendUint32(a.XDR, 1)                // minorversion
	a.XDR = xdr.AppendUint32(a.XDR, uint32(len(ops))) // operations
	for _, op := range ops {
		a.XDR = append(a.XDR, op...)
	}
	d = nfsCall(t, cli, 4, nfs4Compound, a, nil, 0)
	status = d.Uint32()
	d.Opaque(1024) // tag
	n = d.Uint32()
	return status, n, d
}

// op returns an operation: its opcode, then args.
func op(code uint32, args ...[]byte) []byte {
	b := xdr.AppendUint32(nil, code)
	for _, a := range args {
		b = append(b, a...)
	}
	return b
}

// opResult reads an operation's resop and status and fails unless they
// are code and NFS4_OK.
func opResult(t *testing.T, d *rpc.BodyDecoder, code uint32) {
	t.Helper()
	resop, status := d.Uint32(), d.Uint32()
	if d.Err() != nil || resop != code || status != 0 {
		t.Fatalf("operation %d: result for %d, status %d, %v", code, resop, status, d.Err())
	}
}

// channelAttrs appends a channel_attrs4 without RDMA IRD.
func channelAttrs(b []byte, maxReq, maxResp, maxCached, maxOps, maxReqs uint32) []byte {
	for _, v := range []uint32{0, maxReq, maxResp, maxCached, maxOps, maxReqs, 0} {
		b = xdr.AppendUint32(b, v)
	}
	return b
}

// cbServer is a minimal NFSv4.1 callback service (RFC 8881 section 20):
// CB_COMPOUND with CB_SEQUENCE and CB_RECALL, each answered NFS4_OK; the
// stateids recalled go to recalls. CB_RECALL_ANY, which a server may send
// at any time to have state given back (section 20.6; Linux knfsd does
// under memory pressure), is answered NFS4_OK and otherwise ignored.
type cbServer struct {
	t       *testing.T
	recalls chan []byte
}

func (s *cbServer) compound(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
	d := c.Decoder()
	tag := d.Opaque(1024)
	d.Uint32() // minorversion
	d.Uint32() // callback_ident
	n := d.Uint32()
	var res []byte
	for i := uint32(0); i < n && d.Err() == nil; i++ {
		switch code := d.Uint32(); code {
		case cbOpSequence:
			session := d.FixedOpaque(16)
			seq, slot, highest := d.Uint32(), d.Uint32(), d.Uint32()
			d.Bool() // csa_cachethis
			for range d.Uint32() {
				d.FixedOpaque(16)
				d.Skip(8 * int(d.Uint32()))
			}
			res = xdr.AppendUint32(res, code)
			res = xdr.AppendUint32(res, 0)
			res = append(res, session...)
			for _, v := range []uint32{seq, slot, highest, highest} {
				res = xdr.AppendUint32(res, v)
			}
		case cbOpRecall:
			stateid := append([]byte(nil), d.FixedOpaque(16)...)
			d.Bool()      // truncate
			d.Opaque(128) // fh
			res = xdr.AppendUint32(res, code)
			res = xdr.AppendUint32(res, 0)
			s.recalls <- stateid
		case cbOpRecallAny:
			d.Uint32() // craa_objects_to_keep
			d.Skip(4 * int(d.Uint32()))
			res = xdr.AppendUint32(res, code)
			res = xdr.AppendUint32(res, 0)
		default:
			s.t.Errorf("callback operation %d not expected", code)
			return rpc.Body{}, rpc.ErrGarbageArgs
		}
	}
	if err := d.Done(); err != nil {
		s.t.Errorf("CB_COMPOUND: %v", err)
		return rpc.Body{}, err
	}
	out := xdr.AppendUint32(nil, 0) // NFS4_OK
	out = xdr.AppendOpaque(out, tag)
	out = xdr.AppendUint32(out, n)
	return rpc.Body{XDR: append(out, res...)}, nil
}

// session41 is an NFSv4.1 client ID and session on one connection.
type session41 struct {
	t        *testing.T
	cli      *rpc.Client
	clientID uint64
	id       []byte
	slotSeq  uint32
}

// sequence returns a SEQUENCE operation on slot 0, the next in order.
func (s *session41) sequence() []byte {
	s.slotSeq++
	a := append([]byte(nil), s.id...)
	a = xdr.AppendUint32(a, s.slotSeq) // sa_sequenceid
	a = xdr.AppendUint32(a, 0)         // sa_slotid
	a = xdr.AppendUint32(a, 0)         // sa_highest_slotid
	a = xdr.AppendBool(a, false)       // sa_cachethis
	return op(nfs4OpSequence, a)
}

// sequenceResult reads SEQUENCE's result and returns sr_status_flags.
func (s *session41) sequenceResult(d *rpc.BodyDecoder) uint32 {
	s.t.Helper()
	opResult(s.t, d, nfs4OpSequence)
	d.FixedOpaque(16)
	d.Skip(4 * 4)
	return d.Uint32()
}

// TestLinuxBackchannel runs NFSv4.1's callback path over RFC 8167 against
// knfsd: a session whose backchannel is the RPC-over-RDMA connection
// itself, a read delegation, and a local write in the guest that makes
// knfsd recall it with CB_COMPOUND(CB_SEQUENCE, CB_RECALL), a backward
// call our Backchannel's rpc.Server answers. The delegation is returned,
// the write completes, and knfsd never reports the callback path down.
// (knfsd 6.1 sends no CB_NULL on a 4.1 session: it marks the path up at
// CREATE_SESSION, so a recall is the first backward call.)
func TestLinuxBackchannel(t *testing.T) {
	conn, cli := dialLinux(t, iwarp.Options{}, &rpcrdma.Config{BackwardCredits: 4})
	name := fmt.Sprintf("deleg-%d.txt", time.Now().UnixNano())
	if out, rc := lab.Run(t, fmt.Sprintf("echo hello > /export/%s", name), lab.CmdTimeout); rc != 0 {
		t.Fatalf("creating /export/%s in the guest: exit %d\n%s", name, rc, out)
	}

	cbs := &cbServer{t: t, recalls: make(chan []byte, 4)}
	cb := rpc.NewServer(nil)
	cb.Handle(cbProg, 1, cbCompound, cbs.compound)
	served := make(chan struct{})
	go func() { cb.Serve(conn.Backchannel()); close(served) }()
	t.Cleanup(func() { cb.Close(); <-served })

	// EXCHANGE_ID with a fresh owner.
	var a []byte
	a = append(a, 'g', 'o', 'r', 'p', 'c', 'r', 'd', 'm') // co_verifier
	a = xdr.AppendString(a, fmt.Sprintf("go-rpcrdma-backchannel-%d-%d", os.Getpid(), time.Now().UnixNano()))
	a = xdr.AppendUint32(a, 0) // eia_flags
	a = xdr.AppendUint32(a, 0) // SP4_NONE
	a = xdr.AppendUint32(a, 0) // no client_impl_id
	d := compound41(t, cli, op(nfs4OpExchangeID, a))
	opResult(t, d, nfs4OpExchangeID)
	hi, lo := d.Uint32(), d.Uint32()
	seq := d.Uint32()
	if d.Err() != nil {
		t.Fatalf("EXCHANGE_ID result: %v", d.Err())
	}
	s := &session41{t: t, cli: cli, clientID: uint64(hi)<<32 | uint64(lo)}

	// CREATE_SESSION asking for the backchannel on this connection.
	a = xdr.AppendUint64(nil, s.clientID)
	a = xdr.AppendUint32(a, seq)
	a = xdr.AppendUint32(a, createSessionConnBackChan)
	a = channelAttrs(a, 1<<20, 1<<20, 4096, 8, 4) // fore channel
	a = channelAttrs(a, 4096, 4096, 0, 2, 2)      // back channel: within our 4 backward credits
	a = xdr.AppendUint32(a, cbProg)
	a = xdr.AppendUint32(a, 1) // one callback_sec_parms4:
	a = xdr.AppendUint32(a, 0) // AUTH_NONE
	d = compound41(t, cli, op(nfs4OpCreateSession, a))
	opResult(t, d, nfs4OpCreateSession)
	s.id = append([]byte(nil), d.FixedOpaque(16)...)
	d.Uint32() // csr_sequence
	flags := d.Uint32()
	if d.Err() != nil {
		t.Fatalf("CREATE_SESSION result: %v", d.Err())
	}
	if flags&createSessionConnBackChan == 0 {
		t.Fatalf("knfsd did not bind the backchannel to the connection (csr_flags %#x)", flags)
	}

	// RECLAIM_COMPLETE: nothing to reclaim, so OPENs may follow (knfsd
	// answers NFS4ERR_GRACE before it).
	d = compound41(t, cli, s.sequence(), op(nfs4OpReclaimComplete, xdr.AppendBool(nil, false)))
	s.sequenceResult(d)
	opResult(t, d, nfs4OpReclaimComplete)

	// OPEN for reading, wanting a read delegation. Soon after boot, which
	// is when CI gets here, knfsd refuses the OPEN with NFS4ERR_GRACE
	// (its own grace period, the lease time: 10 s in the lab), then opens
	// without a delegation (OPEN_DELEGATE_NONE_EXT, WND4_RESOURCE) while
	// any grace period runs, lockd's included (five times its 10 s
	// timeout). So close and try again, for up to 90 s.
	var openStateid, delegStateid, fh []byte
	start := time.Now()
	for deadline := start.Add(90 * time.Second); ; {
		a = xdr.AppendUint32(nil, 0) // seqid
		a = xdr.AppendUint32(a, openShareRead|openWantReadDeleg)
		a = xdr.AppendUint32(a, 0)          // share_deny
		a = xdr.AppendUint64(a, s.clientID) // open_owner4
		a = xdr.AppendString(a, "go-rpcrdma-owner")
		a = xdr.AppendUint32(a, 0) // OPEN4_NOCREATE
		a = xdr.AppendUint32(a, 0) // CLAIM_NULL
		a = xdr.AppendString(a, name)
		status, _, d := compound41Status(t, cli, s.sequence(), op(nfs4OpPutRootFH), op(nfs4OpOpen, a), op(nfs4OpGetFH))
		if f := s.sequenceResult(d); f&(seq4CBPathDown|seq4CBPathDownSession|seq4BackchannelFault) != 0 {
			t.Fatalf("knfsd reports the callback path down before any backward call: sr_status_flags %#x", f)
		}
		if status == nfs4ErrGrace && time.Now().Before(deadline) {
			time.Sleep(time.Second)
			continue
		}
		if status != 0 {
			t.Fatalf("COMPOUND(SEQUENCE, PUTROOTFH, OPEN, GETFH): status %d", status)
		}
		opResult(t, d, nfs4OpPutRootFH)
		opResult(t, d, nfs4OpOpen)
		openStateid = append([]byte(nil), d.FixedOpaque(16)...)
		d.Skip(4 + 8 + 8) // change_info4
		d.Uint32()        // rflags
		d.Skip(4 * int(d.Uint32()))
		why := uint32(0)
		switch dtype := d.Uint32(); dtype {
		case openDelegateRead:
			delegStateid = append([]byte(nil), d.FixedOpaque(16)...)
			d.Bool()   // recall
			d.Skip(12) // nfsace4 type, flag, access_mask
			d.Opaque(1024)
		case openDelegateNone:
		case openDelegateNoneExt:
			if why = d.Uint32(); why == wnd4Contention || why == wnd4Resource {
				d.Bool()
			}
		default:
			t.Fatalf("knfsd granted delegation type %d, want a read delegation (1)", dtype)
		}
		opResult(t, d, nfs4OpGetFH)
		fh = append([]byte(nil), d.Opaque(128)...)
		if d.Err() != nil {
			t.Fatalf("OPEN result: %v", d.Err())
		}
		if delegStateid != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("knfsd granted no read delegation within 90 s (why_no_delegation4 %d)", why)
		}
		d = compound41(t, cli, s.sequence(), op(nfs4OpPutFH, xdr.AppendOpaque(nil, fh)), op(nfs4OpClose, xdr.AppendUint32(nil, 0), openStateid))
		s.sequenceResult(d)
		opResult(t, d, nfs4OpPutFH)
		opResult(t, d, nfs4OpClose)
		time.Sleep(time.Second)
	}
	if w := time.Since(start); w > time.Second {
		t.Logf("knfsd granted the delegation after %v (grace periods after boot)", w.Round(time.Second))
	}

	// A local write breaks the delegation's lease: knfsd recalls it over
	// the backchannel and holds the write until it comes back (at most
	// its lease time, 10 s in the lab).
	wrote := make(chan error, 1)
	go func() {
		var err error
		if out, rc := lab.Run(t, fmt.Sprintf("echo more >> /export/%s", name), lab.CmdTimeout); rc != 0 {
			err = fmt.Errorf("exit %d: %s", rc, out)
		}
		wrote <- err
	}()
	// The write waits its turn on the guest's command channel, which
	// other tests, of this package or another, may hold for minutes: wait
	// for the recall or for the write to end without one, not for a
	// fixed time (the bound only stops a hang).
	// Meanwhile the client renews its lease (10 s in the lab), as an
	// NFSv4.1 client does with SEQUENCE: one whose lease lapses becomes a
	// courtesy client, whose delegation knfsd (Linux 5.19 and later)
	// revokes without a recall when the conflicting write comes.
	var recalled []byte
	renew := time.NewTicker(2 * time.Second)
	defer renew.Stop()
	giveUp := time.After(5 * time.Minute)
wait:
	for {
		select {
		case recalled = <-cbs.recalls:
			break wait
		case err := <-wrote:
			st := conn.Stats()
			t.Fatalf("the guest's write ended (%v) with no CB_RECALL: %d backward calls, %d replies, %d dropped", err, st.BackwardCalls, st.BackwardReplies, st.Dropped)
		case <-renew.C:
			s.sequenceResult(compound41(t, cli, s.sequence()))
		case <-giveUp:
			st := conn.Stats()
			t.Fatalf("no CB_RECALL within 5 minutes: %d backward calls, %d replies, %d dropped", st.BackwardCalls, st.BackwardReplies, st.Dropped)
		}
	}
	if string(recalled) != string(delegStateid) {
		t.Errorf("CB_RECALL of stateid %x, want the delegation's %x", recalled, delegStateid)
	}
	returned := time.Now()
	d = compound41(t, cli, s.sequence(), op(nfs4OpPutFH, xdr.AppendOpaque(nil, fh)), op(nfs4OpDelegReturn, delegStateid))
	flags = s.sequenceResult(d)
	opResult(t, d, nfs4OpPutFH)
	opResult(t, d, nfs4OpDelegReturn)
	select {
	case err := <-wrote:
		if err != nil {
			t.Errorf("the guest's write: %v", err)
		}
		// knfsd lets the write through once the delegation is back,
		// well before the lease time would have.
		if d := time.Since(returned); d > 5*time.Second {
			t.Errorf("the guest's write finished %v after DELEGRETURN", d)
		}
	case <-time.After(20 * time.Second):
		t.Error("the guest's write still blocked 20 s after DELEGRETURN")
	}
	if flags&(seq4CBPathDown|seq4CBPathDownSession|seq4BackchannelFault) != 0 {
		t.Errorf("knfsd reports the callback path down after our CB_RECALL reply: sr_status_flags %#x", flags)
	}
	st := conn.Stats()
	if st.BackwardCalls == 0 || st.BackwardReplies != st.BackwardCalls || st.Dropped != 0 {
		t.Errorf("backward calls %d, replies %d, dropped %d", st.BackwardCalls, st.BackwardReplies, st.Dropped)
	}

	// Clean up: CLOSE, DESTROY_SESSION, DESTROY_CLIENTID.
	a = xdr.AppendUint32(nil, 0)
	d = compound41(t, cli, s.sequence(), op(nfs4OpPutFH, xdr.AppendOpaque(nil, fh)), op(nfs4OpClose, a, openStateid))
	s.sequenceResult(d)
	d = compound41(t, cli, op(nfs4OpDestroySession, s.id))
	opResult(t, d, nfs4OpDestroySession)
	d = compound41(t, cli, op(nfs4OpDestroyClientID, xdr.AppendUint64(nil, s.clientID)))
	opResult(t, d, nfs4OpDestroyClientID)
	t.Logf("delegation recalled over the backchannel: %d backward calls answered", st.BackwardReplies)
}
