package flow

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

var endSink int

// BenchmarkStringEnd: the scan for the end of a frame's data string over
// a 16 KiB plain run (the base64 of tcp/data), what a TCP client's
// decoding spends most of its frame parsing on.
func BenchmarkStringEnd(b *testing.B) {
	s := []byte(strings.Repeat("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODkr", 400)[:16<<10] + `"`)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		endSink, _ = stringEnd(s, 0)
	}
	if endSink != len(s)-1 {
		b.Fatalf("stringEnd = %d, want %d", endSink, len(s)-1)
	}
}

// BenchmarkStringEndLines: the same over escaped terminal output, a
// line of 80 or 200 characters and an escaped CRLF at a time (each call
// stops at the line's end).
func BenchmarkStringEndLines(b *testing.B) {
	for _, n := range []int{80, 200} {
		b.Run(strconv.Itoa(n), func(b *testing.B) { benchLines(b, n) })
	}
}

func benchLines(b *testing.B, n int) {
	line := strings.Repeat("x", n) + `\r\n`
	s := []byte(strings.Repeat(line, 16<<10/len(line)) + `"`)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		i := 0
		for {
			i, _ = stringEnd(s, i)
			if s[i] == '"' {
				break
			}
			i += 2 // the escape
		}
		endSink = i
	}
}

// stringEndRef is stringEnd byte by byte.
func stringEndRef(b []byte, i int) (int, bool) {
	ascii := true
	for ; i < len(b); i++ {
		c := b[i]
		if c == '"' || c == '\\' || c < 0x20 {
			break
		}
		ascii = ascii && c < 0x80
	}
	return i, ascii
}

