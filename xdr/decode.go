package xdr

import "encoding/binary"

// Decoder is a cursor over an XDR-encoded buffer. It does not copy: Opaque
// and FixedOpaque return sub-slices of the buffer, valid as long as the
// buffer is and aliasing it.
//
// The first failure sticks: it is recorded, the cursor stops where the
// failing item began, and every later call returns a zero value. Callers
// decode a whole structure and check Err once, which keeps decoding code
// straight-line. Every variable-length item takes an explicit maximum, and
// every length or count is checked against the bytes remaining before the
// caller could allocate for it.
//
// The zero Decoder is an empty buffer; Reset points it at another. A Decoder
// is a small value: declare one on the stack (var d xdr.Decoder; d.Reset(b))
// to decode without allocating. It is not safe for concurrent use.
type Decoder struct {
	buf []byte
	off int
	err error
}

// NewDecoder returns a Decoder positioned at the start of b.
func NewDecoder(b []byte) Decoder { return Decoder{buf: b} }

// Reset repositions d at the start of b and clears any error.
func (d *Decoder) Reset(b []byte) { *d = Decoder{buf: b} }

// Err returns the first error met, or nil. It is always a *DecodeError.
func (d *Decoder) Err() error { return d.err }

// Offset returns the number of bytes consumed so far. After a failure it is
// the offset of the item that failed.
func (d *Decoder) Offset() int { return d.off }

// Len returns the number of bytes not yet consumed.
func (d *Decoder) Len() int { return len(d.buf) - d.off }

// Rest returns the bytes not yet consumed, without consuming them. After a
// failure it returns nil.
func (d *Decoder) Rest() []byte {
	if d.err != nil {
		return nil
	}
	return d.buf[d.off:]
}

// Done returns the sticky error if there is one, otherwise an ErrTrailing
// error if bytes remain, otherwise nil. Call it after the last item of a
// message that must fill its buffer exactly.
func (d *Decoder) Done() error {
	if d.err == nil && d.off != len(d.buf) {
		d.fail(ErrTrailing, uint64(len(d.buf)-d.off), 0)
	}
	return d.err
}

// Fail records err as d's error, unless one is already recorded, and stops
// the cursor. It lets a caller reject a value that decoded well but breaks a
// rule of its own type (an enum out of range, say) with the same sticky
// semantics; the offset recorded is the current one. err should be one of
// the Err* kinds or an error of the caller's own.
func (d *Decoder) Fail(err error) {
	if d.err == nil {
		d.err = &DecodeError{Offset: d.off, Err: err}
	}
}

func (d *Decoder) fail(kind error, value, limit uint64) { d.failAt(d.off, kind, value, limit) }

func (d *Decoder) failAt(off int, kind error, value, limit uint64) {
	if d.err == nil {
		d.err = &DecodeError{Offset: off, Err: kind, Value: value, Limit: limit}
	}
}

// take consumes n bytes and returns them, or fails with ErrShort.
func (d *Decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.buf)-d.off {
		d.fail(ErrShort, uint64(n), uint64(len(d.buf)-d.off))
		return nil
	}
	b := d.buf[d.off : d.off+n : d.off+n]
	d.off += n
	return b
}

// Uint32 decodes an unsigned integer (RFC 4506 section 4.2). The common
// case, four bytes there and no error yet, is kept small enough to inline:
// a message's header is mostly such words.
func (d *Decoder) Uint32() uint32 {
	if d.err == nil && len(d.buf)-d.off >= 4 {
		v := binary.BigEndian.Uint32(d.buf[d.off:])
		d.off += 4
		return v
	}
	d.take(4) // records the failure
	return 0
}

// Int32 decodes a signed integer (RFC 4506 section 4.1).
func (d *Decoder) Int32() int32 { return int32(d.Uint32()) }

// Enum decodes an enumeration value (RFC 4506 section 4.3). Whether the
// value is one of the enumeration's members is for the caller to check
// (Fail records a rejection).
func (d *Decoder) Enum() int32 { return d.Int32() }

