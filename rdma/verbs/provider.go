//go:build linux && cgo && verbs

package verbs

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-rpcrdma/rpcrdma/rdma"
)

// Available reports whether this build has the verbs provider.
const Available = true

// Provider is an rdma.Provider over libibverbs and librdmacm. Create it
// with New; its methods are safe for concurrent use.
type Provider struct {
	opts Options
	log  *slog.Logger
	res  resources
}

type resources struct {
	channels, ids, pds, compChannels, cqs, qps, mrs, files, srqs atomic.Int64
}

var (
	_ rdma.Provider                   = (*Provider)(nil)
	_ rdma.PrivateDataLimiter         = (*Provider)(nil)
	_ rdma.RemoteInvalidationReporter = (*Provider)(nil)
)

// New returns a Provider. It fails if rdma-core finds no RDMA device, or
// if opts.Device names none of them.
func New(opts Options) (*Provider, error) {
	if opts.ResolveTimeout < 0 {
		return nil, fmt.Errorf("verbs: new provider: negative resolve timeout: %w", rdma.ErrInvalid)
	}
	if opts.ResolveTimeout == 0 {
		opts.ResolveTimeout = DefaultResolveTimeout
	}
	names, err := Devices()
	if err != nil {
		return nil, fmt.Errorf("verbs: new provider: %w", err)
	}
	if len(names) == 0 {
		return nil, errors.New("verbs: new provider: no RDMA device (ibv_get_device_list is empty: " +
			"is a kernel driver loaded and are rdma-core's provider plug-ins installed? IBV_SHOW_WARNINGS=1 says more)")
	}
	if opts.Device != "" {
		found := false
		for _, n := range names {
			found = found || n == opts.Device
		}
		if !found {
			return nil, fmt.Errorf("verbs: new provider: no device %q among %v", opts.Device, names)
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Provider{opts: opts, log: log}, nil
}

// Devices returns the names of the RDMA devices rdma-core sees.
func Devices() ([]string, error) {
	var n C.int
	list, err := C.ibv_get_device_list(&n)
	if list == nil {
		return nil, fmt.Errorf("ibv_get_device_list: %w", err)
	}
	defer C.ibv_free_device_list(list)
	devs := (*[1 << 16]*C.struct_ibv_device)(unsafePointer(list))[:n:n]
	names := make([]string, 0, n)
	for _, d := range devs {
		names = append(names, C.GoString(C.ibv_get_device_name(d)))
	}
	return names, nil
}

// Options returns the options in force, defaults filled in.
func (p *Provider) Options() Options { return p.opts }

// Resources returns the counts of verbs and rdma_cm objects the provider
// holds now.
func (p *Provider) Resources() Resources {
	r := &p.res
	return Resources{
		EventChannels: int(r.channels.Load()), IDs: int(r.ids.Load()), PDs: int(r.pds.Load()),
		CompChannels: int(r.compChannels.Load()), CQs: int(r.cqs.Load()), QPs: int(r.qps.Load()),
		MRs: int(r.mrs.Load()), Files: int(r.files.Load()), SRQs: int(r.srqs.Load()),
	}
}

// PrivateDataLimits returns the InfiniBand CM sizes (MaxDialPrivateData and
// the others), which the provider enforces whatever the transport.
func (p *Provider) PrivateDataLimits() rdma.PrivateDataLimits {
	return rdma.PrivateDataLimits{Dial: MaxDialPrivateData, Accept: MaxAcceptPrivateData, Reject: MaxRejectPrivateData, Padded: true}
}

// RemoteInvalidation returns false: regions registered with ibv_reg_mr do
// not take a peer's Send with Invalidate (see Limits.RemoteInvalidation).
func (p *Provider) RemoteInvalidation() bool { return false }

// Addr is the address of an rdma_cm endpoint: an IP address and an rdma_cm
// port (in the TCP port space; on iWARP it is a TCP port, on InfiniBand
// and RoCE a port of rdma_cm's own).
type Addr struct {
	netip.AddrPort
	Device string // the RDMA device, when known
}

// Network returns "rdma".
func (a *Addr) Network() string { return "rdma" }

// String returns "host:port", which Dial accepts.
func (a *Addr) String() string { return a.AddrPort.String() }

// parseAddr resolves "host:port".
func parseAddr(ctx context.Context, addr string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return ap, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.AddrPort{}, err
	}
	pn, err := net.DefaultResolver.LookupPort(ctx, "tcp", port)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if host == "" {
		return netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(pn)), nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(ips[0].Unmap(), uint16(pn)), nil
}

// sockaddr splits ap into the scalars the C side takes.
func sockaddr(ap netip.AddrPort) (family C.int, hi, lo C.uint64_t, port C.int) {
	a := ap.Addr().Unmap()
	if a.Is4() {
		b := a.As4()
		return C.AF_INET, 0, C.uint64_t(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])), C.int(ap.Port())
	}
	b := a.As16()
	var h, l uint64
	for i := 0; i < 8; i++ {
		h = h<<8 | uint64(b[i])
		l = l<<8 | uint64(b[8+i])
	}
	return C.AF_INET6, C.uint64_t(h), C.uint64_t(l), C.int(ap.Port())
}

