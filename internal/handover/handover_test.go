package handover

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func sample(t testing.TB) []byte {
	t.Helper()
	var w Writer
	for _, s := range []struct{ name, data string }{
		{"access", "tokens"},
		{"terminal/shell", strings.Repeat("screen ", 1000)},
		{"empty", ""},
		{"tcp/ahp-tcp.1", "\x00\x01\x02"},
	} {
		if err := w.Section(s.name, []byte(s.data)); err != nil {
			t.Fatal(err)
		}
	}
	return w.Bytes()
}

func TestRoundTrip(t *testing.T) {
	b := sample(t)
	s, err := Parse(b, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.Names(), ","); got != "access,terminal/shell,empty,tcp/ahp-tcp.1" {
		t.Fatalf("names %s", got)
	}
	if d, ok := s.Section("terminal/shell"); !ok || string(d) != strings.Repeat("screen ", 1000) {
		t.Fatalf("section terminal/shell: %q %v", d, ok)
	}
	if d, ok := s.Section("empty"); !ok || len(d) != 0 {
		t.Fatalf("empty section: %q %v", d, ok)
	}
	if _, ok := s.Section("missing"); ok {
		t.Fatal("a section that was not written")
	}
}

func TestWriterRefusesBadNames(t *testing.T) {
	var w Writer
	for _, name := range []string{"", strings.Repeat("a", MaxNameLength+1), "Upper", "sp ace", "nul\x00"} {
		if err := w.Section(name, nil); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
	if err := w.Section("a", nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Section("a", nil); err == nil {
		t.Error("a name twice accepted")
	}
}

// TestRefusals: every way a state can be wrong is refused, with the error
// that names it, before any section is handed out.
func TestRefusals(t *testing.T) {
	good := sample(t)
	reseal := func(b []byte) []byte { // a valid checksum over a changed body
		clear(b[24:HeaderSize])
		binary.BigEndian.PutUint32(b[24:], crc32.Checksum(b[HeaderSize:], crc32.MakeTable(crc32.Castagnoli)))
		return b
	}
	v1 := func(b []byte) []byte { // the same state as version 1 wrote it
		binary.BigEndian.PutUint32(b[8:], 1)
		sum := sha256.Sum256(b[HeaderSize:])
		copy(b[24:HeaderSize], sum[:])
		return b
	}
	cases := []struct {
		name string
		b    func() []byte
		max  int64
		want error
	}{
		{"empty", func() []byte { return nil }, 1 << 20, ErrTruncated},
		{"not a state", func() []byte { return []byte("#!/bin/sh\nexec evil\n") }, 1 << 20, ErrNotState},
		{"bad magic", func() []byte { b := bytes.Clone(good); b[0] = 'X'; return b }, 1 << 20, ErrNotState},
		{"newer version", func() []byte { b := bytes.Clone(good); binary.BigEndian.PutUint32(b[8:], Version+1); return b }, 1 << 20, ErrVersion},
		{"unknown flag", func() []byte { b := bytes.Clone(good); b[15] = 1; return b }, 1 << 20, ErrVersion},
		{"header only", func() []byte { return good[:HeaderSize] }, 1 << 20, ErrTruncated},
		{"truncated body", func() []byte { return good[:len(good)-1] }, 1 << 20, ErrTruncated},
		{"trailing bytes", func() []byte { return append(bytes.Clone(good), 0) }, 1 << 20, ErrMalformed},
		{"over the bound", func() []byte { return good }, int64(len(good) - 1), ErrTooLarge},
		{"huge length", func() []byte { b := bytes.Clone(good); binary.BigEndian.PutUint64(b[16:], 1<<62); return b }, 1 << 40, ErrTooLarge},
		{"flipped bit", func() []byte { b := bytes.Clone(good); b[len(b)-5] ^= 0x10; return b }, 1 << 20, ErrChecksum},
		{"flipped checksum", func() []byte { b := bytes.Clone(good); b[25] ^= 1; return b }, 1 << 20, ErrChecksum},
		{"checksum's padding", func() []byte { b := bytes.Clone(good); b[30] ^= 1; return b }, 1 << 20, ErrChecksum},
		{"version 1, flipped bit", func() []byte { b := v1(bytes.Clone(good)); b[len(b)-5] ^= 0x10; return b }, 1 << 20, ErrChecksum},
		{"version 1 with a CRC-32C", func() []byte { b := bytes.Clone(good); binary.BigEndian.PutUint32(b[8:], 1); return b }, 1 << 20, ErrChecksum},
		{"section past the body", func() []byte {
			var w Writer
			w.Section("a", []byte("xyz"))
			b := w.Bytes()
			b[HeaderSize+2] = 9 // data length 9 with 3 bytes there
			return reseal(b)
		}, 1 << 20, ErrMalformed},
		{"bad name", func() []byte {
			var w Writer
			w.Section("ab", nil)
			b := w.Bytes()
			b[HeaderSize+1] = 'A'
			return reseal(b)
		}, 1 << 20, ErrMalformed},
		{"name twice", func() []byte {
			var w Writer
			w.Section("ab", []byte("1"))
			w.Section("ac", []byte("2"))
			b := w.Bytes()
			b[bytes.LastIndex(b, []byte("ac"))+1] = 'b'
			return reseal(b)
		}, 1 << 20, ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.b(), tc.max)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Parse: %v, want %v", err, tc.want)
			}
			// The same through a file.
			f, err := Sealed("test", tc.b())
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := Read(f, tc.max); !errors.Is(err, tc.want) {
				t.Fatalf("Read: %v, want %v", err, tc.want)
			}
		})
	}
	// A state of version 1 (SHA-256), as a daemon before version 2
	// writes it, is read.
	if s, err := Parse(v1(bytes.Clone(good)), 1<<20); err != nil {
		t.Errorf("version 1: %v", err)
	} else if d, _ := s.Section("access"); string(d) != "tokens" {
		t.Errorf("version 1: section access = %q", d)
	}
	// Every truncation of a good state is refused.
	for n := range len(good) {
		if _, err := Parse(good[:n], 1<<20); err == nil {
			t.Fatalf("a state truncated to %d of %d bytes parsed", n, len(good))
		}
	}
}

