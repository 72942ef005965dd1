// C side of the verbs provider: work requests, scatter/gather lists,
// work completions and connection-manager events built and read in C from
// scalars and C memory. See shim.go.
#ifndef RPCRDMA_VERBS_SHIM_H
#define RPCRDMA_VERBS_SHIM_H
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

// shim_nonblock sets O_NONBLOCK on fd; it returns 0 or -errno.
static inline int shim_nonblock(int fd) {
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

// shim_sockaddr fills ss from scalars: family AF_INET (ip in lo's low 32
// bits) or AF_INET6 (hi, lo), and port.
static inline void shim_sockaddr(struct sockaddr_storage *ss, int family, uint64_t hi, uint64_t lo, int port) {
	memset(ss, 0, sizeof *ss);
	if (family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)ss;
		s->sin_family = AF_INET;
		s->sin_port = htons(port);
		s->sin_addr.s_addr = htonl((uint32_t)lo);
	} else {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
		s->sin6_family = AF_INET6;
		s->sin6_port = htons(port);
		for (int i = 0; i < 8; i++) {
			s->sin6_addr.s6_addr[i] = (uint8_t)(hi >> (56 - 8 * i));
			s->sin6_addr.s6_addr[8 + i] = (uint8_t)(lo >> (56 - 8 * i));
		}
	}
}

// shim_addr is a socket address as scalars.
struct shim_addr {
	int family;
	int port;
	uint64_t hi, lo;
};

static inline void shim_from_sockaddr(struct sockaddr *sa, struct shim_addr *out) {
	memset(out, 0, sizeof *out);
	if (sa == NULL)
		return;
	if (sa->sa_family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)sa;
		out->family = AF_INET;
		out->port = ntohs(s->sin_port);
		out->lo = ntohl(s->sin_addr.s_addr);
	} else if (sa->sa_family == AF_INET6) {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)sa;
		out->family = AF_INET6;
		out->port = ntohs(s->sin6_port);
		for (int i = 0; i < 8; i++) {
			out->hi = out->hi << 8 | s->sin6_addr.s6_addr[i];
			out->lo = out->lo << 8 | s->sin6_addr.s6_addr[8 + i];
		}
	}
}

static inline void shim_local_addr(struct rdma_cm_id *id, struct shim_addr *out) {
	shim_from_sockaddr(rdma_get_local_addr(id), out);
}

static inline void shim_peer_addr(struct rdma_cm_id *id, struct shim_addr *out) {
	shim_from_sockaddr(rdma_get_peer_addr(id), out);
}

static inline int shim_resolve_addr(struct rdma_cm_id *id, int family, uint64_t hi, uint64_t lo, int port, int timeout_ms) {
	struct sockaddr_storage ss;
	shim_sockaddr(&ss, family, hi, lo, port);
	return rdma_resolve_addr(id, NULL, (struct sockaddr *)&ss, timeout_ms) ? -errno : 0;
}

static inline int shim_bind_addr(struct rdma_cm_id *id, int family, uint64_t hi, uint64_t lo, int port) {
	struct sockaddr_storage ss;
	shim_sockaddr(&ss, family, hi, lo, port);
	return rdma_bind_addr(id, (struct sockaddr *)&ss) ? -errno : 0;
}

// shim_event is an rdma_cm event copied out before it is acknowledged.
struct shim_event {
	int type;
	int status;
	struct rdma_cm_id *id;
	struct rdma_cm_id *listen_id;
	int responder_resources;
	int initiator_depth;
	int pd_len;
	uint8_t pd[256];
};

