package pty

import (
	"encoding/json"
	"testing"

	"github.com/ahp-dev/ahpd/flow"
)

// messageText returns m's text: Text, or the text whose body Escaped is,
// after checking that Escaped is what the Sender takes it for (ASCII,
// no control characters, every '"' escaped and every escape '\\' '\\' or
// '\\' '"') and that Size, when set, is the text's.
func messageText(t testing.TB, m flow.Message) string {
	t.Helper()
	if m.Escaped == "" {
		return m.Text
	}
	if m.Text != "" {
		t.Fatalf("a message with both Text and Escaped: %.60q", m.Text)
	}
	esc := m.Escaped
	text := make([]byte, 0, len(esc))
	for i := 0; i < len(esc); i++ {
		c := esc[i]
		switch {
		case c < 0x20 || c >= 0x80:
			t.Fatalf("Escaped has byte %#x at %d: %.80q", c, i, esc)
		case c == '"':
			t.Fatalf("Escaped has a '\"' not escaped at %d: %.80q", i, esc)
		case c == '\\':
			if i+1 == len(esc) || (esc[i+1] != '\\' && esc[i+1] != '"') {
				t.Fatalf("Escaped has an escape other than \\\\ or \\\" at %d: %.80q", i, esc)
			}
			i++
			c = esc[i]
		}
		text = append(text, c)
	}
	if m.Size != 0 && m.Size != flow.EscapedTextSize(esc) {
		t.Fatalf("escaped message Size %d, its text's %d", m.Size, flow.EscapedTextSize(esc))
	}
	return string(text)
}

// messageData decodes m (messageText) and returns its method and its
// params.data: the output of a terminal/output message, "" for most
// others.
func messageData(t testing.TB, m flow.Message) (method, data string) {
	t.Helper()
	var msg struct {
		Method string
		Params struct{ Data string }
	}
	if err := json.Unmarshal([]byte(messageText(t, m)), &msg); err != nil {
		t.Fatal(err)
	}
	return msg.Method, msg.Params.Data
}
