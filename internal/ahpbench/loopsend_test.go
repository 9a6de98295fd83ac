package main

import (
	"bytes"
	"io"
	"net"
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
