package b64

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"testing"
)

// codecs are the two implementations: the one this machine uses and the
// portable one (the same on a machine with vector code).
var codecs = []struct {
	name   string
	encode func(dst, src []byte) []byte
	decode func(dst, src []byte) ([]byte, error)
}{
	{"exported", AppendEncode, AppendDecode},
	{"portable", appendEncodePortable, appendDecodePortable},
}

func TestMatchesStandardLibrary(t *testing.T) {
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) { testMatches(t, c.encode, c.decode) })
	}
}

func testMatches(t *testing.T, AppendEncode func(dst, src []byte) []byte, AppendDecode func(dst, src []byte) ([]byte, error)) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := range 300 {
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
	long := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("0123456789abcdef"), 20))
	ins := []string{"aGk", "aGk=aGk=", "aGVsbG8gd29ybGQh!A==", "aGVsbG8gd29ybGQhIQ=", "aGVs\nbG8gd29y\r\nbGQhIQ==", "========", "aGVsbG8gd29ybGQhIQ==",
		// long enough for the vector code, with the fault past its first blocks
		long, long[:100] + "!" + long[101:], long[:200] + "\r\n" + long[200:], long[:150] + "=" + long[151:], long[:len(long)-1]}
	for _, c := range codecs {
		for _, in := range ins {
			got, err := c.decode(nil, []byte(in))
			want, werr := base64.StdEncoding.DecodeString(in)
			if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() || err == nil && !bytes.Equal(got, want) {
				t.Errorf("%s AppendDecode(%q) = %q, %v; want %q, %v", c.name, in, got, err, want, werr)
			}
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte("aGVsbG8gd29ybGQhIQ=="))
	f.Add([]byte("aGVs\nbG8gd29y\r\nbGQhIQ=="))
	f.Add([]byte("aGVsbG8gd29ybGQh!A=="))
	f.Fuzz(func(t *testing.T, in []byte) {
		want, werr := base64.StdEncoding.AppendDecode([]byte{1}, in)
		for _, c := range codecs {
			got, err := c.decode([]byte{1}, in)
			if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
				t.Fatalf("%s AppendDecode(%q): %v, want %v", c.name, in, err, werr)
			}
			if err == nil && !bytes.Equal(got, want) {
				t.Fatalf("%s AppendDecode(%q) = %x, want %x", c.name, in, got, want)
			}
			if enc := c.encode(nil, in); !bytes.Equal(enc, base64.StdEncoding.AppendEncode(nil, in)) {
				t.Fatalf("%s AppendEncode(%q) = %q", c.name, in, enc)
			}
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

func BenchmarkEncodePortable(b *testing.B) {
	src := benchData()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		sink = appendEncodePortable(sink[:0], src)
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

func BenchmarkDecodePortable(b *testing.B) {
	src := base64.StdEncoding.AppendEncode(nil, benchData())
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		sink, _ = appendDecodePortable(sink[:0], src)
	}
}

func BenchmarkDecodeStd(b *testing.B) {
	src := base64.StdEncoding.AppendEncode(nil, benchData())
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		sink, _ = base64.StdEncoding.AppendDecode(sink[:0], src)
	}
}
