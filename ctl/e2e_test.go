package ctl_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/creack/pty"
	"go.uber.org/goleak"

	"github.com/ahp-dev/ahpd/ctl/client"

	"github.com/ahp-dev/ahpd/internal/testbin"
)

// These tests build the real ahpd and ahpctl binaries and drive them as
// black boxes: a daemon on a loopback port with its control socket in a
// temporary directory, real PTYs, and ahpctl attach inside a PTY.

var bin struct {
	dir       string
	ahpd, ctl string
	err       error
	once      sync.Once
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) {
		if bin.dir != "" {
			os.RemoveAll(bin.dir)
		}
	}))
}

// binaries builds ahpd and ahpctl once per test binary (with -race when the
// tests run with it).
func binaries(t *testing.T) (ahpd, ahpctl string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds binaries; skipped with -short")
	}
	bin.once.Do(func() {
		bin.dir, bin.err = os.MkdirTemp("", "ahpctl-e2e-")
		if bin.err != nil {
			return
		}
		bin.ahpd, bin.ctl = filepath.Join(bin.dir, "ahpd"), filepath.Join(bin.dir, "ahpctl")
		bin.err = testbin.Build(bin.dir, raceEnabled, testbin.Commands...)
	})
	if bin.err != nil {
		t.Fatal(bin.err)
	}
	return bin.ahpd, bin.ctl
}

type daemonProc struct {
	t       *testing.T
	cmd     *exec.Cmd
	addr    string
	control string
	ahpctl  string
	exited  chan error
	logMu   sync.Mutex
	log     bytes.Buffer
}

// startDaemon runs ahpd with a loopback listener, a state dir and a control
// socket in t.TempDir(); it is stopped with SIGTERM when the test ends.
func startDaemon(t *testing.T) *daemonProc {
	t.Helper()
	return startDaemonWith(t, nil, nil)
}

// startDaemonWith is startDaemon with more flags and environment entries
// (which replace the inherited ones).
func startDaemonWith(t *testing.T, args, env []string) *daemonProc {
	t.Helper()
	return startDaemonIn(t, t.TempDir(), args, env)
}

// startDaemonIn is startDaemonWith with its state directory, control
// socket and other files in dir: a daemon started again in the same dir
// finds the state the last one left.
func startDaemonIn(t *testing.T, dir string, args, env []string) *daemonProc {
	t.Helper()
	ahpd, _ := binaries(t)
	return startDaemonExe(t, ahpd, dir, args, env)
}

// startDaemonExe is startDaemonIn with the ahpd binary at path ahpd.
// The daemon never sees the user's home: HOME and XDG_CONFIG_HOME point
// into dir (env may set them otherwise), so it neither reads the user's
// config file nor writes there.
func startDaemonExe(t *testing.T, ahpd, dir string, args, env []string) *daemonProc {
	t.Helper()
	_, ahpctl := binaries(t)
	d := &daemonProc{t: t, control: filepath.Join(dir, "ctl.sock"), ahpctl: ahpctl, exited: make(chan error, 1)}
	d.cmd = exec.Command(ahpd, append([]string{"--listen", "127.0.0.1:0", "--state-dir", filepath.Join(dir, "state"),
		"--control", d.control, "--no-default-terminal", "--log-level", "debug"}, args...)...)
	home := filepath.Join(dir, "home")
	d.cmd.Env = append(append(os.Environ(), "SHELL=/bin/sh", "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_STATE_HOME="+filepath.Join(home, ".local", "state"), "CONFIGURATION_DIRECTORY="), env...)
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`msg=listening addr=(\S+)`)
		for sc.Scan() {
			line := sc.Text()
			d.logMu.Lock()
			d.log.WriteString(line + "\n")
			d.logMu.Unlock()
			if m := re.FindStringSubmatch(line); m != nil {
				select {
				case ready <- m[1]:
				default: // said again after an upgrade in place
				}
			}
		}
	}()
	go func() {
		<-logDone
		d.exited <- d.cmd.Wait()
	}()
	select {
	case d.addr = <-ready:
	case err := <-d.exited:
		t.Fatalf("ahpd exited at start: %v\n%s", err, d.logs())
	case <-time.After(30 * time.Second):
		d.cmd.Process.Kill()
		t.Fatalf("ahpd did not start within 30s\n%s", d.logs())
	}
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			d.stop()
		}
		if t.Failed() {
			t.Logf("ahpd log:\n%s", d.logs())
		}
	})
	return d
}

