package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLoopSend: the bare sender delivers every byte over real loopback
// sockets, in order, to each of its connections, no faster than its
// rate, and reports the bytes and a CPU time.
func TestLoopSend(t *testing.T) {
	data := bytes.Repeat([]byte("loopback line 0123456789\r\n"), 20000) // 520 KB, 32 pieces
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const conns = 3
	got := make(chan []byte, conns)
	go func() {
		for range conns {
			c, err := ln.Accept()
			if err != nil {
				got <- nil
				continue
			}
			go func() {
				b, _ := io.ReadAll(c)
				c.Close()
				got <- b
			}()
		}
	}()
	start := time.Now()
	r, err := loopSend(ln.Addr().String(), conns, data, 2e6)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("520 KB at 2 MB/s took %v", d)
	}
	for i := range conns {
		if b := <-got; !bytes.Equal(b, data) {
			t.Fatalf("connection %d received %d bytes, not the %d sent", i, len(b), len(data))
		}
	}
	if r.Bytes != int64(len(data)) || r.CPU <= 0 {
		t.Fatalf("reported %+v for %d bytes", r, len(data))
	}
	addr := ln.Addr().String()
	ln.Close()
	if _, err := loopSend(addr, 1, data, 2e6); err == nil {
		t.Fatal("nothing listening: no error")
	}
}

// TestMain makes this test binary the bare sender when loopbackSend runs
// it again with -loopsend, as ahpbench's main does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "-"+loopSendFlag {
		fs := flag.NewFlagSet("ahpbench.test", flag.ExitOnError)
		addr := fs.String(loopSendFlag, "", "")
		conns := fs.Int(loopConnsFlag, 1, "")
		limit := fs.Int64(loopBytesFlag, 0, "")
		file := fs.String(pacedCatFlag, "", "")
		rate := fs.Float64("pace", 0, "")
		_ = fs.Parse(os.Args[1:])
		if err := loopSendMain(*addr, *conns, *limit, *file, *rate*1e6); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestLoopbackSend: the bare sender runs as a process of its own, sends
// the first limit bytes of the file to every connection, and the bench
// checks they all arrived; a file that does not exist is an error.
func TestLoopbackSend(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data.txt")
	if err := os.WriteFile(file, bytes.Repeat([]byte("bare socket line 0123456789\r\n"), 10000), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := loopbackSend(file, 4e6, 3, 100000)
	if err != nil {
		t.Fatal(err)
	}
	if r.Bytes != 100000 || r.CPU <= 0 {
		t.Fatalf("loopbackSend = %+v, want 100000 bytes and a CPU time", r)
	}
	if _, err := loopbackSend(filepath.Join(t.TempDir(), "missing"), 4e6, 1, 0); err == nil {
		t.Fatal("a file that does not exist: no error")
	}
}
