package daemon_test

import (
	"strings"
	"testing"

	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/daemon/service"
)

// Incomplete client→host messages of all subscriptions of a connection
// together stay within a quarter of maxBufferedBytes: the frame that would
// pass it resets its subscription with overflow (docs/protocol-decisions.md).
func TestPartialInputBound(t *testing.T) {
	h := start(t, false, func(c *config.Config) {
		c.Limits.MaxBufferedBytes = 1 << 20 // budget 256 KiB
		c.Limits.MaxInboundMessageBytes = 512 << 10
	})
	ch, ft := h.term("t")
	c := h.dial(adminToken)
	data := strings.Repeat("a", 30000) // one frame: 60 000 UTF-16 bytes, under the 64 KiB frame limit
	var ids []string
	for i := 0; i < 3; i++ {
		sub, err := c.Subscribe(ctxT(t), ch.URI, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sub.ID)
	}
	// Each subscription starts a message (under its own 256 KiB limit) and
	// never finishes it: 3 × 4 × 30 000 bytes pass the 256 KiB budget.
	sent := 0
	for _, id := range ids {
		for k := 0; k < 4; k++ {
			frame := `{"jsonrpc":"2.0","method":"channel/frame","params":{"channel":"` + ch.URI + `","subscriptionId":"` + id + `","messageId":1,"data":"` + data + `"}}`
			if err := c.SendRaw(ctxT(t), []byte(frame)); err != nil {
				t.Fatal(err)
			}
			sent += len(data)
		}
	}
	notes, err := c.Notifications(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if notes[0].Method != "channel/reset" || !strings.Contains(string(notes[0].Params), `"overflow"`) {
		t.Fatalf("got %s %s, want channel/reset overflow", notes[0].Method, notes[0].Params)
	}
	if sent <= 256<<10 {
		t.Fatalf("test sent only %d bytes", sent)
	}
	if ft.inputText() != "" {
		t.Fatal("incomplete messages reached the terminal")
	}
}

// A watcher that does not read loses its oldest events, never blocks the
// daemon, and is told how many it lost.
func TestEventWatcherBound(t *testing.T) {
	const n = 1000
	h := start(t, false, func(c *config.Config) { c.Limits.MaxTerminals = n })
	next, stop := h.srv.Watch()
	defer stop()
	for i := 0; i < n; i++ {
		if _, err := h.srv.CreateTerminal(service.TerminalSpec{}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	defer close(done)
	events, lost, ok := next(done) // events are queued: it does not wait
	if !ok {
		t.Fatal("no events")
	}
	if len(events) > 256 || len(events)+lost != n {
		t.Fatalf("got %d events and %d lost, want at most 256 kept and %d in all", len(events), lost, n)
	}
}
