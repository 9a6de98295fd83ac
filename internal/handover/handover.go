// Package handover is the container of the state one ahpd hands to the
// binary it re-executes at an upgrade in place (issue 38): a fixed header
// and a body of named sections, each an opaque blob that its owner (the
// terminals, the TCP channels, the telemetry channels, the access state)
// encodes and decodes.
//
// The header is 56 bytes:
//
//	magic   [8]byte  "AHPDSTAT"
//	version uint32   the container's format version (big endian)
//	flags   uint32   0; a reader refuses any bit it does not know
//	length  uint64   the body's length in bytes
//	sum     [32]byte the body's checksum: in version 2, its CRC-32C
//	                 (Castagnoli, big endian) and 28 zero bytes; in
//	                 version 1, its SHA-256
//
// and the body is a sequence of sections, each
//
//	uvarint name length, name (1..64 bytes of [a-z0-9./-])
//	uvarint data length, data
//
// with every name once. A reader checks, before it hands out any section:
// the magic, that it knows the version, that the length is what the input
// holds and at most the caller's bound, the checksum, and that the
// sections fill the body exactly. A truncated, corrupted, oversized or
// newer state is refused with an error that says which, so that the check
// run of the new binary (ahpd --upgrade-check) refuses an upgrade before
// the old daemon has given anything up.
//
// The rule for Version: a change to the header or to the section framing
// bumps it. A change inside one section is that section's owner's to
// version (each section's data starts with a version of its own).
// Version 2 has CRC-32C for SHA-256: the checksum guards against a state
// cut or damaged on its way (the memfd is sealed, and only the daemon's
// own children get it), which either detects, and it is computed three
// times over an ~85 MB state of 100 full terminals — by the writer, the
// check run and the new binary — 70 ms each with SHA-256 on this
// project's 2-core VM against 19 ms. A reader reads both versions, so
// that a daemon of version 1 can upgrade to this one.
package handover

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
)

const (
	// Magic starts every state.
	Magic = "AHPDSTAT"
	// Version is the container format this package writes; it reads
	// it and version 1.
	Version = 2
	// HeaderSize is the fixed header's length.
	HeaderSize = 8 + 4 + 4 + 8 + 32
	// MaxNameLength bounds a section's name.
	MaxNameLength = 64
)

// Errors a reader returns, wrapped with the details.
var (
	ErrNotState  = errors.New("not an ahpd state (bad magic)")
	ErrVersion   = errors.New("state format version not supported")
	ErrTruncated = errors.New("state truncated")
	ErrTooLarge  = errors.New("state too large")
	ErrChecksum  = errors.New("state checksum mismatch")
	ErrMalformed = errors.New("state malformed")
)

// Writer builds a state: Section for each part, then Bytes or Seal.
type Writer struct {
	// parts are the body's pieces in order: each section's framing, then
	// its data as the caller gave it (not copied: a terminal's state is
	// about a megabyte, and a hundred of them were copied twice on their
	// way to the memfd).
	parts [][]byte
	size  int // the body's length
	names map[string]bool
}

// Section appends a named section. It keeps data, without copying it:
// data must not change until the state is written (Bytes, Seal). It fails
// on an invalid or repeated name.
func (w *Writer) Section(name string, data []byte) error {
	if err := checkName(name); err != nil {
		return err
	}
	if w.names[name] {
		return fmt.Errorf("handover: section %q twice", name)
	}
	if w.names == nil {
		w.names = map[string]bool{}
	}
	w.names[name] = true
	head := binary.AppendUvarint(make([]byte, 0, 2*binary.MaxVarintLen64+len(name)), uint64(len(name)))
	head = append(head, name...)
	head = binary.AppendUvarint(head, uint64(len(data)))
	w.parts = append(w.parts, head, data)
	w.size += len(head) + len(data)
	return nil
}

