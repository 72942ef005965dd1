package xdr_test

import (
	"errors"
	"fmt"

	"github.com/go-rpcrdma/rpcrdma/xdr"
)

// A structure is encoded by appending its fields in order and decoded
// with a cursor in the same order, checking the error once at the end.
// In the XDR language of RFC 4506:
//
//	struct entry {
//		unsigned int id;
//		string       name<64>;
//		bool         dir;
//	};
func Example() {
	var b []byte
	b = xdr.AppendUint32(b, 7)
	b = xdr.AppendString(b, "notes.txt") // length, bytes, zero padding to 4
	b = xdr.AppendBool(b, false)
	fmt.Printf("%d bytes: % x\n", len(b), b)

	d := xdr.NewDecoder(b)
	id := d.Uint32()
	name := d.Str(64)
	dir := d.Bool()
	if err := d.Done(); err != nil { // the first error, or bytes left over
		fmt.Println(err)
		return
	}
	fmt.Println(id, name, dir)
	// Output:
	// 24 bytes: 00 00 00 07 00 00 00 09 6e 6f 74 65 73 2e 74 78 74 00 00 00 00 00 00 00
	// 7 notes.txt false
}

// Every variable-length item is decoded against a maximum, and lengths
// are checked against the bytes that remain before anything is taken, so
// a hostile length costs nothing. The first failure sticks: later items
// decode as zero values, and Err reports what went wrong, where.
func ExampleDecoder_Opaque() {
	b := xdr.AppendUint32(nil, 1<<30) // claims a gigabyte, carries nothing
	d := xdr.NewDecoder(b)
	data := d.Opaque(1 << 20)
	next := d.Uint32()
	fmt.Println(len(data), next, errors.Is(d.Err(), xdr.ErrTooLong))
	fmt.Println(d.Err())
	// Output:
	// 0 0 true
	// xdr: length exceeds maximum at offset 0 (1073741824 > 1048576)
}
