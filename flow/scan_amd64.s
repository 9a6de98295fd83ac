//go:build amd64 && !purego

#include "textflag.h"

// STOPS_SETUP fills X1 with 0x20, X2 with '"' and X3 with '\\' in every
// byte, for STOPS (it uses DX).
#define STOPS_SETUP \
	MOVQ $0x2020202020202020, DX; \
	MOVQ DX, X1; \
	PUNPCKLQDQ X1, X1; \
	MOVQ $0x2222222222222222, DX; \
	MOVQ DX, X2; \
	PUNPCKLQDQ X2, X2; \
	MOVQ $0x5c5c5c5c5c5c5c5c, DX; \
	MOVQ DX, X3; \
	PUNPCKLQDQ X3, X3

// STOPS sets bit i of DX for each byte i of X0 that is not written as
// itself in a JSON string: one signed comparison with 0x20 flags both
// the bytes below 0x20 and those from 0x80 (negative as int8), then '"'
// and '\\' (it uses X4 to X6).
#define STOPS \
	MOVO X1, X4; \
	PCMPGTB X0, X4; \
	MOVO X0, X5; \
	PCMPEQB X2, X5; \
	MOVO X0, X6; \
	PCMPEQB X3, X6; \
	POR X5, X4; \
	POR X6, X4; \
	PMOVMSKB X4, DX

// func plainBlocks(p *byte, n int) int
//
// plainBlocks looks at the whole 16-byte blocks of p[:n] with SSE2 (part
// of every amd64 CPU) and returns the index of the first byte that is a
// control character, '"', '\\' or from 0x80 (plainPrefix's stops), or
// n &^ 15 when those blocks hold none.
TEXT ·plainBlocks(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	ANDQ $~15, CX
	XORQ AX, AX
	STOPS_SETUP

loop:
	CMPQ AX, CX
	JAE  done
	MOVOU (SI)(AX*1), X0
	STOPS
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

// func escapeBlocks(dst []byte, src string) (w, r int)
//
// escapeBlocks escapes src into dst 16 bytes at a time, as AppendEscaped
// does: each block is copied whole, and at its first byte that is not
// written as itself, a '"', '\\' or a control character with a short
// escape (shortEscape) is written as '\\' and its letter and the next
// block starts after it. It stops at a byte it leaves to its caller (the
// other control characters, bytes from 0x80), or when fewer than 16
// bytes of src or 18 of dst are left. It returns the bytes written to
// dst and read from src. dst's length is its room: blocks are stored
// whole, so it may be written up to w+16.
TEXT ·escapeBlocks(SB), NOSPLIT, $0-56
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), R9
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), R10
	LEAQ ·shortEscape(SB), R8
	XORQ AX, AX // w
	XORQ BX, BX // r
	STOPS_SETUP

eloop:
	LEAQ 16(BX), CX
	CMPQ CX, R10
	JA   edone
	LEAQ 18(AX), CX
	CMPQ CX, R9
	JA   edone
	MOVOU (SI)(BX*1), X0
	MOVOU X0, (DI)(AX*1)
	STOPS
	TESTL DX, DX
	JNZ   especial
	ADDQ  $16, AX
	ADDQ  $16, BX
	JMP   eloop

especial:
	BSFL DX, DX
	ADDQ DX, AX
	ADDQ DX, BX
	MOVBLZX (SI)(BX*1), CX
	MOVBLZX (R8)(CX*1), CX
	TESTL CX, CX
	JZ   edone
	MOVB $0x5c, (DI)(AX*1)
	MOVB CX, 1(DI)(AX*1)
	ADDQ $2, AX
	INCQ BX
	JMP  eloop

edone:
	MOVQ AX, w+40(FP)
	MOVQ BX, r+48(FP)
	RET
