package ctl_test

import (
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/ctl/client"
)

// attachExit waits for an attach started with inPTY and returns its exit
// status.
func attachExit(t *testing.T, cmd *exec.Cmd, done <-chan error, screen *ptyScreen) int {
	t.Helper()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("attach did not exit; output:\n%q", screen.String())
	}
	return -1
}

// TestE2EAttachExitStatus: attach (by a short name) says where it is and
// how to detach, exits with the program's status (128+N for signal N),
// takes another prefix key, and ends once, saying so, when the channel is
// closed under it.
func TestE2EAttachExitStatus(t *testing.T) {
	d := startDaemon(t)
	for _, id := range []string{"x1", "x2", "x3", "x4"} {
		d.mustCtl("terminal", "create", "--id", id, "--env", "PS1=PROMPT> ", "--env", "HOME=/tmp", "--", "/bin/sh")
	}
	attach := func(args ...string) (*exec.Cmd, func(string), *ptyScreen, <-chan error) {
		cmd := exec.Command(d.ahpctl, append([]string{"--control", d.control, "attach"}, args...)...)
		f, screen, done := inPTY(t, cmd)
		screen.waitFor(t, 0, regexp.MustCompile(`PROMPT> `))
		return cmd, func(s string) {
			if _, err := f.Write([]byte(s)); err != nil {
				t.Fatal(err)
			}
		}, screen, done
	}

	// exit 7 → 7, with the hint first.
	cmd, typ, screen, done := attach("x1")
	typ("exit 7\r")
	if code := attachExit(t, cmd, done, screen); code != 7 {
		t.Fatalf("attach after exit 7: status %d; output:\n%q", code, screen.String())
	}
	screen.waitFor(t, 0, regexp.MustCompile(`exited with status 7`))
	var x1 struct {
		State string `json:"state"`
		Exit  *struct {
			Code int `json:"code"`
		} `json:"exit"`
	}
	if err := json.Unmarshal([]byte(d.mustCtl("channels", "get", "x1", "-o", "json")), &x1); err != nil || x1.State != "exited" || x1.Exit == nil || x1.Exit.Code != 7 {
		t.Fatalf("channels get x1 after exit 7 = %+v, %v", x1, err)
	}
	if out := d.mustCtl("channels", "get", "x1"); !regexp.MustCompile(`(?m)^exit: +status 7$`).MatchString(out) {
		t.Fatalf("channels get x1:\n%s", out)
	}
	// The hint is a line of its own after the snapshot's full reset (RIS,
	// ED3), which would wipe it from the screen and the scrollback, and
	// nothing clears the screen after it.
	out := screen.String()
	reset := strings.Index(out, "\x1bc\x1b[3J")
	hint := strings.Index(out, "\r\nahpctl: attached to ahp-terminal:/x1; detach: Ctrl-] d\r\n")
	if reset < 0 || hint < reset || strings.Count(out, "attached to") != 1 || strings.Contains(out[hint:], "\x1bc") || strings.Contains(out[hint:], "\x1b[2J") || strings.Contains(out[hint:], "\x1b[3J") {
		t.Fatalf("the hint is not on screen after the snapshot; output:\n%q", out)
	}
	screen.waitFor(t, 0, regexp.MustCompile(`exited with status 7`))

	// --detach-keys ctrl-a: Ctrl-A d detaches (status 0); the hint says so.
	cmd, typ, screen, done = attach("--detach-keys", "ctrl-a", "x2")
	screen.waitFor(t, 0, regexp.MustCompile(`detach: Ctrl-A d`)) // printed after the snapshot
	typ("\x01d")
	if code := attachExit(t, cmd, done, screen); code != 0 {
		t.Fatalf("attach after Ctrl-A d: status %d; output:\n%q", code, screen.String())
	}
	screen.waitFor(t, 0, regexp.MustCompile(`\[detached from ahp-terminal:/x2\]`))
	if out := screen.String(); !strings.Contains(out, "detach: Ctrl-A d") || !strings.Contains(out, "[detached from ahp-terminal:/x2]") {
		t.Fatalf("attach --detach-keys ctrl-a output:\n%q", out)
	}

	// Killed by SIGKILL → 137; --quiet drops the hint.
	cmd, typ, screen, done = attach("--quiet", "x3")
	typ("kill -KILL $$\r")
	if code := attachExit(t, cmd, done, screen); code != 128+9 {
		t.Fatalf("attach after SIGKILL: status %d, want 137; output:\n%q", code, screen.String())
	}
	screen.waitFor(t, 0, regexp.MustCompile(`killed by SIGKILL`))
	if strings.Contains(screen.String(), "attached to") {
		t.Fatalf("--quiet printed the hint:\n%q", screen.String())
	}

	// The channel closed under it: exit 1, said once, no reconnecting.
	cmd, _, screen, done = attach("ahp-terminal:/x4")
	d.mustCtl("channels", "close", "x4")
	code := attachExit(t, cmd, done, screen)
	screen.waitFor(t, 0, regexp.MustCompile(`was closed; not reconnecting`))
	out = screen.String()
	if code != 1 || strings.Count(out, "was closed; not reconnecting") != 1 || strings.Contains(out, "reconnecting…") {
		t.Fatalf("attach after channels close: status %d; output:\n%q", code, out)
	}
}

