//go:build amd64 && !purego

package crc32c

import "golang.org/x/sys/cpu"

// foldBlock is what fold consumes per loop iteration: four 512-bit
// registers. (Eight, 512 bytes per iteration, measured no faster:
// BenchmarkUpdate.)
const foldBlock = 256

// canFold reports whether fold may run: it needs AVX-512 (with the
// operating system saving the ZMM registers, which cpu checks) and the
// 512-bit VPCLMULQDQ, and the SSE 4.2 CRC32 instruction for its last
// 16 bytes.
var canFold = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasAVX2 && cpu.X86.HasPCLMULQDQ && cpu.X86.HasSSE42

// fold returns the CRC32c state after p, from state crc, without the
// final or initial inversion (the CRC32 instruction's convention). len(p)
// is a positive multiple of foldBlock. It is in fold_amd64.s.
//
//go:noescape
func fold(crc uint32, p []byte) uint32
