package daemon_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ahp-dev/ahpd/daemon"
	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/service"
	"github.com/ahp-dev/ahpd/daemon/session"
	"github.com/ahp-dev/ahpd/flow"
)

// dialKind is a channel kind the daemon knows only through the channel
// contract: subscribe creates it, and its subscriber is Ready only when
// the test "finishes the dial" — as a TCP channel will be. The connection
// code has nothing specific to it.
type dialKind struct {
	mu    sync.Mutex
	chans []*dialChan
}

func (k *dialKind) create(params json.RawMessage, _ session.Owner) (flow.Channel, error) {
	var p struct {
		Type string `json:"type"`
		Host string `json:"host"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, err
	}
	if p.Host != "127.0.0.1" {
		return nil, &flow.Error{Code: flow.ErrCodeForbidden, Message: "not allowed: " + p.Host}
	}
	c := &dialChan{ending: newEnding()}
	k.mu.Lock()
	k.chans = append(k.chans, c)
	k.mu.Unlock()
	return c, nil
}

func (k *dialKind) last(t *testing.T) *dialChan {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.chans) == 0 {
		t.Fatal("no channel was created")
	}
	return k.chans[len(k.chans)-1]
}

type dialChan struct {
	mu      sync.Mutex
	sub     *dialSub
	dialed  bool
	dialErr error
	ending
	attaches int
}

func (c *dialChan) Kind() string               { return "tcp" }
func (c *dialChan) Describe() flow.Description { return flow.Description{} }
func (c *dialChan) Attach(req flow.AttachRequest) (flow.Subscriber, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.attaches++
	c.sub = &dialSub{c: c, wake: req.Wake}
	return c.sub, nil
}

// finish completes the dial (err nil: connected) and wakes the subscriber.
func (c *dialChan) finish(err error) {
	c.mu.Lock()
	c.dialed, c.dialErr = true, err
	s := c.sub
	c.mu.Unlock()
	s.wake()
}

func (c *dialChan) subClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sub != nil && c.sub.closed
}

type dialSub struct {
	c      *dialChan
	wake   func()
	sent   bool
	closed bool // guarded by c.mu
}

func (s *dialSub) Ready() (flow.AttachResult, bool, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	switch {
	case !s.c.dialed:
		return flow.AttachResult{}, false, nil
	case s.c.dialErr != nil:
		return flow.AttachResult{}, false, &flow.Error{Code: flow.ErrCodeConnectFailed, Message: "connect failed: " + s.c.dialErr.Error()}
	}
	return flow.AttachResult{Initial: flow.InitialLive, Resume: &flow.ResumeResult{Token: "r1"}}, true, nil
}

func (s *dialSub) Pull(dataAllowed bool, _ int64) (flow.Message, bool) {
	if s.sent || !dataAllowed {
		return flow.Message{}, false
	}
	s.sent = true
	return flow.Message{Text: `{"jsonrpc":"2.0","method":"tcp/data","params":{"offset":0,"data":"aGk="}}`}, true
}

func (s *dialSub) Deliver(string, json.RawMessage, func()) error {
	return &flow.Reset{Code: flow.CodeProtocolError, Message: "no input"}
}
func (s *dialSub) Request(string, json.RawMessage) (any, error) {
	return nil, &flow.Error{Code: flow.ErrCodeMethodNotFound, Message: "no requests"}
}
func (s *dialSub) End() *flow.Reset            { return nil }
func (s *dialSub) Stats() flow.SubscriberStats { return flow.SubscriberStats{} }
func (s *dialSub) Close() {
	s.c.mu.Lock()
	s.closed = true
	s.c.mu.Unlock()
}

var errConnRefused = errors.New("connection refused")

// waitCreated waits until kind has made n channels and returns the last.
func waitCreated(t *testing.T, kind *dialKind, n int) *dialChan {
	t.Helper()
	waitFor(t, "the channel to be created", func() bool {
		kind.mu.Lock()
		defer kind.mu.Unlock()
		return len(kind.chans) >= n
	})
	return kind.last(t)
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSubscribeCreateWaitsForReady: subscribe {create} makes a channel
// through its kind's Creator; the response waits until the subscriber is
// Ready, and meanwhile the connection answers other requests; a failed
// dial is the kind's error (-32008) and the channel goes; the rules of
// §8 (control over all channels) hold.
func TestSubscribeCreateWaitsForReady(t *testing.T) {
	kind := &dialKind{}
	h := startWith(t, false, nil, func(o *daemon.Options) {
		o.Creators = map[string]service.Creator{"tcp": kind.create, "terminal": kind.create} // a terminal creator is refused: terminals take a maxTerminals slot over the control plane
	})
	ws := h.rawInit(adminToken)
	send := func(s string) {
		t.Helper()
		if err := ws.Write(ctxT(t), websocket.MessageText, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"create":{"type":"tcp","host":"127.0.0.1","port":9}}}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"channels/list"}`)
	// The list comes first: the pending subscribe does not hold up the
	// connection. It lists the new channel.
	list := readJSON(t, ws)
	if !strings.Contains(list, `"id":2`) || !strings.Contains(list, `"channel":"ahp-tcp:/1"`) {
		t.Fatalf("while the dial is pending, got %s; want the channels/list answer naming ahp-tcp:/1", list)
	}
	kind.last(t).finish(nil)
	res := readJSON(t, ws)
	for _, want := range []string{`"id":1`, `"channel":"ahp-tcp:/1"`, `"kind":"live"`, `"resume":{"token":"r1"`} {
		if !strings.Contains(res, want) {
			t.Fatalf("subscribe result %s lacks %s", res, want)
		}
	}
	if f := readJSON(t, ws); !strings.Contains(f, `"method":"channel/frame"`) || !strings.Contains(f, "tcp/data") {
		t.Fatalf("after the result, got %s; want the first frame", f)
	}

	// A failed dial: the kind's error, and the channel is gone.
	send(`{"jsonrpc":"2.0","id":3,"method":"subscribe","params":{"create":{"type":"tcp","host":"127.0.0.1","port":9}}}`)
	failing := waitCreated(t, kind, 2)
	failing.finish(errConnRefused)
	if res := readJSON(t, ws); !strings.Contains(res, `"id":3`) || !strings.Contains(res, `"code":-32008`) {
		t.Fatalf("failed dial: got %s, want error -32008", res)
	}
	waitFor(t, "the failed dial's subscriber and channel to be closed and unregistered", func() bool {
		_, registered := h.srv.Registry().Get("ahp-tcp:/2")
		return failing.subClosed() && failing.State() == flow.StateClosed && !registered
	})

	// A channel its kind ends (a TCP channel after tcp/closed) leaves the
	// registry by itself.
	first := kind.chans[0]
	_ = first.Close()
	waitFor(t, "the channel its kind closed to leave the registry", func() bool {
		_, registered := h.srv.Registry().Get("ahp-tcp:/1")
		return !registered
	})

	// A subscribe that is refused before the channel would exist (a
	// flowControl.receive the host cannot grant) creates none.
	send(`{"jsonrpc":"2.0","id":6,"method":"subscribe","params":{"create":{"type":"tcp","host":"127.0.0.1","port":9},"flowControl":{"receive":{"windowBytes":10,"maximumFrameBytes":10,"maximumMessageBytes":10}}}}`)
	if res := readJSON(t, ws); !strings.Contains(res, `"id":6`) || !strings.Contains(res, `"code":-32602`) {
		t.Fatalf("create with bad limits: got %s, want -32602", res)
	}
	kind.mu.Lock()
	made := len(kind.chans)
	kind.mu.Unlock()
	if made != 2 {
		t.Fatalf("%d channels made, want 2: a refused subscribe must create none", made)
	}

	// The kind's refusal (an allow-list), an unknown type, and bad JSON.
	for _, tc := range []struct{ params, want string }{
		{`{"create":{"type":"tcp","host":"10.0.0.1","port":9}}`, `"code":-32003`},
		{`{"create":{"type":"telemetry"}}`, `"code":-32602`},
		{`{"create":{"type":"terminal"}}`, `"code":-32602`}, // over the control plane, with a maxTerminals slot
		{`{"create":"tcp"}`, `"code":-32602`},
	} {
		send(`{"jsonrpc":"2.0","id":4,"method":"subscribe","params":` + tc.params + `}`)
		if res := readJSON(t, ws); !strings.Contains(res, tc.want) {
			t.Errorf("subscribe %s: got %s, want %s", tc.params, res, tc.want)
		}
	}

	// A pending subscribe whose connection ends is closed with it.
	send(`{"jsonrpc":"2.0","id":5,"method":"subscribe","params":{"create":{"type":"tcp","host":"127.0.0.1","port":9}}}`)
	pending := waitCreated(t, kind, 3)
	ws.Close(websocket.StatusNormalClosure, "")
	waitFor(t, "the pending subscriber to be closed with its connection", pending.subClosed)
}

// TestCreateNeedsControlOverAllChannels: a view token, and a control
// token scoped to some channels, cannot create (§8).
func TestCreateNeedsControlOverAllChannels(t *testing.T) {
	kind := &dialKind{}
	h := startWith(t, false, nil, func(o *daemon.Options) {
		o.Creators = map[string]service.Creator{"tcp": kind.create}
	})
	h.term("t1")
	for _, g := range []auth.Grant{{Role: auth.RoleView}, {Role: auth.RoleControl, Channels: []string{"ahp-terminal:/t1"}}} {
		tok, _ := h.srv.Tokens().Mint(g)
		ws := h.rawInit(tok)
		_ = ws.Write(ctxT(t), websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"subscribe","params":{"create":{"type":"tcp","host":"127.0.0.1","port":9}}}`))
		if res := readJSON(t, ws); !strings.Contains(res, `"code":-32003`) {
			t.Errorf("grant %+v: got %s, want -32003", g, res)
		}
	}
	kind.mu.Lock()
	defer kind.mu.Unlock()
	if len(kind.chans) != 0 {
		t.Fatalf("%d channels created for credentials that may not create", len(kind.chans))
	}
}
