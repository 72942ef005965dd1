// Package verbs is an rdma.Provider over rdma-core: libibverbs for queue
// pairs, memory registration and completions, librdmacm for connections.
// It runs on any device rdma-core drives: InfiniBand and RoCE adapters
// (mlx5 and others), iWARP adapters, and the kernel's software devices
// rdma_rxe (Soft-RoCE) and siw (soft-iWARP).
//
// # Building
//
// The provider uses cgo and is built only on Linux with the build tag
// verbs:
//
//	apt-get install libibverbs-dev librdmacm-dev   # Debian, Ubuntu
//	dnf install rdma-core-devel                    # Fedora, RHEL
//	go build -tags verbs ./...
//
// In any other build (no tag, CGO_ENABLED=0, another OS) the package still
// compiles, Available is false and New returns ErrNotBuilt saying how to
// build it. At run time the machine needs the rdma-core libraries and the
// provider plug-ins of its device (Debian's ibverbs-providers): without a
// plug-in, ibv_get_device_list finds nothing (IBV_SHOW_WARNINGS=1 says
// why).
//
// # Using it on real hardware
//
//   - Registered memory is locked: a user without CAP_IPC_LOCK needs a
//     memlock limit above what it registers (ulimit -l, or memlock in
//     /etc/security/limits.conf; "unlimited" is usual on RDMA hosts). A
//     failing registration says so.
//   - rdma_cm chooses the device from the IP address: Dial uses the device
//     that owns the route to the peer, Listen the device that owns the
//     address it binds. Give each RDMA device its own address. Options.Device
//     names the device a Provider must use; a connection that lands on
//     another one fails with an error naming both, so a wrong address is
//     found at once rather than by slow traffic over another port.
//   - Addresses are "host:port" in rdma_cm's TCP port space. On iWARP those
//     are real TCP ports and collide with TCP listeners on the same host; on
//     InfiniBand and RoCE they are rdma_cm's own.
//   - Do not dial or listen on 127.0.0.1: rdma_cm then picks the first
//     active device, which is ambiguous with several. A device can connect
//     to itself through its own address.
//
// # What differs from the software iWARP (rdma/iwarp)
//
//   - Private data: a connect request carries at most 56 bytes, a reply
//     196 and a reject 148 (the InfiniBand CM's sizes, enforced on iWARP
//     too), and on InfiniBand and RoCE the receiver sees them zero-padded
//     to those sizes (see rdma.PrivateDataLimits). RFC 8797's eight bytes
//     fit.
//   - Remote invalidation: Limits.RemoteInvalidation is false. A Send with
//     Invalidate naming a region registered with ibv_reg_mr moves an
//     InfiniBand or RoCE queue pair to the error state, and on Linux siw
//     revokes the key with no way back from user space (rdma-core's siw
//     provider does not even report it: such a receive completes without
//     Completion.Invalidated). The provider can still send Send with
//     Invalidate to a peer that takes it, Linux's NFS client for one.
//   - MR.Invalidate deregisters the region (verbs has no local
//     invalidation of an ibv_reg_mr region) and MR.Reregister registers it
//     again: the TO stays, the rkey is the device's choice and its index
//     may change.
//   - Receiver not ready: the provider connects with rnr_retry_count 0, so
//     a Send that finds no posted receive ends the connection at once with
//     a receiver-not-ready error, as iWARP (which has no RNR flow control)
//     does. Retrying (the InfiniBand default) would hide an upper layer's
//     credit bug behind stalls, and RPC-over-RDMA's credits (RFC 8166
//     section 3.3) exist so that receives are always posted in time.
//   - Errors: the device reports a fatal error as a work completion
//     status, not as an RDMAP Terminate. The side whose work failed ends
//     with a TerminateError built from that status (Detail names it); the
//     peer ends when rdma_cm reports the disconnect (rdma.ErrDisconnected)
//     or its queue pair is flushed (rdma.ErrConnectionLost). All of them
//     match net.ErrClosed. Receive completions do not report the Solicited
//     Event flag.
//   - Limits come from the device (ibv_query_device, ibv_query_port):
//     siw takes 6 SGEs and one SGE for an RDMA Read sink
//     (Limits.MaxReadSGE), rxe messages of at most 8 MiB.
//   - RDMA Read sinks on iWARP: hardware iWARP RNICs check remote write on
//     a Read's destination (its STag travels in the Read Request, RFC 5040
//     Section 4.4). The provider registers such a region a second time
//     with local and remote write, the first time it is a Read's sink, and
//     uses that registration only for Reads; the region keeps the rights
//     it was given. The peer the Read goes to could write through that
//     STag until the region is invalidated or released (RFC 5042's
//     security considerations); InfiniBand and RoCE need none of this.
//   - Prepare runs on the initiator after rdma_cm reports the connection
//     established, when the responder may already send: an upper layer
//     whose responder speaks first must allow for that (RPC-over-RDMA's
//     requester speaks first).
//
// # Events
//
// Each connection has a completion channel and an rdma_cm event channel.
// Both file descriptors are made non-blocking and waited on through Go's
// runtime poller, like sockets; a wake-up drains every event until EAGAIN
// (the poller is edge-triggered), acknowledges them and re-arms the
// completion queue before polling it, all in one cgo call for the
// completion channel. No OS thread is blocked per
// connection. The completion channel is waited on by the goroutine that
// calls Wait and finds nothing to return: it parks on the poller itself,
// so the poller wakes the goroutine that wants the completion rather than
// one that hands it over (one hand-off fewer per completion: the Send
// ping-pong's median round trip on Soft-RoCE in the lab guest fell to
// 0.75x); other Waits at the same moment wait for it. A connection's own
// goroutine reads its rdma_cm events; completions are taken only by Poll
// and Wait, so a failed completion ends the connection when one of them
// takes it, and a disconnect (an rdma_cm event) at once. One more
// goroutine per device in use reads the device's
// asynchronous events the same way (ibv_get_async_event): a queue pair or
// completion queue error, a port error or a fatal device error ends the
// connections it concerns with an error naming the event, even when
// nothing is posted. When a device is removed (rdma link delete, a hot
// unplug), rdma_cm reports it on every connection, each ends with an
// error naming the removal without a disconnect (the device sends nothing
// more), and the last Close lets librdmacm close the device, which the
// kernel waits for before it finishes the removal.
//
// # Shared receive queues
//
// The provider implements rdma.SharedRecvProvider over ibv_create_srq. A
// SharedRecvQueue belongs to one device (Options.Device, or the only
// device there is) and has its own protection domain, completion queue
// and completion channel; a connection attached to it (ConnConfig.
// SharedRecv) is created on that protection domain with the queue as its
// receive queue, so its own completion queue carries only send-queue
// work, and the queue's completions name the connection by the queue pair
// number the device reports. The limit event is the device's
// (IBV_EVENT_SRQ_LIMIT_REACHED, read from the device's asynchronous
// events). Attached connections share the queue's protection domain,
// because rdma_rxe checks a receive's memory against the protection domain
// of the queue pair the Send arrived on: an STag one of them exposes is
// valid on the others (see SharedRecvQueue).
//
// Options.BusyPoll makes Wait poll the completion queue for a while
// before it sleeps, or, negative, poll only and never sleep (perftest's
// default mode), trading a CPU for latency.
//
// Work requests, scatter/gather lists and completions are built and read
// in C from scalars and C memory, so no Go pointer is stored in C memory;
// caller buffers given to Register are pinned with runtime.Pinner until
// Release, and Alloc hands out anonymous mappings, which never move.
// Close gives back every queue pair, completion queue, channel, region,
// protection domain and rdma_cm identifier (Provider.Resources counts
// them).
package verbs
