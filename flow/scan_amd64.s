//go:build amd64 && !purego

#include "textflag.h"

// func plainBlocks(p *byte, n int) int
//
// plainBlocks looks at the whole 16-byte blocks of p[:n] with SSE2 (part
// of every amd64 CPU) and returns the index of the first byte that is a
// control character, '"', '\\' or from 0x80 (plainPrefix's stops), or
// n &^ 15 when those blocks hold none. One signed comparison flags both
// the bytes below 0x20 and those from 0x80 (negative as int8).
TEXT ·plainBlocks(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	ANDQ $~15, CX
	XORQ AX, AX
	MOVQ $0x2020202020202020, DX
	MOVQ DX, X1
	PUNPCKLQDQ X1, X1
	MOVQ $0x2222222222222222, DX
	MOVQ DX, X2
	PUNPCKLQDQ X2, X2
	MOVQ $0x5c5c5c5c5c5c5c5c, DX
	MOVQ DX, X3
	PUNPCKLQDQ X3, X3

loop:
	CMPQ AX, CX
	JAE  done
	MOVOU (SI)(AX*1), X0
	MOVO  X1, X4
	PCMPGTB X0, X4 // X4 = 0x20 > x, signed: below 0x20 or from 0x80
	MOVO  X0, X5
	PCMPEQB X2, X5 // '"'
	MOVO  X0, X6
	PCMPEQB X3, X6 // '\\'
	POR   X5, X4
	POR   X6, X4
	PMOVMSKB X4, DX
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
