package nfs

// File handles. A handle names an inode of one export and carries a MAC
// over both, keyed by that export's key, so a client cannot make a handle
// the server did not hand out: not by guessing, not by editing the inode
// number, not by moving a handle of one export into another (RFC 1813
// Section 4.4 leaves the format to the server; knfsd's handles are not
// authenticated at all, and rely on the export's access list). The keys
// derive from a server secret, so handles outlive a restart when the
// secret does (ServerConfig.Secret).
//
//	version (1) | export id (4) | inode (8) | HMAC-SHA-256 truncated (16)

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"sync"

	"github.com/go-rpcrdma/rpcrdma/nfs/nfs3"
)

const (
	handleVersion = 1
	handleMACLen  = 16
	handleLen     = 1 + 4 + 8 + handleMACLen
)

// handleKey signs and checks the handles of one export.
type handleKey struct {
	id   uint32
	pool sync.Pool // of *macState keyed with the export's key
}

func newHandleKey(secret []byte, exportPath string, id uint32) *handleKey {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("go-rpcrdma nfs export key\x00" + exportPath))
	key := m.Sum(nil)
	k := &handleKey{id: id}
	k.pool.New = func() any { return &macState{h: hmac.New(sha256.New, key)} }
	return k
}

// macState is a keyed HMAC with room for its input and output, so that
// computing a MAC allocates nothing: a slice of a stack array passed to
// hash.Hash's methods would escape to the heap.
type macState struct {
	h   hash.Hash
	msg [handleLen]byte
	sum [sha256.Size]byte
}

// mac writes the HMAC of msg (at most handleLen bytes), truncated to
// len(dst), into dst. It is safe for concurrent use.
func (k *handleKey) mac(dst, msg []byte) {
	st := k.pool.Get().(*macState)
	st.h.Reset()
	st.h.Write(st.msg[:copy(st.msg[:], msg)])
	copy(dst, st.h.Sum(st.sum[:0]))
	k.pool.Put(st)
}

// handle returns the handle of ino, appended to dst.
func (k *handleKey) handle(dst []byte, ino uint64) []byte {
	var b [handleLen]byte
	b[0] = handleVersion
	binary.BigEndian.PutUint32(b[1:], k.id)
	binary.BigEndian.PutUint64(b[5:], ino)
	k.mac(b[13:], b[:13])
	return append(dst, b[:]...)
}

// handleExport returns the export id a handle claims, or BADHANDLE if it
// is not one of ours in form.
func handleExport(fh nfs3.FileHandle) (uint32, nfs3.Stat) {
	if len(fh) != handleLen || fh[0] != handleVersion {
		return 0, nfs3.ErrBadHandle
	}
	return binary.BigEndian.Uint32(fh[1:]), nfs3.OK
}

// check returns the inode fh names, or STALE if its MAC is not this
// export's.
func (k *handleKey) check(fh nfs3.FileHandle) (uint64, nfs3.Stat) {
	var sum [handleMACLen]byte
	k.mac(sum[:], fh[:13])
	if !hmac.Equal(sum[:], fh[13:]) {
		return 0, nfs3.ErrStale
	}
	return binary.BigEndian.Uint64(fh[5:]), nfs3.OK
}
