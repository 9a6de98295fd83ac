package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// fakeDaemon is the least of an AHP/1 host that attach needs: it answers
// initialize and one subscribe on loopback, then stops listening and
// closes the connection with 1001, as a daemon that shuts down does.
func fakeDaemon(t *testing.T) (wsURL string, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"ahp.v1"}})
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ctx := r.Context()
		for _, result := range []string{
			`{"protocolVersion":"ahp/1","server":{"name":"fake","version":"0"},"capabilities":{"flowControl":{}}}`,
			`{"subscriptionId":"s1","initial":{"kind":"live"}}`,
		} {
			_, b, err := ws.Read(ctx)
			if err != nil {
				return
			}
			var req struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal(b, &req) != nil {
				return
			}
			if ws.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":`+result+`}`)) != nil {
				return
			}
		}
		ln.Close() // the daemon is gone: nothing listens any more
		_ = ws.Close(websocket.StatusGoingAway, "host shutting down")
		close(done)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return "ws://" + ln.Addr().String() + "/v1/ws", ln.Addr().String()
}

// TestAttachGivesUp: after a drop with the daemon gone, attach tries again
// for its budget (a minute; here 2 s) on one status line rewritten in
// place, gives up at the budget — not a connect timeout or a backoff
// later — and says how the session ended and why the last attempt failed.
func TestAttachGivesUp(t *testing.T) {
	wsURL, addr := fakeDaemon(t)
	out, err := os.Create(filepath.Join(t.TempDir(), "out")) // not a terminal: no resize
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var status bytes.Buffer
	at := &attacher{a: &app{timeout: 10 * time.Second, stderr: &bytes.Buffer{}}, uri: "ahp-terminal:/x", wsURL: wsURL, token: "ahp_tok",
		out: out, budget: 2 * time.Second, line: statusLine{w: &status, tty: true, cols: 1000}}
	keys := make(chan []byte)
	start := time.Now()
	err = at.loop(context.Background(), keys, make(chan os.Signal))
	took := time.Since(start)
	want := "attach: the daemon shut down, and could not reconnect within 2s: nothing listens at " + addr + " (connection refused): is ahpd running?"
	if err == nil || err.Error() != want {
		t.Fatalf("loop = %v\nwant %s", err, want)
	}
	if took < 2*time.Second || took > 4*time.Second {
		t.Errorf("gave up after %v, want at the budget of 2s", took)
	}
	s := status.String()
	if !strings.HasPrefix(s, "\r\n\x1b[0m[ahpctl: the daemon shut down; reconnecting… (Ctrl-] d detaches)]") || strings.Count(s, "\n") != 1 ||
		!strings.Contains(s, "s of 2s (Ctrl-] d detaches): nothing listens at "+addr) || !strings.Contains(s, "\r\x1b[K[ahpctl: the daemon shut down; reconnecting… ") {
		t.Errorf("status line:\n%q", s)
	}
}
