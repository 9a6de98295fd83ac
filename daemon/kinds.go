package daemon

import (
	"log/slog"

	"github.com/ahp-dev/ahpd/daemon/service"
	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/pty"
)

// The channel kinds the daemon serves. Each implements flow.Channel and
// its subscribers flow.Subscriber; the connection code knows none of them.
var _ flow.Channel = (*pty.Terminal)(nil)

// newPTYTerminal is the default TerminalFactory (with the server's pacer
// and flooding hook): a real PTY with the host's VT emulator (package pty).
func newPTYTerminal(spec service.TerminalSpec, backlog int64, log *slog.Logger, pacer *pty.Pacer, flooding func()) (flow.Channel, error) {
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
	return t, nil
}
