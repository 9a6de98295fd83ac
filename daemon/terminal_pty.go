package daemon

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/ahp-dev/ahpd/pty"
)

// newPTYTerminal is the default TerminalFactory (with the server's pacer
// and flooding hook):
// a real PTY with the host's VT emulator (package pty).
func newPTYTerminal(spec TerminalSpec, backlog int64, log *slog.Logger, pacer *pty.Pacer, flooding func()) (Terminal, error) {
	t, err := pty.Start(pty.Config{
		Command:       spec.Command,
		Env:           spec.Env,
		Dir:           spec.Dir,
		Rows:          spec.Rows,
		Cols:          spec.Cols,
		Scrollback:    spec.Scrollback,
		ViewerBacklog: int(backlog),
		// Input the host has credited must not be refused: this covers
		// several viewers each sending a full host window (256 KiB UTF-16,
		// up to 384 KiB of UTF-8, plus one message) at once.
		InputQueue: 4 << 20,
		Logger:     log,
		Pacer:      pacer,
		Flooding:   flooding,
	})
	if err != nil {
		return nil, err
	}
	return ptyTerminal{t}, nil
}

type ptyTerminal struct{ *pty.Terminal }

func (p ptyTerminal) Attach(wake func(), window int64) Viewer {
	return ptyViewer{p.Terminal.AttachWindow(wake, window)}
}

func (p ptyTerminal) Running() bool { return p.State() == "running" }

func (p ptyTerminal) Paced() time.Duration { return p.Stats().Paced }

func (p ptyTerminal) Title() string {
	if t, ok := any(p.Terminal).(interface{ Title() string }); ok {
		return t.Title()
	}
	return ""
}

type ptyViewer struct{ *pty.Viewer }

func (v ptyViewer) Stats() ViewerStats {
	s := v.Viewer.Stats()
	return ViewerStats{BytesDropped: s.BytesDropped, Snapshots: s.Snapshots, Queued: s.Queued}
}

// ExitDetail describes the exit status ("code 0", "signal SIGHUP").
func (p ptyTerminal) ExitDetail() string {
	st, ok := p.Exit()
	switch {
	case !ok:
		return "running"
	case st.Signal != "":
		return "signal " + st.Signal
	}
	return "code " + strconv.Itoa(st.Code)
}
