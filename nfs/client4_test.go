package nfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs4"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// fake4 is a minimal NFSv4.1 server for the client's session logic: it
// keeps one client ID and session, a reply cache per slot (RFC 8881
// Section 2.10.6.1), and counts how often it ran each request, so a test
// can see a request run exactly once however its reply was lost.
type fake4 struct {
	mu        sync.Mutex
	clientID  uint64
	csSeq     uint32
	session   nfs4.SessionID
	slots     int
	cache     map[uint32]fakeSlot // by slot ID
	runs      map[[2]uint32]int   // by slot ID and sequence ID
	badNext   int                 // answer the next SEQUENCEs with NFS4ERR_BADSESSION
	staleNext int                 // answer the next SEQUENCEs with NFS4ERR_STALE_CLIENTID
	sessions  int                 // created
	exchanges int
	target    uint32 // sr_target_highest_slotid
	reclaimed bool
	lieSlot   bool // answer SEQUENCE naming another slot
	made      map[string]bool
	files     fakeFiles // opens, reads and writes: client4_recover_test.go
}

type fakeSlot struct {
	seq   uint32
	reply []byte
}

var fakeRoot = nfs4.FileHandle("root-handle")

func newFake4(slots int) *fake4 {
	return &fake4{slots: slots, cache: map[uint32]fakeSlot{}, runs: map[[2]uint32]int{}, target: uint32(slots - 1), made: map[string]bool{}}
}