// TestSealedMemfd: the state's memfd cannot be changed, by its writer
// either; Inherited takes it (close-on-exec again) and refuses a
// descriptor that is not a sealed memfd.
func TestSealedMemfd(t *testing.T) {
	good := sample(t)
	f, err := Sealed("ahpd-state", good)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("x"), 0); err == nil {
		t.Error("wrote into a sealed state")
	}
	if err := f.Truncate(10); err == nil {
		t.Error("truncated a sealed state")
	}
	// As the new binary finds it: without close-on-exec.
	dup, err := unix.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	g, err := Inherited(dup)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if flags, _ := unix.FcntlInt(g.Fd(), unix.F_GETFD, 0); flags&unix.FD_CLOEXEC == 0 {
		t.Error("the inherited state is not close-on-exec")
	}
	s, err := Read(g, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := s.Section("access"); string(d) != "tokens" {
		t.Fatalf("section access = %q", d)
	}

	// A plain file, an unsealed memfd, a standard stream: refused.
	plain, err := os.CreateTemp(t.TempDir(), "state")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	pfd, _ := unix.Dup(int(plain.Fd()))
	if _, err := Inherited(pfd); err == nil {
		t.Error("a plain file taken as the state")
	}
	unix.Close(pfd)
	mfd, _ := unix.MemfdCreate("unsealed", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if _, err := Inherited(mfd); err == nil {
		t.Error("an unsealed memfd taken as the state")
	}
	unix.Close(mfd)
	if _, err := Inherited(2); err == nil {
		t.Error("stderr taken as the state")
	}
}

// FuzzParse: no input makes Parse panic; what parses re-encodes to the
// same bytes.
func FuzzParse(f *testing.F) {
	f.Add(sample(f))
	var w Writer
	f.Add(w.Bytes())
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b, 1<<20)
		if err != nil {
			return
		}
		var w Writer
		for _, name := range s.Names() {
			d, _ := s.Section(name)
			if err := w.Section(name, d); err != nil {
				t.Fatalf("section %q parsed but not writable: %v", name, err)
			}
		}
		// The same bytes; a state of version 1 (its checksum SHA-256)
		// is written as this version, the same body.
		if again := w.Bytes(); binary.BigEndian.Uint32(b[8:]) == Version && !bytes.Equal(again, b) || !bytes.Equal(again[HeaderSize:], b[HeaderSize:]) {
			t.Fatal("a parsed state re-encodes differently")
		}
	})
}

// FuzzSplit: the body's framing, past the checksum that keeps FuzzParse at
// the header: no input panics, and what splits re-encodes to the same
// bytes.
func FuzzSplit(f *testing.F) {
	f.Add(sample(f)[HeaderSize:])
	f.Add([]byte("\x01a\x00"))
	f.Add([]byte("\x80\x00"))
	f.Fuzz(func(t *testing.T, body []byte) {
		s, err := split(body)
		if err != nil {
			return
		}
		var w Writer
		for _, name := range s.Names() {
			d, _ := s.Section(name)
			if err := w.Section(name, d); err != nil {
				t.Fatalf("section %q split but not writable: %v", name, err)
			}
		}
		if !bytes.Equal(w.Bytes()[HeaderSize:], body) {
			t.Fatal("a split body re-encodes differently")
		}
	})
}

// TestSeal: Writer.Seal writes the very bytes Bytes returns into a sealed
// memfd, which Read takes.
func TestSeal(t *testing.T) {
	var w Writer
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // more than one write's worth
	for i, d := range [][]byte{[]byte("tokens"), big, nil, []byte("\x00\x01")} {
		if err := w.Section("s/"+string(rune('a'+i)), d); err != nil {
			t.Fatal(err)
		}
	}
	f, err := w.Seal("ahpd-state")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, fi.Size())
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, w.Bytes()) {
		t.Fatalf("Seal wrote %d bytes that differ from Bytes' %d", len(got), len(w.Bytes()))
	}
	if seals, _ := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0); seals&unix.F_SEAL_WRITE == 0 {
		t.Errorf("seals %#x: not sealed against writes", seals)
	}
	s, err := Read(f, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := s.Section("s/b"); !bytes.Equal(d, big) {
		t.Error("section s/b read back differs")
	}
}
