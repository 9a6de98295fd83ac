package pty_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/pty"
)

// The channel contract (flow.Channel, flow.Subscriber) as a connection
// drives it, over real PTYs.

// attachAs attaches a subscriber with role the way a connection does and
// returns it with a viewer helper that pulls from it.
func attachAs(t *testing.T, term *pty.Terminal, role flow.Role) (flow.Subscriber, *viewer) {
	t.Helper()
	w := &viewer{t: t, wake: make(chan struct{}, 1), max: 64 << 10}
	sub, err := term.Attach(flow.AttachRequest{
		Wake: func() {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		},
		Window: 256 << 10,
		Role:   role,
	})
	if err != nil {
		t.Fatalf("Attach(role %d) = %v", role, err)
	}
	t.Cleanup(sub.Close)
	v, ok := sub.(*pty.Viewer)
	if !ok {
		t.Fatalf("Attach returned a %T, want a *pty.Viewer", sub)
	}
	w.v = v
	return sub, w
}

// untilOutput pulls until the terminal/output data seen (snapshot
// included) contains want, and returns all of it.
func (w *viewer) untilOutput(want string) string {
	w.t.Helper()
	var got strings.Builder
	for !strings.Contains(got.String(), want) {
		m, ok := w.pull(10 * time.Second)
		if !ok {
			w.t.Fatalf("no %q in the output within 10s; got %q", want, got.String())
		}
		if m.Method == "terminal/output" {
			got.WriteString(m.Params.Data)
		}
	}
	return got.String()
}

// releases counts the calls of a Deliver's release.
type releases struct {
	n  atomic.Int32
	ch chan struct{}
}

func newReleases() *releases { return &releases{ch: make(chan struct{}, 64)} }

func (r *releases) release() {
	r.n.Add(1)
	select {
	case r.ch <- struct{}{}:
	default:
	}
}

// wait waits (bounded) for a release.
func (r *releases) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.ch:
	case <-time.After(10 * time.Second):
		t.Fatal("release was not called within 10s")
	}
}

func inputParams(data string) json.RawMessage {
	b, err := json.Marshal(map[string]string{"data": data})
	if err != nil {
		panic(err)
	}
	return b
}

// TestChannelDeliverRefused: input a subscriber may not send, or that is
// not terminal/input {data}, is refused with a reset, is not released and
// does not reach the PTY, and the subscription's next good input does.
func TestChannelDeliverRefused(t *testing.T) {
	term := start(t, pty.Config{Command: sh("exec cat"), InputQueue: 1 << 10})
	ctl, w := attachAs(t, term, flow.RoleControl)
	view, _ := attachAs(t, term, flow.RoleView)
	refused := newReleases()
	for _, tt := range []struct {
		name   string
		sub    flow.Subscriber
		method string
		params string
		code   string
	}{
		{"view role", view, "terminal/input", `{"data":"refused-view\n"}`, flow.CodeForbidden},
		{"unknown method", ctl, "terminal/inputs", `{"data":"refused-method\n"}`, flow.CodeProtocolError},
		{"another kind's method", ctl, "tcp/input", `{"offset":0,"data":"refused-tcp\n"}`, flow.CodeProtocolError},
		{"unknown method, view role", view, "terminal/resize", `{"rows":30,"cols":100}`, flow.CodeProtocolError},
		{"no data", ctl, "terminal/input", `{"text":"refused-nodata\n"}`, flow.CodeProtocolError},
		{"null data", ctl, "terminal/input", `{"data":null}`, flow.CodeProtocolError},
		{"data not a string", ctl, "terminal/input", `{"data":["refused-array\n"]}`, flow.CodeProtocolError},
		{"null params", ctl, "terminal/input", `null`, flow.CodeProtocolError},
		{"no params", ctl, "terminal/input", ``, flow.CodeProtocolError},
		{"params not JSON", ctl, "terminal/input", `{"data":"refused-json\n"`, flow.CodeProtocolError},
		{"over the input queue", ctl, "terminal/input", string(inputParams("refused-big" + strings.Repeat("x", 2<<10) + "\n")), flow.CodeOverflow},
	} {
		err := tt.sub.Deliver(tt.method, json.RawMessage(tt.params), refused.release)
		var r *flow.Reset
		if !errors.As(err, &r) || r.Code != tt.code || r.Message == "" {
			t.Errorf("%s: Deliver(%q, %s) = %v, want a *flow.Reset with code %s and a message", tt.name, tt.method, tt.params, err, tt.code)
		}
	}
	ok := newReleases()
	if err := ctl.Deliver("terminal/input", inputParams("accepted\n"), ok.release); err != nil {
		t.Fatalf("Deliver(terminal/input) with role control = %v", err)
	}
	ok.wait(t)
	// Input reaches the PTY in order and the tty echoes it as it is
	// written: had a refused one been written, its echo would come first.
	if out := w.untilOutput("accepted"); strings.Contains(out, "refused") {
		t.Errorf("refused input reached the PTY: output %q", out)
	}
	term.Close()
	if n := refused.n.Load(); n != 0 {
		t.Errorf("release of refused input called %d times, want 0", n)
	}
	if n := ok.n.Load(); n != 1 {
		t.Errorf("release of accepted input called %d times, want 1", n)
	}
}

