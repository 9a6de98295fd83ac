package pty

import (
	"strings"
	"testing"
)

// BenchmarkEmulatorWrapped: 100-byte lines on an 80-column screen, as
// `cat` of a log with long lines produces (two scrolls per line).
func BenchmarkEmulatorWrapped(b *testing.B) {
	benchEmu(b, []byte(strings.Repeat(strings.Repeat("a", 99)+"\r\n", 10000)))
}
