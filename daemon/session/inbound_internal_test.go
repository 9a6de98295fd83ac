package session

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/daemon/events"
	"github.com/ahp-dev/ahpd/daemon/registry"
	"github.com/ahp-dev/ahpd/flow"
)

// TestInboundWaitingBound: inbound messages wait while the run loop is
// busy; counted at length + 1 KiB each, they stay within maxBufferedBytes
// plus the one message that passes it, the reader stops reading there, and
// once the run loop gets to the overflow the connection closes with 1008.
func TestInboundWaitingBound(t *testing.T) {
	const token = "ahp_test-inbound-token-0123456789"
	cfg := config.Config{Listen: "127.0.0.1:0", StateDir: t.TempDir(), NoDefaultTerminal: true, WebsocketCompression: "none"}
	cfg.Limits.MaxBufferedBytes = 1 << 20
	cfg.Limits.MaxInboundMessageBytes = 256 << 10
	ctx, cl, c, stop := oneConn(t, cfg, token)
	defer stop()
	// Keep the run loop busy: it takes the query, then waits to hand over
	// the answer until the test reads it.
	reply := make(chan ViewerInfo)
	c.queries <- reply
	released := false
	defer func() {
		if !released {
			<-reply // let the connection end, so that Serve returns
		}
	}()

	// Notifications of 200 KiB (an unknown method: dropped when handled).
	msg := `{"jsonrpc":"2.0","method":"x/pad","params":{"p":"` + strings.Repeat("a", 200<<10) + `"}}`
	per := int64(len(msg)) + 1024
	// Six reach the bound (1 MiB / 201 KiB = 5 fit); a seventh waits in the
	// socket buffers, which take it whether or not the reader goes on.
	for range 7 {
		if err := cl.SendRaw(ctx, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	// The reader stops at the first message that passes the bound.
	deadline := time.Now().Add(5 * time.Second)
	want := cfg.Limits.MaxBufferedBytes/per*per + per
	for c.inBytes.Load() < want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // would it go on reading?
	if n := c.inBytes.Load(); n != want {
		t.Fatalf("%d inbound bytes waiting, want %d: the messages up to maxBufferedBytes (%d) and the one that passes it", n, want, cfg.Limits.MaxBufferedBytes)
	}

	<-reply // the run loop goes on: the waiting messages, then the overflow
	released = true
	select {
	case <-cl.Done():
	case <-ctx.Done():
		t.Fatal("the connection did not close")
	}
	err := cl.Err()
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation || !strings.Contains(ce.Reason, "maxBufferedBytes") {
		t.Fatalf("connection ended with %v, want close 1008 naming maxBufferedBytes", err)
	}
}

// TestIdleConnectionWakesRarely: an idle, initialized connection's run loop
// checks its deadlines about once a second (maxCheckInterval), not ten
// times a second: each wake-up costs an idle daemon CPU.
func TestIdleConnectionWakesRarely(t *testing.T) {
	const token = "ahp_test-idle-token-0123456789abc"
	cfg := config.Config{Listen: "127.0.0.1:0", StateDir: t.TempDir(), NoDefaultTerminal: true, WebsocketCompression: "none"}
	_, _, c, stop := oneConn(t, cfg, token)
	defer stop()
	before := c.checks.Load()
	const idle = 2500 * time.Millisecond
	time.Sleep(idle)
	if n := c.checks.Load() - before; n > int64(idle/maxCheckInterval)+1 {
		t.Fatalf("an idle connection checked its deadlines %d times in %v, want at most %d", n, idle, idle/maxCheckInterval+1)
	}
}

// testHost is the session's Host for tests: the configured limits, a
// registry, no channel kind that subscribe creates.
type testHost struct {
	limits config.Limits
	reg    *registry.Registry
}

func (h testHost) Limits() config.Limits          { return h.limits }
func (h testHost) LimitsFor(string) config.Limits { return h.limits }
func (h testHost) CreateChannel(typ string, _ json.RawMessage) (*registry.Channel, error) {
	return nil, &flow.Error{Code: flow.ErrCodeInvalidParams, Message: "create: no kinds here"}
}
func (h testHost) CloseChannel(uri string) error {
	if _, ok := h.reg.Remove(uri); !ok {
		return registry.ErrChannelNotFound
	}
	return nil
}

// newTestServer is a session Server over cfg (defaulted) with no channels.
func newTestServer(cfg config.Config, tokens *auth.Tokens) *Server {
	cfg = cfg.WithDefaults()
	reg := registry.New()
	return New(Options{
		Config: cfg, Version: "test", Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Tokens: tokens,
		Registry: reg, Events: &events.Bus{}, Budget: flow.NewBudget(cfg.MaxTotalBufferedBytes),
		Host: testHost{limits: cfg.Limits, reg: reg},
	})
}

// oneConn serves cfg on a loopback port and dials one initialized client
// with token. It returns a context that ends within 20 s, the client, the
// daemon's side of the connection, and stop, which closes the client and
// the server and waits for the server.
func oneConn(t *testing.T, cfg config.Config, token string) (context.Context, *client.Conn, *conn, func()) {
	t.Helper()
	srv := newTestServer(cfg, auth.NewTokens(token))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	serveCtx, stopServing := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(serveCtx, ln) }()
	stopServer := func() {
		stopServing()
		if err := <-served; err != nil {
			t.Error(err)
		}
		cancel()
	}
	cl, _, err := client.Dial(ctx, "ws://"+ln.Addr().String()+"/v1/ws", client.Options{Token: token})
	if err != nil {
		stopServer()
		t.Fatal(err)
	}
	srv.mu.Lock()
	var c *conn
	for k := range srv.conns {
		c = k
	}
	srv.mu.Unlock()
	return ctx, cl, c, func() { cl.Close(); stopServer() }
}
