package telemetry_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/telemetry"
)

// counterScript prints "n 1", "n 2", …, each write the end of a line and
// the start of the next ("1\nn "), so that a line is always cut. While
// the file DIR/hold exists it stops (and writes the number of the line
// it cut to DIR/waiting), so that a freeze cuts a line. It pauses 10 ms
// every 10 lines.
const counterScript = `i=1; printf 'n '; while :; do if [ -e DIR/hold ]; then echo $i > DIR/waiting; while [ -e DIR/hold ]; do sleep 0.005; done; rm DIR/waiting; fi; printf '%d\nn ' $i; i=$((i+1)); case $((i % 10)) in 0) sleep 0.01;; esac; done`

// waitFor waits (30 s at most) until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 30 s", what)
		}
	}
}

// unread returns the bytes in the pipe that is pid's stdout.
func unread(t *testing.T, pid int) int {
	t.Helper()
	f, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/fd/1", os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCINQ)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitSeq waits (30 s at most) until c's next seq is at least seq.
func waitSeq(t *testing.T, c *telemetry.Channel, seq uint64) {
	t.Helper()
	wake := make(chan struct{}, 1)
	s, err := c.Attach(flow.AttachRequest{Window: 1 << 20, Role: flow.RoleView, Wake: func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	deadline := time.After(30 * time.Second)
	for c.Stats().Seq < seq {
		for {
			if _, ok := s.Pull(true, 64<<10); !ok {
				break
			}
		}
		select {
		case <-wake:
		case <-deadline:
			t.Fatalf("seq %d after 30 s, want %d", c.Stats().Seq, seq)
		}
	}
}

// execLike passes f's descriptor on as an execve does: under another
// number, as a new File of a blocking descriptor.
func execLike(t *testing.T, f *os.File) *os.File {
	t.Helper()
	if f == nil {
		return nil
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	return os.NewFile(uintptr(fd), "inherited")
}

// TestHandOverCommandKeepsChild: a command source's channel frozen and
// restored three times (the pipe's descriptor passed on as an execve
// passes it), each time with a line cut in two by the freeze, keeps its
// child — the same pid, never started again — and every line it printed
// becomes a sample once, in order; the seqs run on without a gap. Closing the last channel
// kills the child and reaps it.
func TestHandOverCommandKeepsChild(t *testing.T) {
	dir := t.TempDir()
	cfg := telemetry.Config{Source: "command", HistoryBatches: 1 << 20, HistoryBytes: 64 << 20, History: time.Hour, QueueBatches: 1 << 20, QueueBytes: 64 << 20}
	newCmd := func() *telemetry.Command {
		cmd, err := telemetry.NewCommand(telemetry.CommandConfig{Command: []string{"sh", "-c", strings.ReplaceAll(counterScript, "DIR", dir)}})
		if err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	cmd := newCmd()
	c, err := telemetry.New(cfg, cmd)
	if err != nil {
		t.Fatal(err)
	}
	waitSeq(t, c, 20)
	pid := cmd.Pid()
	if pid <= 0 {
		t.Fatalf("pid %d", pid)
	}
	exists := func(name string) func() bool {
		return func() bool { _, err := os.Stat(filepath.Join(dir, name)); return err == nil }
	}
	for round := 1; round <= 3; round++ {
		// The child stops within a line, and the source has read its
		// start: the freeze cuts the line.
		if err := os.WriteFile(filepath.Join(dir, "hold"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "child waiting within a line", exists("waiting"))
		waitFor(t, "pipe read to its end", func() bool { return unread(t, pid) == 0 })
		f := c.Freeze()
		if f.Pipe == nil {
			t.Fatalf("round %d: no pipe handed over", round)
		}
		if held := string(telemetry.HeldOf(f.State)); held != "n " {
			t.Fatalf("round %d: the state holds %q of the line cut, want %q", round, held, "n ")
		}
		if err := os.Remove(filepath.Join(dir, "hold")); err != nil {
			t.Fatal(err)
		}
		cmd = newCmd()
		r, err := telemetry.NewRestored(cfg, cmd, telemetry.Frozen{State: f.State, Pipe: execLike(t, f.Pipe)})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		c = r
		waitSeq(t, c, c.Stats().Seq+20)
		if got := cmd.Pid(); got != pid {
			t.Fatalf("round %d: the child is pid %d, was %d", round, got, pid)
		}
		if st := cmd.Stats(); st.Starts != 1 {
			t.Fatalf("round %d: %d starts, want 1 (never started again)", round, st.Starts)
		}
	}
	// The child stops within line n, and the history (which holds it
	// all) is replayed once line n-1 is in it.
	if err := os.WriteFile(filepath.Join(dir, "hold"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var n int
	waitFor(t, "child waiting within a line", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "waiting"))
		n, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && n > 0
	})
	var ms []msg
	waitFor(t, "line "+strconv.Itoa(n-1)+" published", func() bool {
		ms = pullAll(t, attach(t, c, nil))
		for _, m := range ms {
			for _, s := range m.Params.Samples {
				if s.Value == float64(n-1) {
					return true
				}
			}
		}
		return false
	})
	want, seq := 1.0, uint64(1)
	for _, m := range ms {
		if m.Method != "telemetry/samples" {
			continue
		}
		if m.Params.Seq != seq {
			t.Fatalf("seq %d after %d: %v", m.Params.Seq, seq-1, summary(ms))
		}
		seq++
		for _, s := range m.Params.Samples {
			if s.Value != want {
				t.Fatalf("sample %v where %v was due (seq %d)", s.Value, want, m.Params.Seq)
			}
			want++
		}
	}
	if int(want) != n {
		t.Fatalf("%v samples, the child printed %d whole lines", want-1, n-1)
	}
	t.Logf("%d samples in %d batches, one child across 3 hand-overs", int(want)-1, seq-1)
	c.Close()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the child %d after Close: kill 0 = %v, want ESRCH (killed and reaped)", pid, err)
	}
}

// TestHandOverCommandStdoutClosed: a child that closed its stdout and
// runs on is handed over without a pipe; the restored source waits for
// it, reaps it when it exits and starts the command again.
func TestHandOverCommandStdoutClosed(t *testing.T) {
	dir := t.TempDir()
	// The first run prints, closes its stdout and waits for the file
	// "go"; a later run prints "again 1" and waits too.
	script := `if [ -e ` + dir + `/ran ]; then echo again 1; else : > ` + dir + `/ran; echo first 1; fi; exec >&-; while [ ! -e ` + dir + `/go ]; do sleep 0.01; done`
	newCmd := func() *telemetry.Command {
		cmd, err := telemetry.NewCommand(telemetry.CommandConfig{Command: []string{"sh", "-c", script}, MinBackoff: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	cfg := telemetry.Config{Source: "command"}
	cmd := newCmd()
	c, err := telemetry.New(cfg, cmd)
	if err != nil {
		t.Fatal(err)
	}
	waitSeq(t, c, 2)
	pid := cmd.Pid()
	f := c.Freeze()
	if f.Pipe != nil {
		// The pipe may not have reached its end yet: then it goes too.
		f.Pipe = execLike(t, f.Pipe)
	}
	cmd = newCmd()
	r, err := telemetry.NewRestored(cfg, cmd, f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := cmd.Pid(); got != pid {
		t.Fatalf("the restored source follows pid %d, want %d", got, pid)
	}
	if err := os.WriteFile(dir+"/go", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitSeq(t, r, 3) // "again 1" from the second run
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the first child %d: kill 0 = %v, want ESRCH (reaped by the restored source)", pid, err)
	}
	if st := cmd.Stats(); st.Starts != 2 {
		t.Fatalf("%d starts, want 2", st.Starts)
	}
}

// TestHandOverCommandRefused: a state whose command's child is not given
// to a command source, or is not a child of this process, is refused with
// ErrState; a child of this process is then killed and reaped.
func TestHandOverCommandRefused(t *testing.T) {
	cfg := telemetry.Config{Source: "command"}
	cmd, err := telemetry.NewCommand(telemetry.CommandConfig{Command: []string{"sh", "-c", "echo n 1; exec sleep 60"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := telemetry.New(cfg, cmd)
	if err != nil {
		t.Fatal(err)
	}
	waitSeq(t, c, 2)
	pid := cmd.Pid()
	f := c.Freeze()
	if _, err := telemetry.NewRestored(cfg, nil, f); !errors.Is(err, telemetry.ErrState) {
		t.Fatalf("restored for a push source: %v, want ErrState", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the child %d after the refusal: kill 0 = %v, want ESRCH", pid, err)
	}
	// The same state again: its pid is no child of this process any more.
	cmd2, _ := telemetry.NewCommand(telemetry.CommandConfig{Command: []string{"true"}})
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	if _, err := telemetry.NewRestored(cfg, cmd2, telemetry.Frozen{State: f.State, Pipe: pr}); !errors.Is(err, telemetry.ErrState) || !strings.Contains(err.Error(), "not a child of this process") {
		t.Fatalf("a state naming pid %d, reaped: %v, want ErrState: not a child", pid, err)
	}
	if got := strconv.Itoa(cmd2.Pid()); got != "0" {
		t.Fatalf("the refused source follows pid %s", got)
	}
}
