// Package statebuf writes and reads the compact binary states an upgrade
// in place hands to the next binary (docs/upgrade.md): unsigned varints in
// their shortest form and length-prefixed byte strings. A Reader checks
// every read against the bytes left and the bound the caller gives, and
// keeps its first error: a state that is cut, padded or out of bounds is
// refused with what was wrong, never read past, and never allocates more
// than it holds.
package statebuf

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrState is wrapped by every error of a Reader.
var ErrState = errors.New("state")

// AppendUint appends v as an unsigned varint.
func AppendUint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

// AppendInt appends a non-negative v as an unsigned varint.
func AppendInt(b []byte, v int64) []byte { return binary.AppendUvarint(b, uint64(v)) }

// AppendBool appends v as 0 or 1.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// AppendBytes appends p's length and p.
func AppendBytes(b, p []byte) []byte { return append(binary.AppendUvarint(b, uint64(len(p))), p...) }

// AppendString appends s's length and s.
func AppendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// Reader reads a state; after its first error every read returns zero
// values and Err reports that error.
type Reader struct {
	b   []byte
	err error
}

// NewReader reads b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Err returns the first error.
func (r *Reader) Err() error { return r.err }

// Fail records an error of the caller's (a value out of its range) unless
// one was recorded before.
func (r *Reader) Fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrState, fmt.Sprintf(format, args...))
		r.b = nil
	}
}

// Uint reads an unsigned varint named what (for the error), at most max.
func (r *Reader) Uint(what string, max uint64) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || n != len(binary.AppendUvarint(nil, v)) {
		r.Fail("%s: cut short or not a shortest varint", what)
		return 0
	}
	if v > max {
		r.Fail("%s: %d is more than %d", what, v, max)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Int reads a non-negative integer of at most max.
func (r *Reader) Int(what string, max int64) int64 { return int64(r.Uint(what, uint64(max))) }

// Bool reads 0 or 1.
func (r *Reader) Bool(what string) bool { return r.Uint(what, 1) == 1 }

// Bytes reads a length-prefixed byte string of at most max bytes; the
// result aliases the state.
func (r *Reader) Bytes(what string, max int) []byte {
	n := int(r.Uint(what+" length", uint64(max)))
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.Fail("%s: %d bytes, %d left", what, n, len(r.b))
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}

// String reads a length-prefixed string of at most max bytes (a copy).
func (r *Reader) String(what string, max int) string { return string(r.Bytes(what, max)) }

// End reports an error when bytes are left after the last read.
func (r *Reader) End() error {
	if r.err == nil && len(r.b) > 0 {
		r.Fail("%d bytes after the end", len(r.b))
	}
	return r.err
}
