//go:build amd64 && !purego

#include "textflag.h"

// func printableBlocks(p *byte, n int) int
//
// printableBlocks looks at the whole 16-byte blocks of p[:n] with SSE2
// (part of every amd64 CPU) and returns the index of the first byte that
// is not printable ASCII (0x20–0x7E), or n &^ 15 when those blocks hold
// none. One signed comparison flags both the bytes below 0x20 and those
// from 0x80 (negative as int8); another flags DEL.
TEXT ·printableBlocks(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	ANDQ $~15, CX
	XORQ AX, AX
	MOVQ $0x2020202020202020, DX
	MOVQ DX, X1
	PUNPCKLQDQ X1, X1
	MOVQ $0x7f7f7f7f7f7f7f7f, DX
	MOVQ DX, X2
	PUNPCKLQDQ X2, X2

loop:
	CMPQ AX, CX
	JAE  done
	MOVOU (SI)(AX*1), X0
	MOVO  X1, X3
	PCMPGTB X0, X3 // X3 = 0x20 > x, signed: below 0x20 or from 0x80
	MOVO  X0, X4
	PCMPEQB X2, X4 // DEL
	POR   X4, X3
	PMOVMSKB X3, DX
	TESTL DX, DX
	JNZ   found
	ADDQ  $16, AX
	JMP   loop

found:
	BSFL DX, DX
	ADDQ DX, AX

done:
	MOVQ AX, ret+16(FP)
	RET

// func asciiBlocks(p *byte, n int) bool
//
// asciiBlocks reports whether the whole 16-byte blocks of p[:n] hold no
// byte from 0x80: it ORs them together and looks at the high bits once.
TEXT ·asciiBlocks(SB), NOSPLIT, $0-17
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	ANDQ $~15, CX
	XORQ AX, AX
	PXOR X1, X1

orloop:
	CMPQ AX, CX
	JAE  ordone
	MOVOU (SI)(AX*1), X0
	POR   X0, X1
	ADDQ  $16, AX
	JMP   orloop

ordone:
	PMOVMSKB X1, DX
	TESTL DX, DX
	SETEQ ret+16(FP)
	RET
