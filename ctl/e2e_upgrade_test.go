package ctl_test

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/internal/testbin"
)

// upgrades counts the daemon's "upgraded in place" lines.
func (d *daemonProc) upgrades() int {
	return strings.Count(d.logs(), `msg="upgraded in place"`)
}

// upgrade starts the n-th upgrade in place, with `ahpctl daemon upgrade`
// for odd n (which waits for the new binary) and SIGUSR2 for even n, and
// waits for the n-th "upgraded in place".
func (d *daemonProc) upgrade(n int) {
	d.t.Helper()
	if n%2 == 1 {
		out := d.mustCtl("daemon", "upgrade")
		if want := "(pid " + strconv.Itoa(d.cmd.Process.Pid) + ", upgrade " + strconv.Itoa(n) + ","; !strings.Contains(out, want) {
			d.t.Fatalf("daemon upgrade printed %q, want %q in it", out, want)
		}
	} else if err := d.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
		d.t.Fatal(err)
	}
	d.awaitUpgrade(n)
}

// awaitUpgrade waits for the n-th "upgraded in place" (60 s: a hang).
func (d *daemonProc) awaitUpgrade(n int) {
	d.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for d.upgrades() < n {
		select {
		case err := <-d.exited:
			d.t.Fatalf("ahpd exited during upgrade %d: %v", n, err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("upgrade %d not done within 60 s (a hang)", n)
		}
	}
}

// dialLoop connects to addr over network every 2 ms until stop is closed
// (at most 3 minutes) and counts the connections refused and made.
func dialLoop(network, addr string, stop <-chan struct{}) (wait func() (refused, made int)) {
	var wg sync.WaitGroup
	var refused, made int
	wg.Go(func() {
		end := time.Now().Add(3 * time.Minute)
		for time.Now().Before(end) {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			c, err := net.DialTimeout(network, addr, 5*time.Second)
			if err != nil {
				if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
					refused++
				}
				continue
			}
			made++
			c.Close()
		}
	})
	return func() (int, int) { wg.Wait(); return refused, made }
}

var escapes = regexp.MustCompile(`\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78DEHMc]`)

