package ctl_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/internal/testbin"
)

// terminalViewer subscribes to uri and follows its screen as text
// (escape sequences removed): the snapshot, then its output.
type terminalViewer struct {
	t    *testing.T
	c    *client.Conn
	s    *client.Sub
	text strings.Builder
}

func viewTerminal(t *testing.T, d *daemonProc, uri string) *terminalViewer {
	t.Helper()
	c := adminDial(t, d)
	s, err := c.Subscribe(ctxT(t), uri, nil)
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	return &terminalViewer{t: t, c: c, s: s}
}

// waitFor reads until the screen's text matches re (30 s at most).
func (v *terminalViewer) waitFor(re *regexp.Regexp) string {
	v.t.Helper()
	ctx := ctxT(v.t)
	for !re.MatchString(escapes.ReplaceAllString(v.text.String(), "")) {
		m, err := v.s.Next(ctx)
		if err != nil {
			v.t.Fatalf("waiting for %v on the screen %q: %v", re, escapes.ReplaceAllString(v.text.String(), ""), err)
		}
		var p struct {
			Data string `json:"data"`
		}
		_ = json.Unmarshal(m.Params, &p)
		switch m.Method {
		case "terminal/reset":
			v.text.Reset()
			v.text.WriteString(p.Data)
		case "terminal/output":
			v.text.WriteString(p.Data)
		}
		if err := v.s.Release(ctx, m); err != nil {
			v.t.Fatal(err)
		}
	}
	return escapes.ReplaceAllString(v.text.String(), "")
}

// typeIn sends keys to the terminal.
func (v *terminalViewer) typeIn(keys string) {
	v.t.Helper()
	msg := client.AppendNotification(nil, "terminal/input", map[string]string{"data": keys})
	if err := v.s.Send(ctxT(v.t), string(msg)); err != nil {
		v.t.Fatal(err)
	}
}

// statusJSON is what ahpctl status -o json says of upgrades.
type statusJSON struct {
	Pid            int        `json:"pid"`
	Started        time.Time  `json:"started"`
	Upgraded       *time.Time `json:"upgraded"`
	Upgrades       int        `json:"upgrades"`
	UpgradeRefused *struct {
		Time          time.Time `json:"time"`
		Reason        string    `json:"reason"`
		AfterHandOver bool      `json:"afterHandOver"`
	} `json:"upgradeRefused"`
}

