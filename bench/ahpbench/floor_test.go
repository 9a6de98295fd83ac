package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/bench/termbench"
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

// TestCRelayThroughput: the C relay's batched mode delivers `cat` of a
// file byte for byte (the line discipline turning each "\n" into
// "\r\n"), ends the connection after the program's end, and its CPU
// time is read while it still runs.
func TestCRelayThroughput(t *testing.T) {
	dir := t.TempDir()
	bin, err := buildCRelay(dir)
	if errors.Is(err, errNoCompiler) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "data.txt")
	const size = 4 << 20
	if err := termbench.WriteTextFile(file, size); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.ReplaceAll(data, []byte("\n"), []byte("\r\n"))
	var got bytes.Buffer
	n, elapsed, cpu, err := cRelayThroughput(bin, file, &got)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(got.Len()) || !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("read %d bytes through the C relay, want the file's %d with CRLF line ends (%d bytes)", got.Len(), size, len(want))
	}
	if elapsed <= 0 || cpu <= 0 {
		t.Fatalf("elapsed %v, relay CPU %v: both must be measured", elapsed, cpu)
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
