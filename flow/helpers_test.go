package flow_test

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ahp-dev/ahpd/flow"
)

// replaceInvalid returns s with every invalid UTF-8 byte replaced by
// U+FFFD, one per byte, as the flow encoder writes it. (strings.ToValidUTF8
// replaces a run of invalid bytes with one replacement, which is not the
// same.)
func replaceInvalid(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// limits returns valid ReceiveLimits.
func limits(window, frame, message int64) flow.ReceiveLimits {
	return flow.ReceiveLimits{WindowBytes: window, MaximumFrameBytes: frame, MaximumMessageBytes: message}
}

// notification serializes a logical message carrying data as a JSON
// string (the way channel packages build terminal/output).
func notification(method, data string) string {
	b := []byte(`{"jsonrpc":"2.0","method":"` + method + `","params":{"data":`)
	b = flow.AppendJSONString(b, data)
	return string(append(b, "}}"...))
}

// fakeSource is a deterministic Source: a queue of messages, optionally
// generated on demand. It records contract-relevant calls.
type fakeSource struct {
	queue []flow.Message
	// gen, when set, produces message n (0-based) whenever the queue is
	// empty: an always-ready source.
	gen   func(n int) flow.Message
	n     int
	pulls int
	// cheat makes Pull return data even when it is not allowed.
	cheat bool
}

func (s *fakeSource) Pull(dataAllowed bool, maxMessageBytes int64) (flow.Message, bool) {
	s.pulls++
	if len(s.queue) == 0 && s.gen != nil {
		s.queue = append(s.queue, s.gen(s.n))
		s.n++
	}
	if len(s.queue) == 0 {
		return flow.Message{}, false
	}
	m := s.queue[0]
	if !dataAllowed && m.Class == flow.Data && !s.cheat {
		return flow.Message{}, false
	}
	s.queue = s.queue[1:]
	return m, true
}

func (s *fakeSource) push(ms ...flow.Message) { s.queue = append(s.queue, ms...) }

func dataMsg(text string) flow.Message { return flow.Message{Text: text, Class: flow.Data} }

func lifecycleMsg(text string) flow.Message { return flow.Message{Text: text, Class: flow.Lifecycle} }

// sized returns a logical message whose UTF-16 size is exactly n (n even,
// large enough for the tag), tagged so messages are distinguishable.
func sized(tag string, n int64) string {
	head := `{"t":"` + tag + `","d":"`
	tail := `"}`
	pad := n/2 - int64(len(head)+len(tail))
	if pad < 0 {
		panic(fmt.Sprintf("sized(%q, %d): too small", tag, n))
	}
	return head + strings.Repeat("x", int(pad)) + tail
}
