package ctl_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/ahp-dev/ahpd/ctl/client"
)

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// castOutput is the output a .cast holds: its "o" events' text, in order
// (what asciinema cat prints).
func castOutput(t *testing.T, cast []byte) string {
	t.Helper()
	var out strings.Builder
	lines := strings.Split(strings.TrimSuffix(string(cast), "\n"), "\n")
	for _, l := range lines[1:] {
		var ev []any
		if err := json.Unmarshal([]byte(l), &ev); err != nil || len(ev) != 3 {
			t.Fatalf("event line %q: %v", l, err)
		}
		if ev[1] == "o" {
			out.WriteString(ev[2].(string))
		}
	}
	return out.String()
}

// asciinemaCat runs `asciinema cat FILE`, which opens /dev/tty: in a
// session of its own whose controlling terminal is a fresh PTY, with its
// standard output a pipe, so that what it prints arrives unchanged.
func asciinemaCat(t *testing.T, file string) []byte {
	t.Helper()
	bin, err := exec.LookPath("asciinema")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("asciinema is not installed (.ci/run installs it)")
		}
		t.Skip("asciinema is not installed (apt-get install asciinema): the replay in the real asciinema CLI is not checked")
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	cmd := exec.Command(bin, "cat", file)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Run(); err != nil {
		t.Fatalf("asciinema cat: %v: %s", err, stderr.String())
	}
	return stdout.Bytes()
}

