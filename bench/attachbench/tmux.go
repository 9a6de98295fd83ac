package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ahp-dev/ahpd/bench/benchproc"
)

// tmuxServer is a detached tmux server on a socket of its own (in the
// benchmark's temporary directory), with no configuration file and no
// status line, whose sessions are sized cols×rows. Commands go through one
// control-mode client (tmux -C) that stays attached to a session of its
// own ("ctl", running sleep): polling capture-pane that way costs the
// server a command and this process a pipe read, not a tmux client
// process per poll (fork, exec and connect: about 3.5 ms of CPU each,
// measured with `time` over 100 `tmux capture-pane` calls on the
// benchmark machine — at a 5 ms poll more than half a core of two). A
// control client receives %output only for the panes of its own session,
// so the measured panes' output does not reach it.
type tmuxServer struct {
	sock string
	pid  int // the server's

	ctl    *exec.Cmd
	stdin  io.WriteCloser
	blocks chan tmuxBlock // read sends, cmd receives; read closes it as it returns
	mu     sync.Mutex     // one command at a time
	broken error          // under mu: a command that got no reply; its late reply would answer the next
}

// tmuxBlock is one command's reply: the lines between %begin and %end (or
// %error).
type tmuxBlock struct {
	lines []string
	err   bool
}

// startTmux starts the server (socket in dir) with a session "bench" of
// cols×rows and the control client.
func startTmux(dir string, cols, rows int) (*tmuxServer, error) {
	t := &tmuxServer{sock: filepath.Join(dir, "tmux.sock"), blocks: make(chan tmuxBlock, 4)}
	size := []string{"-x", strconv.Itoa(cols), "-y", strconv.Itoa(rows)}
	if err := t.exec(append([]string{"-f", "/dev/null", "new-session", "-d", "-s", "bench"}, size...)...); err != nil {
		return nil, err
	}
	for _, args := range [][]string{
		{"set", "-g", "status", "off"},
		{"set", "-g", "default-size", fmt.Sprintf("%dx%d", cols, rows)},
		{"new-session", "-d", "-s", "ctl", "--", "sleep", "86400"},
	} {
		if err := t.exec(args...); err != nil {
			t.kill()
			return nil, err
		}
	}
	out, err := runTmux("-S", t.sock, "display", "-p", "#{pid}")
	if err != nil {
		t.kill()
		return nil, fmt.Errorf("tmux display pid: %w", err)
	}
	if t.pid, err = strconv.Atoi(strings.TrimSpace(string(out))); err != nil {
		t.kill()
		return nil, fmt.Errorf("tmux pid %q: %w", out, err)
	}
	t.ctl = exec.Command("tmux", "-S", t.sock, "-C", "attach", "-t", "ctl")
	t.stdin, err = t.ctl.StdinPipe()
	if err == nil {
		var stdout io.ReadCloser
		stdout, err = t.ctl.StdoutPipe()
		if err == nil {
			err = t.ctl.Start()
			if err == nil {
				go t.read(stdout)
			}
		}
	}
	if err != nil {
		t.kill()
		return nil, fmt.Errorf("tmux control client: %w", err)
	}
	// The attach's own reply (flags 0) is skipped by read; a first
	// command shows the client is up.
	if _, err := t.cmd("display -p ok"); err != nil {
		t.kill()
		return nil, err
	}
	return t, nil
}

// exec runs one tmux command as a client process of its own (setup only).
func (t *tmuxServer) exec(args ...string) error {
	out, err := runTmux(append([]string{"-S", t.sock}, args...)...)
	if err != nil {
		return fmt.Errorf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// read parses the control client's output: the lines of each reply to a
// command of this client (%begin … 1 to %end/%error … 1); notifications
// and the replies to others are skipped.
func (t *tmuxServer) read(r io.Reader) {
	defer close(t.blocks)
	br := bufio.NewReaderSize(r, 64<<10)
	var cur *tmuxBlock
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case cur == nil && strings.HasPrefix(line, "%begin ") && strings.HasSuffix(line, " 1"):
			cur = &tmuxBlock{}
		case cur != nil && (strings.HasPrefix(line, "%end ") || strings.HasPrefix(line, "%error ")) && strings.HasSuffix(line, " 1"):
			cur.err = strings.HasPrefix(line, "%error ")
			t.blocks <- *cur
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, line)
		}
	}
}