func goAddr(sa *C.struct_shim_addr, dev string) *Addr {
	var ip netip.Addr
	switch sa.family {
	case C.AF_INET:
		v := uint32(sa.lo)
		ip = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	case C.AF_INET6:
		var b [16]byte
		for i := 0; i < 8; i++ {
			b[i] = byte(uint64(sa.hi) >> (56 - 8*i))
			b[8+i] = byte(uint64(sa.lo) >> (56 - 8*i))
		}
		ip = netip.AddrFrom16(b).Unmap()
	default:
		return &Addr{Device: dev}
	}
	return &Addr{AddrPort: netip.AddrPortFrom(ip, uint16(sa.port)), Device: dev}
}

func localAddr(id *C.struct_rdma_cm_id, dev string) *Addr {
	var sa C.struct_shim_addr
	C.shim_local_addr(id, &sa)
	return goAddr(&sa, dev)
}

func peerAddr(id *C.struct_rdma_cm_id, dev string) *Addr {
	var sa C.struct_shim_addr
	C.shim_peer_addr(id, &sa)
	return goAddr(&sa, dev)
}

// errnoErr turns a negative errno from the C side into an error.
func errnoErr(rc C.int) error {
	if rc >= 0 {
		return nil
	}
	return syscall.Errno(-rc)
}

// channel is an rdma_cm event channel whose fd is non-blocking and waited
// on through Go's poller.
type channel struct {
	p  *Provider
	ch *C.struct_rdma_event_channel
	f  *os.File
}

func (p *Provider) newChannel() (*channel, error) {
	ch, err := C.rdma_create_event_channel()
	if ch == nil {
		return nil, fmt.Errorf("rdma_create_event_channel: %w", err)
	}
	p.res.channels.Add(1)
	c := &channel{p: p, ch: ch}
	f, err := pollable(int(ch.fd), "rdma_cm")
	if err != nil {
		c.destroy()
		return nil, err
	}
	p.res.files.Add(1)
	c.f = f
	return c, nil
}

// pollable makes fd non-blocking and returns a duplicate of it as an
// *os.File registered with Go's poller. The duplicate shares the open file
// description, so it is readable exactly when fd is.
func pollable(fd int, name string) (*os.File, error) {
	if rc := C.shim_nonblock(C.int(fd)); rc < 0 {
		return nil, fmt.Errorf("%s: set O_NONBLOCK: %w", name, errnoErr(rc))
	}
	dup, err := syscall.Dup(fd)
	if err != nil {
		return nil, fmt.Errorf("%s: dup: %w", name, err)
	}
	syscall.CloseOnExec(dup)
	return os.NewFile(uintptr(dup), name), nil
}

// get waits for the next event, until ctx is done or the channel's file is
// closed or its deadline passes.
func (c *channel) get(ctx context.Context) (C.struct_shim_event, error) {
	var ev C.struct_shim_event
	rc, err := c.f.SyscallConn()
	if err != nil {
		return ev, err
	}
	stop := context.AfterFunc(ctx, func() { c.f.SetReadDeadline(time.Now()) })
	defer stop()
	var cerr error
	err = rc.Read(func(uintptr) bool {
		r := C.shim_get_event(c.ch, &ev)
		if r == -C.EAGAIN {
			return false
		}
		cerr = errnoErr(r)
		return true
	})
	if ctx.Err() != nil {
		return ev, ctx.Err()
	}
	if err != nil {
		return ev, err
	}
	return ev, cerr
}

// wake makes a get in progress return (the channel is being closed).
func (c *channel) wake() { c.f.SetReadDeadline(time.Now()) }

