package nfs

// A Server answers NFSv3 (RFC 1813) and MOUNT v3 (RFC 1813 Appendix I)
// over package rpc for one or more exports, each an FS. It registers its
// procedures on rpc.Servers the caller runs over any transport: TCP
// (rpc.Server.ServeListener) or RPC-over-RDMA (rpcrdma.Serve); RFC 8267
// Section 6 keeps MOUNT on TCP. rpc.Server runs the calls of one
// connection concurrently, and NewRPCServer turns its reply cache on for
// the non-idempotent procedures.
//
// Each call: decode the arguments (GARBAGE_ARGS if they do not decode or
// leave bytes over), check the file handle (handle.go: BADHANDLE if not
// ours in form, STALE if not signed by the export it names or naming a
// file the FS no longer has), take the caller's identity from AUTH_SYS
// (AUTH_NONE and, with RootSquash, root become the export's anonymous
// identity), refuse changes to a read-only export with NFS3ERR_ROFS, check
// the permission bits as knfsd does (perm.go), then call the FS and encode
// its answer with the attributes RFC 1813 asks for.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-rpcrdma/rpcrdma/nfs/mount"
	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
	"github.com/go-rpcrdma/rpcrdma/rpc"
)

// Export is one exported filesystem.
type Export struct {
	// Path is the name clients mount it by, e.g. "/export". Clients may
	// also mount a directory below it ("/export/sub").
	Path string
	// FS is the filesystem served.
	FS FS
	// ReadOnly refuses every change with NFS3ERR_ROFS.
	ReadOnly bool
	// RootSquash maps uid 0 to AnonUID and gid 0 to AnonGID, as knfsd's
	// root_squash does.
	RootSquash bool
	// AnonUID and AnonGID are the identity of AUTH_NONE callers and of
	// squashed root; 0 selects 65534 (nobody), as knfsd's default.
	AnonUID, AnonGID uint32
}

// ServerConfig configures a Server.
type ServerConfig struct {
	Exports []Export
	// Secret keys the file handles (handle.go). Handles stay valid across
	// restarts of servers with the same Secret and exports; keep it
	// private, as anyone who has it can forge handles. nil draws a random
	// one: handles then die with the Server.
	Secret []byte
	// MaxIO is the largest READ and WRITE the server does and advertises
	// (FSINFO rtmax and wtmax); 0 selects 1 MiB, Linux's largest.
	MaxIO uint32
	// Logger receives the server's events; nil discards them. At Warn
	// level: failures the FS returns that have no NFS status (answered
	// NFS3ERR_IO, or MNT3ERR_SERVERFAULT), with the procedure, the file
	// and the FS's error. At Info: MNT calls, granted or refused. At
	// Debug: every NFSv3 call answered with a status other than NFS3_OK,
	// or not at all.
	Logger *slog.Logger
	// Observe, if not nil, is called with each NFSv3 call but NULL
	// (which package rpc answers) once its results are ready, on the
	// call's goroutine, concurrently with other calls: it must be quick.
	// Metrics count and time calls with it.
	Observe func(CallDone)
}

// CallDone is an NFSv3 call a Server has handled (ServerConfig.Observe).
type CallDone struct {
	Proc nfs3.Proc
	// Stat is the status answered; NFS3_OK if Err is set.
	Stat nfs3.Stat
	// Err is the handler's error: the call was answered GARBAGE_ARGS or
	// SYSTEM_ERR, or not at all.
	Err error
	// Duration is how long the call took to handle, from its arguments
	// to its results; it does not include sending the reply.
	Duration time.Duration
}

// Server serves NFSv3 and MOUNT v3 for its exports. Create it with
// NewServer; it is safe for concurrent use.
type Server struct {
	exports []*export
	byID    map[uint32]*export
	verf    nfs3.Verf // write verifier: changes when the server restarts
	maxIO   uint32
	log     *slog.Logger
	observe func(CallDone) // nil if none
	mounts  mountTable

	// reads holds idle readStates for reuse (see readState). A bounded
	// stack rather than a sync.Pool bounds the memory kept.
	reads  idle[*readState]
	writes idle[*writeState]
	// smallBufs and bigBufs hold idle READ buffers of smallRead and of
	// maxIO bytes, so that a READ of a few KiB neither takes nor zeroes
	// a buffer of MaxIO.
	smallBufs, bigBufs idle[[]byte]
}