// Bool decodes a boolean (RFC 4506 section 4.4). Values other than 0 and 1
// fail with ErrBool.
func (d *Decoder) Bool() bool {
	start := d.off
	v := d.Uint32()
	if d.err != nil {
		return false
	}
	if v > 1 {
		d.off = start
		d.fail(ErrBool, uint64(v), 1)
		return false
	}
	return v == 1
}

// Optional decodes the discriminant of optional-data (RFC 4506 section 4.19)
// and reports whether the item follows. It fails like Bool.
func (d *Decoder) Optional() bool { return d.Bool() }

// Uint64 decodes an unsigned hyper integer (RFC 4506 section 4.5).
func (d *Decoder) Uint64() uint64 {
	b := d.take(8)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// Int64 decodes a hyper integer (RFC 4506 section 4.5).
func (d *Decoder) Int64() int64 { return int64(d.Uint64()) }

// FixedOpaque decodes n bytes of fixed-length opaque data and its padding
// (RFC 4506 section 4.9) and returns the n bytes, aliasing the buffer.
// Non-zero padding fails with ErrPad.
func (d *Decoder) FixedOpaque(n int) []byte {
	if n < 0 || !d.Need(RoundUp(n)) {
		d.failAt(d.off, ErrShort, uint64(n), uint64(d.Len()))
		return nil
	}
	start := d.off
	end := start + n
	for _, c := range d.buf[end : start+RoundUp(n)] {
		if c != 0 {
			d.failAt(start, ErrPad, uint64(c), 0)
			return nil
		}
	}
	d.off = start + RoundUp(n)
	return d.buf[start:end:end]
}

// Opaque decodes variable-length opaque data (RFC 4506 section 4.10) of at
// most max bytes and returns the data, aliasing the buffer. A length above
// max fails with ErrTooLong, one beyond the buffer with ErrShort; both are
// detected before anything is consumed, and the error's offset is that of the
// length word.
func (d *Decoder) Opaque(max int) []byte {
	start := d.off
	n := d.length(max)
	if d.err != nil {
		return nil
	}
	if have := d.Len(); have < RoundUp(n) {
		d.off = start
		d.failAt(start, ErrShort, uint64(RoundUp(n)), uint64(have))
		return nil
	}
	b := d.FixedOpaque(n)
	if d.err != nil {
		d.off = start
	}
	return b
}

// Str decodes a string (RFC 4506 section 4.11) of at most max bytes. Unlike
// Opaque it copies, since a Go string is immutable.
func (d *Decoder) Str(max int) string { return string(d.Opaque(max)) }

// length decodes a length word and checks it against max.
func (d *Decoder) length(max int) int {
	start := d.off
	v := d.Uint32()
	if d.err != nil {
		return 0
	}
	if max < 0 || uint64(v) > uint64(max) {
		d.off = start
		d.fail(ErrTooLong, uint64(v), uint64(max))
		return 0
	}
	return int(v)
}

// Count decodes the element count of a counted array (RFC 4506 section
// 4.13) and checks it both against max and against the bytes remaining,
// given that every element occupies at least minSize bytes (use 4 when
// elements vary in size: no XDR item is smaller). A count that passes is safe
// to allocate for.
func (d *Decoder) Count(max, minSize int) int {
	start := d.off
	n := d.length(max)
	if d.err != nil {
		return 0
	}
	if minSize < 1 {
		minSize = 1
	}
	if have := d.Len(); uint64(n)*uint64(minSize) > uint64(have) {
		d.off = start
		d.fail(ErrCount, uint64(n), uint64(have/minSize))
		return 0
	}
	return n
}

// Need checks that at least n bytes remain, failing with ErrShort otherwise,
// and reports whether they do. Use it before a fixed-size array (RFC 4506
// section 4.12) to reject a short buffer before allocating for it.
func (d *Decoder) Need(n int) bool {
	if d.err != nil {
		return false
	}
	if n < 0 || n > d.Len() {
		d.fail(ErrShort, uint64(n), uint64(d.Len()))
		return false
	}
	return true
}

// Skip consumes n bytes without interpreting them.
func (d *Decoder) Skip(n int) { d.take(n) }
