package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/daemon"
	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/daemon/registry"
	"github.com/ahp-dev/ahpd/daemon/service"
	"github.com/ahp-dev/ahpd/flow"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) { removeBins(); os.Exit(code) }))
}

const adminToken = "ahp_test-admin-token-0123456789"

type harness struct {
	t      *testing.T
	srv    *daemon.Server
	addr   string
	url    string
	termMu sync.Mutex
	terms  []*fakeTerm
}

// start runs a daemon on a loopback port with fake terminals (or real PTYs
// when real is true); it is shut down when the test ends.
func start(t *testing.T, real bool, mutate func(*config.Config)) *harness {
	t.Helper()
	return startWith(t, real, mutate, nil)
}

// startWith is start with the server's Options changed by mutateOpts.
func startWith(t *testing.T, real bool, mutate func(*config.Config), mutateOpts func(*daemon.Options)) *harness {
	t.Helper()
	var logw io.Writer = io.Discard
	if testing.Verbose() {
		logw = testWriter{t}
	}
	return startWithLog(t, real, mutate, mutateOpts, logw)
}

// startWithLog is startWith with the daemon's log going to logw.
func startWithLog(t *testing.T, real bool, mutate func(*config.Config), mutateOpts func(*daemon.Options), logw io.Writer) *harness {
	t.Helper()
	h, stop, err := startServer(t.TempDir(), real, mutate, mutateOpts, logw)
	if err != nil {
		t.Fatal(err)
	}
	h.t = t
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	return h
}

// startServer starts a daemon with its state in dir; stop shuts it down
// and reports a Serve error or a shutdown that took too long.
func startServer(dir string, real bool, mutate func(*config.Config), mutateOpts func(*daemon.Options), logw io.Writer) (*harness, func() error, error) {
	h := &harness{}
	cfg := config.Config{Listen: "127.0.0.1:0", StateDir: dir, NoDefaultTerminal: true, WebsocketCompression: "none"}
	if mutate != nil {
		mutate(&cfg)
	}
	opts := daemon.Options{Logger: slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelDebug})), Tokens: auth.NewTokens(adminToken)}
	if !real {
		opts.NewTerminal = newFakeFactory(&h.terms, &h.termMu)
	}
	if mutateOpts != nil {
		mutateOpts(&opts)
	}
	srv, err := daemon.New(cfg, opts)
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	stop := func() error {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("Serve: %w", err)
			}
			return nil
		case <-time.After(15 * time.Second):
			return errors.New("Serve did not return within 15s of shutdown")
		}
	}
	h.srv, h.addr = srv, ln.Addr().String()
	h.url = "ws://" + h.addr + "/v1/ws"
	return h, stop, nil
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (h *harness) term(id string) (*registry.Channel, *fakeTerm) {
	h.t.Helper()
	ch, err := h.srv.CreateTerminal(service.TerminalSpec{ID: id})
	if err != nil {
		h.t.Fatal(err)
	}
	h.termMu.Lock()
	defer h.termMu.Unlock()
	if len(h.terms) == 0 {
		return ch, nil
	}
	return ch, h.terms[len(h.terms)-1]
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (h *harness) dial(token string) *client.Conn {
	h.t.Helper()
	c, _, err := client.Dial(ctxT(h.t), h.url, client.Options{Token: token})
	if err != nil {
		h.t.Fatalf("dial: %v", err)
	}
	h.t.Cleanup(func() { c.Close() })
	return c
}

// waitClose waits for the connection to end and returns the close code.
func waitClose(t *testing.T, c *client.Conn) websocket.StatusCode {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("connection did not close")
	}
	return websocket.CloseStatus(c.Err())
}

func rpcCode(err error) int {
	var e *client.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// rawConn is a WebSocket without the client library, for malformed input.
func (h *harness) raw(header http.Header) (*websocket.Conn, *http.Response, error) {
	return websocket.Dial(ctxT(h.t), h.url, &websocket.DialOptions{Subprotocols: []string{"ahp.v1"}, HTTPHeader: header})
}

func readJSON(t *testing.T, ws *websocket.Conn) string {
	t.Helper()
	// 30 s tells a hang; a busy machine under -race can take seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, b, err := ws.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return string(b)
}

func expectClosed(t *testing.T, ws *websocket.Conn, want websocket.StatusCode) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		_, _, err := ws.Read(ctx)
		if err != nil {
			if got := websocket.CloseStatus(err); got != want {
				t.Fatalf("close status = %d (%v), want %d", got, err, want)
			}
			return
		}
	}
}