// shim_get_event takes one event from the non-blocking channel ch, copies
// it into out and acknowledges it. It returns 0, or -EAGAIN when there is
// none, or another -errno.
static inline int shim_get_event(struct rdma_event_channel *ch, struct shim_event *out) {
	struct rdma_cm_event *ev;
	if (rdma_get_cm_event(ch, &ev))
		return -errno;
	memset(out, 0, sizeof *out);
	out->type = ev->event;
	out->status = ev->status;
	out->id = ev->id;
	out->listen_id = ev->listen_id;
	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST || ev->event == RDMA_CM_EVENT_ESTABLISHED ||
	    ev->event == RDMA_CM_EVENT_REJECTED || ev->event == RDMA_CM_EVENT_CONNECT_RESPONSE) {
		const struct rdma_conn_param *c = &ev->param.conn;
		out->responder_resources = c->responder_resources;
		out->initiator_depth = c->initiator_depth;
		int n = c->private_data_len;
		if (c->private_data == NULL)
			n = 0;
		if (n > (int)sizeof out->pd)
			n = sizeof out->pd;
		if (n > 0)
			memcpy(out->pd, c->private_data, n);
		out->pd_len = n;
	}
	rdma_ack_cm_event(ev);
	return 0;
}

// shim_conn_param fills p. pd is C memory or NULL.
static inline void shim_conn_param(struct rdma_conn_param *p, const void *pd, int pd_len, int ird, int ord) {
	memset(p, 0, sizeof *p);
	p->private_data = pd;
	p->private_data_len = pd_len;
	p->responder_resources = ird;
	p->initiator_depth = ord;
	p->retry_count = 7;
	// No receiver-not-ready retry: a Send that finds no posted receive
	// ends the connection, as iWARP has no RNR flow control at all.
	p->rnr_retry_count = 0;
}

static inline int shim_connect(struct rdma_cm_id *id, const void *pd, int pd_len, int ird, int ord) {
	struct rdma_conn_param p;
	shim_conn_param(&p, pd, pd_len, ird, ord);
	return rdma_connect(id, &p) ? -errno : 0;
}

static inline int shim_accept(struct rdma_cm_id *id, const void *pd, int pd_len, int ird, int ord) {
	struct rdma_conn_param p;
	shim_conn_param(&p, pd, pd_len, ird, ord);
	return rdma_accept(id, &p) ? -errno : 0;
}

// shim_create_qp creates id's RC queue pair. With srq (not NULL), receives
// come from it and complete on rcq; otherwise they complete on cq.
static inline int shim_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_cq *cq, int sq, int rq, int sge,
		struct ibv_srq *srq, struct ibv_cq *rcq) {
	struct ibv_qp_init_attr a;
	memset(&a, 0, sizeof a);
	a.send_cq = cq;
	a.recv_cq = srq ? rcq : cq;
	a.srq = srq;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = 1;
	a.cap.max_send_wr = sq;
	a.cap.max_recv_wr = srq ? 0 : rq;
	a.cap.max_send_sge = sge;
	a.cap.max_recv_sge = srq ? 0 : sge;
	return rdma_create_qp(id, pd, &a) ? -errno : 0;
}

static inline int shim_qp_error(struct ibv_qp *qp) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_ERR;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE) ? -errno : 0;
}

// shim_limits is what the provider needs of ibv_query_device and
// ibv_query_port.
struct shim_limits {
	int max_qp_wr, max_sge, max_sge_rd, max_cqe, max_qp_rd_atom, max_qp_init_rd_atom;
	int max_mw, device_cap_flags, max_srq_wr, max_srq_sge;
	uint32_t max_msg_sz;
	int transport, link_layer, vendor_id;
	char name[IBV_SYSFS_NAME_MAX];
};

static inline int shim_query(struct ibv_context *ctx, int port, struct shim_limits *out) {
	struct ibv_device_attr d;
	struct ibv_port_attr p;
	memset(out, 0, sizeof *out);
	if (ibv_query_device(ctx, &d))
		return -errno;
	if (ibv_query_port(ctx, port, &p))
		return -errno;
	out->max_qp_wr = d.max_qp_wr;
	out->max_sge = d.max_sge;
	out->max_sge_rd = d.max_sge_rd;
	out->max_cqe = d.max_cqe;
	out->max_qp_rd_atom = d.max_qp_rd_atom;
	out->max_qp_init_rd_atom = d.max_qp_init_rd_atom;
	out->max_mw = d.max_mw;
	out->max_srq_wr = d.max_srq_wr;
	out->max_srq_sge = d.max_srq_sge;
	out->device_cap_flags = d.device_cap_flags;
	out->max_msg_sz = p.max_msg_sz;
	out->transport = ctx->device->transport_type;
	out->link_layer = p.link_layer;
	out->vendor_id = d.vendor_id;
	strncpy(out->name, ibv_get_device_name(ctx->device), sizeof out->name - 1);
	return 0;
}

