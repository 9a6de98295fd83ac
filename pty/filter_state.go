package pty

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

// The reader's filter holds bytes between two reads: a query's beginning
// (hold, at most maxQueryLen+1 bytes, to be fed again with the next read)
// and an incomplete UTF-8 sequence (u8, at most 3 bytes). An upgrade in
// place (issue 38) hands them to the next binary with the emulator's
// state, or a character or a query split across the hand-over would come
// out mangled.
//
// Format (u: uvarint): u version (1), st, holdSt, a flags byte (bit 0:
// swallowST), u len(hold) and hold, u len(u8) and u8. The scratch slices
// are not state.

const filterStateVersion = 1

// appendState appends the filter's state to b.
func (f *filter) appendState(b []byte) []byte {
	b = binary.AppendUvarint(b, filterStateVersion)
	b = append(b, f.st, f.holdSt)
	var flags byte
	if f.swallowST {
		flags |= 1
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, uint64(len(f.hold)))
	b = append(b, f.hold...)
	b = binary.AppendUvarint(b, uint64(len(f.u8)))
	return append(b, f.u8...)
}

// decodeFilterState reads a filter's state from b, checking every field,
// and returns the filter and what follows it.
func decodeFilterState(b []byte) (*filter, []byte, error) {
	fail := func(format string, args ...any) (*filter, []byte, error) {
		return nil, nil, fmt.Errorf("filter state: "+format, args...)
	}
	v, n := binary.Uvarint(b)
	if n <= 0 || n != len(binary.AppendUvarint(nil, v)) {
		return fail("truncated or not a shortest uvarint")
	}
	if v != filterStateVersion {
		return fail("version %d, this ahpd reads version %d", v, filterStateVersion)
	}
	b = b[n:]
	if len(b) < 3 {
		return fail("truncated")
	}
	f := &filter{st: b[0], holdSt: b[1]}
	if f.st >= numStates || f.holdSt >= numStates {
		return fail("parser state %d/%d, not one of the %d states", f.st, f.holdSt, numStates)
	}
	if b[2]&^1 != 0 {
		return fail("unknown flags %#x", b[2])
	}
	f.swallowST = b[2]&1 != 0
	b = b[3:]
	var err error
	if f.hold, b, err = filterBytes(b, "held query", maxQueryLen+1); err != nil {
		return nil, nil, err
	}
	if f.u8, b, err = filterBytes(b, "UTF-8 tail", utf8.UTFMax-1); err != nil {
		return nil, nil, err
	}
	if len(f.u8) > 0 && (!utf8.RuneStart(f.u8[0]) || utf8.FullRune(f.u8)) {
		return nil, nil, fmt.Errorf("filter state: UTF-8 tail % x is not the start of an incomplete sequence", f.u8)
	}
	return f, b, nil
}

func filterBytes(b []byte, what string, max int) ([]byte, []byte, error) {
	l, n := binary.Uvarint(b)
	if n <= 0 || n != len(binary.AppendUvarint(nil, l)) {
		return nil, nil, fmt.Errorf("filter state: %s: truncated or not a shortest uvarint", what)
	}
	if l > uint64(max) || l > uint64(len(b)-n) {
		return nil, nil, fmt.Errorf("filter state: %s of %d bytes, at most %d (and %d left)", what, l, max, len(b)-n)
	}
	if l == 0 {
		return nil, b[n:], nil
	}
	return append([]byte(nil), b[n:n+int(l)]...), b[n+int(l):], nil
}