func (f *fake4) handle(_ context.Context, c *rpc.Call) (rpc.Body, error) {
	var args nfs4.CompoundArgs
	d := rpc.NewBodyDecoder(c.Args)
	if err := args.Decode(&d); err != nil {
		return rpc.Body{}, rpc.ErrGarbageArgs
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	res := nfs4.CompoundRes{Tag: args.Tag}
	fh := nfs4.FileHandle(nil)
	for i, op := range args.Ops {
		var r nfs4.ResOp
		switch a := op.(type) {
		case *nfs4.ExchangeIDArgs:
			f.exchanges++
			f.clientID++
			f.csSeq = 1
			r = &nfs4.ExchangeIDRes{ClientID: f.clientID, SequenceID: f.csSeq, Flags: nfs4.ExchgIDFlagUseNonPNFS,
				ServerMajorID: []byte("fake-owner"), ServerScope: []byte("fake-scope")}
		case *nfs4.CreateSessionArgs:
			if a.ClientID != f.clientID {
				r = &nfs4.CreateSessionRes{Status: nfs4.ErrStaleClientID}
				break
			}
			if a.Sequence != f.csSeq {
				r = &nfs4.CreateSessionRes{Status: nfs4.ErrSeqMisordered}
				break
			}
			f.csSeq++
			f.sessions++
			f.session = nfs4.SessionID{byte(f.sessions), 0xab}
			f.cache = map[uint32]fakeSlot{}
			fore := a.Fore
			fore.MaxRequests = uint32(min(int(fore.MaxRequests), f.slots))
			r = &nfs4.CreateSessionRes{SessionID: f.session, Sequence: a.Sequence, Fore: fore, Back: a.Back}
		case *nfs4.SequenceArgs:
			if i != 0 {
				r = &nfs4.SequenceRes{Status: nfs4.ErrSequencePos}
				break
			}
			switch {
			case f.staleNext > 0:
				f.staleNext--
				f.clientID += 100 // forget the client
				r = &nfs4.SequenceRes{Status: nfs4.ErrStaleClientID}
			case f.badNext > 0 || a.SessionID != f.session:
				if f.badNext > 0 {
					f.badNext--
					f.session[15]++ // forget the session
				}
				r = &nfs4.SequenceRes{Status: nfs4.ErrBadSession}
			case a.SlotID >= uint32(f.slots):
				r = &nfs4.SequenceRes{Status: nfs4.ErrBadSlot}
			default:
				s := f.cache[a.SlotID]
				switch a.SequenceID {
				case s.seq: // a retry: the cached reply, not run again
					if s.reply == nil { // like knfsd, only what sa_cachethis asked for is kept
						r = &nfs4.SequenceRes{Status: nfs4.ErrRetryUncachedRep}
						break
					}
					return rpc.Body{XDR: s.reply}, nil
				case s.seq + 1:
				default:
					r = &nfs4.SequenceRes{Status: nfs4.ErrSeqMisordered}
				}
				if r == nil {
					f.runs[[2]uint32{a.SlotID, a.SequenceID}]++
					r = &nfs4.SequenceRes{SessionID: a.SessionID, SequenceID: a.SequenceID, SlotID: a.SlotID,
						HighestSlotID: uint32(f.slots - 1), TargetHighestSlotID: f.target, StatusFlags: f.files.statusFlags}
					if f.lieSlot {
						r.(*nfs4.SequenceRes).SlotID++
					}
				}
			}
		case *nfs4.ReclaimCompleteArgs:
			if f.reclaimed {
				r = &nfs4.ReclaimCompleteRes{Status: nfs4.ErrCompleteAlready}
			} else {
				f.reclaimed = true
				r = &nfs4.ReclaimCompleteRes{}
			}
		case *nfs4.PutRootFHArgs:
			fh = fakeRoot
			r = &nfs4.PutRootFHRes{}
		case *nfs4.GetFHArgs:
			r = &nfs4.GetFHRes{FH: fh}
		case *nfs4.GetattrArgs:
			at := nfs4.Attr{Mask: nfs4.BitmapOf(nfs4.AttrType, nfs4.AttrLeaseTime, nfs4.AttrMaxRead, nfs4.AttrMaxWrite),
				Type: nfs4.TypeDir, LeaseTime: 90, MaxRead: 1 << 20, MaxWrite: 1 << 20}
			r = &nfs4.GetattrRes{Attr: at}
		case *nfs4.CreateArgs:
			if f.made[a.Name] {
				r = &nfs4.CreateRes{Status: nfs4.ErrExist}
				break
			}
			f.made[a.Name] = true
			fh = nfs4.FileHandle("made-" + a.Name)
			r = &nfs4.CreateRes{}
		case *nfs4.PutFHArgs:
			fh = a.FH
			r = &nfs4.PutFHRes{}
		case *nfs4.DestroySessionArgs:
			r = &nfs4.DestroySessionRes{}
		case *nfs4.DestroyClientIDArgs:
			r = &nfs4.DestroyClientIDRes{}
		default:
			r = f.fileOp(op, &fh) // client4_recover_test.go
		}
		res.Ops = append(res.Ops, r)
		if st := r.OpStatus(); st != nfs4.OK {
			res.Status = st
			break
		}
	}
	var b rpc.Body
	res.Append(&b)
	if sa, ok := args.Ops[0].(*nfs4.SequenceArgs); ok && res.Ops[0].OpStatus() == nfs4.OK {
		fs := fakeSlot{seq: sa.SequenceID}
		if sa.CacheThis {
			fs.reply = append([]byte(nil), b.XDR...)
		}
		f.cache[sa.SlotID] = fs
	}
	return b, nil
}

// startFake4 serves f on loopback TCP behind a proxy that can cut a
// connection after a reply has been built (drops), and returns the
// proxy's address.
func startFake4(t *testing.T, f *fake4) (addr string, drops *atomic.Int32) {
	t.Helper()
	srv := rpc.NewServer(nil)
	srv.Handle(nfs4.Program, nfs4.Version, nfs4.ProcNull, func(context.Context, *rpc.Call) (rpc.Body, error) { return rpc.Body{}, nil })
	srv.Handle(nfs4.Program, nfs4.Version, nfs4.ProcCompound, f.handle)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.ServeListener(l); close(done) }()
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	drops = new(atomic.Int32)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := pl.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				c.Close()
				continue
			}
			wg.Go(func() { io.Copy(s, c); s.Close() })
			wg.Go(func() {
				buf := make([]byte, 64<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 && drops.Load() > 0 {
						drops.Add(-1)
						c.Close()
						s.Close()
						return
					}
					if n > 0 {
						if _, err := c.Write(buf[:n]); err != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				c.Close()
			})
		}
	})
	t.Cleanup(func() { pl.Close(); srv.Close(); <-done; wg.Wait() })
	return pl.Addr().String(), drops
}