func (c *channel) destroy() {
	if c.f != nil {
		c.f.Close()
		c.f = nil
		c.p.res.files.Add(-1)
	}
	if c.ch != nil {
		C.rdma_destroy_event_channel(c.ch)
		c.ch = nil
		c.p.res.channels.Add(-1)
	}
}

func (p *Provider) createID(ch *channel) (*C.struct_rdma_cm_id, error) {
	var id *C.struct_rdma_cm_id
	if r, err := C.rdma_create_id(ch.ch, &id, nil, C.RDMA_PS_TCP); r != 0 {
		return nil, fmt.Errorf("rdma_create_id: %w", err)
	}
	p.res.ids.Add(1)
	return id, nil
}

func (p *Provider) destroyID(id *C.struct_rdma_cm_id) {
	if id != nil {
		C.rdma_destroy_id(id)
		p.res.ids.Add(-1)
	}
}

// deviceName returns the name of the device id is bound to, or "".
func deviceName(id *C.struct_rdma_cm_id) string {
	if id.verbs == nil {
		return ""
	}
	return C.GoString(C.ibv_get_device_name(id.verbs.device))
}

// checkDevice fails if the provider names a device and id is on another.
func (p *Provider) checkDevice(id *C.struct_rdma_cm_id) error {
	if p.opts.Device == "" {
		return nil
	}
	if got := deviceName(id); got != p.opts.Device {
		return fmt.Errorf("address is on device %q, not on %q (rdma_cm chooses the device by IP address)", got, p.opts.Device)
	}
	return nil
}

var eventNames = map[C.int]string{
	C.RDMA_CM_EVENT_ADDR_RESOLVED:    "address resolved",
	C.RDMA_CM_EVENT_ADDR_ERROR:       "address error",
	C.RDMA_CM_EVENT_ROUTE_RESOLVED:   "route resolved",
	C.RDMA_CM_EVENT_ROUTE_ERROR:      "route error",
	C.RDMA_CM_EVENT_CONNECT_REQUEST:  "connect request",
	C.RDMA_CM_EVENT_CONNECT_RESPONSE: "connect response",
	C.RDMA_CM_EVENT_CONNECT_ERROR:    "connect error",
	C.RDMA_CM_EVENT_UNREACHABLE:      "unreachable",
	C.RDMA_CM_EVENT_REJECTED:         "rejected",
	C.RDMA_CM_EVENT_ESTABLISHED:      "established",
	C.RDMA_CM_EVENT_DISCONNECTED:     "disconnected",
	C.RDMA_CM_EVENT_DEVICE_REMOVAL:   "device removal",
	C.RDMA_CM_EVENT_TIMEWAIT_EXIT:    "timewait exit",
	C.RDMA_CM_EVENT_ADDR_CHANGE:      "address change",
}

func eventName(t C.int) string {
	if s, ok := eventNames[t]; ok {
		return s
	}
	return fmt.Sprintf("event %d", int(t))
}

// expect waits for an event of type want on ch; any other event fails.
func expect(ctx context.Context, ch *channel, want C.int, what string) (C.struct_shim_event, error) {
	ev, err := ch.get(ctx)
	if err != nil {
		return ev, fmt.Errorf("%s: %w", what, err)
	}
	if ev._type != want {
		return ev, fmt.Errorf("%s: rdma_cm %s (status %d), want %s", what, eventName(ev._type), int(ev.status), eventName(want))
	}
	return ev, nil
}

// Dial connects to addr ("host:port") as the initiator: rdma_cm resolves
// the address and route (choosing the local device by IP), the queue pair
// is created, and the connect request carries cfg.PrivateData (at most
// MaxDialPrivateData bytes). cfg.Prepare runs once the connection is
// established and the reply's private data is known: on InfiniBand and
// RoCE the responder may send from that moment, so an upper layer whose
// responder sends first must not rely on Prepare posting its receives in
// time (RPC-over-RDMA requesters send first). See rdma.Provider.
func (p *Provider) Dial(ctx context.Context, addr string, cfg rdma.ConnConfig) (rdma.Conn, error) {
	if err := rdma.CheckPrivateDataMax("dial", cfg.PrivateData, MaxDialPrivateData); err != nil {
		return nil, err
	}
	want, err := cfg.Depths(defaultDepths, maxDepths)
	if err != nil {
		return nil, fmt.Errorf("verbs: dial %s: %w", addr, err)
	}
	if err := p.checkSharedRecv(cfg.SharedRecv); err != nil {
		return nil, fmt.Errorf("verbs: dial %s: %w", addr, err)
	}
	ap, err := parseAddr(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("verbs: dial %s: %w", addr, err)
	}
	// Each attempt takes a new identifier, and rdma_cm picks a new
	// source port: on iWARP the one it picked may be taken (retryPicked).
	var c *Conn
	attempts, err := retryPicked(func() error {
		var err error
		c, err = p.dial(ctx, ap, want, cfg)
		return err
	})
	if err != nil {
		if attempts > 1 {
			err = fmt.Errorf("%w; %d source ports tried", err, attempts)
		}
		var re *rdma.RejectError
		if errors.As(err, &re) {
			return nil, err
		}
		return nil, fmt.Errorf("verbs: dial %s: %w", addr, err)
	}
	return c, nil
}