static inline int shim_post_send(struct ibv_qp *qp, uint64_t wr_id, int opcode, int flags,
		struct ibv_sge *sges, int nsge, uint64_t raddr, uint32_t rkey, uint32_t inv) {
	struct ibv_send_wr wr, *bad;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = wr_id;
	wr.sg_list = nsge ? sges : NULL;
	wr.num_sge = nsge;
	wr.opcode = opcode;
	wr.send_flags = flags | IBV_SEND_SIGNALED;
	if (opcode == IBV_WR_RDMA_WRITE || opcode == IBV_WR_RDMA_READ) {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	if (opcode == IBV_WR_SEND_WITH_INV) {
		wr.invalidate_rkey = inv;
		/* rdma-core's siw provider (providers/siw/siw.c, push_send_wqe)
		 * sends the STag of wr.rdma.rkey, whatever the opcode; the
		 * other providers read invalidate_rkey and ignore wr.rdma on a
		 * Send. Without this, siw sends STag 0 and the peer answers
		 * with a Terminate ("STag cannot be invalidated", RFC 5040
		 * Section 4.8). */
		wr.wr.rdma.rkey = inv;
	}
	return ibv_post_send(qp, &wr, &bad) ? -errno : 0;
}

static inline int shim_post_recv(struct ibv_qp *qp, uint64_t wr_id, struct ibv_sge *sges, int nsge) {
	struct ibv_recv_wr wr, *bad;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = wr_id;
	wr.sg_list = nsge ? sges : NULL;
	wr.num_sge = nsge;
	return ibv_post_recv(qp, &wr, &bad) ? -errno : 0;
}

// shim_wc is the part of struct ibv_wc the provider reads.
struct shim_wc {
	uint64_t wr_id;
	uint32_t status, opcode, byte_len, wc_flags, inv_rkey, vendor_err;
	uint32_t qp_num; // the queue pair whose work completed
};

// shim_poll polls up to n completions into out; it returns the count or
// -errno.
static inline int shim_poll(struct ibv_cq *cq, int n, struct shim_wc *out) {
	struct ibv_wc wc[16];
	int got = 0;
	while (got < n) {
		int want = n - got < 16 ? n - got : 16;
		int k = ibv_poll_cq(cq, want, wc);
		if (k < 0)
			return got ? got : -EIO;
		for (int i = 0; i < k; i++) {
			struct shim_wc *o = &out[got + i];
			o->wr_id = wc[i].wr_id;
			o->status = wc[i].status;
			o->opcode = wc[i].opcode;
			o->byte_len = wc[i].byte_len;
			o->wc_flags = wc[i].wc_flags;
			o->inv_rkey = (wc[i].wc_flags & IBV_WC_WITH_INV) ? wc[i].invalidated_rkey : 0;
			o->vendor_err = wc[i].vendor_err;
			o->qp_num = wc[i].qp_num;
		}
		got += k;
		if (k < want)
			break;
	}
	return got;
}

// shim_cq_events takes every pending event from the non-blocking
// completion channel (until EAGAIN: Go's poller is edge-triggered),
// acknowledges them and re-arms cq. It returns how many it took, or
// -errno for an error other than EAGAIN.
static inline int shim_cq_events(struct ibv_comp_channel *ch, struct ibv_cq *cq) {
	int n = 0;
	for (;;) {
		struct ibv_cq *ev_cq;
		void *ctx;
		if (ibv_get_cq_event(ch, &ev_cq, &ctx)) {
			if (errno != EAGAIN)
				return -errno;
			break;
		}
		n++;
	}
	if (n > 0) {
		ibv_ack_cq_events(cq, n);
		if (ibv_req_notify_cq(cq, 0))
			return -errno;
	}
	return n;
}

// shim_cq_wake is what the Wait parked on a connection's completion
// channel does each time it looks, in one call: it takes every pending
// event from ch and re-arms cq if there were any (shim_cq_events), then
// polls up to n completions into out. The poll comes after the re-arm, so
// a completion that arrives in between is either polled here or raises a
// new event: once this returns 0 the caller may sleep on the channel.
// With no event pending cq is still armed (only this function and
// shim_cq_events take its events, and both re-arm), so the poll is the
// look before sleeping that the poller needs, its readiness having been
// reset when the wait began. It returns how many completions it polled
// (a failed poll counts as none, as for shim_poll's callers), or -errno
// for a failure of the channel or of the re-arm.
static inline int shim_cq_wake(struct ibv_comp_channel *ch, struct ibv_cq *cq, int n, struct shim_wc *out) {
	int ev = shim_cq_events(ch, cq);
	if (ev < 0)
		return ev;
	int k = shim_poll(cq, n, out);
	return k < 0 ? 0 : k;
}

static inline int shim_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access, struct ibv_mr **out) {
	*out = ibv_reg_mr(pd, addr, len, access);
	return *out ? 0 : -errno;
}
// shim_async_event is one asynchronous event, copied out of the
// ibv_async_event before it is acknowledged.
struct shim_async_event {
	int type;
	uint32_t qp_num; // for QP events
	uintptr_t cq;    // for CQ events: the struct ibv_cq's address
	uintptr_t srq;   // for SRQ events: the struct ibv_srq's address
	int port;        // for port events
};