func (d *daemonProc) logs() string {
	d.logMu.Lock()
	defer d.logMu.Unlock()
	return d.log.String()
}

// stop sends SIGTERM and checks a clean exit within the shutdown timeout.
func (d *daemonProc) stop() {
	d.t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.exited:
		if err != nil {
			d.t.Errorf("ahpd exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		d.cmd.Process.Kill()
		<-d.exited
		d.t.Error("ahpd did not exit within 20s of SIGTERM")
	}
}

// ctl runs ahpctl against the daemon and returns stdout, stderr and the
// exit status.
func (d *daemonProc) ctl(args ...string) (string, string, int) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.ahpctl, append([]string{"--control", d.control}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		d.t.Fatalf("ahpctl %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), code
}

// mustCtl runs ahpctl and fails the test unless it exits 0.
func (d *daemonProc) mustCtl(args ...string) string {
	d.t.Helper()
	out, errOut, code := d.ctl(args...)
	if code != 0 {
		d.t.Fatalf("ahpctl %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type channelJSON struct {
	Channel string `json:"channel"`
	ID      string `json:"id"`
	Type    string `json:"type"`
	State   string `json:"state"`
	Viewers int64  `json:"viewers"`
	Rows    int    `json:"rows"`
	Cols    int    `json:"cols"`
}

type viewerJSON struct {
	ID            string `json:"id"`
	Client        string `json:"client"`
	ClientVersion string `json:"clientVersion"`
	Role          string `json:"role"`
	TokenID       string `json:"tokenId"`
	TokenParentID string `json:"tokenParentId"`
	Subscriptions []struct {
		Channel string `json:"channel"`
	} `json:"subscriptions"`
}

func TestE2ETerminalTokenChannelsLimits(t *testing.T) {
	d := startDaemon(t)
	if out := d.mustCtl("terminal", "create", "--id", "e2e", "--rows", "30", "--cols", "100", "--", "/bin/sh"); out != "ahp-terminal:/e2e\n" {
		t.Fatalf("terminal create printed %q, want the URI alone", out)
	}
	if _, errOut, code := d.ctl("terminal", "create", "--id", "e2e"); code != 1 || !strings.Contains(errOut, "ahp-terminal:/e2e") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("duplicate terminal: exit %d, stderr %q; want 1 and one line naming the channel", code, errOut)
	}

	var list []channelJSON
	if err := json.Unmarshal([]byte(d.mustCtl("channels", "list", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Channel != "ahp-terminal:/e2e" || list[0].Type != "terminal" || list[0].State != "running" || list[0].Rows != 30 || list[0].Cols != 100 {
		t.Fatalf("channels list -o json = %+v", list)
	}
	if table := d.mustCtl("channels", "list"); !strings.HasPrefix(table, "CHANNEL ") || !strings.Contains(table, "ahp-terminal:/e2e") {
		t.Fatalf("channels list table:\n%s", table)
	}

	tok := d.mustCtl("token", "create", "--channel", "ahp-terminal:/e2e", "--role", "view", "--ttl", "1m")
	if !regexp.MustCompile(`^ahp_[A-Za-z0-9_-]{43}\n$`).MatchString(tok) {
		t.Fatalf("token create printed %q, want the token alone on a line", tok)
	}
	c, res, err := client.Dial(ctxT(t), "ws://"+d.addr+"/v1/ws", client.Options{Token: strings.TrimSpace(tok)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Access.Role != "view" {
		t.Fatalf("role = %q, want view", res.Access.Role)
	}
	c.Close()
	var tokens []struct {
		ID       string   `json:"id"`
		Role     string   `json:"role"`
		Channels []string `json:"channels"`
	}
	if err := json.Unmarshal([]byte(d.mustCtl("token", "list", "-o", "json")), &tokens); err != nil || len(tokens) != 1 || tokens[0].Role != "view" {
		t.Fatalf("token list -o json = %+v, %v", tokens, err)
	}
	d.mustCtl("token", "revoke", tokens[0].ID)
	if _, _, code := d.ctl("token", "revoke", tokens[0].ID); code != 1 {
		t.Fatalf("revoking twice: exit %d, want 1", code)
	}

	if out := d.mustCtl("limits", "set", "maxOutputStall=2s", "maxBufferedBytes=8MiB", "maxSubscriptions=2", "heartbeatInterval=5s"); out != "maxBufferedBytes=8MiB (was 64MiB)\nmaxOutputStall=2s (was 1m0s)\nmaxSubscriptions=2 (was 1024)\nheartbeatInterval=5s (was 15s)\n" {
		t.Fatalf("limits set printed %q", out)
	}
	var lim struct {
		Effective map[string]any `json:"effective"`
		Defaults  map[string]any `json:"defaults"`
	}
	if err := json.Unmarshal([]byte(d.mustCtl("limits", "get", "-o", "json")), &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Effective["maxOutputStall"] != "2s" || lim.Effective["maxBufferedBytes"] != float64(8<<20) || lim.Effective["maxSubscriptions"] != float64(2) || lim.Defaults["maxOutputStall"] != "1m0s" {
		t.Fatalf("limits get -o json = %+v", lim)
	}
	_, errOut, code := d.ctl("limits", "set", "maxOutputStall=1ms")
	if code != 2 || !strings.Contains(errOut, "invalid argument: maxOutputStall") {
		t.Fatalf("invalid limit: exit %d, stderr %q", code, errOut)
	}
	if _, _, code := d.ctl("limits", "set", "noSuchLimit=1"); code != 2 {
		t.Fatalf("unknown key: exit %d, want 2", code)
	}
	if _, errOut, code := d.ctl("channels", "get", "ahp-terminal:/nope"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("get a missing channel: exit %d, stderr %q", code, errOut)
	}
	if _, _, code := d.ctl("viewers", "kick"); code != 2 {
		t.Fatalf("viewers kick without ID: exit %d, want 2", code)
	}
	var status struct {
		Health       string `json:"health"`
		WebSocketURL string `json:"websocketUrl"`
		Channels     int    `json:"channels"`
	}
	if err := json.Unmarshal([]byte(d.mustCtl("status", "-o", "json")), &status); err != nil || status.Health != "SERVING" || status.WebSocketURL != "ws://"+d.addr+"/v1/ws" || status.Channels != 1 {
		t.Fatalf("status -o json = %+v, %v", status, err)
	}
	if u := d.mustCtl("open", "ahp-terminal:/e2e"); !strings.HasPrefix(u, "http://"+d.addr+"/#ticket=ahp_") {
		t.Fatalf("open printed %q", u)
	}
	var stats struct {
		Channels []struct {
			Channel string `json:"channel"`
		} `json:"channels"`
	}
	if err := json.Unmarshal([]byte(d.mustCtl("stats", "-o", "json")), &stats); err != nil || len(stats.Channels) != 1 {
		t.Fatalf("stats -o json = %+v, %v", stats, err)
	}
	d.mustCtl("channels", "close", "ahp-terminal:/e2e", "--signal", "TERM", "--grace", "2s")
	if out := d.mustCtl("channels", "list", "-o", "json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("channels after close = %s", out)
	}
	// A clean SIGTERM removes the control socket.
	d.stop()
	if _, err := os.Stat(d.control); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("control socket after shutdown: %v", err)
	}
	if _, errOut, code := d.ctl("status"); code != 1 || !strings.Contains(errOut, "is ahpd running?") {
		t.Fatalf("status without a daemon: exit %d, stderr %q", code, errOut)
	}
}

// ptyScreen collects what a process writes to its PTY.
type ptyScreen struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	sig  chan struct{}
	done chan struct{}
}

func newPTYScreen(f *os.File) *ptyScreen {
	s := &ptyScreen{sig: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		b := make([]byte, 4096)
		for {
			n, err := f.Read(b)
			if n > 0 {
				s.mu.Lock()
				s.buf.Write(b[:n])
				s.mu.Unlock()
				select {
				case s.sig <- struct{}{}:
				default:
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return s
}

func (s *ptyScreen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitFor waits until the output after offset from matches re.
func (s *ptyScreen) waitFor(t *testing.T, from int, re *regexp.Regexp) int {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		out := s.String()
		if loc := re.FindStringIndex(out[min(from, len(out)):]); loc != nil {
			return from + loc[1]
		}
		select {
		case <-s.sig:
		case <-s.done:
			if loc := re.FindStringIndex(s.String()[from:]); loc != nil {
				return from + loc[1]
			}
			t.Fatalf("PTY closed before %q; output:\n%q", re, s.String())
		case <-deadline:
			t.Fatalf("no %q within 20s; output:\n%q", re, s.String())
		}
	}
}

// inPTY starts cmd in a 24×80 PTY, closed when the test ends; done
// yields cmd's exit.
func inPTY(t *testing.T, cmd *exec.Cmd) (*os.File, *ptyScreen, <-chan error) {
	t.Helper()
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 80})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	screen := newPTYScreen(f)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return f, screen, done
}

// kickEnds checks that an attach (cmd, its done) exits non-zero after a
// kick with reason, saying so, instead of coming back.
func kickEnds(t *testing.T, cmd *exec.Cmd, done <-chan error, screen *ptyScreen, pos int, reason string) {
	t.Helper()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("attach exited 0 after a kick; output:\n%q", screen.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("attach did not exit after a kick (it came back?); output:\n%q", screen.String())
	}
	screen.waitFor(t, pos, regexp.MustCompile(regexp.QuoteMeta(reason)+`.*not reconnecting`))
}

func TestE2EAttachKickAndEvents(t *testing.T) {
	d := startDaemon(t)
	d.mustCtl("terminal", "create", "--id", "sh", "--env", "PS1=PROMPT> ", "--env", "HOME=/tmp", "--", "/bin/sh")

	// Follow events in the background.
	ectx, ecancel := context.WithCancel(context.Background())
	defer ecancel()
	events := exec.CommandContext(ectx, d.ahpctl, "--control", d.control, "events", "-o", "json")
	evOut, err := events.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := events.Start(); err != nil {
		t.Fatal(err)
	}
	evLines := make(chan string, 256)
	go func() {
		defer close(evLines)
		sc := bufio.NewScanner(evOut)
		for sc.Scan() {
			evLines <- sc.Text()
		}
	}()
	defer func() {
		ecancel()
		for range evLines {
		}
		_ = events.Wait()
	}()
	// The watch is in place once an event created after it shows up.
	waitEvent := func(kind, field, value string) map[string]string {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case line, ok := <-evLines:
				if !ok {
					t.Fatalf("ahpctl events ended while waiting for %s", kind)
				}
				var raw map[string]any
				if err := json.Unmarshal([]byte(line), &raw); err != nil {
					t.Fatalf("events -o json line %q: %v", line, err)
				}
				e := map[string]string{}
				for k, v := range raw {
					e[k] = fmt.Sprint(v)
				}
				if e["kind"] == kind && (field == "" || e[field] == value) {
					return e
				}
			case <-deadline:
				t.Fatalf("no %s event within 20s", kind)
			}
		}
	}
	for i := 0; ; i++ {
		id := fmt.Sprintf("probe%d", i)
		d.mustCtl("terminal", "create", "--id", id, "--", "/bin/sh")
		select {
		case line := <-evLines:
			if strings.Contains(line, `"channel.created"`) {
				goto watching
			}
		case <-time.After(time.Second):
		}
		if i == 20 {
			t.Fatal("ahpctl events shows no channel.created")
		}
	}
watching:

	// Attach inside a PTY, type a command, check the screen.
	cmd := exec.Command(d.ahpctl, "--control", d.control, "attach", "ahp-terminal:/sh")
	f, screen, attachDone := inPTY(t, cmd)
	pos := screen.waitFor(t, 0, regexp.MustCompile(`PROMPT> `))
	if _, err := f.Write([]byte("echo h''i-from-attach\r")); err != nil {
		t.Fatal(err)
	}
	pos = screen.waitFor(t, pos, regexp.MustCompile(`\r\nhi-from-attach\r\n`))
	waitEvent("viewer.joined", "detail", "ahpctl attach")

	// The attach viewer resized the PTY to its terminal (24x80 → 24x80 is
	// no change, so resize the PTY and watch the channel follow).
	if err := pty.Setsize(f, &pty.Winsize{Rows: 33, Cols: 101}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var ch channelJSON
		if err := json.Unmarshal([]byte(d.mustCtl("channels", "get", "ahp-terminal:/sh", "-o", "json")), &ch); err != nil {
			t.Fatal(err)
		}
		if ch.Rows == 33 && ch.Cols == 101 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("channel size = %dx%d after SIGWINCH, want 33x101", ch.Rows, ch.Cols)
		}
		time.Sleep(50 * time.Millisecond) // polling another process's state
	}

	// Detach with Ctrl-] d.
	if _, err := f.Write([]byte{0x1d, 'd'}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-attachDone:
		if err != nil {
			t.Fatalf("attach exit: %v; output:\n%q", err, screen.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("attach did not exit after Ctrl-] d; output:\n%q", screen.String())
	}
	screen.waitFor(t, pos, regexp.MustCompile(`\[detached from ahp-terminal:/sh\]`))

	// Attach again and kick it: it does not come back (its reconnect token
	// is revoked) and says why.
	cmd = exec.Command(d.ahpctl, "--control", d.control, "attach", "ahp-terminal:/sh")
	_, screen, attachDone = inPTY(t, cmd)
	pos = screen.waitFor(t, 0, regexp.MustCompile(`PROMPT> `))
	var viewers []viewerJSON
	var attachID string
	deadline = time.Now().Add(20 * time.Second)
	for attachID == "" {
		if err := json.Unmarshal([]byte(d.mustCtl("viewers", "list", "-o", "json")), &viewers); err != nil {
			t.Fatal(err)
		}
		for _, v := range viewers {
			if v.Client == "ahpctl attach" && len(v.Subscriptions) == 1 && v.Subscriptions[0].Channel == "ahp-terminal:/sh" && v.Role == "control" {
				attachID = v.ID
				if v.ClientVersion == "" {
					t.Fatalf("attach viewer %+v: no client version (initialize sends ahpctl's)", v)
				}
				// The ticket's connection holds the reconnect token derived from it.
				if !strings.HasPrefix(v.TokenID, "tok-") || !strings.HasPrefix(v.TokenParentID, "tok-") || v.TokenID == v.TokenParentID {
					t.Fatalf("attach viewer's token = %q from %q, want a reconnect token id and its ticket's", v.TokenID, v.TokenParentID)
				}
			}
		}
		if attachID == "" && time.Now().After(deadline) {
			t.Fatalf("viewers list -o json = %+v, want the second attach viewer", viewers)
		}
		time.Sleep(50 * time.Millisecond) // polling another process's state
	}
	if table := d.mustCtl("viewers", "list"); !strings.Contains(table, "TOKEN") || !strings.Contains(table, "(from tok-") {
		t.Fatalf("viewers list table lacks the token column:\n%s", table)
	}
	d.mustCtl("viewers", "kick", attachID, "--reason", "test kick")
	if e := waitEvent("viewer.kicked", "viewer", attachID); e["detail"] != "test kick" {
		t.Fatalf("viewer.kicked = %v", e)
	}
	kickEnds(t, cmd, attachDone, screen, pos, "test kick")

	// Kicking a plain WebSocket viewer closes it with 1008 and the reason.
	tok := strings.TrimSpace(d.mustCtl("token", "create", "--role", "view"))
	c, _, err := client.Dial(ctxT(t), "ws://"+d.addr+"/v1/ws", client.Options{Token: tok, ClientName: "kick-me"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	joined := waitEvent("viewer.joined", "detail", "kick-me")
	d.mustCtl("viewers", "kick", joined["viewer"], "--reason", "bye from e2e")
	select {
	case <-c.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("kicked viewer not closed")
	}
	var ce websocket.CloseError
	if !errors.As(c.Err(), &ce) || ce.Code != websocket.StatusPolicyViolation || ce.Reason != "bye from e2e" {
		t.Fatalf("kicked viewer closed with %v, want 1008 %q", c.Err(), "bye from e2e")
	}
	waitEvent("viewer.left", "viewer", joined["viewer"])
}

func TestE2ECompletionScripts(t *testing.T) {
	_, ahpctl := binaries(t)
	for _, shell := range []string{"bash", "zsh", "fish"} {
		out, err := exec.Command(ahpctl, "completion", shell).Output()
		if err != nil {
			t.Fatalf("completion %s: %v", shell, err)
		}
		if !bytes.Contains(out, []byte("ahpctl")) {
			t.Fatalf("completion %s printed %q", shell, out)
		}
		path, err := exec.LookPath(shell)
		if err != nil {
			continue // the shell is not installed: no syntax check
		}
		script := filepath.Join(t.TempDir(), "c")
		if err := os.WriteFile(script, out, 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(path, "-n", script).CombinedOutput(); err != nil {
			t.Fatalf("%s -n: %v\n%s", shell, err, out)
		}
	}
	if err := exec.Command(ahpctl, "completion", "tcsh").Run(); err == nil {
		t.Fatal("completion tcsh succeeded")
	} else if ee := new(exec.ExitError); errors.As(err, &ee) && ee.ExitCode() != 2 {
		t.Fatalf("completion tcsh: exit %d, want 2", ee.ExitCode())
	}
}

// TestE2EAttachRemote: attach without the control socket (as from another
// machine through a tunnel): --url and a token from --token-file. Typing
// works; a kick ends it for good even though its token would still be
// accepted; no token on the command line is needed or taken.
func TestE2EAttachRemote(t *testing.T) {
	d := startDaemon(t)
	d.mustCtl("terminal", "create", "--id", "rsh", "--env", "PS1=REMOTE> ", "--env", "HOME=/tmp", "--", "/bin/sh")
	tok := strings.TrimSpace(d.mustCtl("token", "create", "--role", "control", "--channel", "ahp-terminal:/rsh"))
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A control socket that does not exist: attach must not need it.
	cmd := exec.Command(d.ahpctl, "--control", filepath.Join(t.TempDir(), "none.sock"), "attach",
		"--url", "http://"+d.addr, "--token-file", tokFile, "ahp-terminal:/rsh")
	cmd.Env = append(os.Environ(), "AHP_TOKEN=", "AHP_URL=")
	f, screen, done := inPTY(t, cmd)
	pos := screen.waitFor(t, 0, regexp.MustCompile(`REMOTE> `))
	if _, err := f.Write([]byte("echo re''mote-ok\r")); err != nil {
		t.Fatal(err)
	}
	pos = screen.waitFor(t, pos, regexp.MustCompile(`\r\nremote-ok\r\n`))

	var viewers []viewerJSON
	var id string
	deadline := time.Now().Add(20 * time.Second)
	for id == "" {
		if err := json.Unmarshal([]byte(d.mustCtl("viewers", "list", "-o", "json")), &viewers); err != nil {
			t.Fatal(err)
		}
		for _, v := range viewers {
			if v.Client == "ahpctl attach" {
				id = v.ID
			}
		}
		if id == "" && time.Now().After(deadline) {
			t.Fatalf("viewers = %+v, want the remote attach", viewers)
		}
		time.Sleep(50 * time.Millisecond) // polling another process's state
	}
	d.mustCtl("viewers", "kick", id, "--reason", "remote kick")
	kickEnds(t, cmd, done, screen, pos, "remote kick")

	// --url without a token is a usage error naming where a token goes.
	_, stderr, code := d.ctl("attach", "--url", "http://"+d.addr, "ahp-terminal:/rsh")
	if code == 0 || !strings.Contains(stderr, "AHP_TOKEN") {
		t.Fatalf("attach --url without a token: exit %d, stderr %q", code, stderr)
	}
}
