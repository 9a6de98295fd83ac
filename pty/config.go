package pty

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/ahp-dev/ahpd/pty/record"
)

// MaxSize is the largest accepted number of rows or columns.
const MaxSize = 1000

// DefaultMaxViewers is the default of the daemon's limit on viewers per
// terminal (maxViewersPerTerminal), which it passes as Config.MaxViewers.
const DefaultMaxViewers = 1024

// Sentinel errors.
var (
	// ErrInputFull is returned by Input when the input queue is at its
	// bound (Config.InputQueue). The daemon's flow control normally keeps
	// it below the bound.
	ErrInputFull = errors.New("pty: input queue full")
	// ErrClosed is returned by operations on a closed Terminal.
	ErrClosed = errors.New("pty: terminal closed")
	// ErrExited is returned by Input and Resize once the process has exited.
	ErrExited = errors.New("pty: process exited")
	// ErrInvalidSize is returned by Resize for a size outside 1..MaxSize.
	ErrInvalidSize = errors.New("pty: invalid size")
)

// Config configures a Terminal. The zero value of every field means its
// default; Start applies defaults to a copy and never modifies the caller's
// value.
type Config struct {
	// Command is the program and its arguments. Default (empty): $SHELL,
	// else /bin/sh, started as a login shell (argv[0] prefixed with "-").
	Command []string
	// Env is the environment of the command, as KEY=value. Default (nil):
	// the daemon's environment. TERM is added from Term unless Env sets it.
	Env []string
	// Dir is the working directory. Default (""): the daemon's.
	Dir string
	// Term is the value of TERM. Default "xterm-256color".
	Term string
	// Rows and Cols are the initial size in cells, 1..MaxSize.
	// Default 24 rows, 80 columns.
	Rows, Cols int
	// Scrollback is the number of lines the emulator keeps above the
	// screen, at most 1,000,000. Default 10,000; a negative value keeps
	// none.
	Scrollback int
	// ViewerBacklog is how many bytes of output (UTF-8) a viewer may have
	// queued and not yet pulled; once more is queued, its queue is dropped
	// and it receives a snapshot when it next pulls (PROTOCOL.md §8).
	// At least 4 KiB. Default 1 MiB.
	ViewerBacklog int
	// EmulatorBacklog is how many bytes of output the emulator may lag
	// behind the reader; beyond it the reader pauses until the emulator
	// catches up (the emulator is not a viewer and never loses output).
	// At least 64 KiB. Default 1 MiB.
	EmulatorBacklog int
	// InputQueue bounds the bytes accepted by Input and not yet written to
	// the PTY. One Input call may carry at most this many bytes.
	// At least 1 KiB. Default 256 KiB.
	InputQueue int
	// ReplyQueue bounds the bytes of query replies not yet written to the
	// PTY; replies beyond it are dropped (and counted). At least 1 KiB.
	// Default 64 KiB.
	ReplyQueue int
	// KillTimeout is how long Close waits after SIGHUP before sending
	// SIGKILL to the process group. Default 3 s.
	KillTimeout time.Duration
	// Logger receives lifecycle events. Default (nil): discard.
	Logger *slog.Logger
	// Pacer, when set and shared with other terminals, pauses this
	// terminal's reader while it floods and another terminal is being
	// typed into (see Pacer). Nil: never paused.
	Pacer *Pacer
	// MaxViewers returns the most viewers the terminal may have: Attach
	// refuses one more with a flow.Error of code flow.ErrCodeLimitExceeded
	// naming maxViewersPerTerminal (viewers already attached stay). It is
	// called at each Attach, so a limit the operator changes at run time
	// applies to the next one. Nil, or a result ≤ 0: no cap. The daemon's
	// default is DefaultMaxViewers.
	MaxViewers func() int
	// Record is what the terminal records from its start (or its
	// adoption) into Recordings: record.Output, record.OutputInput, or
	// record.Off (the default: nothing; StartRecording starts later).
	Record record.Mode
	// Recordings is the store recordings go to; required when Record is
	// not Off.
	Recordings *record.Store
	// Channel is the channel id recordings are named after
	// (CHANNEL-START). Default "terminal".
	Channel string
}

// withDefaults returns a copy of c with defaults applied.
func (c Config) withDefaults() Config {
	if len(c.Command) == 0 {
		sh := os.Getenv("SHELL")
		if sh == "" {
			sh = "/bin/sh"
		}
		c.Command = []string{sh}
	} else {
		c.Command = append([]string(nil), c.Command...)
	}
	if c.Term == "" {
		c.Term = "xterm-256color"
	}
	if c.Rows == 0 {
		c.Rows = 24
	}
	if c.Cols == 0 {
		c.Cols = 80
	}
	switch {
	case c.Scrollback == 0:
		c.Scrollback = 10000
	case c.Scrollback < 0:
		c.Scrollback = 0
	}
	if c.ViewerBacklog == 0 {
		c.ViewerBacklog = 1 << 20
	}
	if c.EmulatorBacklog == 0 {
		c.EmulatorBacklog = 1 << 20
	}
	if c.InputQueue == 0 {
		c.InputQueue = 256 << 10
	}
	if c.ReplyQueue == 0 {
		c.ReplyQueue = 64 << 10
	}
	if c.KillTimeout == 0 {
		c.KillTimeout = 3 * time.Second
	}
	if c.Channel == "" {
		c.Channel = "terminal"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports the first invalid field of c (after defaults).
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Rows < 1 || c.Rows > MaxSize:
		return fmt.Errorf("pty: Config.Rows = %d, want 1..%d", c.Rows, MaxSize)
	case c.Cols < 1 || c.Cols > MaxSize:
		return fmt.Errorf("pty: Config.Cols = %d, want 1..%d", c.Cols, MaxSize)
	case c.Scrollback > 1_000_000:
		return fmt.Errorf("pty: Config.Scrollback = %d, want at most 1000000", c.Scrollback)
	case c.ViewerBacklog < 4<<10:
		return fmt.Errorf("pty: Config.ViewerBacklog = %d, want at least 4096", c.ViewerBacklog)
	case c.EmulatorBacklog < 64<<10:
		return fmt.Errorf("pty: Config.EmulatorBacklog = %d, want at least 65536", c.EmulatorBacklog)
	case c.InputQueue < 1024:
		return fmt.Errorf("pty: Config.InputQueue = %d, want at least 1024", c.InputQueue)
	case c.ReplyQueue < 1024:
		return fmt.Errorf("pty: Config.ReplyQueue = %d, want at least 1024", c.ReplyQueue)
	case c.KillTimeout < 0:
		return fmt.Errorf("pty: Config.KillTimeout = %v, want positive", c.KillTimeout)
	case c.Record != record.Off && c.Record != record.Output && c.Record != record.OutputInput:
		return fmt.Errorf("pty: Config.Record = %v, want off, output or output+input", c.Record)
	case c.Record != record.Off && c.Recordings == nil:
		return errors.New("pty: Config.Record is on but Config.Recordings is nil")
	case c.Command[0] == "":
		return errors.New("pty: Config.Command[0] is empty")
	}
	return nil
}
