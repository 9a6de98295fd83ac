package pty

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/ahp-dev/ahpd/flow"
)

// What a viewer writes around a snapshot's preview (the web page's
// terminal-stream.js does the same): the preview on the alternate screen,
// then back to the normal screen, at home, before the snapshot itself,
// with rendering held until previewEnd (before channel/ready).
const (
	previewBefore = "\x1b[?1047h\x1b[H"
	previewAfter  = "\x1b[?2026h\x1b[?1047l\x1b[H\x1b[?25h"
	previewEnd    = "\x1b[?2026l"
)

// previewScripts are the fidelity scripts and a few that end on a full
// scrollback, in colour, on the alternate screen and mid-line.
func previewScripts() map[string]string {
	m := maps.Clone(fidelityScripts)
	var b strings.Builder
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&b, "\x1b[3%dmline %d\x1b[0m of plain text 漢字\r\n", i%8, i)
	}
	m["long"] = b.String() + "prompt$ "
	m["long-alt"] = b.String() + "\x1b[?1049h\x1b[2;3Hin vim\x1b[5;1H~"
	m["long-hidden"] = b.String() + "\x1b[?25l\x1b[1;3H"
	return m
}

// TestPreview: the preview, drawn on a blank alternate screen, shows the
// rows and the cursor the snapshot ends on; and a viewer that draws it as
// the page does and then applies the snapshot ends in exactly the state of
// one that applied the snapshot alone (the preview's alternate screen, pen
// and cursor are all gone; roundTrip checks the same for every fidelity
// and random script).
func TestPreview(t *testing.T) {
	for name, s := range previewScripts() {
		for _, sz := range [][2]int{{24, 80}, {5, 10}} {
			a := NewEmulator(sz[0], sz[1], 100)
			a.Write(s)
			b := NewEmulator(sz[0], sz[1], 100)
			b.Write(previewBefore + a.Preview())
			for y := 0; y < sz[0]; y++ {
				if got, want := b.LineText(y), a.LineText(y); got != want {
					t.Errorf("%s %dx%d: preview row %d = %q, want %q", name, sz[0], sz[1], y, got, want)
				}
			}
			ax, ay, _ := a.Cursor()
			bx, by, _ := b.Cursor()
			if ax != bx || ay != by {
				t.Errorf("%s %dx%d: preview cursor at %d,%d, want %d,%d", name, sz[0], sz[1], bx, by, ax, ay)
			}
			if a.e.cursorHidden != b.e.cursorHidden {
				t.Errorf("%s %dx%d: preview cursor hidden %v, want %v", name, sz[0], sz[1], b.e.cursorHidden, a.e.cursorHidden)
			}
			b.Write(previewAfter + a.Snapshot() + previewEnd)
			if d := Diff(a, b); len(d) > 0 {
				t.Errorf("%s %dx%d: preview then snapshot differs from the state:\n%s", name, sz[0], sz[1], strings.Join(d, "\n"))
			}
		}
	}
}

// TestResetMsgPreview: terminal/reset carries the preview as a JSON string
// when it fits the message limit, its size is the message's UTF-16 size,
// and it goes without the preview when it does not fit.
func TestResetMsgPreview(t *testing.T) {
	preview := "\x1b[31m漢字 \"quoted\" \\ 😀\x1b[m\r\nline two\x1b[2;3H"
	esc, esc16 := escapePreview(preview)
	text, size := resetMsg(24, 80, esc, esc16, 1<<20)
	var m struct {
		Method string
		Params struct {
			Rows, Cols int
			Preview    *string
		}
	}
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		t.Fatalf("reset with preview is not JSON: %v: %q", err, text)
	}
	if m.Method != "terminal/reset" || m.Params.Rows != 24 || m.Params.Cols != 80 || m.Params.Preview == nil || *m.Params.Preview != preview {
		t.Fatalf("reset = %q, want rows 24, cols 80 and the preview", text)
	}
	if want := flow.UTF16Len(text); size != want {
		t.Fatalf("size %d, want the text's UTF-16 size %d", size, want)
	}
	// Exactly at the limit: the preview goes; one UTF-16 byte short: not.
	if exact, _ := resetMsg(24, 80, esc, esc16, size); exact != text {
		t.Fatalf("reset at exactly its size = %q, want it with the preview", exact)
	}
	text2, size2 := resetMsg(24, 80, esc, esc16, size-1)
	if want := `{"jsonrpc":"2.0","method":"terminal/reset","params":{"rows":24,"cols":80}}`; text2 != want || size2 != 2*int64(len(want)) {
		t.Fatalf("reset over the limit = %q (size %d), want %q", text2, size2, want)
	}
	text3, _ := resetMsg(24, 80, "", 0, 1<<20)
	if text3 != text2 {
		t.Fatalf("reset without preview = %q, want %q", text3, text2)
	}
}
