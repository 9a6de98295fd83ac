package ctl_test

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/ctl/client"
)

// TestE2ETokensSurviveRestart: after a stop and start of ahpd on the same
// state directory, a minted token, the reconnect token a page got for its
// ticket and a token minted at runtime still open sessions with their
// grants; a revoked token, a spent ticket and an expired token do not;
// initialize's server.started tells the page the daemon restarted; and
// `ahpctl token list` shows the same tokens.
func TestE2ETokensSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	d := startDaemonIn(t, dir, nil, nil)
	d.mustCtl("terminal", "create", "--id", "r", "--", "/bin/sh")
	view := strings.TrimSpace(d.mustCtl("token", "create", "--channel", "ahp-terminal:/r", "--role", "view", "--ttl", "1h"))
	short := strings.TrimSpace(d.mustCtl("token", "create", "--role", "view", "--ttl", "1s"))
	revoked := strings.TrimSpace(d.mustCtl("token", "create", "--role", "control"))

	// The page's path: a ticket from `ahpctl open`, traded at initialize
	// for a reconnect token.
	link := strings.TrimSpace(d.mustCtl("open", "ahp-terminal:/r"))
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	frag, err := url.ParseQuery(u.Fragment)
	if err != nil || frag.Get("ticket") == "" {
		t.Fatalf("open printed %q: no ticket", link)
	}
	ticket := frag.Get("ticket")
	ws := func(d *daemonProc) string { return "ws://" + d.addr + "/v1/ws" }
	c, res, err := client.Dial(ctxT(t), ws(d), client.Options{Token: ticket})
	if err != nil {
		t.Fatal(err)
	}
	reconnect := res.ReconnectToken
	started := res.Server.Started
	if reconnect == "" || started == "" {
		t.Fatalf("initialize with a ticket: reconnectToken %q, server.started %q; want both", reconnect, started)
	}
	if _, err := time.Parse(time.RFC3339Nano, started); err != nil {
		t.Fatalf("server.started %q: %v", started, err)
	}
	c.Close()

	var before []struct {
		ID   string `json:"id"`
		Role string `json:"role"`
	}
	if err := json.Unmarshal([]byte(d.mustCtl("token", "list", "-o", "json")), &before); err != nil {
		t.Fatal(err)
	}
	var revokedID string
	for _, tk := range before {
		if tk.Role == "control" && revokedID == "" {
			revokedID = tk.ID
		}
	}
	d.mustCtl("token", "revoke", revokedID)
	time.Sleep(1100 * time.Millisecond) // short's TTL
	d.stop()

	d2 := startDaemonIn(t, dir, nil, nil)
	for _, tc := range []struct {
		name, token string
		ok          bool
		role        string
	}{
		{"view token", view, true, "view"},
		{"reconnect token", reconnect, true, "control"},
		{"ticket again", ticket, false, ""},
		{"revoked token", revoked, false, ""},
		{"expired token", short, false, ""},
	} {
		c, res, err := client.Dial(ctxT(t), ws(d2), client.Options{Token: tc.token})
		if !tc.ok {
			var rpcErr *client.Error
			if err == nil {
				c.Close()
				t.Errorf("%s: opened a session after the restart", tc.name)
			} else if !errors.As(err, &rpcErr) || rpcErr.Code != -32001 {
				t.Errorf("%s: %v, want -32001 unauthorized", tc.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s after the restart: %v", tc.name, err)
			continue
		}
		if res.Access.Role != tc.role {
			t.Errorf("%s: role %q, want %q", tc.name, res.Access.Role, tc.role)
		}
		if res.Server.Started == started {
			t.Errorf("%s: server.started %s unchanged across a restart", tc.name, started)
		}
		c.Close()
	}
	if out := d2.mustCtl("token", "list"); !strings.Contains(out, "view") {
		t.Errorf("token list after the restart:\n%s", out)
	}
}
