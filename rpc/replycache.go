package rpc

// The duplicate request cache. A client that loses its connection sends
// the calls it had in flight again on a new one, with their xids (RFC 5531
// section 8 leaves retransmission to the client; DialClient does it, as
// Linux's RPC client does). A call that had already run would run twice,
// which a non-idempotent procedure (create, remove, append) must not. So a
// Server with ServerOptions.ReplyCache remembers each call it runs, by
// xid, program, version, procedure, the client's address (without the
// port, which a new connection changes) and a checksum of the credential
// and of the start of the arguments, as knfsd's cache does, and:
//   - a call seen before whose reply is kept gets that reply again, and
//     the handler does not run;
//   - a call seen before that is still running waits for it, then gets
//     its reply;
//   - otherwise the call runs, and its reply is kept if it is small
//     enough (ServerOptions.ReplyCacheBytes), the most recent ReplyCache
//     of them.
// A reply too large to keep (a READ's data) is handed to the duplicates
// waiting for it and then forgotten: a later copy of that call runs again,
// which is what such procedures can afford.

import (
	"hash/maphash"
	"net"
	"sync"
)

// cacheKey identifies a call for the reply cache.
type cacheKey struct {
	xid, prog, vers, proc uint32
	sum                   uint64 // address, credential, arguments
}

// cacheEntry is one call: running until done is closed, then answered
// with reply (a copy the cache owns) if kept.
type cacheEntry struct {
	key        cacheKey
	done       chan struct{}
	reply      Msg  // set before done is closed; nil XDR if nothing to replay
	kept       bool // in the LRU list
	waiters    int  // duplicates that found it running
	prev, next *cacheEntry
}

// replyCache is a Server's duplicate request cache.
type replyCache struct {
	seed     maphash.Seed
	max      int // kept replies
	maxBytes int // largest reply kept

	mu      sync.Mutex
	entries map[cacheKey]*cacheEntry
	lru     cacheEntry // sentinel: lru.next is the most recent
	n       int        // entries in lru
}

func newReplyCache(entries, maxBytes int) *replyCache {
	rc := &replyCache{seed: maphash.MakeSeed(), max: entries, maxBytes: maxBytes, entries: make(map[cacheKey]*cacheEntry)}
	rc.lru.next, rc.lru.prev = &rc.lru, &rc.lru
	return rc
}

// checksumLen is how much of the arguments the key covers, besides their
// lengths: knfsd's RC_CSUMLEN. Hashing whole WRITE payloads would cost
// more than the cache saves.
const checksumLen = 256

// key returns the cache key of c from a client at addr (nil if the
// transport does not say).
func (rc *replyCache) key(c *Call, addr net.Addr) cacheKey {
	var h maphash.Hash
	h.SetSeed(rc.seed)
	switch a := addr.(type) {
	case *net.TCPAddr:
		h.Write(a.IP.To16())
	case *net.UDPAddr:
		h.Write(a.IP.To16())
	case *net.IPAddr:
		h.Write(a.IP.To16())
		// Other addresses may name the connection rather than the
		// client, and would hide every copy sent on a new one.
	}
	var n [8]byte
	putUint32 := func(v uint32) {
		n[0], n[1], n[2], n[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
		h.Write(n[:4])
	}
	putUint32(uint32(c.Header.Cred.Flavor))
	putUint32(uint32(len(c.Header.Cred.Body)))
	h.Write(c.Header.Cred.Body)
	putUint32(uint32(len(c.Args.XDR)))
	h.Write(c.Args.XDR[:min(len(c.Args.XDR), checksumLen)])
	for _, it := range c.Args.Items {
		putUint32(uint32(it.Offset))
		putUint32(uint32(len(it.Data)))
	}
	hd := &c.Header
	return cacheKey{xid: hd.XID, prog: hd.Prog, vers: hd.Vers, proc: hd.Proc, sum: h.Sum64()}
}

// begin looks k up. If the call is new it records it as running and
// returns its entry with first true; the caller must call finish. If not,
// it returns the first call's entry, whose done channel the caller waits
// on before reading its reply.
func (rc *replyCache) begin(k cacheKey) (e *cacheEntry, first bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if e := rc.entries[k]; e != nil {
		if e.kept {
			rc.unlink(e)
			rc.pushFront(e)
		} else {
			e.waiters++
		}
		return e, false
	}
	e = &cacheEntry{key: k, done: make(chan struct{})}
	rc.entries[k] = e
	return e, true
}

// finish records reply as e's, copying it if it is kept or if duplicates
// may be waiting for it, and wakes them.
func (rc *replyCache) finish(e *cacheEntry, reply *Msg) {
	size := len(reply.XDR)
	for _, it := range reply.Items {
		size += len(it.Data)
	}
	keep := size <= rc.maxBytes
	rc.mu.Lock()
	waited := e.waiters > 0
	if keep {
		rc.pushFront(e)
		e.kept = true
		for rc.n > rc.max {
			old := rc.lru.prev
			rc.unlink(old)
			old.kept = false
			delete(rc.entries, old.key)
		}
	} else {
		delete(rc.entries, e.key)
	}
	rc.mu.Unlock()
	// Duplicates that found e running read e.reply once done is closed;
	// later ones find it only if it is kept. Either way the copy is
	// e's alone. A reply neither kept nor waited for is not copied.
	if keep || waited {
		e.reply = copyMsg(reply)
	}
	close(e.done)
}

// abandon forgets a call that produced no reply (its transport could not
// carry one), so that a copy of it runs.
func (rc *replyCache) abandon(e *cacheEntry) {
	rc.mu.Lock()
	delete(rc.entries, e.key)
	rc.mu.Unlock()
	close(e.done)
}

func (rc *replyCache) pushFront(e *cacheEntry) {
	e.prev, e.next = &rc.lru, rc.lru.next
	e.prev.next, e.next.prev = e, e
	rc.n++
}

func (rc *replyCache) unlink(e *cacheEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
	rc.n--
}

// copyMsg returns a copy of m's body that shares no memory with it.
func copyMsg(m *Msg) Msg {
	size := len(m.XDR)
	for _, it := range m.Items {
		size += len(it.Data)
	}
	buf := make([]byte, 0, size)
	buf = append(buf, m.XDR...)
	cp := Msg{Body: Body{XDR: buf[:len(m.XDR):len(m.XDR)]}}
	if len(m.Items) > 0 {
		cp.Items = make([]DDPItem, len(m.Items))
		for i, it := range m.Items {
			start := len(buf)
			buf = append(buf, it.Data...)
			cp.Items[i] = DDPItem{Offset: it.Offset, Data: buf[start:len(buf):len(buf)]}
		}
	}
	return cp
}
