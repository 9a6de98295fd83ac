package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestReadBufferBound: the read buffer is reused from message to message,
// but one grown by a message larger than maxKeptReadBuf is not kept.
func TestReadBufferBound(t *testing.T) {
	// A host that answers "size" with a result string of that many bytes.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"ahp.v1"}})
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ctx := r.Context()
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				return
			}
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct{ N int } `json:"params"`
			}
			if err := json.Unmarshal(b, &req); err != nil {
				return
			}
			result := `{}`
			if req.Method == "size" {
				result = `"` + strings.Repeat("x", req.Params.N) + `"`
			}
			if err := ws.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":`+result+`}`)); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), Options{})
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
