package daemon_test

import (
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/ahp-dev/ahpd/daemon"
	"github.com/ahp-dev/ahpd/flow"
)

// fakeTerm is a terminal double for protocol tests: Emit broadcasts output
// to every viewer; a viewer's first messages are reset + ready. Real PTYs
// are exercised in pty_integration_test.go.
type fakeTerm struct {
	mu      sync.Mutex
	viewers map[*fakeViewer]bool
	input   []byte
	closed  bool
	rows    int
	cols    int
}

func newFakeFactory(terms *[]*fakeTerm, mu *sync.Mutex) daemon.TerminalFactory {
	return func(spec daemon.TerminalSpec, backlog int64, log *slog.Logger) (daemon.Terminal, error) {
		t := &fakeTerm{viewers: map[*fakeViewer]bool{}, rows: 24, cols: 80}
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

func (t *fakeTerm) Attach(wake func(), _ int64) daemon.Viewer {
	t.mu.Lock()
	defer t.mu.Unlock()
	v := &fakeViewer{t: t, wake: wake}
	v.queue = []flow.Message{
		{Text: `{"jsonrpc":"2.0","method":"terminal/reset","params":{"rows":` + strconv.Itoa(t.rows) + `,"cols":` + strconv.Itoa(t.cols) + `}}`},
		{Text: `{"jsonrpc":"2.0","method":"channel/ready","params":{}}`},
	}
	t.viewers[v] = true
	return v
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

func (t *fakeTerm) Running() bool        { return true }
func (t *fakeTerm) Title() string        { return "" }
func (t *fakeTerm) Paced() time.Duration { return 0 }
func (t *fakeTerm) Close() error {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	return nil
}

type fakeViewer struct {
	t     *fakeTerm
	wake  func()
	mu    sync.Mutex
	queue []flow.Message
}

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
