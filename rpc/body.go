package rpc

import (
	"encoding/binary"
	"errors"
	"slices"
	"strconv"

	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// ErrDDPItem: a held-apart data item of a Body does not fit its XDR stream
// (misplaced, misaligned, out of order, its length word disagreeing with its
// data, or never consumed by the decoder).
var ErrDDPItem = errors.New("bad DDP item")

// Body is an XDR stream with zero or more DDP-eligible data items held apart
// from it (RFC 8166 section 3.4 "reduction"; the kernel's xdr_buf
// head/pages/tail). It is how arguments and results cross this package:
// record marking sends the flattened stream, and an RPC-over-RDMA transport
// can move each item by direct data placement instead.
//
// Each item is variable-length opaque data (RFC 4506 section 4.10) whose
// length word stays in XDR while its bytes and XDR pad are held apart:
//
//	XDR:   ... | len=5 | next item ...
//	Items:             ^ Offset    Data = 5 bytes (the 3 pad bytes are implied)
//
// A Body does not own its memory: XDR and each Data may alias caller
// buffers, and whoever builds a Body keeps that memory unchanged until the
// transport is done with it (see Transport.Send).
type Body struct {
	XDR   []byte    // the stream with each held-apart item's data and XDR pad removed; its length word stays in XDR
	Items []DDPItem // in increasing Offset order

	// Padding, when Align is not zero, says the sender inserted padding
	// before the data of every opaque of at least Thresh bytes so that the
	// data starts at a multiple of Align (RFC 5666 section 3.9, RPC-over-RDMA
	// RDMA_MSGP). BodyDecoder skips it. Only a transport sets it.
	Padding Padding
}

// Padding describes RFC 5666 RDMA_MSGP alignment padding in an XDR stream:
// an opaque whose length is at least Thresh has its data start at the next
// offset o with (Base+o) a multiple of Align, the bytes in between being
// padding. Base is the stream's distance from the point the alignment is
// measured from (the start of the receive buffer).
type Padding struct {
	Align, Thresh, Base int
}

// skip returns the padding before opaque data of n bytes that would start
// at stream offset off.
func (p Padding) skip(off, n int) int {
	if p.Align <= 1 || n < p.Thresh {
		return 0
	}
	return (p.Align - (p.Base+off)%p.Align) % p.Align
}

// DDPItem is one DDP-eligible data item held apart from a Body's XDR stream.
type DDPItem struct {
	Offset int    // offset in XDR where the item's data belongs (just after its length word), or Unplaced
	Data   []byte // the item's data, without pad
}

// Unplaced is the Offset of an item whose place in the XDR stream the
// transport does not know: a result an RPC-over-RDMA responder wrote into
// a write chunk, where only the upper layer knows which opaque it is (RFC
// 8166 section 3.5.4: write chunks are filled by the reply's DDP-eligible
// results in order). Unplaced items follow every placed one; each belongs
// to the next DDP-eligible opaque the decoder reaches (DDPOpaque) after
// the placed items are used. A Body with Unplaced items can be decoded but
// not flattened (AppendFlat, Len).
const Unplaced = -1

// Len returns the length of the flattened stream: XDR plus every item's
// data rounded up to a multiple of four.
func (b *Body) Len() int {
	n := len(b.XDR)
	for _, it := range b.Items {
		n += xdr.RoundUp(len(it.Data))
	}
	return n
}

// AppendFlat appends the flattened stream to dst and returns the extended
// slice: XDR with each item's data and zero pad re-inserted at its Offset,
// which is what record marking sends. b must be valid (see Validate).
func (b *Body) AppendFlat(dst []byte) []byte {
	dst = slices.Grow(dst, b.Len())
	prev := 0
	for _, it := range b.Items {
		dst = append(dst, b.XDR[prev:it.Offset]...)
		dst = append(dst, it.Data...)
		dst = xdr.AppendPad(dst, len(it.Data))
		prev = it.Offset
	}
	return append(dst, b.XDR[prev:]...)
}

// Validate checks the cross-field rules of b's items: each Offset is a
// multiple of four, within XDR, preceded by the item's length word (which
// equals len(Data) and lies after the previous item's Offset). It returns
// nil or an error wrapping ErrDDPItem.
func (b *Body) Validate() error {
	prev := 0
	unplaced := false
	for i, it := range b.Items {
		var why string
		switch {
		case it.Offset == Unplaced:
			unplaced = true
			continue
		case unplaced:
			why = "placed after an unplaced item"
		case it.Offset%xdr.UnitSize != 0:
			why = "not 4-aligned"
		case it.Offset-4 < prev || it.Offset > len(b.XDR):
			why = "out of order or outside the XDR stream"
		case uint64(len(it.Data)) > 1<<32-1 ||
			binary.BigEndian.Uint32(b.XDR[it.Offset-4:]) != uint32(len(it.Data)):
			why = "length word disagrees with the data"
		}
		if why != "" {
			return itemError(i, it.Offset, why)
		}
		prev = it.Offset
	}
	return nil
}

func itemError(i, off int, why string) error {
	return &itemErr{strconv.Itoa(i) + " at offset " + strconv.Itoa(off) + ": " + why}
}

type itemErr struct{ s string }

func (e *itemErr) Error() string { return "rpc: bad DDP item " + e.s }
func (e *itemErr) Unwrap() error { return ErrDDPItem }

// AppendDDPOpaque appends variable-length opaque data (RFC 4506 section
// 4.10) as a DDP-eligible item: its length word goes into XDR and data is
// held apart, not copied. data must stay unchanged until the transport is
// done with the message. To encode opaque data inline instead, append to XDR
// with xdr.AppendOpaque; the receiver decodes both the same way with
// BodyDecoder.DDPOpaque.
func (b *Body) AppendDDPOpaque(data []byte) {
	b.XDR = xdr.AppendUint32(b.XDR, uint32(len(data)))
	b.Items = append(b.Items, DDPItem{Offset: len(b.XDR), Data: data})
}

// tail returns the part of b from offset off on, with item offsets made
// relative to it, shifting b.Items in place (callers own the message). It
// fails with ErrDDPItem if an item lies before the tail's first length word.
func (b *Body) tail(off int) (Body, error) {
	for i := range b.Items {
		if b.Items[i].Offset == Unplaced {
			continue
		}
		if b.Items[i].Offset < off+4 {
			return Body{}, itemError(i, b.Items[i].Offset, "inside the RPC header")
		}
		b.Items[i].Offset -= off
	}
	pad := b.Padding
	pad.Base += off
	return Body{XDR: b.XDR[off:], Items: b.Items, Padding: pad}, nil
}

// BodyDecoder decodes a Body: an xdr.Decoder over its XDR stream that also
// yields the held-apart items. All xdr.Decoder methods decode the stream;
// DDP-eligible opaque data must be decoded with DDPOpaque or DDPOpaqueInto,
// which return the item whether the transport held it apart or the peer sent
// it inline (as a TCP peer always does). Offsets are those of XDR.
//
// Like xdr.Decoder, it does not copy, keeps the first error, and is not safe
// for concurrent use.
type BodyDecoder struct {
	xdr.Decoder
	items []DDPItem
	next  int
	pad   Padding
}

// NewBodyDecoder returns a BodyDecoder positioned at the start of b.
func NewBodyDecoder(b Body) BodyDecoder {
	return BodyDecoder{Decoder: xdr.NewDecoder(b.XDR), items: b.Items, pad: b.Padding}
}

// Reset repositions d at the start of b and clears any error.
func (d *BodyDecoder) Reset(b Body) {
	d.Decoder.Reset(b.XDR)
	d.items = b.Items
	d.next = 0
	d.pad = b.Padding
}

// Opaque decodes variable-length opaque data of at most max bytes, like
// xdr.Decoder.Opaque, skipping RDMA_MSGP padding when the Body has some.
func (d *BodyDecoder) Opaque(max int) []byte {
	if d.pad.Align <= 1 {
		return d.Decoder.Opaque(max)
	}
	rest := d.Rest()
	if len(rest) < 4 {
		return d.Decoder.Opaque(max) // fails as usual
	}
	n := int(binary.BigEndian.Uint32(rest))
	skip := d.pad.skip(d.Offset()+4, n)
	if skip == 0 || uint64(n) > uint64(max) {
		return d.Decoder.Opaque(max)
	}
	d.Skip(4)
	d.Skip(skip)
	return d.FixedOpaque(n)
}

// Str decodes a string of at most max bytes, skipping RDMA_MSGP padding
// like Opaque.
func (d *BodyDecoder) Str(max int) string { return string(d.Opaque(max)) }

// DDPOpaque decodes variable-length opaque data of at most max bytes. If the
// next held-apart item belongs right after the length word at the cursor,
// it consumes the length word, checks that it equals the item's length
// (ErrDDPItem otherwise) and returns the item's Data; else it decodes the
// data inline like xdr.Decoder.Opaque. The result aliases the Body's memory.
func (d *BodyDecoder) DDPOpaque(max int) []byte {
	if d.Err() != nil {
		return nil
	}
	if d.next < len(d.items) && (d.items[d.next].Offset == d.Offset()+4 || d.items[d.next].Offset == Unplaced) {
		it := d.items[d.next]
		if !d.Need(4) {
			return nil
		}
		n := binary.BigEndian.Uint32(d.Rest())
		if max < 0 || uint64(n) > uint64(max) {
			d.Fail(xdr.ErrTooLong)
			return nil
		}
		if uint64(n) != uint64(len(it.Data)) {
			d.Fail(ErrDDPItem)
			return nil
		}
		d.Skip(4)
		d.next++
		return it.Data
	}
	p := d.Opaque(max)
	if d.next < len(d.items) && d.items[d.next].Offset != Unplaced && d.items[d.next].Offset < d.Offset() {
		d.Fail(ErrDDPItem)
		return nil
	}
	return p
}

// DDPOpaqueInto decodes variable-length opaque data of at most len(dst)
// bytes into dst and returns its length. The data is copied unless it is
// already there, as when an RPC-over-RDMA transport placed it into a result
// buffer the caller supplied (Msg.ResultBufs); either way the caller finds
// it in dst. On failure it returns 0 and d holds the error.
func (d *BodyDecoder) DDPOpaqueInto(dst []byte) int {
	p := d.DDPOpaque(len(dst))
	if len(p) > 0 && &dst[0] != &p[0] {
		copy(dst, p)
	}
	return len(p)
}

// Done returns the sticky error if there is one, otherwise an error if
// bytes or held-apart items remain unconsumed, otherwise nil.
func (d *BodyDecoder) Done() error {
	if d.Err() == nil && d.next < len(d.items) {
		d.Fail(ErrDDPItem)
	}
	return d.Decoder.Done()
}