// header returns the header for the body w.parts make up.
func (w *Writer) header() []byte {
	var crc uint32
	for _, p := range w.parts {
		crc = crc32.Update(crc, castagnoli, p)
	}
	out := make([]byte, HeaderSize)
	copy(out, Magic)
	binary.BigEndian.PutUint32(out[8:], Version)
	binary.BigEndian.PutUint32(out[12:], 0)
	binary.BigEndian.PutUint64(out[16:], uint64(w.size))
	binary.BigEndian.PutUint32(out[24:], crc)
	return out
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkSum reports whether sum, a header's checksum field, is that of
// body in the header's version.
func checkSum(version uint32, sum, body []byte) bool {
	if version == 1 {
		want := sha256.Sum256(body)
		return bytes.Equal(sum, want[:])
	}
	var want [32]byte
	binary.BigEndian.PutUint32(want[:], crc32.Checksum(body, castagnoli))
	return bytes.Equal(sum, want[:])
}

// Bytes returns the header and the body.
func (w *Writer) Bytes() []byte {
	out := make([]byte, 0, HeaderSize+w.size)
	out = append(out, w.header()...)
	for _, p := range w.parts {
		out = append(out, p...)
	}
	return out
}

// State is a parsed state: its sections by name.
type State struct {
	sections map[string][]byte
	names    []string // in the order written
}

// Section returns the data of the named section (aliasing the input).
func (s *State) Section(name string) ([]byte, bool) {
	b, ok := s.sections[name]
	return b, ok
}

// Names returns the sections' names in the order they were written.
func (s *State) Names() []string { return slices.Clone(s.names) }

// Parse checks and splits a whole state. max bounds its length (header
// included).
func Parse(b []byte, max int64) (*State, error) {
	if len(b) < HeaderSize {
		if len(b) >= len(Magic) && string(b[:len(Magic)]) != Magic {
			return nil, ErrNotState
		}
		return nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrTruncated, len(b), HeaderSize)
	}
	version, length, err := checkHeader(b[:HeaderSize], max)
	if err != nil {
		return nil, err
	}
	body := b[HeaderSize:]
	if uint64(len(body)) < length {
		return nil, fmt.Errorf("%w: the header announces %d bytes of body, %d are there", ErrTruncated, length, len(body))
	}
	if uint64(len(body)) > length {
		return nil, fmt.Errorf("%w: %d bytes after the %d-byte body", ErrMalformed, uint64(len(body))-length, length)
	}
	if !checkSum(version, b[24:HeaderSize], body) {
		return nil, ErrChecksum
	}
	return split(body)
}

// Read reads a whole state from f (a memfd or a file) from its start,
// checking the header's length against f's size and max before it reads
// the body.
func Read(f *os.File, max int64) (*State, error) {
	var h [HeaderSize]byte
	n, err := f.ReadAt(h[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("handover: read: %w", err)
	}
	if n < HeaderSize {
		return Parse(h[:n], max)
	}
	_, length, err := checkHeader(h[:], max)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("handover: %w", err)
	}
	if size := fi.Size(); uint64(size) != HeaderSize+length {
		if uint64(size) < HeaderSize+length {
			return nil, fmt.Errorf("%w: the header announces %d bytes of body, the file holds %d", ErrTruncated, length, size-HeaderSize)
		}
		return nil, fmt.Errorf("%w: %d bytes after the %d-byte body", ErrMalformed, uint64(size)-HeaderSize-length, length)
	}
	b := make([]byte, HeaderSize+length)
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("handover: read: %w", err)
	}
	return Parse(b, max)
}

func checkHeader(h []byte, max int64) (version uint32, length uint64, err error) {
	if string(h[:len(Magic)]) != Magic {
		return 0, 0, ErrNotState
	}
	if version = binary.BigEndian.Uint32(h[8:]); version != Version && version != 1 {
		return 0, 0, fmt.Errorf("%w: the state is version %d, this ahpd reads versions 1 and %d", ErrVersion, version, Version)
	}
	if f := binary.BigEndian.Uint32(h[12:]); f != 0 {
		return 0, 0, fmt.Errorf("%w: unknown flags %#x", ErrVersion, f)
	}
	length = binary.BigEndian.Uint64(h[16:])
	if max < HeaderSize || length > uint64(max-HeaderSize) {
		return 0, 0, fmt.Errorf("%w: %d bytes of body, the bound is %d", ErrTooLarge, length, max-HeaderSize)
	}
	return version, length, nil
}

func split(body []byte) (*State, error) {
	s := &State{sections: map[string][]byte{}}
	for len(body) > 0 {
		name, rest, err := chunk(body, MaxNameLength)
		if err != nil {
			return nil, fmt.Errorf("%w: section %d's name: %v", ErrMalformed, len(s.names)+1, err)
		}
		if err := checkName(string(name)); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		data, rest, err := chunk(rest, len(rest))
		if err != nil {
			return nil, fmt.Errorf("%w: section %q: %v", ErrMalformed, name, err)
		}
		if _, dup := s.sections[string(name)]; dup {
			return nil, fmt.Errorf("%w: section %q twice", ErrMalformed, name)
		}
		s.sections[string(name)] = data
		s.names = append(s.names, string(name))
		body = rest
	}
	return s, nil
}

// chunk splits a uvarint-length-prefixed chunk of at most max bytes off b.
func chunk(b []byte, max int) (data, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || k != len(binary.AppendUvarint(nil, n)) {
		return nil, nil, errors.New("bad length (not a shortest uvarint)")
	}
	if n > uint64(max) || n > uint64(len(b)-k) {
		return nil, nil, fmt.Errorf("length %d, more than the %d bytes allowed or left", n, min(max, len(b)-k))
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

func checkName(name string) error {
	if len(name) == 0 || len(name) > MaxNameLength {
		return fmt.Errorf("handover: section name of %d bytes, want 1..%d", len(name), MaxNameLength)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '/' || c == '-') {
			return fmt.Errorf("handover: section name %q: only a-z, 0-9, '.', '/' and '-'", name)
		}
	}
	return nil
}
