package pty

// The escape-sequence state machine shared by the query filter (which runs
// on raw PTY bytes in the reader goroutine) and the emulator (which runs on
// sanitized text). Both must agree on where every sequence starts and ends,
// so they use one transition table. It follows the DEC/ECMA-48 parser that
// xterm and xterm.js implement (vt100.net "A parser for DEC's ANSI-compatible
// video terminals"), including C1 controls as the code points U+0080–U+009F
// (the UTF-8 pair C2 80–C2 9F), as xterm.js does.

// Parser states.
const (
	stGround uint8 = iota
	stEsc
	stEscInter
	stCsiEntry
	stCsiParam
	stCsiInter
	stCsiIgnore
	stOsc
	stDcsEntry
	stDcsParam
	stDcsInter
	stDcsPass
	stDcsIgnore
	stSosPmApc
	numStates
)

// Parser actions.
const (
	acNone uint8 = iota
	acPrint
	acExecute
	acClear   // start of an ESC/CSI/DCS sequence: reset collected state
	acCollect // intermediate or private-marker byte
	acParam   // digit, ';' or ':'
	acEscDispatch
	acCsiDispatch
	acOscStart
	acOscPut
	acOscEnd   // OSC complete (terminated by BEL, ST or ESC)
	acOscAbort // OSC cancelled by CAN/SUB
	acHook     // DCS final byte: passthrough starts
	acPut      // DCS passthrough byte
	acUnhook   // DCS complete
	acDcsAbort
	acIgnore
)

// Byte classes beyond 0x7F: the table's columns 0x80–0x9F are the C1
// controls (U+0080–U+009F); column clsHigh is any other non-ASCII byte or
// code point.
const clsHigh = 0xA0

// vtTable[state][class] = action<<8 | next state.
var vtTable [numStates][clsHigh + 1]uint16