// idle is a bounded stack of states or buffers kept for reuse: last in,
// first out, so that the few buffers a steady stream of calls needs are
// the ones used again, and stay in the processor's cache, where a queue
// would cycle through all of them. Safe for concurrent use.
type idle[T any] struct {
	mu   sync.Mutex
	kept []T // at most cap(kept)
}

// get returns the most recently put value, or false if none is kept.
func (q *idle[T]) get() (T, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var zero T
	n := len(q.kept)
	if n == 0 {
		return zero, false
	}
	t := q.kept[n-1]
	q.kept[n-1] = zero
	q.kept = q.kept[:n-1]
	return t, true
}

// put keeps t unless the stack is full.
func (q *idle[T]) put(t T) {
	q.mu.Lock()
	if len(q.kept) < cap(q.kept) {
		q.kept = append(q.kept, t)
	}
	q.mu.Unlock()
}

type export struct {
	Export
	id     uint32
	key    *handleKey
	anonID Cred
}

// Bounds on what bursts of READs and WRITEs leave pinned: statesKept idle
// READ and WRITE states (a few hundred bytes each, enough for as many
// calls in flight as a client's usual queue depth), bigBufsKept idle
// READ buffers of MaxIO bytes and smallBufsKept of smallRead bytes (4 MiB
// in all).
const (
	statesKept    = 128
	bigBufsKept   = 16
	smallBufsKept = 64
	smallRead     = 64 << 10
)

// readState is one READ's memory: its data buffer, arguments, results and
// reply. The handler gives it back once the reply is sent
// (rpc.Call.AfterReply), so a steady stream of READs allocates nothing.
type readState struct {
	s     *Server
	buf   []byte // smallRead or s.maxIO bytes, from takeBuf; nil when idle
	a     nfs3.ReadArgs
	r     nfs3.ReadRes
	xdr   []byte
	items [1]rpc.DDPItem
	done  func(rpc.Body) // release, made once
}

// getRead returns an idle readState, or a new one.
func (s *Server) getRead() *readState {
	if st, ok := s.reads.get(); ok {
		return st
	}
	st := &readState{s: s, xdr: make([]byte, 0, nfs3.ProcRead.ReplySize(0))}
	st.done = st.release
	return st
}

// bufs returns the idle buffers of size n's class: smallRead bytes up to
// smallRead, else MaxIO.
func (s *Server) bufs(n int) *idle[[]byte] {
	if n <= smallRead {
		return &s.smallBufs
	}
	return &s.bigBufs
}

// takeBuf returns a buffer of n's class for a READ of n bytes (at most
// MaxIO): an idle one, or a new one.
func (s *Server) takeBuf(n int) []byte {
	q := s.bufs(n)
	if b, ok := q.get(); ok {
		return b
	}
	if q == &s.smallBufs {
		return make([]byte, smallRead)
	}
	return make([]byte, s.maxIO)
}

// release forgets the call and keeps st and its buffer for reuse unless
// as many are idle as are kept. Nothing may use st or its memory after
// release.
func (st *readState) release(rpc.Body) {
	if st.buf != nil {
		st.s.bufs(len(st.buf)).put(st.buf)
	}
	st.a, st.r, st.items[0], st.buf = nfs3.ReadArgs{}, nfs3.ReadRes{}, rpc.DDPItem{}, nil
	st.s.reads.put(st)
}

// writeState is one WRITE's arguments, results and reply, given back
// once the reply is sent, like readState. The data stays the call's.
type writeState struct {
	s    *Server
	a    nfs3.WriteArgs
	r    nfs3.WriteRes
	xdr  []byte
	done func(rpc.Body) // release, made once
}

// getWrite returns an idle writeState, or a new one.
func (s *Server) getWrite() *writeState {
	if st, ok := s.writes.get(); ok {
		return st
	}
	st := &writeState{s: s, xdr: make([]byte, 0, nfs3.ProcWrite.ReplySize(0))}
	st.done = st.release
	return st
}

// release forgets the call and keeps st for reuse if fewer than
// statesKept are idle. Nothing may use st or its memory after release.
func (st *writeState) release(rpc.Body) {
	st.a, st.r = nfs3.WriteArgs{}, nfs3.WriteRes{}
	st.s.writes.put(st)
}