func mountFake(t *testing.T, addr string, conns int) *Client4 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Mount4(ctx, Config4{Dial: TCP(addr), Conns: conns, Reconnect: rpc.ReconnectConfig{MinBackoff: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestMount4(t *testing.T) {
	f := newFake4(8)
	addr, _ := startFake4(t, f)
	c := mountFake(t, addr, 2)
	in := c.Info()
	if in.Slots != 8 || in.Conns != 2 || in.ServerOwner != "fake-owner" || in.ServerScope != "fake-scope" || in.Lease != 90*time.Second ||
		string(c.Root()) != string(fakeRoot) || in.MaxRead != 1<<20 {
		t.Errorf("Info %+v, root %q", in, c.Root())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.reclaimed {
		t.Error("no RECLAIM_COMPLETE before the first OPEN could be sent")
	}
}

// TestCompound4ExactlyOnce: calls whose replies are lost with their
// connection are sent again on the same slot and sequence ID, and the
// server runs each once; many in flight at once over two connections.
func TestCompound4ExactlyOnce(t *testing.T) {
	f := newFake4(4)
	addr, drops := startFake4(t, f)
	c := mountFake(t, addr, 2)
	ctx := ctxT(t)
	drops.Store(3)
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for range 40 {
		wg.Go(func() { errs <- c.compound(ctx, nil, nil, callOpts{}) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if drops.Load() != 0 {
		t.Fatalf("%d connection cuts left: the test cut nothing", drops.Load())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	total := 0
	for k, n := range f.runs {
		if n != 1 {
			t.Errorf("slot %d sequence %d ran %d times", k[0], k[1], n)
		}
		total += n
	}
	if total < 40 {
		t.Errorf("%d requests ran, want at least 40", total)
	}
}

// TestCompound4NonIdempotent: CREATEs whose replies are lost with their
// connection are answered from the reply cache (sa_cachethis), never run
// twice, which would fail with NFS4ERR_EXIST; idempotent calls whose
// replies were not kept are sent anew.
func TestCompound4NonIdempotent(t *testing.T) {
	f := newFake4(4)
	addr, drops := startFake4(t, f)
	c := mountFake(t, addr, 2)
	ctx := ctxT(t)
	drops.Store(4)
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 20 {
		wg.Go(func() {
			_, err := c.Mkdir(ctx, fakeRoot, fmt.Sprintf("d%d", i), nfs4.SetAttr{})
			errs <- err
		})
		wg.Go(func() { errs <- c.compound(ctx, nil, nil, callOpts{}) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if drops.Load() != 0 {
		t.Fatalf("%d connection cuts left: the test cut nothing", drops.Load())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.made) != 20 {
		t.Errorf("%d directories made, want 20", len(f.made))
	}
}

// TestCompound4Recovery: a lost session is created again, a lost client
// ID exchanged again, and the request goes through.
func TestCompound4Recovery(t *testing.T) {
	f := newFake4(2)
	addr, _ := startFake4(t, f)
	c := mountFake(t, addr, 1)
	ctx := ctxT(t)
	f.mu.Lock()
	f.badNext = 1
	f.mu.Unlock()
	if err := c.compound(ctx, nil, nil, callOpts{}); err != nil {
		t.Fatalf("after BADSESSION: %v", err)
	}
	f.mu.Lock()
	sessions, exchanges := f.sessions, f.exchanges
	f.staleNext = 1
	f.mu.Unlock()
	if sessions != 2 || exchanges != 1 {
		t.Errorf("after BADSESSION: %d sessions, %d exchanges", sessions, exchanges)
	}
	if err := c.compound(ctx, nil, nil, callOpts{}); err != nil {
		t.Fatalf("after STALE_CLIENTID: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sessions != 3 || f.exchanges != 2 {
		t.Errorf("after STALE_CLIENTID: %d sessions, %d exchanges", f.sessions, f.exchanges)
	}
}

// TestCompound4TargetSlots: the client uses no slot above the server's
// target.
func TestCompound4TargetSlots(t *testing.T) {
	f := newFake4(8)
	f.target = 1
	addr, _ := startFake4(t, f)
	c := mountFake(t, addr, 1)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { c.compound(ctx, nil, nil, callOpts{}) })
	}
	wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	for k := range f.runs {
		// The first calls, before a reply set the target, may use any.
		if k[0] > 1 && k[1] > 1 {
			t.Errorf("slot %d used after the server's target of 1", k[0])
		}
	}
}

func TestCheckResults(t *testing.T) {
	args := []nfs4.ArgOp{&nfs4.SequenceArgs{}, &nfs4.PutRootFHArgs{}, &nfs4.GetFHArgs{}}
	for _, tc := range []struct {
		res  nfs4.CompoundRes
		want string
	}{
		{nfs4.CompoundRes{Ops: []nfs4.ResOp{&nfs4.SequenceRes{}, &nfs4.PutRootFHRes{}, &nfs4.GetFHRes{}}}, ""},
		{nfs4.CompoundRes{Ops: []nfs4.ResOp{&nfs4.SequenceRes{}, &nfs4.PutRootFHRes{}, &nfs4.GetFHRes{}, &nfs4.GetFHRes{}}}, "4 results for 3 operations"},
		{nfs4.CompoundRes{Ops: []nfs4.ResOp{&nfs4.SequenceRes{}, &nfs4.GetFHRes{}}}, "GETFH result for operation 1, a PUTROOTFH"},
		{nfs4.CompoundRes{Ops: []nfs4.ResOp{&nfs4.SequenceRes{}}}, "1 results for 3 operations and no error"},
		{nfs4.CompoundRes{Status: nfs4.ErrBadSession, Ops: []nfs4.ResOp{&nfs4.SequenceRes{Status: nfs4.ErrBadSession}}}, "SEQUENCE: "},
		{nfs4.CompoundRes{Status: nfs4.ErrMinorVersMismatch}, "SEQUENCE: "},
		{nfs4.CompoundRes{Ops: []nfs4.ResOp{&nfs4.SequenceRes{}, &nfs4.PutRootFHRes{Status: nfs4.ErrWrongSec}, &nfs4.GetFHRes{}}}, "goes on after PUTROOTFH failed"},
	} {
		err := checkResults(args, tc.res)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("checkResults(%d results): %v, want %q", len(tc.res.Ops), err, tc.want)
		}
	}
	var e *Error4
	if err := checkResults(args, nfs4.CompoundRes{Status: nfs4.ErrBadSession, Ops: []nfs4.ResOp{&nfs4.SequenceRes{Status: nfs4.ErrBadSession}}}); !errors.As(err, &e) || !errors.Is(err, nfs4.ErrBadSession) {
		t.Errorf("a failed SEQUENCE is not an *Error4 matching the status: %v", err)
	}
}

// TestCompound4WrongSequenceReply: a SEQUENCE result for another slot or
// sequence ID is an error naming both, not a success.
func TestCompound4WrongSequenceReply(t *testing.T) {
	f := newFake4(4)
	addr, _ := startFake4(t, f)
	c := mountFake(t, addr, 1)
	ctx := ctxT(t)
	f.mu.Lock()
	f.lieSlot = true
	f.mu.Unlock()
	err := c.compound(ctx, nil, nil, callOpts{})
	if err == nil || !strings.Contains(err.Error(), "answered for slot") {
		t.Errorf("a SEQUENCE answered for another slot: %v", err)
	}
}
