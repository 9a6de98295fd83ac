package daemon_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/daemon/service"
	"github.com/ahp-dev/ahpd/flow"
)

// closedWith waits (at most within) for c to close and checks 1008 and the
// reason.
// closeWithin is how long a test waits for a connection the daemon must
// close: on an idle machine the close comes within a second (the close
// handshake waits 0.5 s), but how soon is a figure a loaded machine
// changes; a connection still open after this long is a hang.
const closeWithin = 15 * time.Second

func closedWith(t *testing.T, c *client.Conn, within time.Duration, reason string) {
	t.Helper()
	select {
	case <-c.Done():
	case <-time.After(within):
		t.Fatalf("connection still open %v later, want close 1008 %q", within, reason)
	}
	var ce websocket.CloseError
	if !errors.As(c.Err(), &ce) || ce.Code != websocket.StatusPolicyViolation || ce.Reason != reason {
		t.Fatalf("closed with %v, want 1008 %q", c.Err(), reason)
	}
}

// waitUntil polls cond every 10 ms for at most d.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func input(t *testing.T, sub *client.Sub, data string) error {
	return sub.Send(ctxT(t), string(client.AppendNotification(nil, "terminal/input", map[string]string{"data": data})))
}

// A revoked token's open connection closes within a second and its input
// stops reaching the terminal.
func TestRevokeClosesOpenConnection(t *testing.T) {
	h := start(t, false, nil)
	ch, ft := h.term("t")
	secret, info, err := h.srv.CreateToken(context.Background(), service.TokenRequest{Role: auth.RoleControl})
	if err != nil {
		t.Fatal(err)
	}
	c := h.dial(secret)
	other := h.dial(adminToken)
	sub, err := c.Subscribe(ctxT(t), ch.URI, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := input(t, sub, "before"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "input before revoking", func() bool { return ft.inputText() == "before" })
	vs := waitViewers(t, h, 2, closeWithin)
	if vs[0].Token != info.ID || vs[1].Token != "" {
		t.Fatalf("viewers = %+v, want the first with token %s, the admin's without", vs, info.ID)
	}
	if err := h.srv.RevokeToken(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	closedWith(t, c, closeWithin, "token revoked")
	t.Logf("closed %v after the revocation", time.Since(revoked))
	_ = input(t, sub, "after") // fails: the connection is closed
	if _, err := c.Subscribe(ctxT(t), ch.URI, nil); err == nil {
		t.Fatal("subscribe after revocation succeeded")
	}
	// The admin's connection is untouched; its input arrives after
	// anything the revoked one could have sent.
	osub, err := other.Subscribe(ctxT(t), ch.URI, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := input(t, osub, "|admin"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "admin input", func() bool { return strings.HasSuffix(ft.inputText(), "|admin") })
	if got := ft.inputText(); got != "before|admin" {
		t.Fatalf("terminal got %q, want %q: input after the revocation reached it", got, "before|admin")
	}
}

// A token's connection closes "token expired" when the token expires, not
// before. (The TTL outlasts a dial and a subscribe on a loaded machine; how
// late the close comes is logged, not checked.)
func TestExpiryClosesOpenConnection(t *testing.T) {
	h := start(t, false, nil)
	ch, _ := h.term("t")
	secret, info, err := h.srv.CreateToken(context.Background(), service.TokenRequest{Role: auth.RoleControl, TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c := h.dial(secret)
	if _, err := c.Subscribe(ctxT(t), ch.URI, nil); err != nil {
		t.Fatal(err)
	}
	wait := time.Until(info.Grant.Expires)
	closedWith(t, c, wait+closeWithin, "token expired")
	late := time.Since(info.Grant.Expires)
	if late < 0 {
		t.Fatalf("closed %v before the expiry", -late)
	}
	t.Logf("closed %v after the expiry", late)
}

// ticket mints a single-use ticket with ttl and connects with it; it
// returns the connection, the reconnect token and the ticket's id.
func ticket(t *testing.T, h *harness, ttl time.Duration) (*client.Conn, string, string) {
	t.Helper()
	secret, info, err := h.srv.CreateToken(context.Background(), service.TokenRequest{Role: auth.RoleControl, SingleUse: true, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	c, res, err := client.Dial(ctxT(t), h.url, client.Options{Token: secret})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if res.ReconnectToken == "" {
		t.Fatal("no reconnect token")
	}
	return c, res.ReconnectToken, info.ID
}

// Revoking a ticket after it expired still revokes its reconnect token and
// closes the connections using it; while connected, the reconnect token
// outlives its idle period.
func TestRevokeExpiredTicketClosesReconnects(t *testing.T) {
	const ttl = 5 * time.Second // outlasts the dial and the listing below
	h := start(t, false, nil)
	c1, reconnect, ticketID := ticket(t, h, ttl)
	vs := waitViewers(t, h, 1, closeWithin)
	if vs[0].TokenParent != ticketID || vs[0].Token == "" || vs[0].Token == ticketID {
		t.Fatalf("viewers = %+v, want one holding a reconnect token derived from %s", vs, ticketID)
	}
	reconnectID := vs[0].Token
	// Past the ticket's TTL and the reconnect token's idle period (both
	// ttl, counted from before now): the open connection keeps the
	// reconnect token alive.
	time.Sleep(ttl + 500*time.Millisecond)
	// Still served: a request on it is answered.
	if err := c1.Call(ctxT(t), "channels/list", map[string]any{}, nil); err != nil {
		t.Fatalf("the connection stopped working at the ticket's expiry: %v", err)
	}
	c2 := h.dial(reconnect)
	for _, ti := range h.srv.ListTokens(context.Background()) {
		if ti.ID == ticketID {
			t.Fatalf("expired ticket still listed: %+v", ti)
		}
		if ti.ID == reconnectID && ti.Grant.Expires.After(time.Now().Add(ttl+100*time.Millisecond)) {
			t.Fatalf("reconnect token expires %v, want within its %v idle period", ti.Grant.Expires, ttl)
		}
	}
	if err := h.srv.RevokeToken(context.Background(), ticketID); err != nil {
		t.Fatalf("revoking the expired ticket: %v", err)
	}
	closedWith(t, c1, closeWithin, "token revoked")
	closedWith(t, c2, closeWithin, "token revoked")
	if _, _, err := client.Dial(ctxT(t), h.url, client.Options{Token: reconnect}); rpcCode(err) != flow.ErrCodeUnauthorized {
		t.Fatalf("reconnect token after revoking its ticket: %v, want -32001", err)
	}
}

// A reconnect token not in use expires its idle period (the ticket's TTL)
// after its last connection closed.
func TestReconnectTokenIdleExpiry(t *testing.T) {
	// The TTL outlasts the wait for the close below and a new dial.
	const ttl = 5 * time.Second
	h := start(t, false, nil)
	c, reconnect, _ := ticket(t, h, ttl)
	c.Close()
	waitUntil(t, closeWithin, "connection gone", func() bool { return h.srv.ConnectionCount() == 0 })
	// Within the idle period it works (and, connected, is renewed).
	c2 := h.dial(reconnect)
	c2.Close()
	waitUntil(t, closeWithin, "connection gone", func() bool { return h.srv.ConnectionCount() == 0 })
	closed := time.Now()
	// Its expiry is set when the last connection ended: the ticket's TTL
	// after that, not later (read from the store, not timed: how soon a
	// poll notices is the machine's).
	found := 0
	for _, ti := range h.srv.ListTokens(context.Background()) {
		if ti.Grant.Parent == "" {
			continue
		}
		found++
		if ti.Grant.Expires.After(closed.Add(ttl)) {
			t.Fatalf("reconnect token expires %v, more than the ticket's %v TTL after its last connection ended (%v)", ti.Grant.Expires, ttl, closed)
		}
	}
	if found == 0 {
		t.Fatal("no reconnect token listed")
	}
	// Authenticate does not attach a connection, so polling renews nothing.
	var aerr error
	waitUntil(t, ttl+30*time.Second, "reconnect token expiry", func() bool {
		_, aerr = h.srv.Tokens().Authenticate(reconnect)
		return aerr != nil
	})
	if !errors.Is(aerr, auth.ErrTokenExpired) {
		t.Fatalf("reconnect token after its idle period: %v, want %v", aerr, auth.ErrTokenExpired)
	}
	_, _, err := client.Dial(ctxT(t), h.url, client.Options{Token: reconnect})
	if rpcCode(err) != flow.ErrCodeUnauthorized {
		t.Fatalf("dial with the expired reconnect token: %v, want -32001", err)
	}
}

// A kicked viewer's reconnect token is revoked: it cannot come back, and
// the kicked connection gets the operator's reason.
func TestKickRevokesReconnectToken(t *testing.T) {
	h := start(t, false, nil)
	c, reconnect, _ := ticket(t, h, time.Minute)
	c2 := h.dial(reconnect) // the same tab reloaded, or a copy of it
	vs := waitViewers(t, h, 2, closeWithin)
	if err := h.srv.DisconnectViewer(context.Background(), vs[0].ID, "shift over"); err != nil {
		t.Fatal(err)
	}
	closedWith(t, c, closeWithin, "shift over")
	closedWith(t, c2, closeWithin, "token revoked")
	if _, _, err := client.Dial(ctxT(t), h.url, client.Options{Token: reconnect}); rpcCode(err) != flow.ErrCodeUnauthorized {
		t.Fatalf("reconnect token after kick: %v, want -32001", err)
	}
}

// A reconnect token's idle period is its ticket's TTL, capped at the
// reconnect cap (24 h, what initialize asks for).
func TestReconnectIdleIsTicketTTLCapped(t *testing.T) {
	tokens := auth.NewTokens(adminToken)
	now := time.Now()
	for _, tc := range []struct{ ticketTTL, want time.Duration }{
		{time.Minute, time.Minute},
		{48 * time.Hour, 24 * time.Hour},
	} {
		_, ticketID := tokens.Mint(auth.Grant{Role: auth.RoleView, SingleUse: true, Expires: now.Add(tc.ticketTTL)})
		_, id := tokens.Mint(auth.Grant{Role: auth.RoleView, Parent: ticketID, Expires: time.Now().Add(24 * time.Hour)})
		found := false
		for _, ti := range tokens.List() {
			if ti.ID != id {
				continue
			}
			found = true
			if d := ti.Grant.Idle - tc.want; d < -time.Second || d > time.Second {
				t.Errorf("ticket TTL %v: reconnect idle %v, want %v", tc.ticketTTL, ti.Grant.Idle, tc.want)
			}
			if left := time.Until(ti.Grant.Expires); left > tc.want {
				t.Errorf("ticket TTL %v: reconnect token expires in %v, want at most %v", tc.ticketTTL, left, tc.want)
			}
		}
		if !found {
			t.Fatalf("reconnect token %s not listed", id)
		}
	}
}

// A token has at most maxConnectionsPerToken connections open: the next
// one closes with 1008 naming the limit, and a place freed is usable
// again. The admin token has no bound.
func TestMaxConnectionsPerToken(t *testing.T) {
	h := start(t, false, func(c *config.Config) { c.MaxConnectionsPerToken = 2 })
	secret, _, err := h.srv.CreateToken(context.Background(), service.TokenRequest{Role: auth.RoleView})
	if err != nil {
		t.Fatal(err)
	}
	first := h.dial(secret)
	h.dial(secret)
	const reason = "too many connections with this token (maxConnectionsPerToken 2)"
	third, _, err := client.Dial(ctxT(t), h.url, client.Options{Token: secret})
	if err != nil {
		if !strings.Contains(err.Error(), reason) {
			t.Fatalf("third connection: %v, want a close with %q", err, reason)
		}
	} else {
		defer third.Close()
		closedWith(t, third, closeWithin, reason)
	}
	first.Close()
	waitUntil(t, 5*time.Second, "first connection gone", func() bool { return h.srv.ConnectionCount() == 1 })
	again := h.dial(secret)
	if err := again.Call(ctxT(t), "channels/list", map[string]any{}, nil); err != nil {
		t.Fatalf("a connection after one closed: %v", err)
	}
	for range 3 {
		h.dial(adminToken)
	}
}
