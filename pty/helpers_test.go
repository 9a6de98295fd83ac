package pty_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/pty"
)

func start(t testing.TB, cfg pty.Config) *pty.Terminal {
	t.Helper()
	term, err := pty.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { term.Close() })
	return term
}

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

// msg is a decoded logical message.
type msg struct {
	Method string `json:"method"`
	Params struct {
		Data    string  `json:"data"`
		Preview *string `json:"preview"`
		Rows    int     `json:"rows"`
		Cols    int     `json:"cols"`
		Code    *int    `json:"code"`
		Signal  *string `json:"signal"`
	} `json:"params"`
	class flow.Class
	size  int64
}

// viewer drives a pty.Viewer the way a connection would.
type viewer struct {
	t    testing.TB
	v    *pty.Viewer
	wake chan struct{}
	max  int64
}

func attach(t testing.TB, term *pty.Terminal, max int64) *viewer {
	w := &viewer{t: t, wake: make(chan struct{}, 1), max: max}
	w.v = term.AttachWindow(func() {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}, 0)
	t.Cleanup(w.v.Close)
	return w
}

// pull returns the next message, waiting (bounded) for one.
func (w *viewer) pull(timeout time.Duration) (msg, bool) {
	w.t.Helper()
	m, ok := w.pullRaw(timeout)
	if !ok {
		return msg{}, false
	}
	return w.decode(m), true
}

// pullRaw is pull without decoding, for viewers that must keep up with a
// flood (decoding JSON in the loop would make the test the bottleneck).
func (w *viewer) pullRaw(timeout time.Duration) (flow.Message, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		m, ok := w.v.Pull(true, w.max)
		if ok {
			// The viewer reuses the text's memory on its next Pull.
			m.Text, m.Escaped = strings.Clone(pty.MessageText(w.t, m)), ""
			if m.Size != 0 && m.Size != flow.UTF16Len(m.Text) {
				w.t.Fatalf("message Size %d, UTF16Len %d: %.80q", m.Size, flow.UTF16Len(m.Text), m.Text)
			}
			return m, true
		}
		select {
		case <-w.wake:
		case <-deadline.C:
			return flow.Message{}, false
		}
	}
}

// untilExitRaw pulls without decoding until terminal/exit, then decodes.
func (w *viewer) untilExitRaw(timeout time.Duration, each func()) []msg {
	w.t.Helper()
	var raw []flow.Message
	end := time.Now().Add(timeout)
	for {
		m, ok := w.pullRaw(time.Until(end))
		if !ok {
			w.t.Fatalf("no terminal/exit within %v", timeout)
		}
		raw = append(raw, m)
		if each != nil {
			each()
		}
		if m.Class == flow.Lifecycle {
			break
		}
	}
	out := make([]msg, len(raw))
	for i, m := range raw {
		out[i] = w.decode(m)
	}
	return out
}

func (w *viewer) decode(m flow.Message) msg {
	w.t.Helper()
	if n := flow.UTF16Len(m.Text); n > w.max {
		w.t.Fatalf("message of %d UTF-16 bytes exceeds maxMessageBytes %d", n, w.max)
	}
	if !utf8.ValidString(m.Text) {
		w.t.Fatalf("message is not valid UTF-8")
	}
	var d msg
	if err := json.Unmarshal([]byte(m.Text), &d); err != nil {
		w.t.Fatalf("bad JSON %q: %v", m.Text, err)
	}
	if !strings.HasPrefix(m.Text, `{"jsonrpc":"2.0","method":"`) {
		w.t.Fatalf("not a JSON-RPC notification: %q", m.Text)
	}
	wantClass := flow.Data
	if d.Method == "terminal/exit" {
		wantClass = flow.Lifecycle
	}
	if m.Class != wantClass {
		w.t.Fatalf("%s has class %d", d.Method, m.Class)
	}
	d.class = m.Class
	d.size = flow.UTF16Len(m.Text)
	return d
}

// untilExit pulls everything up to and including terminal/exit.
func (w *viewer) untilExit(timeout time.Duration) []msg {
	w.t.Helper()
	var out []msg
	end := time.Now().Add(timeout)
	for {
		m, ok := w.pull(time.Until(end))
		if !ok {
			w.t.Fatalf("no terminal/exit within %v (got %d messages)", timeout, len(out))
		}
		out = append(out, m)
		if m.Method == "terminal/exit" {
			return out
		}
	}
}

// liveText concatenates the terminal/output data after the first
// channel/ready (the live part of the stream), or all of it when the
// snapshot was pulled before.
func liveText(ms []msg) string {
	var b strings.Builder
	ready := true
	for _, m := range ms {
		if m.Method == "channel/ready" {
			ready = false
		}
	}
	for _, m := range ms {
		switch {
		case m.Method == "channel/ready":
			ready = true
		case ready && m.Method == "terminal/output":
			b.WriteString(m.Params.Data)
		}
	}
	return b.String()
}

// replay applies ms to e as the web page does, a snapshot's preview
// included (terminal-stream.js).
func replay(e *pty.Emulator, ms []msg) {
	previewing := false
	for _, m := range ms {
		switch m.Method {
		case "terminal/reset":
			e.Reset(m.Params.Rows, m.Params.Cols)
			previewing = m.Params.Preview != nil && *m.Params.Preview != ""
			if previewing {
				e.Write(pty.PreviewBefore + *m.Params.Preview + pty.PreviewAfter)
			}
		case "channel/ready":
			if previewing {
				e.Write(pty.PreviewEnd)
				previewing = false
			}
		case "terminal/resize":
			e.Resize(m.Params.Rows, m.Params.Cols)
		case "terminal/output":
			e.Write(m.Params.Data)
		}
	}
}

// untilReady pulls the initial snapshot up to channel/ready.
func untilReady(t testing.TB, w *viewer) {
	t.Helper()
	for {
		m, ok := w.pull(10 * time.Second)
		if !ok {
			t.Fatal("no channel/ready")
		}
		if m.Method == "channel/ready" {
			return
		}
	}
}