func init() {
	set := func(st uint8, lo, hi int, act, next uint8) {
		for c := lo; c <= hi; c++ {
			vtTable[st][c] = uint16(act)<<8 | uint16(next)
		}
	}
	for st := uint8(0); st < numStates; st++ {
		// Defaults: stay and ignore.
		set(st, 0, clsHigh, acIgnore, st)
	}
	c0 := func(st uint8, act uint8) {
		set(st, 0x00, 0x17, act, st)
		set(st, 0x19, 0x19, act, st)
		set(st, 0x1C, 0x1F, act, st)
	}
	// Ground.
	c0(stGround, acExecute)
	set(stGround, 0x20, 0x7E, acPrint, stGround)
	set(stGround, clsHigh, clsHigh, acPrint, stGround)
	// Escape.
	c0(stEsc, acExecute)
	set(stEsc, 0x20, 0x2F, acCollect, stEscInter)
	set(stEsc, 0x30, 0x7E, acEscDispatch, stGround)
	set(stEsc, '[', '[', acClear, stCsiEntry)
	set(stEsc, ']', ']', acOscStart, stOsc)
	set(stEsc, 'P', 'P', acClear, stDcsEntry)
	set(stEsc, 'X', 'X', acNone, stSosPmApc)
	set(stEsc, '^', '^', acNone, stSosPmApc)
	set(stEsc, '_', '_', acNone, stSosPmApc)
	c0(stEscInter, acExecute)
	set(stEscInter, 0x20, 0x2F, acCollect, stEscInter)
	set(stEscInter, 0x30, 0x7E, acEscDispatch, stGround)
	// CSI.
	c0(stCsiEntry, acExecute)
	set(stCsiEntry, 0x20, 0x2F, acCollect, stCsiInter)
	set(stCsiEntry, 0x30, 0x3B, acParam, stCsiParam)
	set(stCsiEntry, 0x3C, 0x3F, acCollect, stCsiParam)
	set(stCsiEntry, 0x40, 0x7E, acCsiDispatch, stGround)
	c0(stCsiParam, acExecute)
	set(stCsiParam, 0x30, 0x3B, acParam, stCsiParam)
	set(stCsiParam, 0x3C, 0x3F, acNone, stCsiIgnore)
	set(stCsiParam, 0x20, 0x2F, acCollect, stCsiInter)
	set(stCsiParam, 0x40, 0x7E, acCsiDispatch, stGround)
	c0(stCsiInter, acExecute)
	set(stCsiInter, 0x20, 0x2F, acCollect, stCsiInter)
	set(stCsiInter, 0x30, 0x3F, acNone, stCsiIgnore)
	set(stCsiInter, 0x40, 0x7E, acCsiDispatch, stGround)
	c0(stCsiIgnore, acExecute)
	set(stCsiIgnore, 0x40, 0x7E, acNone, stGround)
	// OSC: BEL or ST ends it.
	set(stOsc, 0x20, 0x7E, acOscPut, stOsc)
	set(stOsc, clsHigh, clsHigh, acOscPut, stOsc)
	set(stOsc, 0x07, 0x07, acOscEnd, stGround)
	// DCS.
	set(stDcsEntry, 0x20, 0x2F, acCollect, stDcsInter)
	set(stDcsEntry, 0x30, 0x3B, acParam, stDcsParam)
	set(stDcsEntry, 0x3C, 0x3F, acCollect, stDcsParam)
	set(stDcsEntry, 0x40, 0x7E, acHook, stDcsPass)
	set(stDcsParam, 0x30, 0x3B, acParam, stDcsParam)
	set(stDcsParam, 0x3C, 0x3F, acNone, stDcsIgnore)
	set(stDcsParam, 0x20, 0x2F, acCollect, stDcsInter)
	set(stDcsParam, 0x40, 0x7E, acHook, stDcsPass)
	set(stDcsInter, 0x20, 0x2F, acCollect, stDcsInter)
	set(stDcsInter, 0x30, 0x3F, acNone, stDcsIgnore)
	set(stDcsInter, 0x40, 0x7E, acHook, stDcsPass)
	c0(stDcsPass, acPut)
	set(stDcsPass, 0x20, 0x7E, acPut, stDcsPass)
	set(stDcsPass, clsHigh, clsHigh, acPut, stDcsPass)

	// Transitions from anywhere. A string in progress is finished (OSC,
	// DCS) by ESC and ST, and abandoned by CAN and SUB.
	for st := uint8(0); st < numStates; st++ {
		end := acNone
		abort := acExecute
		switch st {
		case stOsc:
			end, abort = acOscEnd, acOscAbort
		case stDcsPass:
			end, abort = acUnhook, acDcsAbort
		}
		escAct := acClear
		if end != acNone {
			escAct = end // the emulator clears after finishing the string
		}
		set(st, 0x18, 0x18, abort, stGround)
		set(st, 0x1A, 0x1A, abort, stGround)
		set(st, 0x1B, 0x1B, escAct, stEsc)
		c1exec := acExecute
		if end != acNone {
			c1exec = end
		}
		set(st, 0x80, 0x8F, c1exec, stGround)
		set(st, 0x91, 0x97, c1exec, stGround)
		set(st, 0x99, 0x9A, c1exec, stGround)
		st2 := acNone
		if end != acNone {
			st2 = end
		}
		set(st, 0x9C, 0x9C, st2, stGround)
		set(st, 0x90, 0x90, pick(end, acClear), stDcsEntry)
		set(st, 0x9D, 0x9D, pick(end, acOscStart), stOsc)
		set(st, 0x98, 0x98, st2, stSosPmApc)
		set(st, 0x9E, 0x9F, st2, stSosPmApc)
		set(st, 0x9B, 0x9B, pick(end, acClear), stCsiEntry)
	}
	// DEL is ignored everywhere.
	for st := uint8(0); st < numStates; st++ {
		vtTable[st][0x7F] = uint16(acIgnore)<<8 | uint16(st)
	}
}

// pick returns a when it is not acNone, else b. When a string is finished by
// the introducer of the next sequence, the emulator finishes the string and
// then starts the sequence itself (see emulator.transition).
func pick(a, b uint8) uint8 {
	if a != acNone {
		return a
	}
	return b
}
