package main

import (
	"errors"
	"testing"
)

// TestCRelayEchoes: the C relay compiles with the machine's cc and echoes
// every keystroke, one timing each, through a real PTY and loopback TCP.
func TestCRelayEchoes(t *testing.T) {
	bin, err := buildCRelay(t.TempDir())
	if errors.Is(err, errNoCompiler) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	out, err := cRelayEcho(bin, n, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.d) != n {
		t.Fatalf("%d timings for %d keystrokes", len(out.d), n)
	}
	for i, d := range out.d {
		if d <= 0 {
			t.Fatalf("keystroke %d took %v", i, d)
		}
	}
}