// dial is one attempt of Dial, on an identifier and event channel of its
// own: it resolves ap, sets the queue pair up for want clamped to the
// device, connects, and settles IRD and ORD from the reply. On failure
// what it made is destroyed.
func (p *Provider) dial(ctx context.Context, ap netip.AddrPort, want rdma.Depths, cfg rdma.ConnConfig) (*Conn, error) {
	ch, err := p.newChannel()
	if err != nil {
		return nil, err
	}
	id, err := p.createID(ch)
	if err != nil {
		ch.destroy()
		return nil, err
	}
	c := &Conn{p: p, ch: ch, id: id}
	c.srq, _ = cfg.SharedRecv.(*SharedRecvQueue) // setup checks it
	ok := false
	defer func() {
		if !ok {
			c.destroy()
		}
	}()
	if err := p.resolve(ctx, ch, id, ap); err != nil {
		return nil, err
	}
	dev, err := queryDevice(id)
	if err != nil {
		return nil, err
	}
	d := dev.clamp(want)
	if err := c.setup(dev, d); err != nil {
		return nil, err
	}
	pd, free := cBytes(cfg.PrivateData)
	rc := C.shim_connect(id, pd, C.int(len(cfg.PrivateData)), C.int(d.IRD), C.int(d.ORD))
	free()
	if rc < 0 {
		// The source port is always rdma_cm's choice.
		return nil, fmt.Errorf("rdma_connect: %w", pickedPortErr(errnoErr(rc)))
	}
	ev, err := ch.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := established(&ev); err != nil {
		return nil, err
	}
	d = settleDepths(dev, d, &ev)
	c.peerPD = goBytes(&ev)
	c.finish(dev, d)
	if cfg.Prepare != nil {
		if err := cfg.Prepare(c); err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
	}
	c.start()
	ok = true
	return c, nil
}

// consumerReject is the status rdma_cm reports on the initiator when the
// responder's consumer called rdma_reject (IB_CM_REJ_CONSUMER_DEFINED, and
// ECONNREFUSED on iWARP).
const consumerReject = 28

// resolve resolves ap and the route to it on id, whose events come on
// ch, within Options.ResolveTimeout and ctx's deadline, and checks the
// device it resolved to (checkDevice).
func (p *Provider) resolve(ctx context.Context, ch *channel, id *C.struct_rdma_cm_id, ap netip.AddrPort) error {
	timeout := p.opts.ResolveTimeout
	if d, has := ctx.Deadline(); has {
		timeout = min(timeout, time.Until(d))
	}
	ms := C.int(max(timeout.Milliseconds(), 1))
	fam, hi, lo, port := sockaddr(ap)
	if rc := C.shim_resolve_addr(id, fam, hi, lo, port, ms); rc < 0 {
		return fmt.Errorf("rdma_resolve_addr: %w", errnoErr(rc))
	}
	if _, err := expect(ctx, ch, C.RDMA_CM_EVENT_ADDR_RESOLVED, "resolve address"); err != nil {
		return err
	}
	if err := p.checkDevice(id); err != nil {
		return err
	}
	if r, err := C.rdma_resolve_route(id, ms); r != 0 {
		return fmt.Errorf("rdma_resolve_route: %w", err)
	}
	if _, err := expect(ctx, ch, C.RDMA_CM_EVENT_ROUTE_RESOLVED, "resolve route"); err != nil {
		return err
	}
	return nil
}

