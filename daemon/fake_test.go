package daemon_test

import (
	"encoding/json"
	"log/slog"
	"strconv"
	"sync"

	"github.com/ahp-dev/ahpd/daemon/service"
	"github.com/ahp-dev/ahpd/flow"
)

// fakeTerm is a terminal double for protocol tests: Emit broadcasts output
// to every viewer; a viewer's first messages are reset + ready. Real PTYs
// are exercised in pty_integration_test.go.
type fakeTerm struct {
	mu      sync.Mutex
	viewers map[*fakeViewer]bool
	input   []byte
	ending
	rows int
	cols int
}

func newFakeFactory(terms *[]*fakeTerm, mu *sync.Mutex) service.TerminalFactory {
	return func(spec service.TerminalSpec, backlog int64, log *slog.Logger) (flow.Channel, error) {
		t := &fakeTerm{viewers: map[*fakeViewer]bool{}, rows: 24, cols: 80, ending: newEnding()}
		mu.Lock()
		*terms = append(*terms, t)
		mu.Unlock()
		return t, nil
	}
}

func outputMessage(data string) string {
	b := []byte(`{"jsonrpc":"2.0","method":"terminal/output","params":{"data":`)
	b = flow.AppendJSONString(b, data)
	return string(append(b, `}}`...))
}

func (t *fakeTerm) Emit(data string) {
	m := flow.Message{Text: outputMessage(data)}
	t.mu.Lock()
	var wakes []func()
	for v := range t.viewers {
		v.mu.Lock()
		v.queue = append(v.queue, m)
		v.mu.Unlock()
		wakes = append(wakes, v.wake)
	}
	t.mu.Unlock()
	for _, w := range wakes {
		w()
	}
}

func (t *fakeTerm) Attach(req flow.AttachRequest) (flow.Subscriber, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v := &fakeViewer{t: t, wake: req.Wake, control: req.Role == flow.RoleControl}
	v.queue = []flow.Message{
		{Text: `{"jsonrpc":"2.0","method":"terminal/reset","params":{"rows":` + strconv.Itoa(t.rows) + `,"cols":` + strconv.Itoa(t.cols) + `}}`},
		{Text: `{"jsonrpc":"2.0","method":"channel/ready","params":{}}`},
	}
	t.viewers[v] = true
	return v, nil
}

func (t *fakeTerm) Input(data []byte, done func()) error {
	t.mu.Lock()
	t.input = append(t.input, data...)
	t.mu.Unlock()
	done() // in order, like a real terminal's writer
	return nil
}

// inputText is everything the terminal received as input.
func (t *fakeTerm) inputText() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.input)
}

func (t *fakeTerm) Resize(rows, cols int) error {
	t.mu.Lock()
	t.rows, t.cols = rows, cols
	t.mu.Unlock()
	return nil
}

func (t *fakeTerm) Kind() string               { return "terminal" }
func (t *fakeTerm) Describe() flow.Description { return flow.Description{} }

// ending is a fake channel's end: State, Close and Done.
type ending struct {
	once sync.Once
	done chan struct{}
}

func newEnding() ending { return ending{done: make(chan struct{})} }

// State is closed once Close was called, else running.
func (e *ending) State() flow.ChannelState {
	select {
	case <-e.done:
		return flow.StateClosed
	default:
		return flow.StateRunning
	}
}

// Close ends the channel; idempotent.
func (e *ending) Close() error {
	e.once.Do(func() { close(e.done) })
	return nil
}

// Done is closed by Close (a fake has nothing to release).
func (e *ending) Done() <-chan struct{} { return e.done }

// fakeViewer is a fakeTerm's flow.Subscriber: it takes terminal/input and
// terminal/resize as a pty.Viewer does, role checks included.
type fakeViewer struct {
	t       *fakeTerm
	wake    func()
	control bool
	mu      sync.Mutex
	queue   []flow.Message
}

func (v *fakeViewer) Ready() (flow.AttachResult, bool, error) {
	return flow.AttachResult{Initial: flow.InitialSnapshot}, true, nil
}

func (v *fakeViewer) Deliver(method string, params json.RawMessage, release func()) error {
	var p struct {
		Data *string `json:"data"`
	}
	if method != "terminal/input" || json.Unmarshal(params, &p) != nil || p.Data == nil {
		return &flow.Reset{Code: flow.CodeProtocolError, Message: "want terminal/input with params.data"}
	}
	if !v.control {
		return &flow.Reset{Code: flow.CodeForbidden, Message: "view role cannot send input"}
	}
	return v.t.Input([]byte(*p.Data), release)
}

func (v *fakeViewer) Request(method string, params json.RawMessage) (any, error) {
	var p struct{ Rows, Cols int }
	if method != "terminal/resize" {
		return nil, &flow.Error{Code: flow.ErrCodeMethodNotFound, Message: "method not found"}
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, err
	}
	if !v.control {
		return nil, &flow.Error{Code: flow.ErrCodeForbidden, Message: "forbidden: view role cannot resize"}
	}
	return struct{}{}, v.t.Resize(p.Rows, p.Cols)
}

func (v *fakeViewer) End() *flow.Reset {
	if v.t.State() == flow.StateClosed {
		return &flow.Reset{Code: flow.CodeChannelClosed, Message: "the channel was closed"}
	}
	return nil
}

func (v *fakeViewer) Stats() flow.SubscriberStats { return flow.SubscriberStats{} }

func (v *fakeViewer) Pull(dataAllowed bool, max int64) (flow.Message, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !dataAllowed || len(v.queue) == 0 {
		return flow.Message{}, false
	}
	m := v.queue[0]
	v.queue = v.queue[1:]
	return m, true
}

func (v *fakeViewer) Close() {
	v.t.mu.Lock()
	delete(v.t.viewers, v)
	v.t.mu.Unlock()
}
