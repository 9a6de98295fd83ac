package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// CommandConfig configures a Command source.
type CommandConfig struct {
	// Command is the program and its arguments (required).
	Command []string
	Dir     string
	Env     []string // nil: the daemon's environment
	// MinBackoff and MaxBackoff bound the wait before a restart; it
	// doubles from MinBackoff after each run that published nothing and
	// starts over after one that did. Defaults 1 s and 60 s.
	MinBackoff, MaxBackoff time.Duration
	// Logger; nil: discard.
	Logger *slog.Logger
}

// Command is a source that runs a child whose stdout lines are samples
// (ParseLine: "name value [k=v ...]" or a JSON object). A bad line is
// counted and logged (the first ones of each run, then every 1000th),
// never fatal. When the child exits it is restarted after a backoff. The
// child is in its own process group; on Close the group is killed and the
// child reaped before Run returns. Its stderr is discarded.
//
// A channel's Freeze holds the source instead (hold): Run returns at
// once, leaving the child running and its stdout pipe open with what was
// read of it and not yet parsed, for the Command a restored channel runs
// (adopt) — in this process or, after an execve, in the next binary,
// whose child the process still is.
type Command struct {
	cfg CommandConfig
	log *slog.Logger

	lines, bad, samples, starts atomic.Int64

	held chan struct{} // closed by hold

	mu      sync.Mutex // guards what follows
	holding bool       // hold was called
	cur     *child     // the child Run follows
	handed  *child     // the child a hold left running (nil: none)
	adopted *child     // the child Run follows first (adopt)
}

// child is a Command's process, the leader of its own process group.
type child struct {
	pid   int
	pidfd *os.File    // pollable: a deadline interrupts waitExit
	out   *os.File    // the read end of its stdout; nil once read to its end
	lr    *LineReader // reads out
	// reaped: its pid may be another process's now (Command.mu).
	reaped bool
}

// interrupt makes the child's reads and waits return
// os.ErrDeadlineExceeded from now on; Command.mu is held.
func (ch *child) interrupt() {
	now := time.Now()
	if ch.out != nil {
		_ = ch.out.SetReadDeadline(now)
	}
	if ch.pidfd != nil {
		_ = ch.pidfd.SetReadDeadline(now)
	}
}

// CommandStats are a command source's counters.
type CommandStats struct {
	Lines, BadLines, Samples, Starts int64
}

// logBadLines is how many bad lines of a run are logged one by one.
const logBadLines = 10

// NewCommand checks the config.
func NewCommand(cfg CommandConfig) (*Command, error) {
	if len(cfg.Command) == 0 || cfg.Command[0] == "" {
		return nil, errors.New("command source: a command is required")
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 60 * time.Second
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		return nil, errors.New("command source: MaxBackoff must be at least MinBackoff")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Command{cfg: cfg, log: cfg.Logger.With("command", cfg.Command[0]), held: make(chan struct{})}, nil
}

// Stats returns the counters.
func (c *Command) Stats() CommandStats {
	return CommandStats{Lines: c.lines.Load(), BadLines: c.bad.Load(), Samples: c.samples.Load(), Starts: c.starts.Load()}
}

// Pid returns the pid of the child running now, or 0.
func (c *Command) Pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range []*child{c.cur, c.adopted, c.handed} {
		if ch != nil && !ch.reaped {
			return ch.pid
		}
	}
	return 0
}

// Run implements Source: it runs the child, and again after it exits,
// until ctx is done or the source is held.
func (c *Command) Run(ctx context.Context, p Publisher) error {
	backoff := c.cfg.MinBackoff
	c.mu.Lock()
	ch := c.adopted
	c.adopted = nil
	c.mu.Unlock()
	for {
		var published bool
		var err error
		if ch == nil {
			ch, err = c.start()
		}
		if ch != nil {
			published, err = c.follow(ctx, ch, p)
			ch = nil
		}
		if ctx.Err() != nil || c.isHeld() {
			return nil
		}
		if errors.Is(err, ErrClosed) {
			return err
		}
		if published {
			backoff = c.cfg.MinBackoff
		}
		c.log.Info("telemetry command exited; restarting", "err", err, "backoff", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-c.held:
			t.Stop()
			return nil
		case <-t.C:
		}
		if !published {
			backoff = min(2*backoff, c.cfg.MaxBackoff)
		}
	}
}