// established returns nil if ev, the event that answers rdma_connect,
// reports the connection established, an *rdma.RejectError with the
// private data if the peer's consumer rejected it, and an error that
// says why otherwise.
func established(ev *C.struct_shim_event) error {
	switch ev._type {
	case C.RDMA_CM_EVENT_ESTABLISHED:
		return nil
	case C.RDMA_CM_EVENT_REJECTED:
		if ev.status == C.int(consumerReject) || ev.pd_len > 0 {
			return &rdma.RejectError{PrivateData: goBytes(ev)}
		}
		return fmt.Errorf("connect: rejected by the peer's CM (status %d): %w", int(ev.status), rdma.ErrRejected)
	default:
		return fmt.Errorf("connect: rdma_cm %s (status %d)", eventName(ev._type), int(ev.status))
	}
}

// settleDepths returns the depths d, which an initiator on dev asked
// for, as the established event ev leaves them.
func settleDepths(dev device, d rdma.Depths, ev *C.struct_shim_event) rdma.Depths {
	// RFC 6581 section 9.1, from the responder's reply, which rdma_cm
	// reports from this side's view: initiator_depth is the responder's
	// IRD, responder_resources its ORD.
	// On iWARP the kernel negotiated already (RFC 6581 section 9.1, in
	// the MPA exchange) and reports this side's values in force:
	// initiator_depth is its IRD, responder_resources its ORD.
	switch {
	case dev.iwarp:
		if ev.initiator_depth > 0 {
			d.IRD = int(ev.initiator_depth)
		}
		if ev.responder_resources > 0 {
			d.ORD = min(d.ORD, int(ev.responder_resources))
		}
	default:
		if ev.initiator_depth > 0 {
			d.ORD = min(d.ORD, int(ev.initiator_depth))
		}
		d.IRD = max(d.IRD, min(int(ev.responder_resources), dev.maxIRD))
	}
	return d
}

// goBytes copies an event's private data.
func goBytes(ev *C.struct_shim_event) []byte {
	n := int(ev.pd_len)
	b := make([]byte, n)
	for i := range n {
		b[i] = byte(ev.pd[i])
	}
	return b
}

// cBytes copies b into C memory; free releases it.
func cBytes(b []byte) (unsafePtr, func()) {
	if len(b) == 0 {
		return nil, func() {}
	}
	m := C.CBytes(b)
	return m, func() { C.free(m) }
}

var (
	defaultDepths = rdma.Depths{SendQueue: DefaultQueueDepth, RecvQueue: DefaultQueueDepth, IRD: DefaultReadDepth, ORD: DefaultReadDepth}
	maxDepths     = rdma.Depths{SendQueue: MaxQueueDepth, RecvQueue: MaxQueueDepth, IRD: MaxReadDepth, ORD: MaxReadDepth}
)

// device is what a connection needs to know of its device.
type device struct {
	name               string
	iwarp              bool
	maxWR, maxCQE      int
	maxSGE, maxReadSGE int
	maxIRD, maxORD     int
	maxMsg             int
}

func queryDevice(id *C.struct_rdma_cm_id) (device, error) {
	if id.verbs == nil {
		return device{}, errors.New("rdma_cm bound the address to no RDMA device")
	}
	var l C.struct_shim_limits
	port := C.int(id.port_num)
	if port == 0 {
		port = 1
	}
	if rc := C.shim_query(id.verbs, port, &l); rc < 0 {
		return device{}, fmt.Errorf("ibv_query_device: %w", errnoErr(rc))
	}
	d := device{
		name:       C.GoString(&l.name[0]),
		iwarp:      l.transport == C.IBV_TRANSPORT_IWARP,
		maxWR:      int(l.max_qp_wr),
		maxCQE:     int(l.max_cqe),
		maxSGE:     min(int(l.max_sge), MaxSGE),
		maxReadSGE: min(int(l.max_sge_rd), int(l.max_sge), MaxSGE),
		maxIRD:     min(int(l.max_qp_rd_atom), MaxReadDepth),
		maxORD:     min(int(l.max_qp_init_rd_atom), MaxReadDepth),
		maxMsg:     int(l.max_msg_sz),
	}
	if d.maxMsg <= 0 || d.maxMsg > 1<<30 {
		d.maxMsg = 1 << 30
	}
	if d.maxReadSGE < 1 {
		d.maxReadSGE = 1
	}
	return d, nil
}

// clamp lowers want to what the device allows.
func (d device) clamp(want rdma.Depths) rdma.Depths {
	want.SendQueue = min(want.SendQueue, d.maxWR, d.maxCQE/2)
	want.RecvQueue = min(want.RecvQueue, d.maxWR, d.maxCQE/2)
	want.IRD = min(want.IRD, d.maxIRD)
	want.ORD = min(want.ORD, d.maxORD)
	return want
}
