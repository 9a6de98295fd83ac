package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"
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
type Command struct {
	cfg CommandConfig
	log *slog.Logger

	lines, bad, samples, starts atomic.Int64
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
	return &Command{cfg: cfg, log: cfg.Logger.With("command", cfg.Command[0])}, nil
}

// Stats returns the counters.
func (c *Command) Stats() CommandStats {
	return CommandStats{Lines: c.lines.Load(), BadLines: c.bad.Load(), Samples: c.samples.Load(), Starts: c.starts.Load()}
}

// Run implements Source: it runs the child, and again after it exits,
// until ctx is done.
func (c *Command) Run(ctx context.Context, p Publisher) error {
	backoff := c.cfg.MinBackoff
	for {
		published, err := c.runOnce(ctx, p)
		if ctx.Err() != nil {
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
		case <-t.C:
		}
		if !published {
			backoff = min(2*backoff, c.cfg.MaxBackoff)
		}
	}
}

func (c *Command) runOnce(ctx context.Context, p Publisher) (published bool, err error) {
	cmd := exec.CommandContext(ctx, c.cfg.Command[0], c.cfg.Command[1:]...)
	cmd.Dir, cmd.Env = c.cfg.Dir, c.cfg.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return false, err
	}
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("starting %s: %w", c.cfg.Command[0], err)
	}
	c.starts.Add(1)
	published, readErr := c.read(out, p)
	if readErr != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	werr := cmd.Wait()
	if readErr != nil {
		return published, readErr
	}
	return published, werr
}

// read parses the child's lines into batches: a batch is published when
// no further line is already buffered, or at MaxBatchSamples lines.
func (c *Command) read(r io.Reader, p Publisher) (published bool, err error) {
	lr := NewLineReader(r)
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
			_ = flush()
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