// cmd sends one command line through the control client and returns its
// reply's lines, waiting 10 s at most.
func (t *tmuxServer) cmd(line string) ([]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.broken != nil {
		return nil, fmt.Errorf("tmux %s: %w", line, t.broken)
	}
	if _, err := io.WriteString(t.stdin, line+"\n"); err != nil {
		return nil, fmt.Errorf("tmux %s: %w", line, err)
	}
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case b, ok := <-t.blocks:
		if !ok {
			return nil, fmt.Errorf("tmux %s: the control client ended", line)
		}
		if b.err {
			return nil, fmt.Errorf("tmux %s: %s", line, strings.Join(b.lines, "; "))
		}
		return b.lines, nil
	case <-timer.C:
		t.broken = fmt.Errorf("an earlier command (%s) got no reply in 10 s", line)
		return nil, fmt.Errorf("tmux %s: no reply in 10 s", line)
	}
}

// newWindow starts argv (run directly, no shell) in a new window of
// session bench with env entries (KEY=VALUE) added, and returns the
// pane's id (%N) and the pid of its process.
func (t *tmuxServer) newWindow(env []string, argv ...string) (string, int, error) {
	var b strings.Builder
	b.WriteString("new-window -d -t bench: -P -F '#{pane_id} #{pane_pid}'")
	for _, e := range env {
		b.WriteString(" -e " + quote(e))
	}
	b.WriteString(" --")
	for _, a := range argv {
		b.WriteString(" " + quote(a))
	}
	lines, err := t.cmd(b.String())
	if err != nil {
		return "", 0, err
	}
	if len(lines) != 1 {
		return "", 0, fmt.Errorf("tmux new-window: reply %q", lines)
	}
	f := strings.Fields(lines[0])
	if len(f) != 2 {
		return "", 0, fmt.Errorf("tmux new-window: reply %q", lines[0])
	}
	pid, err := strconv.Atoi(f[1])
	return f[0], pid, err
}

// capture returns the visible screen of pane, one string per row.
func (t *tmuxServer) capture(pane string) ([]string, error) {
	return t.cmd("capture-pane -p -t " + pane)
}

// typeLine types s literally into pane, then Enter.
func (t *tmuxServer) typeLine(pane, s string) error {
	if _, err := t.cmd("send-keys -t " + pane + " -l " + quote(s)); err != nil {
		return err
	}
	_, err := t.cmd("send-keys -t " + pane + " Enter")
	return err
}

// killWindow closes pane's window (its process gets SIGHUP).
func (t *tmuxServer) killWindow(pane string) {
	_, _ = t.cmd("kill-window -t " + pane)
}

// cpu is the server's CPU time so far.
func (t *tmuxServer) cpu() time.Duration { return cpuOf(t.pid) }

// kill ends the control client, and the goroutine that reads it, and the
// server (kill-server, then SIGKILL if the server is still there after
// 2 s).
func (t *tmuxServer) kill() {
	if t.stdin != nil {
		t.stdin.Close()
	}
	_, _ = runTmux("-S", t.sock, "kill-server")
	if t.ctl != nil && t.ctl.Process != nil {
		benchproc.WaitOrKill(t.ctl, 2*time.Second)
		// The client's output is closed: read ends, after any reply no
		// command took (a command that timed out) is drained.
		for range t.blocks {
		}
	}
	if t.pid > 0 && !waitGone(context.Background(), t.pid, 2*time.Second) {
		if p, err := os.FindProcess(t.pid); err == nil {
			_ = p.Kill()
		}
	}
}

// runTmux runs one tmux client process with args and returns its output
// (stdout and stderr); it is killed if it has not ended within 10 s.
func runTmux(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, "tmux", args...).CombinedOutput()
}

// quote quotes s for tmux's command parser: in single quotes, where tmux
// expands nothing. A single quote inside s cannot be quoted so, and the
// bench never needs one: quote panics rather than send another command.
func quote(s string) string {
	if strings.ContainsRune(s, '\'') {
		panic(fmt.Sprintf("attachbench: quote(%q): a single quote cannot be quoted for tmux", s))
	}
	return "'" + s + "'"
}
