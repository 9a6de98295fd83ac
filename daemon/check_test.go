package daemon_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/tcp"
)

// TestChannelsCheck: channels/check answers what subscribe {create} would
// get short of the dial — {} for a target the allow-list admits, -32003
// naming the target for one it refuses, -32003 for a token without role
// control over all channels, -32602 for a create member that is wrong —
// and creates nothing (docs/protocol-decisions.md, "forward's checks at
// start").
func TestChannelsCheck(t *testing.T) {
	allowed, refused := closedPort(t), closedPort(t)
	rule, err := tcp.ParseRule("127.0.0.1:" + strconv.Itoa(allowed))
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, false, func(c *config.Config) { c.TCPAllow = []tcp.Rule{rule} })
	ctx := ctxT(t)
	dial := func(tok string) *client.Conn {
		t.Helper()
		c, _, err := client.Dial(ctx, h.url, client.Options{Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	check := func(c *client.Conn, params any) (map[string]any, error) {
		var res map[string]any
		err := c.Call(ctx, "channels/check", params, &res)
		return res, err
	}
	create := func(port int) map[string]any {
		return map[string]any{"create": map[string]any{"type": "tcp", "host": "127.0.0.1", "port": port}}
	}
	admin := dial(adminToken)
	// Admitted: {} although nothing listens there (no dial).
	if res, err := check(admin, create(allowed)); err != nil || len(res) != 0 {
		t.Fatalf("channels/check of an allowed target = %v, %v; want {}", res, err)
	}
	target := "127.0.0.1:" + strconv.Itoa(refused)
	_, err = check(admin, create(refused))
	if rpcCode(err) != flow.ErrCodeForbidden || !strings.Contains(err.Error(), "not allowed: tcp target "+target+" (allow it with: ahpctl tcp allow "+target+")") {
		t.Fatalf("channels/check of a target not allowed: %v; want -32003 naming it", err)
	}
	for _, tc := range []struct {
		params any
		want   string
	}{
		{map[string]any{}, "create: required"},
		{map[string]any{"create": map[string]any{"type": "tcp", "host": "127.0.0.1"}}, "create.port: required"},
		{map[string]any{"create": map[string]any{"type": "terminal"}}, "cannot be created by subscribe"},
		{map[string]any{"create": "tcp"}, "create: "},
	} {
		if _, err := check(admin, tc.params); rpcCode(err) != flow.ErrCodeInvalidParams || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("channels/check %v: %v; want -32602 saying %q", tc.params, err, tc.want)
		}
	}
	scoped, _ := h.srv.Tokens().Mint(auth.Grant{Role: auth.RoleControl, Channels: []string{"ahp-tcp:/x"}})
	view, _ := h.srv.Tokens().Mint(auth.Grant{Role: auth.RoleView})
	for _, tok := range []string{scoped, view} {
		if _, err := check(dial(tok), create(allowed)); rpcCode(err) != flow.ErrCodeForbidden || !strings.Contains(err.Error(), "needs role control over all channels") {
			t.Errorf("channels/check without control over all channels: %v; want -32003", err)
		}
	}
	if got := listedChannels(t, admin); len(got) != 0 {
		t.Fatalf("channels after the checks: %v; want none", got)
	}
}