func (c *Command) isHeld() bool {
	select {
	case <-c.held:
		return true
	default:
		return false
	}
}

// hold makes Run return as soon as it can without ending the child: it
// stops reading its pipe (a read under way returns) and waiting for it.
// Once Run has returned, handOver has the child.
func (c *Command) hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.holding {
		c.holding = true
		close(c.held)
	}
	if c.cur != nil {
		c.cur.interrupt()
	}
}

// handOver returns the child a hold left running (nil if none); call it
// after Run returned.
func (c *Command) handOver() *child {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.handed
}

// start starts the child with its stdout on a pipe.
func (c *Command) start() (*child, error) {
	cmd := exec.Command(c.cfg.Command[0], c.cfg.Command[1:]...)
	cmd.Dir, cmd.Env = c.cfg.Dir, c.cfg.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("starting %s: %w", c.cfg.Command[0], err)
	}
	c.starts.Add(1)
	ch := &child{pid: cmd.Process.Pid, out: r, lr: NewLineReader(r)}
	_ = cmd.Process.Release() // waitExit reaps it, not cmd.Wait
	if err := ch.openPidfd(); err != nil {
		_ = syscall.Kill(-ch.pid, syscall.SIGKILL)
		reap(ch.pid)
		r.Close()
		return nil, err
	}
	return ch, nil
}

// openPidfd opens the child's pidfd, pollable.
func (ch *child) openPidfd() error {
	fd, err := unix.PidfdOpen(ch.pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", ch.pid, err)
	}
	ch.pidfd = os.NewFile(uintptr(fd), "pidfd")
	return nil
}

// reap waits for the child pid to exit and reaps it.
func reap(pid int) (syscall.WaitStatus, error) {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			return ws, err
		}
	}
}

// follow publishes the child's lines until its stdout ends, then waits
// for it and reaps it; ctx done kills its process group first, and so
// does an error reading it or publishing. After a hold it returns at
// once and leaves the child running, with its pipe and what was read of
// it, in c.handed.
func (c *Command) follow(ctx context.Context, ch *child, p Publisher) (published bool, err error) {
	c.mu.Lock()
	c.cur = ch
	if c.holding {
		ch.interrupt()
	}
	c.mu.Unlock()
	kill := func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !ch.reaped {
			_ = syscall.Kill(-ch.pid, syscall.SIGKILL)
		}
	}
	stop := context.AfterFunc(ctx, func() {
		kill()
		c.mu.Lock()
		ch.interrupt()
		c.mu.Unlock()
	})
	defer stop()
	defer func() {
		c.mu.Lock()
		c.cur = nil
		c.mu.Unlock()
	}()
	var readErr error
	if ch.out != nil {
		published, readErr = c.read(ch.lr, p)
		if ctx.Err() == nil && c.isHeld() && errors.Is(readErr, os.ErrDeadlineExceeded) {
			c.handOff(ch)
			return published, nil
		}
		c.mu.Lock()
		ch.out.Close()
		ch.out, ch.lr = nil, nil
		c.mu.Unlock()
		if readErr != nil {
			kill()
		}
	}
	for {
		ws, err := c.waitExit(ch)
		switch {
		case err == nil && readErr != nil:
			return published, readErr
		case err == nil && ws.Signaled():
			return published, fmt.Errorf("signal: %v", ws.Signal())
		case err == nil && ws.ExitStatus() != 0:
			return published, fmt.Errorf("exit status %d", ws.ExitStatus())
		case err == nil:
			return published, nil
		case !errors.Is(err, os.ErrDeadlineExceeded):
			// Not ours to wait for (it cannot happen to a child of ours).
			return published, err
		case ctx.Err() != nil:
			// Killed: wait for it to go.
			_ = ch.pidfd.SetReadDeadline(time.Time{})
		case c.isHeld():
			c.handOff(ch)
			return published, nil
		}
	}
}

// handOff leaves the child, running, to handOver.
func (c *Command) handOff(ch *child) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch.pidfd.Close()
	ch.pidfd = nil
	c.handed = ch
}

