package b64

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"testing"
)

func TestMatchesStandardLibrary(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := range 200 {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(r.Uint32())
		}
		prefix := []byte("prefix")
		enc := AppendEncode(bytes.Clone(prefix), src)
		want := base64.StdEncoding.AppendEncode(bytes.Clone(prefix), src)
		if !bytes.Equal(enc, want) {
			t.Fatalf("AppendEncode(%d bytes) = %q, want %q", n, enc, want)
		}
		dec, err := AppendDecode(bytes.Clone(prefix), enc[len(prefix):])
		if err != nil || !bytes.Equal(dec[len(prefix):], src) || !bytes.Equal(dec[:len(prefix)], prefix) {
			t.Fatalf("AppendDecode of %d bytes: %v, %x want %x", n, err, dec, src)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, in := range []string{"aGk", "aGk=aGk=", "aGVsbG8gd29ybGQh!A==", "aGVsbG8gd29ybGQhIQ=", "aGVs\nbG8gd29y\r\nbGQhIQ==", "========", "aGVsbG8gd29ybGQhIQ=="} {
		got, err := AppendDecode(nil, []byte(in))
		want, werr := base64.StdEncoding.DecodeString(in)
		if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() || err == nil && !bytes.Equal(got, want) {
			t.Errorf("AppendDecode(%q) = %q, %v; want %q, %v", in, got, err, want, werr)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte("aGVsbG8gd29ybGQhIQ=="))
	f.Add([]byte("aGVs\nbG8gd29y\r\nbGQhIQ=="))
	f.Add([]byte("aGVsbG8gd29ybGQh!A=="))
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := AppendDecode([]byte{1}, in)
		want, werr := base64.StdEncoding.AppendDecode([]byte{1}, in)
		if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
			t.Fatalf("AppendDecode(%q): %v, want %v", in, err, werr)
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Fatalf("AppendDecode(%q) = %x, want %x", in, got, want)
		}
		if enc := AppendEncode(nil, in); !bytes.Equal(enc, base64.StdEncoding.AppendEncode(nil, in)) {
			t.Fatalf("AppendEncode(%q) = %q", in, enc)
		}
	})
}

var sink []byte

func benchData() []byte {
	src := make([]byte, 64<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	return src
}

func BenchmarkEncode(b *testing.B) {
	src := benchData()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		sink = AppendEncode(sink[:0], src)
	}
}

func BenchmarkEncodeStd(b *testing.B) {
	src := benchData()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		sink = base64.StdEncoding.AppendEncode(sink[:0], src)
	}
}

func BenchmarkDecode(b *testing.B) {
	src := base64.StdEncoding.AppendEncode(nil, benchData())
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		sink, _ = AppendDecode(sink[:0], src)
	}
}

func BenchmarkDecodeStd(b *testing.B) {
	src := base64.StdEncoding.AppendEncode(nil, benchData())
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		sink, _ = base64.StdEncoding.AppendDecode(sink[:0], src)
	}
}
