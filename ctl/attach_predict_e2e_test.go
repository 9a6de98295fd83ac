package ctl_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/internal/linkemu"
	"github.com/ahp-dev/ahpd/pty"
)

// tmuxPane is one tmux server of its own (its socket in a temporary
// directory) with one pane of a fixed size running a command.
type tmuxPane struct {
	t    *testing.T
	tmux string
	sock string
	env  []string
}

func startTmux(t *testing.T, cols, rows int, command string) *tmuxPane {
	t.Helper()
	bin, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux is not installed")
	}
	dir := t.TempDir()
	p := &tmuxPane{t: t, tmux: bin, sock: filepath.Join(dir, "tmux.sock")}
	p.env = append(os.Environ(), "TMUX=", "TMUX_TMPDIR="+dir, "HOME="+dir, "TERM=xterm-256color")
	p.run("-f", "/dev/null", "new-session", "-d", "-s", "p", "-x", strconv.Itoa(cols), "-y", strconv.Itoa(rows), command)
	t.Cleanup(func() {
		cmd := exec.Command(p.tmux, "-S", p.sock, "kill-server")
		cmd.Env = p.env
		_ = cmd.Run()
	})
	return p
}

func (p *tmuxPane) run(args ...string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.tmux, append([]string{"-S", p.sock}, args...)...)
	cmd.Env = p.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %q: %v\n%s", args, err, out)
	}
	return string(out)
}

// keys types s literally.
func (p *tmuxPane) keys(s string) { p.run("send-keys", "-t", "p", "-l", s) }

// enter presses Enter.
func (p *tmuxPane) enter() { p.run("send-keys", "-t", "p", "Enter") }

// rows returns the pane's lines, trailing blank lines removed.
func (p *tmuxPane) rows() []string {
	return trimRows(strings.Split(p.run("capture-pane", "-p", "-t", "p"), "\n"))
}

// styled returns the pane's lines with their SGR sequences.
func (p *tmuxPane) styled() string { return p.run("capture-pane", "-p", "-e", "-t", "p") }

func (p *tmuxPane) cursor() (x, y int) {
	f := strings.Split(strings.TrimSpace(p.run("display-message", "-p", "-t", "p", "#{cursor_x} #{cursor_y}")), " ")
	x, _ = strconv.Atoi(f[0])
	y, _ = strconv.Atoi(f[len(f)-1])
	return x, y
}

