package pty

// Benchmarks of the emulator and the filter on three kinds of output:
// plain text, escape-heavy output and CJK/emoji (doc.go quotes them; the
// same inputs once went through github.com/charmbracelet/x/vt as well).

import (
	"bytes"
	"fmt"
	"testing"
)

func plainText(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "line %d: the quick brown fox jumps over the lazy dog %x\r\n", i, i*7919)
	}
	return b.Bytes()[:n]
}

func escapeHeavy(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "\x1b[%d;%dH\x1b[1;3%dm%04d\x1b[0m \x1b[38;5;%dmab\x1b[48;2;1;2;3mc\x1b[K", i%24+1, i%70+1, i%8, i%10000, i%256)
	}
	return b.Bytes()[:n]
}

func cjkText(n int) []byte {
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString("漢字テスト😀 mixed text 한국어\r\n")
	}
	return b.Bytes()
}

func benchEmu(b *testing.B, data []byte) {
	e := newEmulator(24, 80, 10000)
	s := string(data)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		e.write(s)
	}
}

func BenchmarkEmulatorPlain(b *testing.B)  { benchEmu(b, plainText(1<<20)) }
func BenchmarkEmulatorEscape(b *testing.B) { benchEmu(b, escapeHeavy(1<<20)) }
func BenchmarkEmulatorCJK(b *testing.B)    { benchEmu(b, cjkText(1<<20)) }

func BenchmarkFilterPlain(b *testing.B) {
	data := plainText(64 << 10)
	var f filter
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		f.feed(data, false)
	}
}

func BenchmarkFilterEscape(b *testing.B) {
	data := escapeHeavy(64 << 10)
	var f filter
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		f.feed(data, false)
	}
}

func BenchmarkSnapshot(b *testing.B) {
	e := newEmulator(24, 80, 10000)
	e.write(string(plainText(2 << 20)))
	var n int
	for b.Loop() {
		n = len(e.snapshot())
	}
	b.ReportMetric(float64(n), "bytes/snapshot")
}

func BenchmarkEmulatorYes(b *testing.B) { benchEmu(b, bytes.Repeat([]byte("y\r\n"), 1<<20/3)) }
