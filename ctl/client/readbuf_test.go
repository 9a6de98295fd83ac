package client

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestReadBufferBound: the read buffer is reused from message to message,
// but one grown by a message larger than maxKeptReadBuf is not kept.
func TestReadBufferBound(t *testing.T) {
	// A host that answers "size" with a result string of that many bytes.
	url := fakeHost(t, func(req hostRequest) string {
		var p struct{ N int }
		if req.Method == "size" && json.Unmarshal(req.Params, &p) == nil {
			return `"result":"` + strings.Repeat("x", p.N) + `"`
		}
		return `"result":{}`
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := Dial(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, n := range []int{1 << 20, 3 << 20, 6 << 20, 1 << 10, 12 << 20, 2 << 20} {
		var s string
		if err := c.Call(ctx, "size", map[string]int{"N": n}, &s); err != nil {
			t.Fatal(err)
		}
		if len(s) != n {
			t.Fatalf("result of %d bytes, want %d", len(s), n)
		}
		// readLoop set c.rbuf before it delivered the response.
		if got := cap(c.rbuf); got > maxKeptReadBuf {
			t.Fatalf("after a %d-byte message the kept read buffer holds %d bytes, above the %d bound", n, got, maxKeptReadBuf)
		}
		if n <= 3<<20 && cap(c.rbuf) < n {
			t.Errorf("after a %d-byte message the kept read buffer holds %d bytes: not reused", n, cap(c.rbuf))
		}
	}
}