// waitRows waits (at most 20s) until a line of the pane matches re.
func (p *tmuxPane) waitRows(re *regexp.Regexp) []string {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rows := p.rows()
		if slices.ContainsFunc(rows, re.MatchString) {
			return rows
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no line of the pane matches %v within 20s:\n%s", re, strings.Join(rows, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func trimRows(rows []string) []string {
	for i := range rows {
		rows[i] = strings.TrimRight(rows[i], " ")
	}
	for len(rows) > 0 && rows[len(rows)-1] == "" {
		rows = rows[:len(rows)-1]
	}
	return rows
}

// underlined reports whether styled pane text turns underline on (SGR 4
// or 4:n with n > 0).
func underlined(styled string) bool {
	for _, m := range regexp.MustCompile(`\x1b\[([0-9;:]*)m`).FindAllStringSubmatch(styled, -1) {
		for _, p := range strings.Split(m[1], ";") {
			if p == "4" || strings.HasPrefix(p, "4:") && p != "4:0" {
				return true
			}
		}
	}
	return false
}

// hostScreen subscribes to uri straight at the daemon (not through the
// link) and returns its snapshot, applied to a fresh emulator: the host's
// real screen.
func hostScreen(t *testing.T, d *daemonProc, token, uri string) *pty.Screen {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _, err := client.Dial(ctx, "ws://"+d.addr+"/v1/ws", client.Options{Token: token, ClientName: "predict-check"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sub, err := c.Subscribe(ctx, uri, nil)
	if err != nil {
		t.Fatal(err)
	}
	var scr *pty.Screen
	var buf []byte
	for {
		m, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		switch m.Method {
		case "terminal/reset":
			var p struct{ Rows, Cols int }
			if err := json.Unmarshal(m.Params, &p); err != nil {
				t.Fatal(err)
			}
			scr = pty.NewScreen(p.Rows, p.Cols)
		case "terminal/output":
			if buf, err = m.AppendTerminalData(buf[:0]); err != nil {
				t.Fatal(err)
			}
			scr.Write(string(buf))
		case "channel/ready":
			return scr
		}
	}
}

func screenRows(s *pty.Screen) []string {
	rows, cols := s.Size()
	out := make([]string, rows)
	for y := range rows {
		var b strings.Builder
		for x := range cols {
			if s.Wide(x, y) && s.Text(x, y) == "" {
				continue
			}
			b.WriteString(cmpOr(s.Text(x, y), " "))
		}
		out[y] = b.String()
	}
	return trimRows(out)
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// settled waits until the pane shows exactly the host's screen (a fresh
// snapshot) with no underline and the cursor where the host has it, and
// still does a moment later; it fails after 20s.
func settled(t *testing.T, p *tmuxPane, d *daemonProc, token, uri, when string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	matches := 0
	for {
		host := hostScreen(t, d, token, uri)
		want := screenRows(host)
		got := p.rows()
		styled := p.styled()
		hx, hy, _ := host.Cursor()
		x, y := p.cursor()
		if slices.Equal(got, want) && !underlined(styled) && x == hx && y == hy {
			if matches++; matches == 2 {
				return
			}
			time.Sleep(300 * time.Millisecond)
			continue
		}
		matches = 0
		if time.Now().After(deadline) {
			t.Fatalf("%s: the pane does not settle to the host's screen within 20s\npane (cursor %d,%d; underline %v):\n%s\nhost (cursor %d,%d):\n%s\nstyled pane:\n%q",
				when, x, y, underlined(styled), strings.Join(got, "\n"), hx, hy, strings.Join(want, "\n"), styled)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestE2EAttachPredict: ahpctl attach --predict always in a tmux pane,
// through an emulated link with a 200 ms round trip to ahpd. A key typed
// at a shell prompt shows (underlined) long before its echo; at a
// read -s prompt, after a key whose echo differs from it (repaired) and
// in vim's insert mode nothing wrong is left once the output settles: the
// pane equals a fresh snapshot of the host's screen cell by cell, with no
// underline, and the cursor is where the host has it.
// predictSetup starts ahpd with a bash terminal "pr", an emulated link
// with round trip rtt to it, and ahpctl attach --predict mode through
// the link in a tmux pane of its own; it returns once the pane shows the
// prompt and the host's screen. dir is a temporary directory.
func predictSetup(t *testing.T, mode string, rtt time.Duration) (p *tmuxPane, d *daemonProc, tok, dir string) {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed (read -s)")
	}
	d = startDaemon(t)
	d.mustCtl("terminal", "create", "--id", "pr", "--env", "PS1=$ ", "--env", "TERM=xterm-256color", "--", bash, "--norc", "--noprofile")
	dir = t.TempDir()
	tok = strings.TrimSpace(d.mustCtl("token", "create", "--channel", "pr", "--role", "control"))
	tokFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokFile, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	half := linkemu.Params{Delay: rtt / 2}
	link, err := linkemu.Start(d.addr, half, half)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { link.Close() })
	attach := strings.Join([]string{"env", "AHP_TOKEN=", "AHP_URL=", d.ahpctl, "--control", filepath.Join(dir, "none.sock"),
		"attach", "--quiet", "--predict", mode, "--url", "http://" + link.Addr(), "--token-file", tokFile, "pr"}, " ")
	p = startTmux(t, 100, 30, attach+" 2>"+filepath.Join(dir, "attach.err")+"; echo \"[attach exit $?]\"; sleep 600")
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(dir, "attach.err")); err == nil && len(b) > 0 {
			t.Logf("attach's stderr: %q", b)
		}
	})
	p.waitRows(regexp.MustCompile(`^\$ ?$`))
	settled(t, p, d, tok, "ahp-terminal:/pr", "after attaching")
	return p, d, tok, dir
}

// typeAndTime types k after typed (the line so far, after the prompt)
// and returns how long the pane took to show it and to show it without
// underline (the echo). glyph is 0 when the echo came first.
func typeAndTime(t *testing.T, p *tmuxPane, typed, k string) (glyph, echo time.Duration) {
	t.Helper()
	return typeAndTimeLine(t, p, "$ "+typed, k, "$ "+typed+k)
}

// typeAndTimeLine types k at the end of line and returns how long the
// pane took to show line+k underlined (0: not seen) and to show echoed
// without underline.
func typeAndTimeLine(t *testing.T, p *tmuxPane, line, k, echoed string) (glyph, echo time.Duration) {
	t.Helper()
	predicted := regexp.MustCompile(`^` + regexp.QuoteMeta(line+k) + `$`)
	done := regexp.MustCompile(`^` + regexp.QuoteMeta(echoed) + `$`)
	start := time.Now()
	p.keys(k)
	for deadline := start.Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		rows := p.rows()
		at := time.Since(start)
		if slices.ContainsFunc(rows, done.MatchString) && !underlined(p.styled()) {
			return glyph, at
		}
		if glyph == 0 && slices.ContainsFunc(rows, predicted.MatchString) && underlined(p.styled()) {
			glyph = at
		}
	}
	t.Fatalf("%q never showed without underline", echoed)
	return 0, 0
}

// TestE2EAttachPredictAuto: with the default --predict auto through a
// 200 ms round trip, attach measures it with ping and predicts.
func TestE2EAttachPredictAuto(t *testing.T) {
	const rtt = 200 * time.Millisecond
	p, _, _, _ := predictSetup(t, "auto", rtt)
	typed := ""
	var glyphs []time.Duration
	for _, k := range "echo" {
		g, _ := typeAndTime(t, p, typed, string(k))
		typed += string(k)
		if g > 0 {
			glyphs = append(glyphs, g)
		}
	}
	if len(glyphs) == 0 || slices.Min(glyphs) >= rtt {
		t.Fatalf("auto at a %v round trip: no key showed before its echo (%v)", rtt, glyphs)
	}
	t.Logf("auto at a %v round trip: key to glyph %v", rtt, glyphs)
}

func TestE2EAttachPredict(t *testing.T) {
	const rtt = 200 * time.Millisecond
	p, d, tok, dir := predictSetup(t, "always", rtt)
	const uri = "ahp-terminal:/pr"

	// A key at a shell prompt, once prediction has been confirmed (the
	// first key after a snapshot is tentative).
	p.keys("e")
	p.waitRows(regexp.MustCompile(`^\$ e$`))
	settled(t, p, d, tok, uri, "after the first key")
	var glyph, echo []time.Duration
	typed := "e"
	for _, k := range "cho" {
		g, e := typeAndTime(t, p, typed, string(k))
		typed += string(k)
		if g == 0 {
			g = e // the echo came first (a slow capture under load)
		}
		glyph, echo = append(glyph, g), append(echo, e)
		settled(t, p, d, tok, uri, "after key "+string(k))
	}
	t.Logf("through a %v round trip: key to glyph %v, key to echo (underline gone) %v", rtt, glyph, echo)
	if slices.Min(glyph) >= rtt {
		t.Errorf("no key showed before the echo could come back: key to glyph %v, round trip %v", glyph, rtt)
	}
	// The arrows move the cursor over the text (bash echoes a backspace
	// and the character passed over); backspaces at the end delete.
	x0, _ := p.cursor()
	start := time.Now()
	p.run("send-keys", "-t", "p", "Left")
	for deadline := start.Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if x, _ := p.cursor(); x == x0-1 {
			t.Logf("left arrow: the cursor moved after %v", time.Since(start))
			break
		}
	}
	for _, k := range []string{"Left", "Right"} {
		p.run("send-keys", "-t", "p", k)
	}
	settled(t, p, d, tok, uri, "after left, left, right")
	p.run("send-keys", "-t", "p", "Right")
	p.keys("\b\b\b\b")
	settled(t, p, d, tok, uri, "after backspaces")

	// read -s: nothing is echoed; nothing of the secret shows, and the
	// screen settles to the host's.
	p.keys("read -s -p 'Password: ' pw; echo \"[${#pw}]\"")
	p.enter()
	p.waitRows(regexp.MustCompile(`^Password:$`))
	for _, k := range "hunter2" {
		p.keys(string(k))
		if rows := p.rows(); slices.ContainsFunc(rows, func(r string) bool { return strings.Contains(r, "Password: h") }) {
			t.Fatalf("the secret shows at the password prompt:\n%s", strings.Join(rows, "\n"))
		}
		time.Sleep(30 * time.Millisecond)
	}
	settled(t, p, d, tok, uri, "at the password prompt")
	p.enter()
	p.waitRows(regexp.MustCompile(`^Password: \[7\]$`))
	settled(t, p, d, tok, uri, "after the password")

	// A program whose echo differs from the key (digits come back as #):
	// the shown prediction is contradicted and repaired, and what follows
	// is tentative.
	p.keys(`stty -echo; printf '> '; while IFS= read -r -n1 c; do [ "$c" = q ] && break; case $c in [0-9]) printf '#';; *) printf '%s' "$c";; esac; done; stty echo; echo`)
	p.enter()
	p.waitRows(regexp.MustCompile(`^>$`))
	for _, k := range "ab" {
		p.keys(string(k))
		p.waitRows(regexp.MustCompile(`^> a` + map[rune]string{'a': "", 'b': "b"}[k] + `$`))
	}
	settled(t, p, d, tok, uri, "after confirmed keys")
	g, e := typeAndTimeLine(t, p, "> ab", "1", "> ab#")
	t.Logf("a contradicted key: the prediction showed after %v, the echo that repaired it after %v", g, e)
	settled(t, p, d, tok, uri, "after a contradicted key")
	p.keys("c")
	p.waitRows(regexp.MustCompile(`^> ab#c$`))
	settled(t, p, d, tok, uri, "after a key following a contradiction")
	p.keys("q")
	p.waitRows(regexp.MustCompile(`^\$$`))

	// vim insert mode (the alternate screen: nothing is predicted).
	if vim, err := exec.LookPath("vim"); err != nil {
		t.Log("vim is not installed: its part skipped")
	} else {
		p.keys(vim + " -u NONE -N -n -i NONE " + filepath.Join(dir, "x.txt"))
		p.enter()
		p.waitRows(regexp.MustCompile(`^~ *$`))
		p.keys("ihello world")
		p.keys("\x7f\x7fxx")
		p.waitRows(regexp.MustCompile(`^hello worxx$`))
		settled(t, p, d, tok, uri, "in vim's insert mode")
		p.keys("\x1b:q!")
		p.enter()
		p.waitRows(regexp.MustCompile(`^\$$`))
		settled(t, p, d, tok, uri, "after vim")
	}
}