// waitExit waits until the child exits and reaps it; an interrupt makes
// it return os.ErrDeadlineExceeded, the child left as it is.
func (c *Command) waitExit(ch *child) (syscall.WaitStatus, error) {
	rc, err := ch.pidfd.SyscallConn()
	if err != nil {
		return 0, err
	}
	var werr error
	err = rc.Read(func(fd uintptr) bool {
		// WNOWAIT: an interrupt between the exit and the reaping leaves the
		// child, a zombie, to the adopter.
		var info unix.Siginfo
		for {
			werr = unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
			if werr != unix.EINTR {
				break
			}
		}
		if werr == unix.EAGAIN { // not yet (PIDFD_NONBLOCK)
			werr = nil
			return false
		}
		return werr != nil || info.Signo != 0
	})
	if err == nil {
		err = werr
	}
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ws, err := reap(ch.pid)
	ch.reaped = true
	ch.pidfd.Close()
	ch.pidfd = nil
	return ws, err
}

// read parses the child's lines into batches: a batch is published when
// no further line is already buffered, or at MaxBatchSamples lines. A
// read error (an interrupt) returns what was read so far published; the
// line it cut short stays in lr.
func (c *Command) read(lr *LineReader, p Publisher) (published bool, err error) {
	var batch []Sample
	bad := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := p.Publish(batch)
		c.samples.Add(int64(len(batch)))
		batch = batch[:0]
		published = true
		return err
	}
	for {
		line, n, err := lr.Next()
		if err == io.EOF {
			return published, flush()
		}
		if err != nil && err != ErrLineTooLong {
			if ferr := flush(); ferr != nil {
				return published, ferr
			}
			return published, err
		}
		c.lines.Add(1)
		var s Sample
		ok := false
		if err == nil {
			s, ok, err = ParseLine(line, nowMilli(time.Now()))
		}
		switch {
		case err != nil:
			c.bad.Add(1)
			bad++
			if bad <= logBadLines || bad%1000 == 0 {
				c.log.Warn("telemetry command: bad line", "line", n, "err", err, "badLines", bad)
			}
		case ok:
			batch = append(batch, s)
		}
		if len(batch) >= DefaultMaxBatchSamples || !lr.Buffered() {
			if err := flush(); err != nil {
				return published, err
			}
		}
	}
}

// adopt takes over a child that a held Command (handOver) left running,
// in this process or in the process image before an execve: its pid, the
// read end of its stdout (nil if read to its end already; adopt owns it)
// and what was read of it but not parsed (LineReader.Held). Run follows
// it first. The pid must be a child of this process.
func (c *Command) adopt(pid int, pipe *os.File, held []byte, skipping bool, n int) error {
	if err := isChild(pid); err != nil {
		if pipe != nil {
			pipe.Close()
		}
		return err
	}
	ch := &child{pid: pid}
	if pipe != nil {
		out, err := pollable(pipe)
		if err != nil {
			return err
		}
		ch.out, ch.lr = out, ResumeLineReader(out, held, skipping, n)
	}
	if err := ch.openPidfd(); err != nil {
		if ch.out != nil {
			ch.out.Close()
		}
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.adopted = ch
	return nil
}

// isChild returns an error unless pid is a child of this process (exited
// or not, not reaped).
func isChild(pid int) error {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		switch err {
		case nil:
			return nil
		case unix.EINTR:
			continue
		}
		return fmt.Errorf("pid %d: not a child of this process: %w", pid, err)
	}
}

// endChild kills the process group of pid and reaps it, if pid is a child
// of this process, and closes pipe: for a child handed over whose
// channel is not restored.
func endChild(pid int, pipe *os.File) {
	if pipe != nil {
		pipe.Close()
	}
	if isChild(pid) == nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_, _ = reap(pid)
	}
}

// pollable returns f's descriptor as a new File whose reads take
// deadlines (a descriptor inherited across an execve is blocking: the
// previous image's Fd made it so), and closes f.
func pollable(f *os.File) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 3)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("the command's pipe: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("the command's pipe: %w", err)
	}
	return os.NewFile(uintptr(fd), "|0"), nil
}
