package ctl_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// These tests check what ahpctl attach says, and when it stops, when the
// daemon refuses it or goes away: a refused credential, Origin or Host
// ends it at once with exit 1 and what to do; a daemon that is down gets
// one status line, rewritten in place.

// libraryWords are the WebSocket library's and JSON-RPC's words, which a
// user-facing message must not carry.
var libraryWords = []string{"failed to ", "StatusPolicyViolation", "status = ", "handshake", "code -32", "(code "}

// noLibraryWords fails the test if out carries one of libraryWords.
func noLibraryWords(t *testing.T, what, out string) {
	t.Helper()
	for _, w := range libraryWords {
		if strings.Contains(out, w) {
			t.Errorf("%s says %q:\n%q", what, w, out)
		}
	}
}

// tokenFile writes tok to a file of mode in a temporary directory.
func tokenFile(t *testing.T, tok string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(tok+"\n"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // whatever the umask
		t.Fatal(err)
	}
	return path
}

// remoteAttach runs ahpctl attach --url base --token-file tokFile URI in
// a PTY, with a control socket that does not exist.
func remoteAttach(t *testing.T, d *daemonProc, base, tokFile, uri string) (*ptyScreen, <-chan error, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(d.ahpctl, "--control", filepath.Join(t.TempDir(), "none.sock"), "attach",
		"--url", base, "--token-file", tokFile, uri)
	cmd.Env = append(os.Environ(), "AHP_TOKEN=", "AHP_URL=")
	// 200 columns: attach's status line is cut to the terminal's width.
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 200})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	screen := newPTYScreen(f)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return screen, done, cmd
}

// exitsWith waits (at most 20 s) for an attach to exit and checks its
// status and that its output matches want and carries no library words,
// no reconnect and no "[detached from".
func exitsWith(t *testing.T, what string, screen *ptyScreen, done <-chan error, cmd *exec.Cmd, code int, want *regexp.Regexp) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s: attach did not exit within 20s (it retries?); output:\n%q", what, screen.String())
	}
	<-screen.done
	out := screen.String()
	if got := cmd.ProcessState.ExitCode(); got != code {
		t.Errorf("%s: exit %d, want %d; output:\n%q", what, got, code, out)
	}
	if !want.MatchString(out) {
		t.Errorf("%s: output does not match %q:\n%q", what, want, out)
	}
	for _, w := range []string{"reconnecting", "[detached from"} {
		if strings.Contains(out, w) {
			t.Errorf("%s: says %q:\n%q", what, w, out)
		}
	}
	noLibraryWords(t, what, out)
}

// proxy starts a reverse proxy on loopback in front of the daemon that
// changes each request with edit, and returns its URL.
func proxy(t *testing.T, d *daemonProc, edit func(*http.Request)) string {
	t.Helper()
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(&url.URL{Scheme: "http", Host: d.addr})
		edit(r.Out)
	}}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestE2EAttachRefused: attach --url with a wrong, revoked or expired
