package session

import (
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/coder/websocket"

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
// In a synctest bubble over a pipe, so "the reader stopped" is checked
// once every goroutine is blocked, not after a sleep.
func TestInboundWaitingBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var limits config.Limits
		p, srv, done := servePipeServer(t, func(l *config.Limits) {
			l.MaxBufferedBytes = 1 << 20
			l.MaxInboundMessageBytes = 256 << 10
			limits = *l
		})
		initializePipe(t, p)
		synctest.Wait()
		srv.mu.Lock()
		var c *conn
		for k := range srv.conns {
			c = k
		}
		srv.mu.Unlock()
		// Keep the run loop busy: it takes the query, then waits to hand
		// over the answer until the test reads it.
		reply := make(chan ViewerInfo)
		c.queries <- reply

		// Notifications of 200 KiB (an unknown method: dropped when
		// handled). Six reach the bound (1 MiB / 201 KiB = 5 fit); a
		// seventh stays unread.
		msg := `{"jsonrpc":"2.0","method":"x/pad","params":{"p":"` + strings.Repeat("a", 200<<10) + `"}}`
		per := int64(len(msg)) + 1024
		for range 7 {
			p.in <- []byte(msg)
		}
		synctest.Wait()
		want := limits.MaxBufferedBytes/per*per + per
		if n := c.inBytes.Load(); n != want {
			t.Fatalf("%d inbound bytes waiting, want %d: the messages up to maxBufferedBytes (%d) and the one that passes it", n, want, limits.MaxBufferedBytes)
		}
		if len(p.in) != 1 {
			t.Fatalf("%d messages left unread, want 1: the reader must stop at the bound", len(p.in))
		}

		<-reply // the run loop goes on: the waiting messages, then the overflow
		<-done
		code, reason, _ := p.closing()
		if code != websocket.StatusPolicyViolation || !strings.Contains(reason, "maxBufferedBytes") {
			t.Fatalf("connection ended with %d %q, want close 1008 naming maxBufferedBytes", code, reason)
		}
	})
}

// TestCreditReadOnce: a channel/credit in the shape every client writes
// is read by the fast parse alone, not first scanned as a frame (the
// frame decoder, which forgets the last frame's ids on a message that is
// not one, never sees it), and is applied: here to no subscription, so
// it is counted as dropped.
func TestCreditReadOnce(t *testing.T) {
	c := &conn{initialized: true, limits: config.Config{}.WithDefaults().Limits, subs: map[string]*subscription{}}
	c.frame.SubscriptionID = "s1"
	if err := c.handle(flow.AppendCredit(nil, "ahp-terminal:/t", "s9", 4096)); err != nil {
		t.Fatal(err)
	}
	if c.frame.SubscriptionID != "s1" {
		t.Fatalf("the credit was scanned as a frame (the frame's subscription id is %q, want the last frame's s1)", c.frame.SubscriptionID)
	}
	if n := c.stats.droppedNotifications.Load(); n != 1 {
		t.Fatalf("a credit for no subscription counted %d dropped notifications, want 1", n)
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
func (h testHost) CreateChannel(typ string, _ json.RawMessage, _ Owner) (*registry.Channel, error) {
	return nil, &flow.Error{Code: flow.ErrCodeInvalidParams, Message: "create: no kinds here"}
}
func (h testHost) CheckCreate(string, json.RawMessage) error {
	return &flow.Error{Code: flow.ErrCodeInvalidParams, Message: "create: no kinds here"}
}
func (h testHost) CreateShell(string, string) (*registry.Channel, error) {
	return nil, &flow.Error{Code: flow.ErrCodeInvalidParams, Message: "no terminals here"}
}
func (h testHost) RestartTerminal(string) (*registry.Channel, error) {
	return nil, &flow.Error{Code: flow.ErrCodeInvalidParams, Message: "no terminals here"}
}
func (h testHost) RecordingsPage(string, string, int, func(string) bool) ([]RecordingInfo, bool) {
	return nil, false
}
func (h testHost) RecordingsInfo(string) (RecordingInfo, error) {
	return RecordingInfo{}, ErrRecordingNotFound
}
func (h testHost) RecordingsOpen(string) (io.ReadSeekCloser, RecordingInfo, error) {
	return nil, RecordingInfo{}, ErrRecordingNotFound
}
func (h testHost) RecordingsIndex(string) (RecordingIndex, error) {
	return RecordingIndex{}, ErrRecordingNotFound
}
func (h testHost) RecordingsKeyframe(string, int) (RecordingKeyframe, error) {
	return RecordingKeyframe{}, ErrRecordingNotFound
}
func (h testHost) RecordAudit(string, Audit) string { return "" }
func (h testHost) RecordingOf(string) string        { return "" }
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