// adminDial connects to the daemon's WebSocket with its admin token.
func adminDial(t *testing.T, d *daemonProc) *client.Conn {
	t.Helper()
	tok, err := os.ReadFile(filepath.Join(filepath.Dir(d.control), "state", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := client.Dial(ctxT(t), "ws://"+d.addr+"/v1/ws", client.Options{Token: strings.TrimSpace(string(tok))})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// screenLines subscribes to uri and returns the lines of its snapshot
// and what follows up to terminal/exit, escape sequences removed.
func screenLines(t *testing.T, d *daemonProc, uri string) []string {
	t.Helper()
	c := adminDial(t, d)
	defer c.Close()
	s, err := c.Subscribe(ctxT(t), uri, nil)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for {
		m, err := s.Next(ctxT(t))
		if err != nil {
			t.Fatalf("reading %s: %v", uri, err)
		}
		var p struct {
			Data string `json:"data"`
		}
		_ = json.Unmarshal(m.Params, &p)
		switch m.Method {
		case "terminal/reset":
			text.Reset()
			text.WriteString(p.Data)
		case "terminal/output":
			text.WriteString(p.Data)
		}
		if err := s.Release(ctxT(t), m); err != nil {
			t.Fatal(err)
		}
		if m.Method == "terminal/exit" {
			break
		}
	}
	var lines []string
	for _, l := range strings.Split(escapes.ReplaceAllString(text.String(), ""), "\n") {
		lines = append(lines, strings.TrimSpace(l))
	}
	return lines
}

// TestE2EUpgradeInPlace: 20 upgrades in place (SIGUSR2) while a terminal
// prints 20,000 numbered lines and clients connect in a loop to the
// HTTP listener and to the control socket: the PID stays, no connect is
// refused, the terminal keeps its URI and its process, every line is in
// its scrollback once and in order, and its exit status arrives.
func TestE2EUpgradeInPlace(t *testing.T) {
	d := startDaemon(t)
	pid := d.cmd.Process.Pid
	var before struct {
		Started  time.Time  `json:"started"`
		Upgraded *time.Time `json:"upgraded"`
		Upgrades int        `json:"upgrades"`
		Pid      int        `json:"pid"`
	}
	if err := json.Unmarshal([]byte(d.mustCtl("status", "-o", "json")), &before); err != nil {
		t.Fatal(err)
	}
	if before.Upgrades != 0 || before.Upgraded != nil || before.Pid != pid {
		t.Fatalf("status before any upgrade: %+v", before)
	}
	const lines, per = 20000, 50
	script := "for k in $(seq 0 " + strconv.Itoa(lines/per-1) + "); do seq -f N%g $((k*" + strconv.Itoa(per) + "+1)) $((k*" + strconv.Itoa(per) + "+" + strconv.Itoa(per) + ")); sleep 0.02; done; exit 3"
	uri := strings.TrimSpace(d.mustCtl("terminal", "create", "--id", "seq", "--scrollback", "30000", "--", "/bin/sh", "-c", script))
	if uri != "ahp-terminal:/seq" {
		t.Fatalf("terminal create printed %q", uri)
	}
	// A viewer connected before the first upgrade is closed with 1012.
	viewer := adminDial(t, d)
	defer viewer.Close()
	stop := make(chan struct{})
	httpDials := dialLoop("tcp", d.addr, stop)
	controlDials := dialLoop("unix", d.control, stop)
	start := time.Now()
	for i := 1; i <= 20; i++ {
		d.upgrade(i)
		if i == 1 {
			select {
			case <-viewer.Done():
			case <-time.After(30 * time.Second):
				t.Fatal("the viewer was not closed by the upgrade")
			}
			if code, reason := websocket.CloseStatus(viewer.Err()), closeReason(viewer.Err()); code != websocket.StatusServiceRestart || reason != "host upgrading" {
				t.Fatalf("viewer closed with %v %q, want 1012 host upgrading", code, reason)
			}
		}
	}
	took := time.Since(start)
	close(stop)
	httpRefused, httpMade := httpDials()
	controlRefused, controlMade := controlDials()
	t.Logf("20 upgrades in %v; HTTP connects %d made, %d refused; control %d made, %d refused", took, httpMade, httpRefused, controlMade, controlRefused)
	if httpRefused != 0 || controlRefused != 0 {
		t.Errorf("connects refused during the upgrades: HTTP %d, control %d", httpRefused, controlRefused)
	}
	if d.cmd.Process.Pid != pid || syscall.Kill(pid, 0) != nil {
		t.Fatalf("the daemon's process %d is gone", pid)
	}
	if strings.Contains(d.logs(), "terminals lost") || strings.Contains(d.logs(), "not handed over") {
		t.Fatal("a terminal was lost")
	}
	after := before
	if err := json.Unmarshal([]byte(d.mustCtl("status", "-o", "json")), &after); err != nil {
		t.Fatal(err)
	}
	if after.Upgrades != 20 || after.Upgraded == nil || after.Upgraded.Before(before.Started) || !after.Started.Equal(before.Started) || after.Pid != pid {
		t.Fatalf("status after 20 upgrades: %+v (before: %+v)", after, before)
	}
	got := screenLines(t, d, uri)
	want := 1
	for _, l := range got {
		if !strings.HasPrefix(l, "N") {
			continue
		}
		if l != "N"+strconv.Itoa(want) {
			t.Fatalf("line %q where N%d was due", l, want)
		}
		want++
	}
	if want != lines+1 {
		t.Fatalf("%d numbered lines, want %d", want-1, lines)
	}
	var ch struct {
		State string `json:"state"`
		Exit  *struct {
			Code *int `json:"code"`
		} `json:"exit"`
	}
	if err := json.Unmarshal([]byte(d.mustCtl("channels", "get", uri, "-o", "json")), &ch); err != nil {
		t.Fatal(err)
	}
	if ch.State != "exited" || ch.Exit == nil || ch.Exit.Code == nil || *ch.Exit.Code != 3 {
		t.Fatalf("channel after its exit: %+v, want exited with code 3", ch)
	}
}

// TestE2EUpgradeRefused: a binary that fails the check — not
// executable, a program that is not ahpd, one that writes a state
// version this ahpd does not read — is refused with the reason in the
// log, and the daemon goes on serving its terminal as if nothing
// happened.
func TestE2EUpgradeRefused(t *testing.T) {
	ahpd, _ := binaries(t)
	dir := t.TempDir()
	exe := filepath.Join(dir, "bin", "ahpd")
	if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(ahpd)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	d := startDaemonExe(t, exe, dir, nil, nil)
	uri := strings.TrimSpace(d.mustCtl("terminal", "create", "--id", "sh", "--", "/bin/sh", "-c", "echo READY; exec cat"))
	refused := func(want string) {
		t.Helper()
		before := strings.Count(d.logs(), "upgrade refused")
		if err := d.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(60 * time.Second)
		for strings.Count(d.logs(), "upgrade refused") == before {
			if time.Now().After(deadline) {
				t.Fatalf("no refusal within 60 s (%s)", want)
			}
			time.Sleep(10 * time.Millisecond)
		}
		logs := d.logs()
		last := logs[strings.LastIndex(logs, "upgrade refused"):]
		if !strings.Contains(last, want) {
			t.Fatalf("refusal %q, want it to say %q", strings.SplitN(last, "\n", 2)[0], want)
		}
		var ch channelJSON
		if err := json.Unmarshal([]byte(d.mustCtl("channels", "get", uri, "-o", "json")), &ch); err != nil || ch.State != "running" {
			t.Fatalf("after the refusal: %+v, %v", ch, err)
		}
		if d.upgrades() != 0 {
			t.Fatal("upgraded anyway")
		}
	}
	// Not executable.
	if err := os.Chmod(exe, 0o644); err != nil {
		t.Fatal(err)
	}
	refused("not executable")
	// Not ahpd: a program that fails the check.
	if err := os.Remove(exe); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, []byte("#!/bin/sh\necho 'not an ahpd' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	refused("not an ahpd")
	// Missing.
	if err := os.Remove(exe); err != nil {
		t.Fatal(err)
	}
	refused("no such file")
	// Named to ahpctl: refused the same way, exit status 1.
	_, errOut, code := d.ctl("daemon", "upgrade", "--binary", filepath.Join(dir, "nowhere", "ahpd"))
	if code != 1 || !strings.Contains(errOut, "no such file") || !strings.Contains(errOut, "the daemon serves on") {
		t.Fatalf("daemon upgrade --binary of a missing file: exit %d, stderr %q", code, errOut)
	}
	// An ahpd of another state version.
	if err := testbin.BuildFlags(filepath.Dir(exe), raceEnabled, []string{"-ldflags", "-X main.stateVersionOverride=2"}, testbin.Commands[0]); err != nil {
		t.Fatal(err)
	}
	refused("daemon state version 1, this ahpd reads version 2")
	// The daemon serves on: the terminal takes input and answers.
	if out := d.mustCtl("channels", "list"); !strings.Contains(out, uri) {
		t.Fatalf("channels list after the refusals:\n%s", out)
	}
}

// closeReason is the reason of a WebSocket close error, or "".
func closeReason(err error) string {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return ""
}

// openFDs counts the descriptors process pid has open.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestE2EUpgradeDescriptors: after 50 upgrades the daemon holds as many
// descriptors as after the first (nothing handed over leaks), and a shell
// started after them inherits none of the daemon's (close-on-exec holds
// across the execve).
func TestE2EUpgradeDescriptors(t *testing.T) {
	echo := newTCPServer(t, echoServe)
	d := startTCPDaemon(t, echo.addr())
	pid := d.cmd.Process.Pid
	d.mustCtl("terminal", "create", "--id", "kept", "--", "/bin/sh", "-c", "exec cat")
	// A TCP channel's socket crosses every upgrade too.
	d.mustCtl("tcp", "create", "--id", "kept", echo.addr())
	// Limits set at run time, for the daemon and for the terminal, are
	// kept too.
	d.mustCtl("limits", "set", "maxSubscriptions=7")
	d.mustCtl("limits", "set", "--channel", "ahp-terminal:/kept", "clientReceiveDefaults.windowBytes=131072")
	d.upgrade(1)
	// Let the first binary's goroutines settle (the control socket's
	// connections of the ahpctl above end) before counting.
	time.Sleep(200 * time.Millisecond)
	first := openFDs(t, pid)
	for i := 2; i <= 50; i++ {
		if err := d.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
			t.Fatal(err)
		}
		d.awaitUpgrade(i)
	}
	// A connection of the last ahpctl or upgrade may still be closing:
	// what counts is that the descriptors come back to the first count.
	for deadline := time.Now().Add(15 * time.Second); openFDs(t, pid) > first; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon holds %d descriptors after 50 upgrades, %d after the first", openFDs(t, pid), first)
		}
	}
	d.mustCtl("terminal", "create", "--id", "fds", "--", "/bin/sh", "-c", "exec cat")
	var fds struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(d.mustCtl("channels", "get", "ahp-terminal:/fds", "-o", "json")), &fds); err != nil || fds.Pid <= 0 {
		t.Fatalf("channels get: pid %d, %v", fds.Pid, err)
	}
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(fds.Pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != "0 1 2" {
		t.Fatalf("a program started after 50 upgrades has descriptors %v, want 0 1 2", got)
	}
	var ch channelJSON
	if err := json.Unmarshal([]byte(d.mustCtl("channels", "get", "ahp-terminal:/kept", "-o", "json")), &ch); err != nil || ch.State != "running" {
		t.Fatalf("the terminal after 50 upgrades: %+v, %v", ch, err)
	}
	if err := json.Unmarshal([]byte(d.mustCtl("channels", "get", "ahp-tcp:/kept", "-o", "json")), &ch); err != nil || ch.State != "running" {
		t.Fatalf("the TCP channel after 50 upgrades: %+v, %v", ch, err)
	}
	var lim struct {
		Effective map[string]any `json:"effective"`
	}
	if err := json.Unmarshal([]byte(d.mustCtl("limits", "get", "-o", "json")), &lim); err != nil || lim.Effective["maxSubscriptions"] != float64(7) {
		t.Fatalf("daemon limits after 50 upgrades: maxSubscriptions %v, %v; want 7", lim.Effective["maxSubscriptions"], err)
	}
	if out := d.mustCtl("limits", "get", "--channel", "ahp-terminal:/kept"); !regexp.MustCompile(`clientReceiveDefaults\.windowBytes\s+128KiB \(channel\)`).MatchString(out) {
		t.Fatalf("the terminal's own limit after 50 upgrades:\n%s", out)
	}
}

// push sends lines to a push telemetry channel with ahpctl telemetry push.
func (d *daemonProc) push(uri, lines string) {
	d.t.Helper()
	cmd := exec.Command(d.ahpctl, "--control", d.control, "telemetry", "push", uri)
	cmd.Stdin = strings.NewReader(lines)
	if out, err := cmd.CombinedOutput(); err != nil {
		d.t.Fatalf("telemetry push: %v\n%s", err, out)
	}
}

// telemetrySeqs subscribes to uri and returns the seqs and values of the
// replay (the telemetry/samples before channel/ready).
func telemetrySeqs(t *testing.T, d *daemonProc, uri string) (seqs []uint64, values []float64) {
	t.Helper()
	c := adminDial(t, d)
	defer c.Close()
	s, err := c.Subscribe(ctxT(t), uri, nil)
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := s.Next(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if m.Method == "channel/ready" {
			return seqs, values
		}
		var p struct {
			Seq     uint64 `json:"seq"`
			Samples []struct {
				Value float64 `json:"value"`
			} `json:"samples"`
		}
		if m.Method != "telemetry/samples" || json.Unmarshal(m.Params, &p) != nil {
			t.Fatalf("replay: %s %s", m.Method, m.Params)
		}
		seqs = append(seqs, p.Seq)
		for _, x := range p.Samples {
			values = append(values, x.Value)
		}
		if err := s.Release(ctxT(t), m); err != nil {
			t.Fatal(err)
		}
	}
}

// TestE2EUpgradeTelemetry: a telemetry channel keeps its URI, its history
// and its seq across upgrades in place: a viewer's replay afterwards has
// every sample pushed before, and the next batch continues the seq.
func TestE2EUpgradeTelemetry(t *testing.T) {
	d := startDaemon(t)
	uri := strings.TrimSpace(d.mustCtl("telemetry", "create", "--kind", "push", "--id", "m", "--history", "10m"))
	d.push(uri, "n 1\nn 2\n")
	d.push(uri, "n 3\n")
	seqs, values := telemetrySeqs(t, d, uri)
	if len(values) != 3 {
		t.Fatalf("before: replay of values %v, seqs %v", values, seqs)
	}
	for i := 1; i <= 3; i++ {
		d.upgrade(i)
	}
	d.push(uri, "n 4\n")
	after, got := telemetrySeqs(t, d, uri)
	if !slices.Equal(got, []float64{1, 2, 3, 4}) {
		t.Fatalf("after 3 upgrades: replay of values %v, want 1 2 3 4", got)
	}
	if !slices.Equal(after[:len(seqs)], seqs) || after[len(after)-1] != seqs[len(seqs)-1]+1 {
		t.Fatalf("seqs %v before, %v after: want the same, then the next", seqs, after)
	}
}

// TestE2EUpgradeKeepsTCPRules: a TCP rule allowed at run time, which
// --config none keeps nowhere but in the daemon, is still in force after
// an upgrade in place.
func TestE2EUpgradeKeepsTCPRules(t *testing.T) {
	d := startDaemonWith(t, []string{"--config", "none"}, nil)
	d.mustCtl("tcp", "allow", "127.0.0.1:1234")
	d.upgrade(1)
	if out := d.mustCtl("tcp", "list"); !strings.Contains(out, "127.0.0.1:1234") {
		t.Fatalf("tcp list after the upgrade:\n%s", out)
	}
}
