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