// TestE2ERecordings: a terminal created with --record runs a real shell;
// a control token types a command; the recording is listed, exported byte
// for byte, printed by ahpctl recordings cat and by the real asciinema
// cat, both reproducing the recorded output exactly, and its index holds
// the viewer's audit (token id, never the secret); ahpctl events shows
// the recording and the viewer's first keystroke.
func TestE2ERecordings(t *testing.T) {
	d := startDaemon(t)
	if out := d.mustCtl("terminal", "create", "--id", "rec", "--record", "--", "/bin/sh"); out != "ahp-terminal:/rec\n" {
		t.Fatalf("terminal create printed %q", out)
	}
	secret := strings.TrimSpace(d.mustCtl("token", "create", "--channel", "ahp-terminal:/rec", "--role", "control", "--ttl", "1m"))
	var tokens []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(d.mustCtl("token", "list", "-o", "json")), &tokens); err != nil || len(tokens) != 1 {
		t.Fatalf("token list: %v, %v", tokens, err)
	}
	ctx := ctxT(t)
	c, _, err := client.Dial(ctx, "ws://"+d.addr+"/v1/ws", client.Options{Token: secret})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sub, err := c.Subscribe(ctx, "ahp-terminal:/rec", nil)
	if err != nil {
		t.Fatal(err)
	}
	input := string(client.AppendNotification(nil, "terminal/input", map[string]string{"data": "printf 'h\\303\\251llo %s\\n' world; echo done-$((6*7))\r"}))
	if err := sub.Send(ctx, input); err != nil {
		t.Fatal(err)
	}
	var live strings.Builder
	ready := false
	for !strings.Contains(live.String(), "done-42") {
		m, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for the command's output: %v (got %q)", err, live.String())
		}
		switch m.Method {
		case "channel/ready":
			ready = true
		case "terminal/output":
			var p struct {
				Data string `json:"data"`
			}
			if err := json.Unmarshal(m.Params, &p); err != nil {
				t.Fatal(err)
			}
			if ready {
				live.WriteString(p.Data)
			}
		}
		if err := sub.Release(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := sub.Unsubscribe(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if out := d.mustCtl("terminal", "record", "rec", "off"); out != "not recording ahp-terminal:/rec\n" {
		t.Fatalf("terminal record off printed %q", out)
	}

	var recs []struct {
		ID      string `json:"id"`
		Channel string `json:"channel"`
		Live    bool   `json:"live"`
		Path    string `json:"path"`
		Input   bool   `json:"input"`
	}
	if err := json.Unmarshal([]byte(d.mustCtl("recordings", "list", "rec", "-o", "json")), &recs); err != nil || len(recs) != 1 {
		t.Fatalf("recordings list: %+v, %v", recs, err)
	}
	r := recs[0]
	if r.Channel != "ahp-terminal:/rec" || r.Live || r.Input || !strings.HasPrefix(r.ID, "rec-") {
		t.Fatalf("recording %+v: want rec-…, ended, output only", r)
	}
	if table := d.mustCtl("recordings", "list"); !strings.Contains(table, r.ID) || !strings.HasPrefix(table, "ID ") {
		t.Fatalf("recordings list table:\n%s", table)
	}
	onDisk, err := os.ReadFile(r.Path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(r.Path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: mode %v, want 0600", r.Path, fi.Mode().Perm())
	}
	export := filepath.Join(t.TempDir(), "session.cast")
	d.mustCtl("recordings", "export", r.ID, "-o", export)
	exported, err := os.ReadFile(export)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(exported, onDisk) {
		t.Fatalf("export: %d bytes, the file %d: not the same bytes", len(exported), len(onDisk))
	}
	if out := d.mustCtl("recordings", "export", r.ID); out != string(onDisk) {
		t.Fatal("export to standard output: not the file's bytes")
	}
	want := castOutput(t, onDisk)
	if !strings.Contains(want, "héllo world\r\n") || !strings.Contains(want, live.String()) {
		t.Fatalf("recorded output %q lacks the live output %q", want, live.String())
	}
	if got := d.mustCtl("recordings", "cat", r.ID); got != want {
		t.Fatalf("recordings cat ID = %q, want %q", got, want)
	}
	if got := d.mustCtl("recordings", "cat", export); got != want {
		t.Fatalf("recordings cat FILE = %q, want %q", got, want)
	}
	if got := d.mustCtl("recordings", "cat", "--speed", "1000", "--idle-limit", "1ms", r.ID); got != want {
		t.Fatalf("recordings cat --speed = %q, want %q", got, want)
	}
	if got := asciinemaCat(t, export); string(got) != want {
		t.Fatalf("asciinema cat = %q, want %q", got, want)
	}

	// The audit: the viewer attached, typed and left, named by its token's
	// id; the secret is in neither file.
	index, err := os.ReadFile(strings.TrimSuffix(r.Path, ".cast") + ".index.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	for _, l := range strings.Split(strings.TrimSpace(string(index)), "\n") {
		var a struct {
			Type, Event, Token, Role, Remote, Detail string
		}
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatalf("index line %q: %v", l, err)
		}
		if a.Type != "audit" || a.Event == "record-on" || a.Event == "record-off" {
			continue
		}
		if a.Token != tokens[0].ID || a.Role != "control" || !strings.HasPrefix(a.Remote, "127.0.0.1:") {
			t.Errorf("audit %+v: want token %s, role control, a loopback address", a, tokens[0].ID)
		}
		events = append(events, a.Event+":"+a.Detail)
	}
	typed := len("printf 'h\\303\\251llo %s\\n' world; echo done-$((6*7))\r")
	if len(events) != 3 || events[0] != "attach:" || events[1] != "input:" || events[2] != "detach:"+itoa(typed)+" bytes of input" {
		t.Fatalf("audit events %q, want attach, input, detach with the input's size", events)
	}
	if bytes.Contains(index, []byte(secret)) || bytes.Contains(onDisk, []byte(secret)) {
		t.Fatal("the token's secret is in the recording")
	}

	// The events, from the daemon's first on (seq 1 is channel.created).
	out := d.mustCtl("events", "-o", "json", "--after", "1", "--count", "3",
		"--kind", "recording.started", "--kind", "viewer.input", "--kind", "recording.stopped")
	var kinds []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var e struct{ Kind, Channel, Detail string }
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("events line %q: %v", l, err)
		}
		if e.Channel != "ahp-terminal:/rec" || !strings.Contains(e.Detail, r.ID) {
			t.Errorf("event %+v: want the channel and the recording %s", e, r.ID)
		}
		if e.Kind == "viewer.input" && (!strings.Contains(e.Detail, tokens[0].ID) || strings.Contains(e.Detail, secret)) {
			t.Errorf("viewer.input %q: want the token's id, never its secret", e.Detail)
		}
		kinds = append(kinds, e.Kind)
	}
	if strings.Join(kinds, ",") != "recording.started,viewer.input,recording.stopped" {
		t.Fatalf("events %v", kinds)
	}

	// Errors: exit 1 for what the daemon refuses, 2 for bad usage.
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"recordings", "cat", "rec-20991231T000000Z"}, 1, "recording not found"},
		{[]string{"recordings", "cat", "./no/such.cast"}, 2, "no such file"},
		{[]string{"recordings", "export", r.ID, "-o", export}, 2, "exists"},
		{[]string{"recordings", "cat", "--speed", "-1", r.ID}, 2, "--speed"},
		{[]string{"terminal", "record", "rec", "maybe"}, 2, "want on or off"},
		{[]string{"terminal", "record", "nope", "on"}, 1, "nope"},
		{[]string{"terminal", "create", "--record=input"}, 2, "--record=output+input"},
	} {
		_, errOut, code := d.ctl(tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("ahpctl %v: exit %d, %q; want %d with %q", tc.args, code, errOut, tc.code, tc.msg)
		}
	}
}