// TestE2EShortNamesAndOutput: bare IDs for URIs (ambiguous: exit 2 with
// the candidates), ls, a global -o, -o yaml and wide, channels get with
// its viewers, limits set's report, open without a URI, token list order.
func TestE2EShortNamesAndOutput(t *testing.T) {
	d := startDaemon(t)
	d.mustCtl("terminal", "create", "--id", "sh1", "--rows", "30", "--cols", "90", "--", "/bin/sh")
	d.mustCtl("terminal", "create", "--id", "dup", "--", "/bin/sh")
	d.mustCtl("telemetry", "create", "--kind", "push", "--id", "dup")

	var ch struct {
		Channel     string `json:"channel"`
		Rows        int    `json:"rows"`
		Cwd         string `json:"cwd"`
		Subscribers []struct {
			Client string `json:"client"`
			Role   string `json:"role"`
		} `json:"subscribers"`
	}
	if err := json.Unmarshal([]byte(d.mustCtl("channels", "get", "sh1", "-o", "json")), &ch); err != nil || ch.Channel != "ahp-terminal:/sh1" || ch.Rows != 30 || !filepath.IsAbs(ch.Cwd) || len(ch.Subscribers) != 0 {
		t.Fatalf("channels get sh1 -o json = %+v, %v", ch, err)
	}
	_, errOut, code := d.ctl("channels", "get", "dup")
	if code != 2 || !strings.Contains(errOut, "ahp-terminal:/dup, ahp-telemetry:/dup") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("ambiguous dup: exit %d, stderr %q", code, errOut)
	}
	cmd := exec.Command(d.ahpctl, "--control", d.control, "attach", "nope")
	_, screen, done := inPTY(t, cmd)
	if code := attachExit(t, cmd, done, screen); code != 1 {
		t.Fatalf("attach nope: exit %d, output %q", code, screen.String())
	}
	screen.waitFor(t, 0, regexp.MustCompile(`no terminal channel has the ID "nope" \(see ahpctl ls --type terminal; a full URI is ahp-terminal:/nope\)`))
	d.mustCtl("terminal", "resize", "sh1", "--rows", "31", "--cols", "91")

	// A viewer shows up in channels get.
	tok := strings.TrimSpace(d.mustCtl("token", "create", "--channel", "sh1", "--role", "view"))
	c, _, err := client.Dial(ctxT(t), "ws://"+d.addr+"/v1/ws", client.Options{Token: tok, ClientName: "get-viewer"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Subscribe(ctxT(t), "ahp-terminal:/sh1", nil); err != nil {
		t.Fatal(err)
	}
	table := d.mustCtl("channels", "get", "sh1")
	if !regexp.MustCompile(`(?m)^size: +91x31`).MatchString(table) || !regexp.MustCompile(`(?m)^command: +/bin/sh\ncwd: +/\S*\ncreated: +\d{4}-`).MatchString(table) || !regexp.MustCompile(`(?m)^c\d+ +get-viewer +view `).MatchString(table) {
		t.Fatalf("channels get sh1:\n%s", table)
	}

	// ls, with -o before or after the command.
	var list []struct {
		Channel string `json:"channel"`
	}
	for _, args := range [][]string{{"-o", "json", "ls"}, {"ls", "-o", "json"}, {"-o", "json", "channels", "list"}, {"--output", "yaml", "ls", "-o", "json"}} {
		if err := json.Unmarshal([]byte(d.mustCtl(args...)), &list); err != nil || len(list) != 3 {
			t.Fatalf("ahpctl %v = %+v, %v", args, list, err)
		}
	}
	if y := d.mustCtl("-o", "yaml", "ls", "--type", "terminal"); !strings.HasPrefix(y, "- channel: ahp-terminal:/sh1\n  id: sh1\n  type: terminal\n") || strings.Contains(y, "telemetry") {
		t.Fatalf("ls -o yaml:\n%s", y)
	}
	if w := d.mustCtl("ls", "-o", "wide"); !regexp.MustCompile(`^CHANNEL +ID +TYPE +STATE +AGE +VIEWERS +SIZE +PID +EXIT +COMMAND/DETAIL +TITLE\n`).MatchString(w) ||
		!strings.Contains(w, "push drop-oldest samples=0") || !regexp.MustCompile(`(?m)^ahp-terminal:/sh1 +sh1 +terminal +running +\d+s +1 +91x31 +\d+ +- +/bin/sh `).MatchString(w) {
		t.Fatalf("ls -o wide:\n%s", w)
	}

	// limits set says what changed, and when nothing did.
	if out := d.mustCtl("limits", "set", "maxOutputStall=2s"); out != "maxOutputStall=2s (was 1m0s)\n" {
		t.Fatalf("limits set printed %q", out)
	}
	if out := d.mustCtl("limits", "set", "maxOutputStall=2s"); !strings.HasPrefix(out, "no change") {
		t.Fatalf("limits set again printed %q", out)
	}

	// status names a link command; open without a URI covers every channel.
	if out := d.mustCtl("status"); !strings.Contains(out, "ahpctl open ahp-terminal:/sh1") {
		t.Fatalf("status:\n%s", out)
	}
	u := strings.TrimSpace(d.mustCtl("open"))
	ticket, ok := strings.CutPrefix(u, "http://"+d.addr+"/#ticket=")
	if !ok || strings.Contains(ticket, "&") {
		t.Fatalf("open printed %q", u)
	}
	c2, _, err := client.Dial(ctxT(t), "ws://"+d.addr+"/v1/ws", client.Options{Token: ticket})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	for _, uri := range []string{"ahp-terminal:/dup", "ahp-telemetry:/dup"} {
		if _, err := c2.Subscribe(ctxT(t), uri, nil); err != nil {
			t.Fatalf("the open ticket does not reach %s: %v", uri, err)
		}
	}
	if u := d.mustCtl("open", "sh1", "--role", "view"); !strings.Contains(u, "&channel=ahp-terminal:/sh1") {
		t.Fatalf("open sh1 printed %q", u)
	}
	// --share: a reusable token, its id on stderr for token revoke.
	out, errOut, code := d.ctl("open", "--share", "--ttl", "2h", "--role", "view", "sh1")
	m := regexp.MustCompile(`revoke it with: ahpctl token revoke (tok-\d+)\n$`).FindStringSubmatch(errOut)
	if code != 0 || !strings.HasPrefix(out, "http://"+d.addr+"/#token=ahp_") || m == nil {
		t.Fatalf("open --share: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	shareTok, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(out), "http://"+d.addr+"/#token="), "&")
	for range 2 { // reusable
		c3, _, err := client.Dial(ctxT(t), "ws://"+d.addr+"/v1/ws", client.Options{Token: shareTok})
		if err != nil {
			t.Fatalf("share link token: %v", err)
		}
		c3.Close()
	}
	d.mustCtl("token", "revoke", m[1])
	// --reusable (the name) is --share.
	if out, _, code := d.ctl("open", "--reusable", "--role", "view", "sh1"); code != 0 || !strings.Contains(out, "#token=ahp_") {
		t.Fatalf("open --reusable: exit %d, %q", code, out)
	}
	if _, _, code := d.ctl("open", "--ttl", "1h", "sh1"); code != 2 {
		t.Fatalf("open --ttl without --share: exit %d, want 2", code)
	}

	// token list: oldest first (tok-2 before tok-10).
	for range 10 {
		d.mustCtl("token", "create")
	}
	var tokens []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(d.mustCtl("token", "list", "-o", "json")), &tokens); err != nil {
		t.Fatal(err)
	}
	d.mustCtl("token", "create", "--channel", "ahp-terminal:/later")
	if table := d.mustCtl("token", "list"); !strings.Contains(table, "ahp-terminal:/later (no such channel)") || strings.Contains(table, "ahp-terminal:/sh1 (no such") {
		t.Fatalf("token list:\n%s", table)
	}
	last := 0
	for _, tk := range tokens {
		n, err := strconv.Atoi(strings.TrimPrefix(tk.ID, "tok-"))
		if err != nil || n < last {
			t.Fatalf("token list order: %+v", tokens)
		}
		last = n
	}

	// A page's reconnect token (from a ticket of a terminal) is listed
	// while its terminal exists and left out once it is gone.
	d.mustCtl("terminal", "create", "--id", "gone", "--", "/bin/sh")
	link := d.mustCtl("open", "gone")
	tm := regexp.MustCompile(`#ticket=([A-Za-z0-9_-]+)`).FindStringSubmatch(link)
	if tm == nil {
		t.Fatalf("open gone: %s", link)
	}
	c4, init, err := client.Dial(ctxT(t), "ws://"+d.addr+"/v1/ws", client.Options{Token: tm[1]})
	if err != nil || init.ReconnectToken == "" {
		t.Fatalf("ticket: %v, reconnect token %q", err, init.ReconnectToken)
	}
	c4.Close()
	count := func() int { return strings.Count(d.mustCtl("token", "list"), "ahp-terminal:/gone") }
	if n := count(); n != 1 {
		t.Fatalf("token list shows %d tokens of ahp-terminal:/gone, want the reconnect token", n)
	}
	d.mustCtl("channels", "close", "gone")
	if n := count(); n != 0 {
		t.Fatalf("token list shows %d tokens of the closed ahp-terminal:/gone, want none:\n%s", n, d.mustCtl("token", "list"))
	}
}
