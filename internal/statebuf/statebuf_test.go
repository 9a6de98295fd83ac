package statebuf

import (
	"errors"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	b := AppendInt(nil, 300)
	b = AppendBool(b, true)
	b = AppendBytes(b, []byte("abc"))
	b = AppendString(b, "")
	r := NewReader(b)
	if v, ok, p, s := r.Int("n", 1000), r.Bool("b"), r.Bytes("p", 3), r.String("s", 0); v != 300 || !ok || string(p) != "abc" || s != "" {
		t.Fatalf("read %d %v %q %q", v, ok, p, s)
	}
	if err := r.End(); err != nil {
		t.Fatal(err)
	}
}

func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		read func(*Reader)
	}{
		{"cut varint", []byte{0x80}, func(r *Reader) { r.Uint("n", 1<<20) }},
		{"padded varint", []byte{0x81, 0x00}, func(r *Reader) { r.Uint("n", 1<<20) }},
		{"over its bound", AppendInt(nil, 11), func(r *Reader) { r.Int("n", 10) }},
		{"not a bool", []byte{2}, func(r *Reader) { r.Bool("b") }},
		{"bytes past the end", append(AppendInt(nil, 5), "abc"...), func(r *Reader) { r.Bytes("p", 10) }},
		{"bytes over their bound", AppendBytes(nil, []byte("abcdef")), func(r *Reader) { r.Bytes("p", 5) }},
		{"bytes left over", []byte{1, 2}, func(r *Reader) { r.Uint("n", 10) }},
	} {
		r := NewReader(tc.b)
		tc.read(r)
		if err := r.End(); !errors.Is(err, ErrState) {
			t.Errorf("%s: End = %v, want ErrState", tc.name, err)
		}
		// The first error sticks: later reads give zero values.
		if v := r.Uint("after", 1<<20); v != 0 {
			t.Errorf("%s: a read after the error gave %d", tc.name, v)
		}
	}
}

func FuzzReader(f *testing.F) {
	f.Add(append(AppendInt(nil, 300), AppendBytes(nil, []byte("abc"))...))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(b)
		n := r.Int("n", 1<<40)
		p := r.Bytes("p", 1<<20)
		if r.Err() == nil && (n < 0 || len(p) > len(b)) {
			t.Fatalf("read %d and %d bytes from %d", n, len(p), len(b))
		}
		_ = r.End()
	})
}