// TestE2EUpgradeFallsBack: a new binary that passes the first check (the
// versions) but refuses the state itself at the second, after the
// freeze (built with -X main.refuseTerminals=1: it refuses any state
// with a terminal), makes the daemon re-execute itself with its own
// state. ahpctl daemon upgrade says so and exits 1; the daemon keeps its
// pid, its start and its upgrade count; the terminal keeps its process,
// its screen and its job, which still answers; a viewer closed with 1012
// reconnects; the log and ahpctl status say the upgrade was refused and
// why. A proper upgrade afterwards goes through.
func TestE2EUpgradeFallsBack(t *testing.T) {
	d := startDaemon(t)
	pid := d.cmd.Process.Pid
	refusing := filepath.Join(t.TempDir(), "ahpd")
	if err := testbin.BuildFlags(filepath.Dir(refusing), raceEnabled, []string{"-ldflags", "-X main.refuseTerminals=1"}, testbin.Commands[0]); err != nil {
		t.Fatal(err)
	}
	uri := strings.TrimSpace(d.mustCtl("terminal", "create", "--id", "job", "--", "/bin/sh", "-c", "echo MARK-$$; exec cat"))
	var ch struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(d.mustCtl("channels", "get", uri, "-o", "json")), &ch); err != nil || ch.Pid <= 0 {
		t.Fatalf("channels get: %+v, %v", ch, err)
	}
	mark := regexp.MustCompile(`MARK-` + strconv.Itoa(ch.Pid))
	v := viewTerminal(t, d, uri)
	defer v.c.Close()
	v.waitFor(mark)
	// Refused before the hand-over: status says so too.
	if _, errOut, code := d.ctl("daemon", "upgrade", "--binary", filepath.Join(t.TempDir(), "missing")); code != 1 || !strings.Contains(errOut, "the daemon serves on") {
		t.Fatalf("daemon upgrade to a missing binary: exit %d, stderr %q", code, errOut)
	}
	var before statusJSON
	if err := json.Unmarshal([]byte(d.mustCtl("status", "-o", "json")), &before); err != nil {
		t.Fatal(err)
	}
	if r := before.UpgradeRefused; r == nil || r.AfterHandOver || !strings.Contains(r.Reason, "no such file") {
		t.Fatalf("status after a refusal before the hand-over: %+v", r)
	}

	start := time.Now()
	out, errOut, code := d.ctl("daemon", "upgrade", "--binary", refusing)
	t.Logf("daemon upgrade (%v): exit %d, stdout %q, stderr %q", time.Since(start).Round(time.Millisecond), code, out, errOut)
	if code != 1 || !strings.Contains(errOut, "refuses a state with terminals") || !strings.Contains(errOut, "took its channels back") {
		t.Fatalf("daemon upgrade to a binary refusing the state: exit %d, stderr %q; want 1, the reason and that the daemon took its channels back", code, errOut)
	}
	select {
	case <-v.c.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the viewer was not closed by the hand-over")
	}
	if code := websocket.CloseStatus(v.c.Err()); code != websocket.StatusServiceRestart {
		t.Fatalf("viewer closed with %v, want 1012", code)
	}
	if d.cmd.Process.Pid != pid || syscall.Kill(pid, 0) != nil {
		t.Fatalf("the daemon's process %d is gone", pid)
	}
	logs := d.logs()
	if !strings.Contains(logs, "took its channels back") || strings.Contains(logs, `msg="upgraded in place"`) {
		t.Fatalf("the log does not say the upgrade was refused, or says it was done:\n%s", logs)
	}
	var after statusJSON
	if err := json.Unmarshal([]byte(d.mustCtl("status", "-o", "json")), &after); err != nil {
		t.Fatal(err)
	}
	if after.Pid != pid || !after.Started.Equal(before.Started) || after.Upgrades != 0 || after.Upgraded != nil ||
		after.UpgradeRefused == nil || !after.UpgradeRefused.AfterHandOver || !after.UpgradeRefused.Time.After(before.UpgradeRefused.Time) ||
		!strings.Contains(after.UpgradeRefused.Reason, "refuses a state with terminals") {
		t.Fatalf("status after the refusal: %+v (refused %+v); before: %+v", after, after.UpgradeRefused, before)
	}
	if text := d.mustCtl("status"); !regexp.MustCompile(`upgrade refused:\s+\S+ ago \(after the hand-over; channels taken back\): .*refuses a state with terminals`).MatchString(text) {
		t.Fatalf("status does not say the upgrade was refused:\n%s", text)
	}
	// The terminal: the same process, its screen, and its job answers.
	var ch2 struct {
		Pid   int    `json:"pid"`
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(d.mustCtl("channels", "get", uri, "-o", "json")), &ch2); err != nil || ch2.Pid != ch.Pid || ch2.State != "running" {
		t.Fatalf("the terminal after the refusal: %+v, %v; want pid %d running", ch2, err, ch.Pid)
	}
	v2 := viewTerminal(t, d, uri)
	defer v2.c.Close()
	v2.waitFor(mark)
	v2.typeIn("still-there\r")
	v2.waitFor(regexp.MustCompile(`still-there\s+still-there`)) // the echo, then cat's line

	// A binary that takes the state: the upgrade goes through.
	d.upgrade(1)
	var last statusJSON
	if err := json.Unmarshal([]byte(d.mustCtl("status", "-o", "json")), &last); err != nil {
		t.Fatal(err)
	}
	if last.Pid != pid || last.Upgrades != 1 || last.Upgraded == nil {
		t.Fatalf("status after a proper upgrade: %+v", last)
	}
	v3 := viewTerminal(t, d, uri)
	defer v3.c.Close()
	v3.waitFor(regexp.MustCompile(`(?s)MARK-` + strconv.Itoa(ch.Pid) + `.*still-there\s+still-there`))
	if _, err := os.Stat(refusing); err != nil {
		t.Fatal(err)
	}
}
