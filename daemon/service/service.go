package service

// The control plane's service logic (PROTOCOL.md §10): plain Go methods on
// *Service that the gRPC layer (grpc.go) adapts one line per RPC and that
// tests may call directly. Errors are classified by the sentinels and
// *ArgError below; grpc.go maps them to gRPC codes in one place.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/ahp-dev/ahpd/daemon/registry"
	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/pty/record"
	"github.com/ahp-dev/ahpd/tcp"
)

// ArgError reports an invalid argument of a control-plane request. Field
// is the argument's name as the API spells it in JSON (e.g. "rows",
// "env[2]", "maxOutputStall", "clientReceiveDefaults.windowBytes").
type ArgError struct {
	Field  string
	Reason string
}

func (e *ArgError) Error() string { return e.Field + ": " + e.Reason }

func argErr(field, format string, args ...any) error {
	return &ArgError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Errors of the control-plane services (see also ErrChannelNotFound,
// ErrChannelExists, ErrViewerNotFound).
var (
	// ErrTokenNotFound: no live token has the id.
	ErrTokenNotFound = errors.New("token not found")
	// ErrTooMany: a bound on live objects (tokens, watchers) was reached.
	ErrTooMany = errors.New("too many")
	// ErrUnsupported: the channel cannot do what was asked.
	ErrUnsupported = errors.New("not supported")
	// ErrNotRunning: the channel's process has exited.
	ErrNotRunning = errors.New("process has exited")
	// ErrShuttingDown: the daemon is stopping.
	ErrShuttingDown = errors.New("daemon shutting down")
	// ErrUpgradeRefused: an upgrade in place was refused (the new binary
	// failed its check, or one is under way); the daemon serves on.
	ErrUpgradeRefused = errors.New("upgrade refused")
)

// Bounds of control-plane requests.
const (
	maxTerminalSize  = 1000 // rows or cols; pty.MaxSize
	maxScrollback    = 1_000_000
	maxTitleBytes    = 256
	maxCloseGrace    = 60 * time.Second
	maxCloseReason   = 123 // bytes in a WebSocket close frame
	maxLiveTokens    = 10_000
	maxTokenChannels = 256
	maxTokenTTL      = 366 * 24 * time.Hour
	defaultTokenTTL  = 24 * time.Hour
)

// ChannelDetail describes a channel for the control plane.
type ChannelDetail struct {
	registry.ChannelInfo
	ID         string
	Created    time.Time
	Command    []string  // a terminal's program and arguments
	Cwd        string    // the directory it started in
	Rows, Cols int       // 0 if unknown
	Pid        int       // 0 if unknown
	TCP        *tcp.Info // a TCP channel's figures; nil for other kinds
	// Telemetry is a telemetry channel's figures; nil for other kinds.
	Telemetry *TelemetryInfo
	// Recording is a terminal's recording; nil for other kinds.
	Recording *RecordingState
}

// TelemetryInfo is what the control plane shows of a telemetry channel.
type TelemetryInfo struct {
	Source, Policy string
	Seq            uint64 // the next batch's
	Samples        int64  // published
	Viewers        int
	Status         string // what went wrong with a source that goes on; "" when nothing did
}

// Optional capabilities of a channel, for the control plane (a
// pty.Terminal has them all).
type (
	terminalSizer   interface{ Size() (rows, cols int) }
	terminalPider   interface{ Pid() int }
	terminalCmder   interface{ Command() []string }
	terminalDirer   interface{ Dir() string }
	terminalSignal  interface{ Signal(os.Signal) error }
	terminalResizer interface{ Resize(rows, cols int) error }
	tcpInfoer       interface{ Info() tcp.Info } // a tcp.Channel
)

// running reports whether the channel's process has not exited.
func running(c flow.Channel) bool { return c.State() == flow.StateRunning }

func channelDetail(c *registry.Channel) ChannelDetail {
	d := ChannelDetail{ChannelInfo: c.Info(), ID: c.ID, Created: c.Created, Recording: recordingOf(c)}
	if t, ok := c.Impl().(terminalCmder); ok {
		d.Command = t.Command()
	}
	if t, ok := c.Impl().(terminalDirer); ok {
		d.Cwd = t.Dir()
	}
	if s, ok := c.Impl().(terminalSizer); ok {
		d.Rows, d.Cols = s.Size()
	}
	if p, ok := c.Impl().(terminalPider); ok {
		d.Pid = p.Pid()
	}
	if t, ok := c.Impl().(tcpInfoer); ok {
		info := t.Info()
		d.TCP = &info
	}
	if t, ok := c.Impl().(telemetryChannel); ok {
		cfg, st := t.Config(), t.Stats()
		d.Telemetry = &TelemetryInfo{Source: cfg.Source, Policy: string(cfg.Policy), Seq: st.Seq, Samples: st.Samples, Viewers: st.Viewers, Status: t.SourceStatus()}
	}
	return d
}

// ListChannels returns the channels in creation order, only those of type
// typ if it is not empty.
func (s *Service) ListChannels(ctx context.Context, typ string) []ChannelDetail {
	out := []ChannelDetail{}
	for _, ch := range s.registry.List() {
		if typ == "" || ch.Type == typ {
			out = append(out, channelDetail(ch))
		}
	}
	return out
}

// GetChannel describes the channel with uri.
func (s *Service) GetChannel(ctx context.Context, uri string) (ChannelDetail, error) {
	ch, ok := s.registry.Get(uri)
	if !ok {
		return ChannelDetail{}, fmt.Errorf("%w: %s", registry.ErrChannelNotFound, uri)
	}
	return channelDetail(ch), nil
}

// parseSignal accepts TERM, SIGTERM, sigterm or 15.
func parseSignal(name string) (unix.Signal, error) {
	if n, err := strconv.Atoi(name); err == nil {
		if n < 1 || n > 64 {
			return 0, argErr("signal", "%d is not a signal number (1–64)", n)
		}
		return unix.Signal(n), nil
	}
	up := strings.ToUpper(name)
	if !strings.HasPrefix(up, "SIG") {
		up = "SIG" + up
	}
	if sig := unix.SignalNum(up); sig != 0 {
		return sig, nil
	}
	return 0, argErr("signal", "unknown signal %q", name)
}

// CloseChannelWith closes the channel with uri. For a terminal whose
// process runs, sig (if not empty) is first sent to the process group,
// and the process is given up to grace to exit before the PTY is hung up.
// It reports whether the process exited during grace.
func (s *Service) CloseChannelWith(ctx context.Context, uri, sig string, grace time.Duration) (bool, error) {
	var signum unix.Signal
	if sig != "" {
		n, err := parseSignal(sig)
		if err != nil {
			return false, err
		}
		signum = n
	}
	if grace < 0 || grace > maxCloseGrace {
		return false, argErr("grace", "must be between 0 and %v", maxCloseGrace)
	}
	ch, ok := s.registry.Get(uri)
	if !ok {
		return false, fmt.Errorf("%w: %s", registry.ErrChannelNotFound, uri)
	}
	exited := false
	if signum != 0 && ch.Type == "terminal" && running(ch.Impl()) {
		if err := signalTerminal(ch.Impl(), signum); err != nil {
			return false, fmt.Errorf("signal %s: %w", uri, err)
		}
		s.log.Info("channel signalled", "channel", uri, "signal", unix.SignalName(signum))
		exited = waitExit(ctx, ch.Impl(), grace)
	}
	if err := s.CloseChannel(uri); err != nil {
		return false, err
	}
	return exited, nil
}

func signalTerminal(t flow.Channel, sig unix.Signal) error {
	if ts, ok := t.(terminalSignal); ok {
		return ts.Signal(sig)
	}
	p, ok := t.(terminalPider)
	if !ok || p.Pid() <= 0 {
		return fmt.Errorf("%w: this terminal cannot take signals", ErrUnsupported)
	}
	// The PTY's process leads its own session and process group.
	if err := unix.Kill(-p.Pid(), sig); err != nil {
		if err := unix.Kill(p.Pid(), sig); err != nil && !errors.Is(err, unix.ESRCH) {
			return err
		}
	}
	return nil
}

// waitExit waits up to grace for the terminal's process to exit.
func waitExit(ctx context.Context, t flow.Channel, grace time.Duration) bool {
	if grace <= 0 {
		return !running(t)
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for running(t) {
		select {
		case <-tick.C:
		case <-deadline.C:
			return !running(t)
		case <-ctx.Done():
			return !running(t)
		}
	}
	return true
}

// TerminalRequest describes a terminal for StartTerminal.
type TerminalRequest struct {
	ID         string
	Title      string
	Command    string   // empty: the login shell
	Args       []string // argv[1:]
	Env        []string // KEY=VALUE added to the daemon's environment
	ClearEnv   bool     // use exactly Env
	Cwd        string   // absolute; empty: the daemon's
	Rows, Cols int      // 0: 24×80
	Scrollback int      // lines; 0 default, -1 none
	Record     string   // off, output, output+input; "": the config's record
}

// Validate checks r, naming the first invalid field.
func (r TerminalRequest) Validate() error {
	if r.ID != "" {
		if err := registry.ValidID(r.ID); err != nil {
			return argErr("id", "%s", strings.TrimPrefix(err.Error(), registry.ErrBadChannelID.Error()+": "))
		}
	}
	if len(r.Title) > maxTitleBytes || !utf8.ValidString(r.Title) {
		return argErr("title", "must be valid UTF-8 of at most %d bytes", maxTitleBytes)
	}
	if r.Command == "" && len(r.Args) > 0 {
		return argErr("args", "arguments need a command")
	}
	for i, e := range r.Env {
		k, _, ok := strings.Cut(e, "=")
		if !ok || k == "" || strings.ContainsRune(e, 0) {
			return argErr(fmt.Sprintf("env[%d]", i), "want KEY=VALUE, got %q", e)
		}
	}
	if r.Cwd != "" {
		if !filepath.IsAbs(r.Cwd) {
			return argErr("cwd", "must be an absolute path, got %q", r.Cwd)
		}
		fi, err := os.Stat(r.Cwd)
		if err != nil {
			return argErr("cwd", "%v", errors.Unwrap(err))
		}
		if !fi.IsDir() {
			return argErr("cwd", "%s is not a directory", r.Cwd)
		}
	}
	if r.Command != "" {
		if strings.ContainsRune(r.Command, 0) {
			return argErr("command", "contains NUL")
		}
		if !strings.Contains(r.Command, "/") {
			if _, err := exec.LookPath(r.Command); err != nil {
				return argErr("command", "%q not found in the daemon's PATH", r.Command)
			}
		} else if filepath.IsAbs(r.Command) {
			if _, err := os.Stat(r.Command); err != nil {
				return argErr("command", "%v", err)
			}
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"rows", r.Rows}, {"cols", r.Cols}} {
		if f.v < 0 || f.v > maxTerminalSize {
			return argErr(f.name, "must be between 1 and %d (0 for the default), got %d", maxTerminalSize, f.v)
		}
	}
	if r.Scrollback < -1 || r.Scrollback > maxScrollback {
		return argErr("scrollback", "must be between -1 and %d, got %d", maxScrollback, r.Scrollback)
	}
	if _, err := parseRecordMode("record", r.Record, record.Off); err != nil {
		return err
	}
	return nil
}

// mergeEnv returns base with the entries of add (later entries win).
func mergeEnv(base, add []string) []string {
	idx := map[string]int{}
	out := make([]string, 0, len(base)+len(add))
	for _, e := range append(append([]string(nil), base...), add...) {
		k, _, _ := strings.Cut(e, "=")
		if i, ok := idx[k]; ok {
			out[i] = e
			continue
		}
		idx[k] = len(out)
		out = append(out, e)
	}
	return out
}

// StartTerminal validates r and starts a terminal channel.
func (s *Service) StartTerminal(ctx context.Context, r TerminalRequest) (*registry.Channel, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err // the caller gave up: start no process
	}
	if s.isClosing() {
		return nil, ErrShuttingDown
	}
	spec := TerminalSpec{ID: r.ID, Title: r.Title, Dir: r.Cwd, Rows: r.Rows, Cols: r.Cols, Scrollback: r.Scrollback, Record: r.Record}
	if r.Command != "" {
		spec.Command = append([]string{r.Command}, r.Args...)
	}
	switch {
	case r.ClearEnv:
		spec.Env = append([]string{}, r.Env...)
	case len(r.Env) > 0:
		spec.Env = mergeEnv(os.Environ(), r.Env)
	}
	ch, err := s.CreateTerminal(spec)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return nil, argErr("command", "%v", err)
		}
		return nil, err
	}
	// Shutdown closes the channels it finds after stopping connections; a
	// channel registered after that point is ours to close.
	if s.isClosing() {
		_ = s.CloseChannel(ch.URI)
		return nil, ErrShuttingDown
	}
	return ch, nil
}

// ResizeTerminal sets the size of the terminal with uri.
func (s *Service) ResizeTerminal(ctx context.Context, uri string, rows, cols int) error {
	for _, f := range []struct {
		name string
		v    int
	}{{"rows", rows}, {"cols", cols}} {
		if f.v < 1 || f.v > maxTerminalSize {
			return argErr(f.name, "must be between 1 and %d, got %d", maxTerminalSize, f.v)
		}
	}
	ch, ok := s.registry.Get(uri)
	if !ok {
		return fmt.Errorf("%w: %s", registry.ErrChannelNotFound, uri)
	}
	r, ok := ch.Impl().(terminalResizer)
	if !ok || ch.Type != "terminal" {
		return fmt.Errorf("%w: %s is not a terminal", ErrUnsupported, uri)
	}
	if !running(ch.Impl()) {
		return fmt.Errorf("%w: %s", ErrNotRunning, uri)
	}
	if err := r.Resize(rows, cols); err != nil {
		if !running(ch.Impl()) {
			return fmt.Errorf("%w: %s", ErrNotRunning, uri)
		}
		return fmt.Errorf("resize %s: %w", uri, err)
	}
	return nil
}
