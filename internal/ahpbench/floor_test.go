package main

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/internal/termbench"
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

// TestGoTCPRelayEchoes: the Go TCP relay, served in this process, echoes
// every keystroke through a real PTY and loopback TCP, and ends both its
// copies and the command when the client closes.
func TestGoTCPRelayEchoes(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	served := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			served <- err
			return
		}
		served <- serveTCPRelay(c)
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close() // on a failure below, this ends the relay too
	if err := c.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	const n = 50
	d, err := termbench.Echo(c, n, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != n {
		t.Fatalf("%d timings for %d keystrokes", len(d), n)
	}
	c.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("the relay ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the relay did not end after its client closed")
	}
}