// NewServer returns a Server for cfg's exports, or an error if they are
// misconfigured (no FS, duplicate or relative paths).
func NewServer(cfg ServerConfig) (*Server, error) {
	s := &Server{byID: make(map[uint32]*export), maxIO: cfg.MaxIO, log: cfg.Logger, observe: cfg.Observe}
	if s.maxIO == 0 {
		s.maxIO = 1 << 20
	}
	s.maxIO = min(s.maxIO, nfs3.MaxData)
	s.reads.kept = make([]*readState, 0, statesKept)
	s.writes.kept = make([]*writeState, 0, statesKept)
	s.smallBufs.kept = make([][]byte, 0, smallBufsKept)
	s.bigBufs.kept = make([][]byte, 0, bigBufsKept)
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	secret := cfg.Secret
	if secret == nil {
		secret = make([]byte, 32)
		rand.Read(secret)
	}
	rand.Read(s.verf[:])
	for _, e := range cfg.Exports {
		if e.FS == nil || len(e.Path) == 0 || e.Path[0] != '/' {
			return nil, fmt.Errorf("nfs: export %q: needs an FS and an absolute path", e.Path)
		}
		sum := sha256.Sum256([]byte(e.Path))
		id := binary.BigEndian.Uint32(sum[:])
		if _, dup := s.byID[id]; dup {
			return nil, fmt.Errorf("nfs: export %q: path exported twice (or its id collides)", e.Path)
		}
		ex := &export{Export: e, id: id, key: newHandleKey(secret, e.Path, id)}
		ex.anonID = Cred{UID: e.AnonUID, GID: e.AnonGID}
		if ex.anonID.UID == 0 {
			ex.anonID.UID = 65534
		}
		if ex.anonID.GID == 0 {
			ex.anonID.GID = 65534
		}
		s.exports = append(s.exports, ex)
		s.byID[id] = ex
	}
	return s, nil
}

// RootHandle returns the file handle of export path's root, as MNT would.
func (s *Server) RootHandle(path string) (nfs3.FileHandle, error) {
	for _, ex := range s.exports {
		if ex.Path == path {
			return ex.key.handle(nil, ex.FS.Root()), nil
		}
	}
	return nil, mount.ErrNoEnt
}

// RegisterNFS registers the NFSv3 procedures on rs.
func (s *Server) RegisterNFS(rs *rpc.Server) {
	for p, h := range s.nfsHandlers() {
		if h != nil {
			rs.Handle(nfs3.Program, nfs3.Version, uint32(p), s.observed(nfs3.Proc(p), h))
		}
	}
}

// observed returns h reporting each call it handles: to Observe, and at
// Debug level when it fails. The status is read from the results, where
// every NFSv3 procedure's starts (RFC 1813 Section 3.3).
func (s *Server) observed(p nfs3.Proc, h rpc.Handler) rpc.Handler {
	return func(ctx context.Context, c *rpc.Call) (rpc.Body, error) {
		var start time.Time
		if s.observe != nil {
			start = time.Now()
		}
		res, err := h(ctx, c)
		st := nfs3.OK
		if err == nil && len(res.XDR) >= 4 {
			st = nfs3.Stat(binary.BigEndian.Uint32(res.XDR))
		}
		if (err != nil || st != nfs3.OK) && s.log.Enabled(ctx, slog.LevelDebug) {
			outcome := slog.String("status", st.String())
			if err != nil {
				outcome = slog.Any("err", err)
			}
			s.log.LogAttrs(ctx, slog.LevelDebug, "nfs: call failed", slog.String("proc", p.String()), outcome,
				slog.String("xid", fmt.Sprintf("%#x", c.Header.XID)), slog.String("client", clientName(c)), slog.Any("uid", callerUID(c)))
		}
		if s.observe != nil {
			s.observe(CallDone{Proc: p, Stat: st, Err: err, Duration: time.Since(start)})
		}
		return res, err
	}
}

// callerUID returns the AUTH_SYS uid of c, or "none".
func callerUID(c *rpc.Call) any {
	if c.AuthSys == nil {
		return "none"
	}
	return c.AuthSys.UID
}

// RegisterMount registers the MOUNT v3 procedures on rs, which should
// serve TCP only (RFC 8267 Section 6).
func (s *Server) RegisterMount(rs *rpc.Server) {
	rs.Handle(mount.Program, mount.Version, uint32(mount.ProcMnt), s.mnt)
	rs.Handle(mount.Program, mount.Version, uint32(mount.ProcDump), s.dump)
	rs.Handle(mount.Program, mount.Version, uint32(mount.ProcUmnt), s.umnt)
	rs.Handle(mount.Program, mount.Version, uint32(mount.ProcUmntall), s.umntall)
	rs.Handle(mount.Program, mount.Version, uint32(mount.ProcExport), s.exportList)
}