// TestChannelDeliverReleaseAfterWrite: a control subscriber's input reaches
// the PTY byte for byte, and its release is called exactly once, only
// when the PTY has taken all of it: the input is larger than the kernel
// buffers, and the command does not read until the test says so.
func TestChannelDeliverReleaseAfterWrite(t *testing.T) {
	dir := t.TempDir()
	gate, out := filepath.Join(dir, "go"), filepath.Join(dir, "out")
	var b strings.Builder
	for i := 0; b.Len() < 200<<10; i++ {
		fmt.Fprintf(&b, "line %d of the input, \"quoted\" \\ and 日本語\n", i)
	}
	payload := b.String()
	term := start(t, pty.Config{Command: sh(fmt.Sprintf(
		"stty raw -echo; echo ready; while [ ! -e '%s' ]; do sleep 0.01; done; head -c %d > '%s'",
		gate, len(payload), out))})
	ctl, w := attachAs(t, term, flow.RoleControl)
	w.untilOutput("ready") // stty has run: the input goes through unchanged
	rel := newReleases()
	if err := ctl.Deliver("terminal/input", inputParams(payload), rel.release); err != nil {
		t.Fatalf("Deliver(terminal/input) of %d bytes = %v", len(payload), err)
	}
	// Nothing reads the PTY yet, and its buffers (about 68 KiB on Linux)
	// cannot hold 200 KiB: the input is not all written, and release must
	// not come, neither from Deliver nor (the bounded wait, a check that
	// something does not happen) from another goroutine soon after.
	if n := rel.n.Load(); n != 0 {
		t.Fatalf("release called %d times by Deliver, before the PTY could take the input", n)
	}
	select {
	case <-rel.ch:
		t.Fatal("release called before the PTY could take the input")
	case <-time.After(200 * time.Millisecond):
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	rel.wait(t)
	select {
	case <-term.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("the command did not read all the input within 10s")
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, []byte(payload)) {
		t.Errorf("the command read %d bytes, want the %d delivered (first difference at %d)", len(got), len(payload), firstByteDiff(got, []byte(payload)))
	}
	term.Close()
	if n := rel.n.Load(); n != 1 {
		t.Errorf("release called %d times, want 1", n)
	}
}

func firstByteDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestChannelRequest: terminal/resize needs role control and valid
// params; other methods are not found.
func TestChannelRequest(t *testing.T) {
	term := start(t, pty.Config{Command: sh("exec cat"), Rows: 24, Cols: 80})
	ctl, w := attachAs(t, term, flow.RoleControl)
	view, _ := attachAs(t, term, flow.RoleView)
	untilReady(t, w) // so that the resize comes as a notice, not in the first snapshot
	for _, tt := range []struct {
		name   string
		sub    flow.Subscriber
		method string
		params string
		code   int
	}{
		{"view role", view, "terminal/resize", `{"rows":30,"cols":100}`, flow.ErrCodeForbidden},
		{"unknown method", ctl, "terminal/scroll", `{"lines":1}`, flow.ErrCodeMethodNotFound},
		{"input is not a request", ctl, "terminal/input", `{"data":"x"}`, flow.ErrCodeMethodNotFound},
		{"rows not a number", ctl, "terminal/resize", `{"rows":"30","cols":100}`, flow.ErrCodeInvalidParams},
		{"params an array", ctl, "terminal/resize", `[30,100]`, flow.ErrCodeInvalidParams},
		{"params not JSON", ctl, "terminal/resize", `{"rows":30,`, flow.ErrCodeInvalidParams},
	} {
		res, err := tt.sub.Request(tt.method, json.RawMessage(tt.params))
		var e *flow.Error
		if !errors.As(err, &e) || e.Code != tt.code || e.Message == "" || res != nil {
			t.Errorf("%s: Request(%q, %s) = %v, %v; want a *flow.Error with code %d and a message", tt.name, tt.method, tt.params, res, err, tt.code)
		}
	}
	if rows, cols := term.Size(); rows != 24 || cols != 80 {
		t.Fatalf("refused requests changed the size to %dx%d", rows, cols)
	}
	// A size out of range is not a *flow.Error: the connection answers it
	// with -32602 invalid params (flow.Subscriber).
	for _, params := range []string{`{"rows":0,"cols":100}`, `{"rows":30,"cols":1001}`, `{}`} {
		res, err := ctl.Request("terminal/resize", json.RawMessage(params))
		var e *flow.Error
		if !errors.Is(err, pty.ErrInvalidSize) || errors.As(err, &e) || res != nil {
			t.Errorf("Request(terminal/resize, %s) = %v, %v; want ErrInvalidSize", params, res, err)
		}
	}
	res, err := ctl.Request("terminal/resize", json.RawMessage(`{"rows":30,"cols":100}`))
	if err != nil {
		t.Fatalf("Request(terminal/resize) with role control = %v", err)
	}
	if b, err := json.Marshal(res); err != nil || string(b) != "{}" {
		t.Errorf("terminal/resize result marshals to %s, %v; want {}", b, err)
	}
	if rows, cols := term.Size(); rows != 30 || cols != 100 {
		t.Errorf("Size() = %dx%d after terminal/resize, want 30x100", rows, cols)
	}
	for {
		m, ok := w.pull(10 * time.Second)
		if !ok {
			t.Fatal("no terminal/resize notice within 10s")
		}
		if m.Method == "terminal/resize" {
			if m.Params.Rows != 30 || m.Params.Cols != 100 {
				t.Errorf("terminal/resize notice %+v, want 30x100", m.Params)
			}
			break
		}
	}
}

// TestChannelLifecycle: State, Describe, End, Done and Attach from start
// to exit to Close.
func TestChannelLifecycle(t *testing.T) {
	for _, tt := range []struct {
		script, detail string
	}{
		{"read x; exit 7", "code 7"},
		{"read x; kill -9 $$", "signal SIGKILL"},
	} {
		t.Run(tt.detail, func(t *testing.T) {
			term := start(t, pty.Config{Command: sh(tt.script)})
			if k := term.Kind(); k != "terminal" {
				t.Errorf("Kind() = %q, want terminal", k)
			}
			view, _ := attachAs(t, term, flow.RoleView)
			ctl, _ := attachAs(t, term, flow.RoleControl)
			for _, sub := range []flow.Subscriber{view, ctl} {
				res, ok, err := sub.Ready()
				if res != (flow.AttachResult{Initial: flow.InitialSnapshot}) || !ok || err != nil {
					t.Errorf("Ready() = %+v, %v, %v; want a snapshot with no lease, true, nil", res, ok, err)
				}
			}
			if s := term.State(); s != flow.StateRunning {
				t.Errorf("State() = %q while the process runs, want running", s)
			}
			if d := term.Describe(); d != (flow.Description{}) {
				t.Errorf("Describe() = %+v while the process runs, want none", d)
			}
			if end := view.End(); end != nil {
				t.Errorf("End() = %+v while the process runs, want nil", end)
			}
			select {
			case <-term.Done():
				t.Fatal("Done() is closed before Close")
			default:
			}

			if err := ctl.Deliver("terminal/input", inputParams("\n"), nil); err != nil {
				t.Fatal(err)
			}
			select {
			case <-term.Exited():
			case <-time.After(10 * time.Second):
				t.Fatal("the process did not exit within 10s")
			}
			if s := term.State(); s != flow.StateExited {
				t.Errorf("State() = %q after the process exited, want exited", s)
			}
			if d := term.Describe(); d.Detail != tt.detail || d.Title != "" {
				t.Errorf("Describe() = %+v after exit, want detail %q", d, tt.detail)
			}
			// The subscription goes on after the exit, so that its viewer
			// can pull terminal/exit.
			if end := view.End(); end != nil {
				t.Errorf("End() = %+v after the exit, before Close; want nil", end)
			}
			rel := newReleases()
			err := ctl.Deliver("terminal/input", inputParams("late\n"), rel.release)
			if r := (*flow.Reset)(nil); !errors.As(err, &r) || r.Code != flow.CodeChannelClosed {
				t.Errorf("Deliver after the exit = %v, want a channel-closed reset", err)
			}

			if err := term.Close(); err != nil {
				t.Fatalf("Close() = %v", err)
			}
			select {
			case <-term.Done():
			default:
				t.Fatal("Done() is not closed when Close returns")
			}
			if s := term.State(); s != flow.StateClosed {
				t.Errorf("State() = %q after Close, want closed", s)
			}
			if d := term.Describe(); d.Detail != tt.detail {
				t.Errorf("Describe() = %+v after Close, want detail %q", d, tt.detail)
			}
			for _, sub := range []flow.Subscriber{view, ctl} {
				if end := sub.End(); end == nil || end.Code != flow.CodeChannelClosed || end.Message == "" {
					t.Errorf("End() = %+v after Close, want a channel-closed reset", end)
				}
			}
			err = ctl.Deliver("terminal/input", inputParams("later\n"), rel.release)
			if r := (*flow.Reset)(nil); !errors.As(err, &r) || r.Code != flow.CodeChannelClosed {
				t.Errorf("Deliver after Close = %v, want a channel-closed reset", err)
			}
			sub, err := term.Attach(flow.AttachRequest{Wake: func() {}, Window: 4096, Role: flow.RoleControl})
			if e := (*flow.Error)(nil); !errors.As(err, &e) || e.Code != flow.ErrCodeChannelNotFound || sub != nil {
				t.Errorf("Attach after Close = %v, %v; want nil and a *flow.Error with code %d", sub, err, flow.ErrCodeChannelNotFound)
			}
			if err := term.Close(); err != nil {
				t.Errorf("a second Close() = %v", err)
			}
			if n := rel.n.Load(); n != 0 {
				t.Errorf("release of refused input called %d times, want 0", n)
			}
		})
	}
}

// TestChannelMaxViewers: Attach refuses a viewer beyond Config.MaxViewers
// with -32004 naming maxViewersPerTerminal, leaves the viewers attached as
// they were, and applies the limit as it is at each Attach: a viewer that
// leaves makes room, and a limit raised or removed at run time applies to
// the next Attach.
func TestChannelMaxViewers(t *testing.T) {
	var limit atomic.Int64
	limit.Store(3)
	term := start(t, pty.Config{Command: sh("sleep 30"), MaxViewers: func() int { return int(limit.Load()) }})
	attach := func() (flow.Subscriber, error) {
		sub, err := term.Attach(flow.AttachRequest{Wake: func() {}, Window: 64 << 10, Role: flow.RoleView})
		if err == nil {
			t.Cleanup(sub.Close)
		}
		return sub, err
	}
	refused := func(what string) {
		t.Helper()
		before := term.Stats().Viewers
		sub, err := attach()
		if e := (*flow.Error)(nil); !errors.As(err, &e) || e.Code != flow.ErrCodeLimitExceeded || sub != nil ||
			!strings.Contains(e.Message, "maxViewersPerTerminal") || !strings.Contains(e.Message, fmt.Sprint(limit.Load())) {
			t.Fatalf("%s: Attach = %v, %v; want nil and a *flow.Error with code %d naming maxViewersPerTerminal and %d", what, sub, err, flow.ErrCodeLimitExceeded, limit.Load())
		}
		if n := term.Stats().Viewers; n != before {
			t.Fatalf("%s: %d viewers after a refused Attach, %d before", what, n, before)
		}
	}
	accepted := func(what string) flow.Subscriber {
		t.Helper()
		sub, err := attach()
		if err != nil {
			t.Fatalf("%s: Attach = %v", what, err)
		}
		return sub
	}
	var subs []flow.Subscriber
	for i := range 3 {
		subs = append(subs, accepted(fmt.Sprintf("viewer %d of 3", i+1)))
	}
	refused("a fourth viewer")
	subs[0].Close()
	accepted("a viewer after one left")
	refused("a fourth viewer again")
	limit.Store(4)
	accepted("a fourth viewer under a limit raised to 4")
	refused("a fifth viewer")
	limit.Store(2)
	refused("a viewer under a limit lowered below the viewers attached")
	if n := term.Stats().Viewers; n != 4 {
		t.Fatalf("%d viewers after the limit was lowered, want the 4 attached", n)
	}
	limit.Store(0)
	for i := range 3 {
		accepted(fmt.Sprintf("viewer %d without a limit", i+5))
	}
	if n := term.Stats().Viewers; n != 7 {
		t.Fatalf("%d viewers, want 7", n)
	}
}