// TestE2ERecordingAcrossUpgrade: a recorded terminal handed over at an
// upgrade in place is recorded on by the new binary, in a new file that
// continues the terminal's recording; the old file ends with its marker.
func TestE2ERecordingAcrossUpgrade(t *testing.T) {
	d := startDaemon(t)
	d.mustCtl("terminal", "create", "--id", "up", "--record", "--", "/bin/sh", "-c", "echo before-upgrade; read x; echo after-$x; read y")
	type rec struct {
		ID    string `json:"id"`
		Live  bool   `json:"live"`
		Path  string `json:"path"`
		Input bool   `json:"input"`
	}
	list := func() []rec {
		var recs []rec
		if err := json.Unmarshal([]byte(d.mustCtl("recordings", "list", "up", "-o", "json")), &recs); err != nil {
			t.Fatal(err)
		}
		return recs
	}
	waitOutput := func(id, want string) {
		t.Helper()
		for range 500 {
			if strings.Contains(d.mustCtl("recordings", "cat", id), want) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("recording %s never held %q", id, want)
	}
	first := list()
	if len(first) != 1 || !first[0].Live {
		t.Fatalf("before the upgrade: %+v", first)
	}
	waitOutput(first[0].ID, "before-upgrade")
	d.upgrade(1)
	recs := list()
	if len(recs) != 2 || !recs[0].Live || recs[1].ID != first[0].ID || recs[1].Live {
		t.Fatalf("after the upgrade: %+v, want a new live file and the old one ended", recs)
	}
	old, err := os.ReadFile(recs[1].Path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(old, []byte(`"recording stopped: `)) {
		t.Fatalf("the old file does not end with its marker: %q", old[max(0, len(old)-200):])
	}
	c := adminDial(t, d)
	defer c.Close()
	sub, err := c.Subscribe(ctxT(t), "ahp-terminal:/up", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Send(ctxT(t), string(client.AppendNotification(nil, "terminal/input", map[string]string{"data": "zz\r"}))); err != nil {
		t.Fatal(err)
	}
	waitOutput(recs[0].ID, "after-zz")
	var ch struct {
		Recording struct{ Mode, ID string } `json:"recording"`
	}
	if err := json.Unmarshal([]byte(d.mustCtl("channels", "get", "up", "-o", "json")), &ch); err != nil || ch.Recording.Mode != "output" || ch.Recording.ID != recs[0].ID {
		t.Fatalf("channels get: recording %+v, %v; want output to %s", ch.Recording, err, recs[0].ID)
	}
}
