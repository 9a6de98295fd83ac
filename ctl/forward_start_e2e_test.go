package ctl_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestE2EForwardChecksAtStart: what forward can know before the first
// local connection it checks before it listens, and refuses with exit 1
// and what to do: a refused token, a token that may not create TCP
// channels (it reaches one channel only), a target the allow-list does
// not admit (channels/check, through --url and through the control
// socket), a channel that does not exist, a Host the daemon does not
// serve. A bad LOCAL_ADDR is bad usage (exit 2). A token file others may
// read is warned of, and used.
func TestE2EForwardChecksAtStart(t *testing.T) {
	echo := newTCPServer(t, echoServe)
	d := startTCPDaemon(t, echo.addr())
	base := "http://" + d.addr
	notAllowed := closedPort(t)

	if _, stderr, code := d.ctl("forward", "abc", "127.0.0.1:80"); code != 2 || !strings.Contains(stderr, `ahpctl: forward: LOCAL_ADDR "abc": want PORT, HOST:PORT or :PORT`) {
		t.Errorf("forward abc 127.0.0.1:80: exit %d, stderr %q; want 2 (usage) naming LOCAL_ADDR", code, stderr)
	}

	d.mustCtl("terminal", "create", "--id", "t", "--", "/bin/sh")
	scoped := strings.TrimSpace(d.mustCtl("token", "create", "--role", "control", "--channel", "ahp-terminal:/t"))
	control := strings.TrimSpace(d.mustCtl("token", "create", "--role", "control"))
	for _, tc := range []struct {
		what string
		env  []string
		args []string
		want string
	}{
		{"a wrong token", []string{"AHP_TOKEN=ahp_" + strings.Repeat("x", 43)}, []string{"--url", base, "127.0.0.1:0", echo.addr()},
			"ahpctl: forward: the token was refused (revoked, expired or wrong): get a new one with 'ahpctl token create' (or 'ahpctl open') on the daemon's host"},
		{"a token for one channel", []string{"AHP_TOKEN=" + scoped}, []string{"--url", base, "127.0.0.1:0", echo.addr()},
			"ahpctl: forward: the token may not create TCP channels: it reaches only ahp-terminal:/t, and creating one needs role control over every channel; mint one with 'ahpctl token create --role control' (without --channel)"},
		{"a channel that does not exist", []string{"AHP_TOKEN=" + control}, []string{"--url", base, "127.0.0.1:0", "ahp-tcp:/nosuch"},
			"ahpctl: forward: no channel ahp-tcp:/nosuch (closed, or never created: 'ahpctl tcp create HOST:PORT' makes one)"},
		{"a target the allow-list does not admit", []string{"AHP_TOKEN=" + control}, []string{"--url", base, "127.0.0.1:0", notAllowed},
			"ahpctl: forward: not allowed: tcp target " + notAllowed + " (allow it with: ahpctl tcp allow " + notAllowed + ")"},
		{"a target not admitted, through the control socket", nil, []string{"127.0.0.1:0", notAllowed},
			"ahpctl: forward: not allowed: tcp target " + notAllowed + " (allow it with: ahpctl tcp allow " + notAllowed + ")"},
		{"a Host not allowed", []string{"AHP_TOKEN=" + control}, []string{"--url", proxy(t, d, func(r *http.Request) { r.Host = "ahp.example" }), "127.0.0.1:0", echo.addr()},
			`ahpctl: forward: the daemon refused the host name in the URL (HTTP 421: host not allowed (see allowedHosts): add "ahp.example" to allowedHosts`},
	} {
		f := startForward(t, d, tc.env, tc.args...)
		if code := f.wait(); code != 1 || f.addr != "" || !strings.Contains(f.log(), tc.want) {
			t.Errorf("%s: exit %d (listening on %q); want 1 before listening, saying %q:\n%s", tc.what, code, f.addr, tc.want, f.log())
		}
		noLibraryWords(t, tc.what, f.log())
	}

	// A token file others may read: a warning, and forward works.
	file := tokenFile(t, control, 0o644)
	f := startForward(t, d, nil, "--url", base, "--token-file", file, "127.0.0.1:0", echo.addr())
	if f.addr == "" || !strings.Contains(f.log(), "ahpctl: warning: --token-file "+file+" is open to others (mode 0644)") {
		t.Errorf("a 0644 token file: listening on %q; want a warning:\n%s", f.addr, f.log())
	}
	f.stop()
}
