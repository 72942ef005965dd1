// Package crc32c computes the CRC32c (Castagnoli) of MPA FPDUs (RFC 5044
// section 6), with hash/crc32's conventions: Update(Update(0, a), b) is
// the CRC of a followed by b.
//
// On amd64 with AVX-512 and VPCLMULQDQ it folds 256 bytes per loop
// iteration with carry-less multiplications (the method of Gopal et al.,
// "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ
// Instruction", Intel 2009, widened to four 512-bit lanes), several times
// faster than hash/crc32, whose Castagnoli code is bounded by the CRC32
// instruction's throughput. MPA checksums every payload byte on both
// sides, so at RDMA rates that throughput decides what CRC on costs.
// Everywhere else, and for what is left over, it is hash/crc32.
package crc32c

import "hash/crc32"

var table = crc32.MakeTable(crc32.Castagnoli)

// foldMin is the shortest input handed to the folding code: below it the
// setup costs more than hash/crc32's loop.
const foldMin = 1024

// Update returns the CRC32c of what crc is the CRC32c of, followed by p.
func Update(crc uint32, p []byte) uint32 {
	if canFold && len(p) >= foldMin {
		n := len(p) &^ (foldBlock - 1)
		crc = ^fold(^crc, p[:n])
		p = p[n:]
	}
	return crc32.Update(crc, table, p)
}

// Checksum returns the CRC32c of p.
func Checksum(p []byte) uint32 { return Update(0, p) }
