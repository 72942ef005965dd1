//go:build amd64 && !purego

#include "textflag.h"

// Fold constants for CRC32c in the bit-reflected domain: for a distance
// of D bits, the low quadword of a 128-bit lane is multiplied by
// (x^(D+32) mod P)' << 1 and the high one by (x^(D-32) mod P)' << 1,
// where ' reflects the 32 bits (crc32c_test.go computes them again).

// D = 2048: a lane onto the same lane of the next 256-byte block.
DATA k2048<>+0(SB)/8, $0xdcb17aa4
DATA k2048<>+8(SB)/8, $0xb9e02b86
GLOBL k2048<>(SB), RODATA|NOPTR, $16

// D = 512: one 512-bit register onto the next.
DATA k512<>+0(SB)/8, $0x740eef02
DATA k512<>+8(SB)/8, $0x9e4addf8
GLOBL k512<>(SB), RODATA|NOPTR, $16

// The lanes of the last register onto its last lane: D = 384, 256, 128,
// and zero for the last lane itself.
DATA klanes<>+0(SB)/8, $0x1c291d04
DATA klanes<>+8(SB)/8, $0x1d82c63da
DATA klanes<>+16(SB)/8, $0x1384aa63a
DATA klanes<>+24(SB)/8, $0xba4fc28e
DATA klanes<>+32(SB)/8, $0xf20c0dfe
DATA klanes<>+40(SB)/8, $0x14cd00bd6
DATA klanes<>+48(SB)/8, $0
DATA klanes<>+56(SB)/8, $0
GLOBL klanes<>(SB), RODATA|NOPTR, $64

// func fold(crc uint32, p []byte) uint32
TEXT ·fold(SB), NOSPLIT, $0-36
	MOVL crc+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX

	// The first block, with the state XORed into its first 32 bits.
	VMOVDQU64 0(SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
	VMOVD     AX, X4 // clears the rest of Z4
	VPXORQ    Z4, Z0, Z0
	ADDQ      $256, SI
	SUBQ      $256, CX

	VBROADCASTI32X4 k2048<>(SB), Z8

loop:
	CMPQ CX, $256
	JB   reduce
	VPCLMULQDQ $0x00, Z8, Z0, Z4
	VPCLMULQDQ $0x11, Z8, Z0, Z0
	VPTERNLOGD $0x96, 0(SI), Z4, Z0
	VPCLMULQDQ $0x00, Z8, Z1, Z5
	VPCLMULQDQ $0x11, Z8, Z1, Z1
	VPTERNLOGD $0x96, 64(SI), Z5, Z1
	VPCLMULQDQ $0x00, Z8, Z2, Z6
	VPCLMULQDQ $0x11, Z8, Z2, Z2
	VPTERNLOGD $0x96, 128(SI), Z6, Z2
	VPCLMULQDQ $0x00, Z8, Z3, Z7
	VPCLMULQDQ $0x11, Z8, Z3, Z3
	VPTERNLOGD $0x96, 192(SI), Z7, Z3
	ADDQ       $256, SI
	SUBQ       $256, CX
	JMP        loop

reduce:
	// Z0 onto Z1, Z1 onto Z2, Z2 onto Z3.
	VBROADCASTI32X4 k512<>(SB), Z8
	VPCLMULQDQ      $0x00, Z8, Z0, Z4
	VPCLMULQDQ      $0x11, Z8, Z0, Z0
	VPTERNLOGD      $0x96, Z4, Z0, Z1
	VPCLMULQDQ      $0x00, Z8, Z1, Z4
	VPCLMULQDQ      $0x11, Z8, Z1, Z1
	VPTERNLOGD      $0x96, Z4, Z1, Z2
	VPCLMULQDQ      $0x00, Z8, Z2, Z4
	VPCLMULQDQ      $0x11, Z8, Z2, Z2
	VPTERNLOGD      $0x96, Z4, Z2, Z3

	// Lanes 0-2 of Z3 onto lane 3.
	VMOVDQU64     klanes<>(SB), Z8
	VPCLMULQDQ    $0x00, Z8, Z3, Z4
	VPCLMULQDQ    $0x11, Z8, Z3, Z5
	VPXORQ        Z5, Z4, Z4
	VEXTRACTI32X4 $3, Z3, X6
	VEXTRACTI64X4 $1, Z4, Y5
	VPXOR         Y5, Y4, Y4
	VEXTRACTI128  $1, Y4, X5
	VPXOR         X5, X4, X4
	VPXOR         X6, X4, X4

	// What is left is 128 bits of message: its CRC from a zero state is
	// the state after p.
	VMOVQ   X4, AX
	VPEXTRQ $1, X4, BX
	XORL    DX, DX
	CRC32Q  AX, DX
	CRC32Q  BX, DX
	MOVL    DX, ret+32(FP)
	VZEROUPPER
	RET