// NewRPCServer returns an rpc.Server with the NFS procedures registered,
// the MOUNT ones too if withMount, and the reply cache on for NFS's
// non-idempotent procedures (RFC 1813 Section 4.1's duplicate request
// cache), keeping 1024 replies. o, if not nil, gives the other options.
func (s *Server) NewRPCServer(withMount bool, o *rpc.ServerOptions) *rpc.Server {
	var opts rpc.ServerOptions
	if o != nil {
		opts = *o
	}
	if opts.ReplyCache == 0 {
		opts.ReplyCache = 1024
	}
	if opts.ReplyCacheFor == nil {
		opts.ReplyCacheFor = func(prog, vers, proc uint32) bool {
			return prog == nfs3.Program && !nfs3.Proc(proc).Idempotent()
		}
	}
	rs := rpc.NewServer(&opts)
	s.RegisterNFS(rs)
	if withMount {
		s.RegisterMount(rs)
	}
	return rs
}

// resolve checks fh and returns its export and inode.
func (s *Server) resolve(fh nfs3.FileHandle) (*export, uint64, nfs3.Stat) {
	id, st := handleExport(fh)
	if st != nfs3.OK {
		return nil, 0, st
	}
	ex, ok := s.byID[id]
	if !ok {
		return nil, 0, nfs3.ErrStale
	}
	ino, st := ex.key.check(fh)
	return ex, ino, st
}

// cred returns who c runs as on ex, after squashing.
func (ex *export) cred(c *rpc.Call) Cred {
	p := c.AuthSys
	if p == nil {
		return ex.anonID
	}
	cr := Cred{UID: p.UID, GID: p.GID, GIDs: p.GIDs}
	if ex.RootSquash {
		if cr.UID == 0 {
			cr.UID = ex.anonID.UID
		}
		if cr.GID == 0 {
			cr.GID = ex.anonID.GID
		}
		for i, g := range cr.GIDs {
			if g == 0 {
				if i == 0 {
					cr.GIDs = append([]uint32(nil), cr.GIDs...)
				}
				cr.GIDs[i] = ex.anonID.GID
			}
		}
	}
	return cr
}

// errStat turns an error the FS returned for file ino (and name in it,
// if not "") into a status, logging at Warn level those that have none:
// NFS3ERR_IO tells the client nothing, so the log is where an operator
// finds what went wrong, with the procedure, the export, the file
// (inode and file handle) and the FS's error.
func (o *op) errStat(err error, ino uint64, name string) nfs3.Stat {
	st := StatOf(err)
	if st == nfs3.ErrIO && !errors.Is(err, nfs3.ErrIO) {
		o.s.logFSError(o.ctx, o, ino, name, st.String(), err)
	}
	return st
}

// logFSError logs at Warn level that an FS error for ino (and name) in
// o's call was answered with status.
func (s *Server) logFSError(ctx context.Context, o *op, ino uint64, name, status string, err error) {
	if !s.log.Enabled(ctx, slog.LevelWarn) {
		return
	}
	attrs := make([]slog.Attr, 0, 8)
	if o.call != nil {
		attrs = append(attrs, slog.String("proc", procName(&o.call.Header)))
	}
	attrs = append(attrs, slog.String("status", status), slog.String("export", o.ex.Path),
		slog.Uint64("ino", ino), slog.String("fh", hex.EncodeToString(o.handle(ino))))
	if name != "" {
		attrs = append(attrs, slog.String("name", name))
	}
	attrs = append(attrs, slog.Any("err", err))
	s.log.LogAttrs(ctx, slog.LevelWarn, "nfs: filesystem error", attrs...)
}

// procName names the procedure h calls: "READ", or "MNT" for MOUNT.
func procName(h *rpc.CallHeader) string {
	if h.Prog == mount.Program {
		return mount.Proc(h.Proc).String()
	}
	return nfs3.Proc(h.Proc).String()
}

// mountTable is what DUMP lists: the client names and paths of MNTs not
// yet UMNTed, at most maxMounts of them.
type mountTable struct {
	mu sync.Mutex
	m  map[mount.MountBody]struct{}
}

const maxMounts = 1024
