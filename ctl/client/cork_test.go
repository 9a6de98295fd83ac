package client

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// writeCounter counts the writes to a socket.
type writeCounter struct {
	net.Conn
	writes *atomic.Int64
}

func (w writeCounter) Write(p []byte) (int, error) {
	w.writes.Add(1)
	return w.Conn.Write(p)
}

// TestMessageOneWrite: a message Conn sends leaves in one write to the
// socket, however large (the WebSocket library masks a client's frames in
// 4 KiB pieces: a 30 KiB message was 8 writes), and arrives whole.
func TestMessageOneWrite(t *testing.T) {
	var writes atomic.Int64
	dial := dialSocket
	dialSocket = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return writeCounter{c, &writes}, nil
	}
	t.Cleanup(func() { dialSocket = dial })
	// The host answers "big" with the length of the data it got.
	url := fakeHost(t, func(req hostRequest) string {
		var p struct{ Data string }
		if req.Method != "big" || json.Unmarshal(req.Params, &p) != nil {
			return `"result":{}`
		}
		return `"result":` + strconv.Itoa(len(p.Data))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := Dial(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.cork == nil {
		t.Fatal("Dial without an HTTP client made no corkConn")
	}
	for _, n := range []int{30 << 10, 10, 20 << 10} { // the host reads at most 32 KiB
		before := writes.Load()
		var got int
		if err := c.Call(ctx, "big", map[string]string{"data": strings.Repeat("y", n)}, &got); err != nil {
			t.Fatal(err)
		}
		if got != n {
			t.Fatalf("the host got %d bytes of data, want %d", got, n)
		}
		if got := writes.Load() - before; got != 1 {
			t.Errorf("a request of %d bytes took %d writes, want 1", n, got)
		}
	}
}

// discard is a socket that takes every write.
type discard struct{ net.Conn }

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestCorkBound: what a corkConn held goes out in one write on uncork;
// between messages it keeps at most maxKeptCork of memory.
func TestCorkBound(t *testing.T) {
	var writes atomic.Int64
	c := &corkConn{Conn: writeCounter{discard{}, &writes}}
	for _, n := range []int{1 << 20, 4 << 10, maxKeptCork} {
		c.cork()
		for range n / 1024 {
			if _, err := c.Write(make([]byte, 1024)); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.uncork(); err != nil {
			t.Fatal(err)
		}
		if got := writes.Swap(0); got != 1 {
			t.Errorf("%d bytes corked: %d writes, want 1", n, got)
		}
		if kept := cap(c.held); kept > maxKeptCork {
			t.Errorf("after %d bytes the cork keeps %d bytes, above %d", n, kept, maxKeptCork)
		}
	}
	if _, err := c.Write([]byte("x")); err != nil || writes.Load() != 1 {
		t.Errorf("uncorked, a write is %d writes (%v), want 1", writes.Load(), err)
	}
}