// TestE2EAttachPredictFlows: everyday bash through a 200 ms round trip
// with --predict always (tab completion, reverse search, less, edits in
// the middle of a line, a background job printing while a line is typed,
// a line wrapping at the margin): after each, the pane settles to the
// host's screen, with no underline left.
func TestE2EAttachPredictFlows(t *testing.T) {
	p, d, tok, _ := predictSetup(t, "always", 200*time.Millisecond)
	const uri = "ahp-terminal:/pr"
	p.keys("echo hello world")
	p.enter()
	p.waitRows(regexp.MustCompile(`^hello world$`))
	settled(t, p, d, tok, uri, "echo")
	// fast typing with a tab completion
	p.keys("ech")
	p.run("send-keys", "-t", "p", "Tab")
	p.keys("done")
	p.enter()
	p.waitRows(regexp.MustCompile(`^done$`))
	settled(t, p, d, tok, uri, "tab")
	// reverse search
	p.run("send-keys", "-t", "p", "C-r")
	p.keys("hel")
	time.Sleep(300 * time.Millisecond)
	settled(t, p, d, tok, uri, "C-r")
	p.run("send-keys", "-t", "p", "C-g")
	settled(t, p, d, tok, uri, "C-g")
	// less
	p.keys("seq 1 200 | less")
	p.enter()
	p.waitRows(regexp.MustCompile(`^:$`))
	p.keys("jjjj/15")
	p.enter()
	time.Sleep(500 * time.Millisecond)
	settled(t, p, d, tok, uri, "less")
	p.keys("q")
	settled(t, p, d, tok, uri, "after less")
	// mid-line edits
	p.keys("echo abcdef")
	p.waitRows(regexp.MustCompile(`^\$ echo abcdef$`))
	for range 3 {
		p.run("send-keys", "-t", "p", "Left")
	}
	settled(t, p, d, tok, uri, "after three lefts")
	// An insertion in the middle shows at once, the rest moved right.
	want := regexp.MustCompile(`^\$ echo abcXdef$`)
	start := time.Now()
	p.keys("X")
	for deadline := start.Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if slices.ContainsFunc(p.rows(), want.MatchString) {
			t.Logf("an insertion mid-line showed after %v (underlined: %v)", time.Since(start), underlined(p.styled()))
			break
		}
	}
	p.keys("Y")
	p.run("send-keys", "-t", "p", "BSpace")
	p.run("send-keys", "-t", "p", "End")
	p.keys(" tail")
	p.enter()
	p.waitRows(regexp.MustCompile(`^abcXdef tail$`))
	settled(t, p, d, tok, uri, "mid-line")
	// a command that prints while typing
	p.keys("(sleep 0.3; echo BG) &")
	p.enter()
	p.keys("echo typed while bg")
	time.Sleep(time.Second)
	settled(t, p, d, tok, uri, "bg output while typing")
	p.enter()
	settled(t, p, d, tok, uri, "end")
	// long line wrapping at the margin
	p.keys("echo " + "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789")
	settled(t, p, d, tok, uri, "wrap")
	p.enter()
	settled(t, p, d, tok, uri, "wrap enter")
}