// TestStringEndLongRuns: stringEnd agrees with the byte-by-byte scan on
// plain runs of every length around its word, step and chunk sizes, with
// each kind of stop (and none) after them, and non-ASCII bytes inside.
func TestStringEndLongRuns(t *testing.T) {
	run := []byte(strings.Repeat("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODkr", 100))
	for n := 0; n < 1700; n++ {
		for _, stop := range []string{"", `"`, `\`, "\x00", "\x1f", "\n"} {
			for _, high := range []int{-1, 0, n / 2, n - 1} {
				b := append(append([]byte{}, run[:n]...), stop...)
				b = append(b, "tail"...)
				if high >= 0 && high < n {
					b[high] = 0xc3
				}
				for _, from := range []int{0, 3} {
					if from > n {
						continue
					}
					gi, ga := stringEnd(b, from)
					wi, wa := stringEndRef(b, from)
					if gi != wi || ga != wa {
						t.Fatalf("run %d, stop %q, high %d, from %d: stringEnd = %d, %v; want %d, %v", n, stop, high, from, gi, ga, wi, wa)
					}
				}
			}
		}
	}
}

func FuzzStringEnd(f *testing.F) {
	f.Add([]byte(strings.Repeat("a", 600)+`"`), 0)
	f.Add([]byte(strings.Repeat("ab\xc3\xa9", 200)+"\x01"), 5)
	f.Fuzz(func(t *testing.T, b []byte, i int) {
		if i < 0 || i > len(b) {
			return
		}
		gi, ga := stringEnd(b, i)
		wi, wa := stringEndRef(b, i)
		if gi != wi || ga != wa {
			t.Fatalf("stringEnd(%q, %d) = %d, %v; want %d, %v", b, i, gi, ga, wi, wa)
		}
	})
}

// plainPrefixRef is plainPrefix byte by byte.
func plainPrefixRef(s string, i, limit int) int {
	for i < limit && safeByte[s[i]] {
		i++
	}
	return i
}

// TestPlainPrefix: plainPrefix (whole blocks with vector instructions on
// amd64, then words, then bytes) stops where the byte-by-byte scan does,
// for every byte value at every position of texts up to 70 bytes long,
// from several starts and to several limits.
func TestPlainPrefix(t *testing.T) {
	buf := []byte(strings.Repeat("a", 70))
	for n := 0; n <= len(buf); n++ {
		for p := 0; p < n; p++ {
			for c := 0; c < 256; c++ {
				buf[p] = byte(c)
				s := string(buf[:n])
				for _, i := range []int{0, 1, 7, 15, 16, 17} {
					for _, limit := range []int{n, n - 1, n - 9, n - 16} {
						if i > limit || limit < 0 {
							continue
						}
						if got, want := plainPrefix(s, i, limit), plainPrefixRef(s, i, limit); got != want {
							t.Fatalf("plainPrefix(%q, %d, %d) = %d, want %d", s, i, limit, got, want)
						}
					}
				}
			}
			buf[p] = 'a'
		}
	}
}

// FuzzPlainPrefix: plainPrefix agrees with the byte-by-byte scan on any
// text, from any start to any limit.
func FuzzPlainPrefix(f *testing.F) {
	f.Add("the quick brown fox jumps over the lazy dog 0123456789 \r\n", 0, 58)
	f.Add(strings.Repeat("x", 40)+"\"quoted\" \\ \x1b[1m\xc3\xa9", 3, 60)
	f.Add(strings.Repeat("0123456789abcdef", 5)+"\x7f\x80", 16, 82)
	f.Fuzz(func(t *testing.T, s string, i, limit int) {
		if i < 0 || limit > len(s) || i > limit {
			return
		}
		if got, want := plainPrefix(s, i, limit), plainPrefixRef(s, i, limit); got != want {
			t.Fatalf("plainPrefix(%q, %d, %d) = %d, want %d", s, i, limit, got, want)
		}
	})
}

// escapeRef is AppendEscapedLen byte by byte: the body of s's JSON string
// and its UTF-16 size.
func escapeRef(s string) (string, int64) {
	var b []byte
	var n int64
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safeByte[c] {
				b = append(b, c)
			} else {
				b = appendEscapedASCII(b, c)
			}
			n += int64(escapeLen[c]) * 2
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		n += utf16Width(r)
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\uFFFD"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return string(b), n
}

// checkEscaped compares AppendEscapedLen of s with escapeRef, into dst
// buffers whose room is from none to ample, so that escapeBlocks (amd64)
// starts, stops and resumes at every place: the bytes before dst's length
// are kept, and the result is the reference.
func checkEscaped(t *testing.T, s string) {
	t.Helper()
	want, wantN := escapeRef(s)
	for _, room := range []int{0, 1, 17, 33, 34, 35, len(s), len(s) + 34, 2*len(s) + 40} {
		dst := make([]byte, 3, 3+room)
		copy(dst, "pre")
		got, n := AppendEscapedLen(dst, s)
		if string(got) != "pre"+want || n != wantN {
			t.Fatalf("AppendEscapedLen(%q) with room %d = %q, %d; want %q, %d", s, room, got, n, "pre"+want, wantN)
		}
	}
}

// TestAppendEscapedBlocks: AppendEscapedLen (whole blocks with
// escapeBlocks on amd64, then the rest) escapes as the byte-by-byte
// reference does, for every byte value at every position of texts up to
// 70 bytes long, alone and next to a "\r\n", a non-ASCII character and an
// invalid byte.
func TestAppendEscapedBlocks(t *testing.T) {
	buf := []byte(strings.Repeat("a", 70))
	for n := 0; n <= len(buf); n++ {
		for p := 0; p < n; p++ {
			for c := 0; c < 256; c++ {
				buf[p] = byte(c)
				checkEscaped(t, string(buf[:n]))
				buf[p] = 'a'
			}
		}
	}
	for _, extra := range []string{"\r\n", "é", "\xff", "\x01", `"\`} {
		for n := 0; n <= 70; n++ {
			for p := 0; p <= n; p++ {
				s := strings.Repeat("b", p) + extra + strings.Repeat("c", n-p)
				checkEscaped(t, s)
			}
		}
	}
}

// FuzzAppendEscaped: AppendEscapedLen is the byte-by-byte reference for
// any text, into any room.
func FuzzAppendEscaped(f *testing.F) {
	f.Add("the quick brown fox jumps over the lazy dog 0123456789\r\n\"quoted\" \\ tab\there é 中文 \xff\x00\x1f")
	f.Add(strings.Repeat("0123456789abcdef", 5) + "\r\n")
	f.Fuzz(func(t *testing.T, s string) {
		checkEscaped(t, s)
	})
}
