package pty

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/ahp-dev/ahpd/flow"
)

// A Terminal is a flow.Channel and each of its Viewers a flow.Subscriber:
// the daemon serves them with no terminal-specific code in its
// connections (flow/doc.go, "Channels").
var (
	_ flow.Channel    = (*Terminal)(nil)
	_ flow.Subscriber = (*Viewer)(nil)
)

// Kind is "terminal".
func (t *Terminal) Kind() string { return "terminal" }

// Describe returns the window title the program set (OSC 0 or 2; "" for
// none) and, once the process has exited, the exit status as the detail
// ("code 0", "signal SIGHUP").
func (t *Terminal) Describe() flow.Description {
	d := flow.Description{Title: t.Title()}
	st, ok := t.Exit()
	switch {
	case !ok:
		return d
	case st.Signal != "":
		d.Detail = "signal " + st.Signal
	default:
		d.Detail = "code " + strconv.Itoa(st.Code)
	}
	d.Exit = &flow.Exit{Code: st.Code, Signal: st.Signal}
	return d
}

// Command is the command line the terminal runs (its program and
// arguments).
func (t *Terminal) Command() []string { return append([]string(nil), t.cfg.Command...) }

// Dir is the directory the terminal's program started in (Config.Dir, or
// the daemon's working directory then).
func (t *Terminal) Dir() string { return t.dir }

// Title is the window title the program set last (OSC 0 or 2), as the
// emulator has applied it (it may lag the output by its lazy timer), or
// "" for none.
func (t *Terminal) Title() string {
	if p := t.title.Load(); p != nil {
		return *p
	}
	return ""
}

// Attach adds a viewer (AttachWindow with req.Wake and req.Window) that
// may send input and resize when req.Role is control. A terminal has no
// resume: every subscription starts with a snapshot. Beyond
// Config.MaxViewers viewers it refuses with -32004 limit exceeded
// (PROTOCOL.md §7), as the daemon does beyond maxSubscriptions.
func (t *Terminal) Attach(req flow.AttachRequest) (flow.Subscriber, error) {
	select {
	case <-t.closing:
		return nil, &flow.Error{Code: flow.ErrCodeChannelNotFound, Message: "the terminal is closed"}
	default:
	}
	limit := 0
	if t.cfg.MaxViewers != nil {
		limit = t.cfg.MaxViewers() // not under t.mu: the daemon's function may take its own locks
	}
	v := t.attach(req.Wake, req.Window, limit)
	if v == nil {
		return nil, &flow.Error{Code: flow.ErrCodeLimitExceeded, Message: fmt.Sprintf("limit exceeded: at most %d viewers per terminal (maxViewersPerTerminal)", limit)}
	}
	v.control = req.Role == flow.RoleControl
	return v, nil
}

// Done is closed once Close has released the terminal.
func (t *Terminal) Done() <-chan struct{} { return t.done }

// Ready reports a viewer ready at once; it starts with a snapshot.
func (v *Viewer) Ready() (flow.AttachResult, bool, error) {
	return flow.AttachResult{Initial: flow.InitialSnapshot}, true, nil
}

// Deliver takes terminal/input (PROTOCOL.md §8): release runs once the
// data is written to the PTY.
func (v *Viewer) Deliver(method string, params json.RawMessage, release func()) error {
	if method != "terminal/input" {
		return &flow.Reset{Code: flow.CodeProtocolError, Message: fmt.Sprintf("unexpected %q on a terminal", method)}
	}
	if !v.control {
		return &flow.Reset{Code: flow.CodeForbidden, Message: "view role cannot send input"}
	}
	data, ok := inputData(params)
	if !ok {
		var p struct {
			Data *string `json:"data"`
		}
		if err := json.Unmarshal(params, &p); err != nil || p.Data == nil {
			return &flow.Reset{Code: flow.CodeProtocolError, Message: "terminal/input needs params.data"}
		}
		data = []byte(*p.Data)
	}
	v.active() // typing makes its size decide (size.go)
	err := v.t.Input(data, release)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrExited), errors.Is(err, ErrClosed):
		return &flow.Reset{Code: flow.CodeChannelClosed, Message: "the terminal has exited"}
	}
	return &flow.Reset{Code: flow.CodeOverflow, Message: err.Error()}
}

// inputData reads terminal/input's params in the shape every client
// writes, {"data":"…"} with nothing else and no '"' escaped inside,
// without encoding/json (it took a tenth of the daemon's CPU per
// keystroke); ok is false for any other shape or for text
// flow.AppendUnescaped refuses (invalid UTF-8, a lone surrogate), which
// encoding/json then reads or refuses as before. params has been checked
// to be well-formed JSON (flow.DecodeNotification).
func inputData(params []byte) (data []byte, ok bool) {
	const head, tail = `{"data":"`, `"}`
	if len(params) < len(head)+len(tail) || string(params[:len(head)]) != head || string(params[len(params)-len(tail):]) != tail {
		return nil, false
	}
	body := params[len(head) : len(params)-len(tail)]
	for _, c := range body {
		if c == '"' || c < 0x20 {
			return nil, false
		}
	}
	data, _, err := flow.AppendUnescaped(make([]byte, 0, len(body)), body)
	return data, err == nil
}

// Request answers terminal/resize {rows, cols} (role control) with {}:
// the request tells the viewer's size, and whether the PTY takes it is the
// size policy's choice (size.go); every viewer learns the size the PTY has
// from terminal/resize in its stream. A view-only viewer is refused
// (-32003) and never resizes.
func (v *Viewer) Request(method string, params json.RawMessage) (any, error) {
	if method != "terminal/resize" {
		return nil, &flow.Error{Code: flow.ErrCodeMethodNotFound, Message: "method not found: " + strconv.Quote(method) + " on a terminal"}
	}
	var p struct {
		Rows int `json:"rows"`
		Cols int `json:"cols"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &flow.Error{Code: flow.ErrCodeInvalidParams, Message: "invalid params: " + err.Error()}
	}
	if !v.control {
		return nil, &flow.Error{Code: flow.ErrCodeForbidden, Message: "forbidden: view role cannot resize"}
	}
	if err := v.requestSize(p.Rows, p.Cols); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// End reports channel-closed once the terminal is being closed.
func (v *Viewer) End() *flow.Reset {
	select {
	case <-v.t.closing:
		return &flow.Reset{Code: flow.CodeChannelClosed, Message: "the channel was closed"}
	default:
		return nil
	}
}