func TestHandshakeSubscribeAndOutput(t *testing.T) {
	h := start(t, false, nil)
	ch, ft := h.term("t1")
	c, res, err := client.Dial(ctxT(t), h.url, client.Options{Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if res.ProtocolVersion != "ahp/1" || res.Server.Name != "ahpd" || res.Access.Role != "control" {
		t.Fatalf("initialize result = %+v", res)
	}
	var list struct {
		Channels []registry.ChannelInfo `json:"channels"`
	}
	if err := c.Call(ctxT(t), "channels/list", map[string]any{}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Channels) != 1 || list.Channels[0].Channel != ch.URI || list.Channels[0].Type != "terminal" || list.Channels[0].State != "running" {
		t.Fatalf("channels/list = %+v", list)
	}
	sub, err := c.Subscribe(ctxT(t), ch.URI, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"terminal/reset", "channel/ready"}
	for _, w := range want {
		m, err := sub.Next(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if m.Method != w {
			t.Fatalf("message = %s, want %s", m.Method, w)
		}
		if err := sub.Release(ctxT(t), m); err != nil {
			t.Fatal(err)
		}
	}
	ft.Emit("hello\x1b[1mworld")
	m, err := sub.Next(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if m.Method != "terminal/output" || !strings.Contains(string(m.Params), `hello\u001b[1mworld`) {
		t.Fatalf("output = %s", m.Text)
	}
	if ch.Viewers() != 1 {
		t.Fatalf("viewers = %d, want 1", ch.Viewers())
	}
}

func TestWrongTokenClosesWith1008(t *testing.T) {
	h := start(t, false, nil)
	_, _, err := client.Dial(ctxT(t), h.url, client.Options{Token: "ahp_wrong"})
	if rpcCode(err) != flow.ErrCodeUnauthorized {
		t.Fatalf("dial with a wrong token: err = %v, want code %d", err, flow.ErrCodeUnauthorized)
	}
	ws, _, err := h.raw(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	_ = ws.Write(ctxT(t), websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"ahp/1","token":"nope","client":{"name":"t","version":"0"},"capabilities":{"flowControl":true}}}`))
	if got := readJSON(t, ws); !strings.Contains(got, `"code":-32001`) {
		t.Fatalf("response = %s, want -32001", got)
	}
	expectClosed(t, ws, websocket.StatusPolicyViolation)
}

func TestBearerTokenOnUpgrade(t *testing.T) {
	h := start(t, false, nil)
	c, res, err := client.Dial(ctxT(t), h.url, client.Options{Header: http.Header{"Authorization": {"Bearer " + adminToken}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if res.Access.Role != "control" {
		t.Fatalf("role = %q", res.Access.Role)
	}
}

func TestMessageBeforeInitialize(t *testing.T) {
	h := start(t, false, nil)
	ws, _, err := h.raw(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	_ = ws.Write(ctxT(t), websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":7,"method":"channels/list","params":{}}`))
	if got := readJSON(t, ws); !strings.Contains(got, `"id":7`) || !strings.Contains(got, `"code":-32001`) {
		t.Fatalf("response = %s, want -32001 for id 7", got)
	}
	expectClosed(t, ws, websocket.StatusPolicyViolation)
}

func TestInitializeTimeout(t *testing.T) {
	h := start(t, false, func(c *config.Config) { c.Limits.InitializeTimeout = 200 * time.Millisecond })
	ws, _, err := h.raw(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	// End to end over a socket; that it closes on time, at its deadline
	// and not on a coarse tick, is TestInitializeTimeoutExact's (session,
	// in fake time).
	expectClosed(t, ws, websocket.StatusPolicyViolation)
}

func TestForeignOriginIs403(t *testing.T) {
	h := start(t, false, nil)
	_, resp, err := h.raw(http.Header{"Origin": {"http://evil.example"}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign origin: err=%v resp=%v, want 403", err, resp)
	}
	_, port, _ := net.SplitHostPort(h.addr)
	for _, o := range []string{"http://" + h.addr, "http://localhost:" + port} {
		ws, _, err := h.raw(http.Header{"Origin": {o}})
		if err != nil {
			t.Fatalf("origin %s refused: %v", o, err)
		}
		ws.CloseNow()
	}
}

func TestBinaryMessageCloses1003(t *testing.T) {
	h := start(t, false, nil)
	c := h.dial(adminToken)
	if err := c.WS().Write(ctxT(t), websocket.MessageBinary, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if got := waitClose(t, c); got != websocket.StatusUnsupportedData {
		t.Fatalf("close = %d, want 1003", got)
	}
}

func TestBatchIsRejectedButConnectionStays(t *testing.T) {
	h := start(t, false, nil)
	ws, _, err := h.raw(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ctx := ctxT(t)
	_ = ws.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"ahp/1","token":"`+adminToken+`","client":{"name":"t","version":"0"},"capabilities":{"flowControl":true}}}`))
	if got := readJSON(t, ws); !strings.Contains(got, `"result"`) {
		t.Fatalf("initialize: %s", got)
	}
	_ = ws.Write(ctx, websocket.MessageText, []byte(`[{"jsonrpc":"2.0","id":2,"method":"channels/list"}]`))
	if got := readJSON(t, ws); !strings.Contains(got, `"id":null`) || !strings.Contains(got, `"code":-32600`) {
		t.Fatalf("batch response = %s, want id null and -32600", got)
	}
	_ = ws.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":3,"method":"channels/list","params":{}}`))
	if got := readJSON(t, ws); !strings.Contains(got, `"id":3`) || !strings.Contains(got, `"result"`) {
		t.Fatalf("after batch: %s", got)
	}
	_ = ws.Write(ctx, websocket.MessageText, []byte(`{not json`))
	if got := readJSON(t, ws); !strings.Contains(got, `"code":-32700`) {
		t.Fatalf("parse error response = %s", got)
	}
	_ = ws.Write(ctx, websocket.MessageText, []byte{})
	if got := readJSON(t, ws); !strings.Contains(got, `"code":-32700`) {
		t.Fatalf("empty message response = %s, want -32700", got)
	}
	_ = ws.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":4,"method":"nope"}`))
	if got := readJSON(t, ws); !strings.Contains(got, `"code":-32601`) {
		t.Fatalf("unknown method response = %s", got)
	}
}

func TestOversizedMessageCloses1009(t *testing.T) {
	h := start(t, false, nil)
	c := h.dial(adminToken)
	big := `{"jsonrpc":"2.0","method":"x","params":{"p":"` + strings.Repeat("a", 2<<20) + `"}}`
	_ = c.SendRaw(ctxT(t), []byte(big))
	if got := waitClose(t, c); got != websocket.StatusMessageTooBig {
		t.Fatalf("close = %d, want 1009", got)
	}
}

func TestSubscribeErrors(t *testing.T) {
	h := start(t, false, func(c *config.Config) { c.Limits.MaxSubscriptions = 2 })
	ch, _ := h.term("t1")
	c := h.dial(adminToken)
	ctx := ctxT(t)
	if _, err := c.Subscribe(ctx, "ahp-terminal:/nope", nil); rpcCode(err) != flow.ErrCodeChannelNotFound {
		t.Errorf("unknown channel: %v, want -32002", err)
	}
	_, err := c.Subscribe(ctx, ch.URI, &flow.ReceiveLimits{WindowBytes: 4096, MaximumFrameBytes: 512, MaximumMessageBytes: 4096})
	if rpcCode(err) != flow.ErrCodeInvalidParams || !strings.Contains(err.Error(), "maximumFrameBytes") {
		t.Errorf("frame limit 512: %v, want -32602 naming maximumFrameBytes", err)
	}
	_, err = c.Subscribe(ctx, ch.URI, &flow.ReceiveLimits{WindowBytes: 1024, MaximumFrameBytes: 2048, MaximumMessageBytes: 4096})
	if rpcCode(err) != flow.ErrCodeInvalidParams || !strings.Contains(err.Error(), "windowBytes") {
		t.Errorf("window < frame: %v, want -32602 naming windowBytes", err)
	}
	// The host lowers, never raises.
	s1, err := c.Subscribe(ctx, ch.URI, &flow.ReceiveLimits{WindowBytes: 1 << 40, MaximumFrameBytes: 1 << 30, MaximumMessageBytes: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	max := config.DefaultLimits().ClientReceiveMaximums
	if s1.Flow.ClientReceive != max {
		t.Errorf("negotiated %+v, want the maximums %+v", s1.Flow.ClientReceive, max)
	}
	if _, err := c.Subscribe(ctx, ch.URI, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Subscribe(ctx, ch.URI, nil); rpcCode(err) != flow.ErrCodeLimitExceeded {
		t.Errorf("third subscription: %v, want -32004", err)
	}
	err = c.Call(ctx, "unsubscribe", map[string]string{"subscriptionId": "s999"}, nil)
	if rpcCode(err) != flow.ErrCodeUnknownSubscriber {
		t.Errorf("unsubscribe unknown: %v, want -32005", err)
	}
	if err := s1.Unsubscribe(ctx); err != nil {
		t.Fatal(err)
	}
	// An ended subscription id is never reused and stays unknown.
	err = c.Call(ctx, "unsubscribe", map[string]string{"subscriptionId": s1.ID}, nil)
	if rpcCode(err) != flow.ErrCodeUnknownSubscriber {
		t.Errorf("unsubscribe twice: %v, want -32005", err)
	}
}

func TestScopedTokens(t *testing.T) {
	h := start(t, false, nil)
	a, ft := h.term("a")
	b, _ := h.term("b")
	view, _ := h.srv.Tokens().Mint(auth.Grant{Channels: []string{a.URI}, Role: auth.RoleView})
	c := h.dial(view)
	ctx := ctxT(t)
	var list struct {
		Channels []registry.ChannelInfo `json:"channels"`
	}
	if err := c.Call(ctx, "channels/list", map[string]any{}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Channels) != 1 || list.Channels[0].Channel != a.URI {
		t.Fatalf("view token sees %+v, want only %s", list.Channels, a.URI)
	}
	if _, err := c.Subscribe(ctx, b.URI, nil); rpcCode(err) != flow.ErrCodeForbidden {
		t.Fatalf("subscribe outside scope: %v, want -32003", err)
	}
	sub, err := c.Subscribe(ctx, a.URI, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Call(ctx, "terminal/resize", map[string]any{"subscriptionId": sub.ID, "rows": 10, "cols": 10}, nil)
	if rpcCode(err) != flow.ErrCodeForbidden {
		t.Fatalf("view resize: %v, want -32003", err)
	}
	input := string(client.AppendNotification(nil, "terminal/input", map[string]string{"data": "rm -rf /\r"}))
	if err := sub.Send(ctx, input); err != nil {
		t.Fatal(err)
	}
	notes, err := c.Notifications(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if notes[0].Method != "channel/reset" || !strings.Contains(string(notes[0].Params), `"code":"forbidden"`) {
		t.Fatalf("view input: %s %s, want channel/reset forbidden", notes[0].Method, notes[0].Params)
	}
	if got := ft.inputText(); got != "" {
		t.Fatalf("view input reached the terminal: %q", got)
	}
	// Single-use tickets work once and hand out a reconnect token.
	ticket := h.srv.Ticket(nil, auth.RoleControl, time.Minute)
	c2, res, err := client.Dial(ctx, h.url, client.Options{Token: ticket})
	if err != nil {
		t.Fatal(err)
	}
	c2.Close()
	if res.ReconnectToken == "" {
		t.Fatal("no reconnect token for a ticket")
	}
	if _, _, err := client.Dial(ctx, h.url, client.Options{Token: ticket}); rpcCode(err) != flow.ErrCodeUnauthorized {
		t.Fatalf("ticket reuse: %v, want -32001", err)
	}
	c3, _, err := client.Dial(ctx, h.url, client.Options{Token: res.ReconnectToken})
	if err != nil {
		t.Fatalf("reconnect token: %v", err)
	}
	c3.Close()
}

func TestControlInputReachesTerminal(t *testing.T) {
	// More input than the host window: credit must come back for it.
	var chunks []string
	for range 200 {
		chunks = append(chunks, strings.Repeat("é😀\x03", 300))
	}
	inputArrives(t, chunks)
}

// inputArrives sends chunks as terminal/input on a control subscription
// and waits for all of them, in order, at the terminal.
func inputArrives(t *testing.T, chunks []string) {
	t.Helper()
	h := start(t, false, nil)
	ch, ft := h.term("t")
	c := h.dial(adminToken)
	ctx := ctxT(t)
	sub, err := c.Subscribe(ctx, ch.URI, nil)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, chunk := range chunks {
		want.WriteString(chunk)
		if err := sub.Send(ctx, string(client.AppendNotification(nil, "terminal/input", map[string]string{"data": chunk}))); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 10*time.Second, "all input at the terminal", func() bool { return ft.inputText() == want.String() })
}

func TestInvalidCreditResetsOnlyThatSubscription(t *testing.T) {
	h := start(t, false, nil)
	ch, ft := h.term("t")
	c := h.dial(adminToken)
	ctx := ctxT(t)
	bad, err := c.Subscribe(ctx, ch.URI, nil)
	if err != nil {
		t.Fatal(err)
	}
	good, err := c.Subscribe(ctx, ch.URI, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*client.Sub{bad, good} {
		for i := 0; i < 2; i++ {
			m, err := s.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if s == good {
				_ = s.Release(ctx, m)
			}
		}
	}
	if err := bad.SendCredit(ctx, 1<<40); err != nil {
		t.Fatal(err)
	}
	notes, err := c.Notifications(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if notes[0].Method != "channel/reset" || !strings.Contains(string(notes[0].Params), `"invalid-credit"`) || !strings.Contains(string(notes[0].Params), bad.ID) {
		t.Fatalf("got %s %s, want channel/reset invalid-credit for %s", notes[0].Method, notes[0].Params, bad.ID)
	}
	ft.Emit("still here")
	m, err := good.Next(ctx)
	if err != nil || !strings.Contains(string(m.Text), "still here") {
		t.Fatalf("good subscription after neighbour's reset: %s %v", m.Text, err)
	}
}

func TestFramesFitNegotiatedLimits(t *testing.T) {
	h := start(t, false, nil)
	ch, ft := h.term("t")
	ws, _, err := h.raw(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20)
	ctx := ctxT(t)
	_ = ws.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"ahp/1","token":"`+adminToken+`","client":{"name":"t","version":"0"},"capabilities":{"flowControl":true}}}`))
	readJSON(t, ws)
	_ = ws.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":2,"method":"subscribe","params":{"channel":"`+ch.URI+`","flowControl":{"receive":{"windowBytes":1048576,"maximumFrameBytes":1024,"maximumMessageBytes":1048576}}}}`))
	readJSON(t, ws)
	payload := strings.Repeat("\x1b[31m<&>\"\\ 中文 😀 ", 400)
	ft.Emit(payload)
	var got strings.Builder
	var f flow.Frame
	for got.Len() == 0 || !strings.Contains(got.String(), "terminal/output") || !strings.HasSuffix(got.String(), "}}") {
		b := readJSON(t, ws)
		if n := flow.UTF16Len(b); n > 1024 {
			t.Fatalf("frame of %d UTF-16 bytes > 1024: %.80s…", n, b)
		}
		if err := flow.DecodeFrame([]byte(b), &f); err != nil {
			t.Fatalf("not a frame: %v: %.80s", err, b)
		}
		d, err := f.Data()
		if err != nil {
			t.Fatal(err)
		}
		got.WriteString(d)
		if f.Final && !strings.Contains(got.String(), "terminal/output") {
			got.Reset()
		}
	}
	if want := outputMessage(payload); got.String() != want {
		t.Fatalf("reassembled output differs: %d vs %d bytes", got.Len(), len(want))
	}
}

func TestShutdownClosesWith1001(t *testing.T) {
	h := start(t, false, nil)
	c := h.dial(adminToken)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = ctx
	// Serve's context is cancelled by the harness cleanup; trigger it now
	// through a second server to keep this test self-contained.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := daemon.New(config.Config{StateDir: t.TempDir(), NoDefaultTerminal: true}, daemon.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Tokens: auth.NewTokens(adminToken)})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	c2, _, err := client.Dial(ctxT(t), "ws://"+ln.Addr().String()+"/v1/ws", client.Options{Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	stop()
	if got := waitClose(t, c2); got != websocket.StatusGoingAway {
		t.Fatalf("close on shutdown = %d, want 1001", got)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_ = c
}

func TestCloseChannelResetsSubscriptions(t *testing.T) {
	h := start(t, false, nil)
	ch, _ := h.term("t")
	c := h.dial(adminToken)
	if _, err := c.Subscribe(ctxT(t), ch.URI, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.srv.CloseChannel(ch.URI); err != nil {
		t.Fatal(err)
	}
	notes, err := c.Notifications(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if notes[0].Method != "channel/reset" || !strings.Contains(string(notes[0].Params), `"channel-closed"`) {
		t.Fatalf("got %s %s, want channel/reset channel-closed", notes[0].Method, notes[0].Params)
	}
}

func TestViewRoleFrameIsRefusedBeforeBuffering(t *testing.T) {
	h := start(t, false, nil)
	ch, _ := h.term("t")
	view, _ := h.srv.Tokens().Mint(auth.Grant{Role: auth.RoleView})
	c := h.dial(view)
	sub, err := c.Subscribe(ctxT(t), ch.URI, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A non-final frame: nothing is complete, yet the subscription is reset.
	frame := `{"jsonrpc":"2.0","method":"channel/frame","params":{"channel":"` + ch.URI + `","subscriptionId":"` + sub.ID + `","messageId":1,"data":"{\"jsonrpc\":\"2.0\""}}`
	if err := c.SendRaw(ctxT(t), []byte(frame)); err != nil {
		t.Fatal(err)
	}
	notes, err := c.Notifications(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if notes[0].Method != "channel/reset" || !strings.Contains(string(notes[0].Params), `"forbidden"`) {
		t.Fatalf("got %s %s, want channel/reset forbidden", notes[0].Method, notes[0].Params)
	}
}

// TestKeystrokeCreditWithoutOutput: small inputs (keystrokes) to a
// terminal that answers nothing are credited anyway, with no output to
// carry the credit: more of them than the host window holds all arrive.
func TestKeystrokeCreditWithoutOutput(t *testing.T) {
	var keys []string
	for i, n := 0, 0; n < 400<<10; i++ { // the host window is 256 KiB of UTF-16
		keys = append(keys, strings.Repeat(string(rune('a'+i%26)), 100))
		n += 100
	}
	inputArrives(t, keys)
}

func TestMalformedFrameResetsNothing(t *testing.T) {
	h := start(t, false, nil)
	ch, ft := h.term("t")
	c := h.dial(adminToken)
	sub, err := c.Subscribe(ctxT(t), ch.URI, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Send(ctxT(t), string(client.AppendNotification(nil, "terminal/input", map[string]string{"data": "a"}))); err != nil {
		t.Fatal(err)
	}
	_ = c.SendRaw(ctxT(t), []byte(`{"jsonrpc":"2.0","method":"channel/frame"}`))
	if err := sub.Send(ctxT(t), string(client.AppendNotification(nil, "terminal/input", map[string]string{"data": "b"}))); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for ft.inputText() != "ab" {
		if time.Now().After(deadline) || sub.Err() != nil {
			t.Fatalf("input = %q, sub err %v; a malformed frame must not reset the subscription", ft.inputText(), sub.Err())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Revoking a ticket also revokes the reconnect token it was traded for.
func TestRevokingTicketRevokesReconnectToken(t *testing.T) {
	h := start(t, false, nil)
	secret, id := h.srv.Tokens().Mint(auth.Grant{Role: auth.RoleView, SingleUse: true, Expires: time.Now().Add(time.Minute)})
	c, res, err := client.Dial(ctxT(t), h.url, client.Options{Token: secret})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if res.ReconnectToken == "" {
		t.Fatal("no reconnect token")
	}
	if !h.srv.Tokens().Revoke(id) {
		t.Fatal("Revoke(ticket) = false")
	}
	if _, _, err := client.Dial(ctxT(t), h.url, client.Options{Token: res.ReconnectToken}); rpcCode(err) != flow.ErrCodeUnauthorized {
		t.Fatalf("reconnect token after revoking its ticket: %v, want -32001", err)
	}
}

// With permessage-deflate, repetitive output crosses the socket in far
// fewer bytes, and the stats say so (wire bytes vs message bytes).
func TestCompressionShowsInStats(t *testing.T) {
	h := start(t, false, func(c *config.Config) { c.WebsocketCompression = "deflate" })
	ch, ft := h.term("t")
	c, _, err := client.Dial(ctxT(t), h.url, client.Options{Token: adminToken, Deflate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sub, err := c.Subscribe(ctxT(t), ch.URI, nil)
	if err != nil {
		t.Fatal(err)
	}
	v := &viewer{t: t, sub: sub}
	for i := 0; i < 20; i++ { // messages within the default 1 MiB limit
		ft.Emit(strings.Repeat("all work and no play makes jack a dull boy\r\n", 1000))
	}
	ft.Emit("END")
	v.until(10*time.Second, func(o string) bool { return strings.Contains(o, "END") })
	st := h.srv.Stats(ctxT(t))
	if len(st.Connections) != 1 {
		t.Fatalf("connections = %d", len(st.Connections))
	}
	cc := st.Connections[0].ConnectionCounters
	if cc.BytesOut < 800000 || cc.WireBytesOut == 0 || cc.WireBytesOut*5 > cc.BytesOut {
		t.Fatalf("bytes out %d, wire %d: want a compression ratio below 1/5", cc.BytesOut, cc.WireBytesOut)
	}
	t.Logf("compression: %d message bytes → %d wire bytes (%.3f)", cc.BytesOut, cc.WireBytesOut, float64(cc.WireBytesOut)/float64(cc.BytesOut))
}