// shim_async takes one asynchronous event from ctx's non-blocking async
// fd, copies what identifies its object into ev and acknowledges it (a
// QP or CQ cannot be destroyed while an event of it is unacknowledged).
// It returns 0, -EAGAIN when there is none, or -errno.
static inline int shim_async(struct ibv_context *ctx, struct shim_async_event *ev) {
	struct ibv_async_event e;
	if (ibv_get_async_event(ctx, &e))
		return -errno;
	memset(ev, 0, sizeof *ev);
	ev->type = e.event_type;
	switch (e.event_type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		ev->qp_num = e.element.qp->qp_num;
		break;
	case IBV_EVENT_CQ_ERR:
		ev->cq = (uintptr_t)e.element.cq;
		break;
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		ev->port = e.element.port_num;
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		ev->srq = (uintptr_t)e.element.srq;
		break;
	default:
		break;
	}
	ibv_ack_async_event(&e);
	return 0;
}

// shim_device_list returns librdmacm's device contexts (rdma_get_devices),
// the ones its identifiers use, and their count in *n; the caller frees
// the list with rdma_free_devices, which keeps librdmacm's reference to
// each context until then.
static inline struct ibv_context **shim_device_list(int *n) {
	return rdma_get_devices(n);
}

static inline struct ibv_context *shim_device_at(struct ibv_context **list, int i) {
	return list[i];
}

static inline const char *shim_context_name(struct ibv_context *ctx) {
	return ibv_get_device_name(ctx->device);
}

// shim_create_srq creates a shared receive queue of depth receives of at
// most sge SGEs each on pd; it returns NULL and sets errno on failure.
static inline struct ibv_srq *shim_create_srq(struct ibv_pd *pd, int depth, int sge) {
	struct ibv_srq_init_attr a;
	memset(&a, 0, sizeof a);
	a.attr.max_wr = depth;
	a.attr.max_sge = sge;
	return ibv_create_srq(pd, &a);
}

static inline int shim_post_srq_recv(struct ibv_srq *srq, uint64_t wr_id, struct ibv_sge *sges, int nsge) {
	struct ibv_recv_wr wr, *bad;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = wr_id;
	wr.sg_list = nsge ? sges : NULL;
	wr.num_sge = nsge;
	return ibv_post_srq_recv(srq, &wr, &bad) ? -errno : 0;
}

// shim_srq_limit arms srq's limit event at limit receives (0 disarms it).
static inline int shim_srq_limit(struct ibv_srq *srq, int limit) {
	struct ibv_srq_attr a;
	memset(&a, 0, sizeof a);
	a.srq_limit = limit;
	return ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT) ? -errno : 0;
}

#endif