// token, through a proxy whose Host or Origin the daemon refuses (421,
// 403), or through one that wants credentials (401), exits 1 at once
// saying why and what to do, instead of retrying forever; a token revoked
// while attached ends it the same way. A token file others may read is
// warned of.
func TestE2EAttachRefused(t *testing.T) {
	d := startDaemon(t)
	d.mustCtl("terminal", "create", "--id", "rsh", "--env", "PS1=REMOTE> ", "--env", "HOME=/tmp", "--", "/bin/sh")
	base := "http://" + d.addr
	refused := regexp.MustCompile(`ahpctl: attach: the token was refused \(revoked, expired or wrong\): get a new one with 'ahpctl token create' \(or 'ahpctl open'\) on the daemon's host\r\n`)

	// A token that never was, in a file others may read.
	bogus := tokenFile(t, "ahp_"+strings.Repeat("x", 43), 0o644)
	screen, done, cmd := remoteAttach(t, d, base, bogus, "ahp-terminal:/rsh")
	exitsWith(t, "a wrong token", screen, done, cmd, 1, refused)
	if warn := "ahpctl: warning: --token-file " + bogus + " is open to others (mode 0644): whoever can read it can use the token; run chmod 600 " + bogus; !strings.Contains(screen.String(), warn) {
		t.Errorf("a 0644 token file: no warning %q:\n%q", warn, screen.String())
	}

	// A revoked token.
	tok := strings.TrimSpace(d.mustCtl("token", "create", "--role", "control", "--channel", "ahp-terminal:/rsh"))
	var tokens []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(d.mustCtl("token", "list", "-o", "json")), &tokens); err != nil || len(tokens) != 1 {
		t.Fatalf("token list: %v %v", tokens, err)
	}
	d.mustCtl("token", "revoke", tokens[0].ID)
	screen, done, cmd = remoteAttach(t, d, base, tokenFile(t, tok, 0o600), "ahp-terminal:/rsh")
	exitsWith(t, "a revoked token", screen, done, cmd, 1, refused)
	if strings.Contains(screen.String(), "warning") {
		t.Errorf("a 0600 token file: %q", screen.String())
	}

	// An expired one.
	tok = strings.TrimSpace(d.mustCtl("token", "create", "--role", "control", "--ttl", "1s"))
	time.Sleep(1100 * time.Millisecond) // its expiry is wall-clock time
	screen, done, cmd = remoteAttach(t, d, base, tokenFile(t, tok, 0o600), "ahp-terminal:/rsh")
	exitsWith(t, "an expired token", screen, done, cmd, 1,
		regexp.MustCompile(`ahpctl: attach: the token expired: get a new one with 'ahpctl token create'`))

	// Refused at the upgrade: a Host the daemon does not serve (421), an
	// Origin it does not allow (403), a proxy that wants credentials.
	good := tokenFile(t, strings.TrimSpace(d.mustCtl("token", "create", "--role", "control")), 0o600)
	for _, tc := range []struct {
		what string
		base string
		want string
	}{
		{"a Host not allowed", proxy(t, d, func(r *http.Request) { r.Host = "ahp.example" }),
			`ahpctl: attach: the daemon refused the host name in the URL \(HTTP 421: host not allowed \(see allowedHosts\): add "ahp.example" to allowedHosts in ahpd's config file`},
		{"an Origin not allowed", proxy(t, d, func(r *http.Request) { r.Header.Set("Origin", "http://ahp.example") }),
			`ahpctl: attach: the daemon refused the Origin a proxy in front of it adds \(HTTP 403: origin not allowed \(see allowedOrigins\): add "ahp.example:80" to allowedOrigins in ahpd's config file`},
		{"a proxy that wants credentials", func() string {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("WWW-Authenticate", `Basic realm="ahp"`)
				http.Error(w, "<html>401 Authorization Required</html>", http.StatusUnauthorized)
			}))
			t.Cleanup(srv.Close)
			return srv.URL
		}(), `ahpctl: attach: a proxy in front of the daemon wants credentials \(HTTP 401 Unauthorized\)`},
	} {
		screen, done, cmd = remoteAttach(t, d, tc.base, good, "ahp-terminal:/rsh")
		exitsWith(t, tc.what, screen, done, cmd, 1, regexp.MustCompile(tc.want))
	}

	// Revoked while attached: the daemon closes with 1008 "token revoked";
	// attach says so and does not come back.
	tok = strings.TrimSpace(d.mustCtl("token", "create", "--role", "control", "--channel", "ahp-terminal:/rsh"))
	screen, done, cmd = remoteAttach(t, d, base, tokenFile(t, tok, 0o600), "ahp-terminal:/rsh")
	pos := screen.waitFor(t, 0, regexp.MustCompile(`REMOTE> `))
	if err := json.Unmarshal([]byte(d.mustCtl("token", "list", "-o", "json")), &tokens); err != nil {
		t.Fatal(err)
	}
	for _, tk := range tokens {
		d.mustCtl("token", "revoke", tk.ID)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("attach did not exit after its token was revoked; output:\n%q", screen.String())
	}
	<-screen.done
	out := screen.String()[pos:]
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(out, "ahpctl: attach: the token was revoked: get a new one with 'ahpctl token create' (or 'ahpctl open') on the daemon's host; not reconnecting") ||
		strings.Contains(out, "reconnecting…") || strings.Contains(out, "[detached from") {
		t.Errorf("revoked while attached: exit %d; output:\n%q", code, out)
	}
	noLibraryWords(t, "revoked while attached", out)
}

// TestE2EAttachDaemonDown: while the daemon is down, attach shows one
// status line that it rewrites in place at each attempt (not a line per
// attempt), naming how the session ended and why the attempts fail; it
// reconnects to the daemon started again, and, the terminal having ended
// with the old daemon, exits 1 saying the channel was closed.
func TestE2EAttachDaemonDown(t *testing.T) {
	dir := t.TempDir()
	d := startDaemonIn(t, dir, nil, nil)
	d.mustCtl("terminal", "create", "--id", "down", "--env", "PS1=DOWN> ", "--env", "HOME=/tmp", "--", "/bin/sh")
	tok := tokenFile(t, strings.TrimSpace(d.mustCtl("token", "create", "--role", "control")), 0o600)
	screen, done, cmd := remoteAttach(t, d, "http://"+d.addr, tok, "ahp-terminal:/down")
	pos := screen.waitFor(t, 0, regexp.MustCompile(`DOWN> `))
	d.stop()

	// The line opens once, then is rewritten: \r, erase the line.
	first := regexp.QuoteMeta("\r\n\x1b[0m[ahpctl: the daemon shut down; reconnecting… (Ctrl-] d detaches)]")
	pos = screen.waitFor(t, pos, regexp.MustCompile(first))
	again := regexp.MustCompile(regexp.QuoteMeta("\r\x1b[K[ahpctl: the daemon shut down; reconnecting… ") + `\d+s of 1m0s \(Ctrl-\] d detaches\): nothing listens at ` +
		regexp.QuoteMeta(d.addr+" (connection refused): is ahpd running?]"))
	for range 3 {
		pos = screen.waitFor(t, pos, again)
	}
	out := screen.String()
	status := out[strings.Index(out, "[ahpctl: the daemon shut down"):]
	if n := strings.Count(status, "\n"); n != 0 {
		t.Errorf("%d line feeds in the status line while the daemon is down (one line per attempt?):\n%q", n, status)
	}
	noLibraryWords(t, "the status line", status)

	// The daemon is back (its state kept the token; its terminals ended).
	startDaemonIn(t, dir, []string{"--listen", d.addr}, nil)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("attach did not exit once the daemon was back without its terminal; output:\n%q", screen.String())
	}
	<-screen.done
	out = screen.String()[pos:]
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(out, "ahpctl: attach: ahp-terminal:/down was closed; not reconnecting") {
		t.Errorf("after the daemon came back: exit %d; output:\n%q", code, out)
	}
	if strings.Contains(out, "[detached from") {
		t.Errorf("says detached:\n%q", out)
	}
}
