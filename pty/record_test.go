package pty_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/pty"
	"github.com/ahp-dev/ahpd/pty/record"
)

func openStore(t testing.TB, l record.Limits, opts ...record.Option) *record.Store {
	t.Helper()
	s, err := record.OpenStore(filepath.Join(t.TempDir(), "recordings"), l, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// cast is a recording read back whole.
type cast struct {
	hdr    record.Header
	events []record.Event
	raw    []byte
	index  []record.IndexLine
}

func readCast(t testing.TB, s *record.Store, id string) cast {
	t.Helper()
	f, _, err := s.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	c := cast{raw: raw}
	r, err := record.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	c.hdr = r.Header()
	for e, err := range r.Events() {
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		c.events = append(c.events, e)
	}
	ix, err := os.ReadFile(filepath.Join(s.Dir(), id+record.IndexSuffix))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.SplitAfter(ix, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		l, err := record.ParseIndexLine(line)
		if err != nil {
			t.Fatalf("%s index: %v", id, err)
		}
		c.index = append(c.index, l)
	}
	return c
}

func (c cast) text(typ string) string {
	var b strings.Builder
	for _, e := range c.events {
		if e.Type == typ {
			b.WriteString(e.Data)
		}
	}
	return b.String()
}

func (c cast) keyframes() []record.Keyframe {
	var ks []record.Keyframe
	for _, l := range c.index {
		if l.Type == "keyframe" {
			ks = append(ks, l.Keyframe)
		}
	}
	return ks
}

// replayEvents applies the output and resize events at offsets in
// [from, to) to e.
func replayEvents(t testing.TB, e *pty.Emulator, evs []record.Event, from, to int64) {
	t.Helper()
	for _, ev := range evs {
		if ev.Offset < from || ev.Offset >= to {
			continue
		}
		switch ev.Type {
		case "o":
			e.Write(ev.Data)
		case "r":
			c, r, ok := strings.Cut(ev.Data, "x")
			cols, err1 := strconv.Atoi(c)
			rows, err2 := strconv.Atoi(r)
			if !ok || err1 != nil || err2 != nil {
				t.Fatalf("resize event %q", ev.Data)
			}
			e.Resize(rows, cols)
		}
	}
}

// fromKeyframe is a fresh emulator showing keyframe k.
func fromKeyframe(k record.Keyframe) *pty.Emulator {
	e := pty.NewEmulator(k.Rows, k.Cols, 1000)
	e.Write(k.Screen)
	return e
}

// screenDiff is pty.Diff without the scrollback (a keyframe has none)
// and without the alternate screen's saved cursor: a snapshot taken while
// the normal screen is active does not carry it (viewers' snapshots
// neither), so it differs after the program enters the alternate screen
// again until it saves the cursor there (DECRC without DECSC is rare).
func screenDiff(a, b *pty.Emulator) []string {
	var d []string
	for _, l := range pty.Diff(a, b) {
		if !strings.HasPrefix(l, "scrollback") && !strings.HasPrefix(l, "screen 1 saved") {
			d = append(d, l)
		}
	}
	return d
}

// recordStream runs the test binary as streamWriter under a recording
// with input, a viewer attached from the start, and a resize of the
// columns midway; it returns what the viewer received live, the
// recording, and the terminal's emulator at the end.
func recordStream(t *testing.T, pieces int) (live string, c cast, final *pty.Emulator) {
	store := openStore(t, record.Limits{KeyframeBytes: 4 << 10})
	term := start(t, pty.Config{
		Command:       []string{os.Args[0]},
		Env:           append(os.Environ(), pty.StreamWriterEnv+"=7:"+strconv.Itoa(pieces)),
		Record:        record.OutputInput,
		Recordings:    store,
		Channel:       "term/1",
		ViewerBacklog: 64 << 20,
	})
	id, mode := term.Recording()
	if mode != record.OutputInput || !strings.HasPrefix(id, "term_1-") {
		t.Fatalf("Recording() = %q, %v; want term_1-…, output+input", id, mode)
	}
	w := attach(t, term, 1<<20)
	untilReady(t, w)
	if err := term.Input([]byte("go\n"), nil); err != nil {
		t.Fatal(err)
	}
	n := 0
	ms := w.untilExitRaw(120*time.Second, func() {
		if n++; n == 10 {
			if err := term.Resize(24, 100); err != nil {
				t.Error(err)
			}
		}
	})
	for _, m := range ms {
		if m.Method == "terminal/reset" {
			t.Fatal("the viewer lost its queue: the test needs one that keeps up")
		}
	}
	term.Close()
	if id2, _ := term.Recording(); id2 != "" {
		t.Fatalf("still recording %q after Close", id2)
	}
	final = term.EmulatorCopy()
	return liveText(ms), readCast(t, store, id), final
}

// TestRecordingByteExact: the output events of a recording, concatenated,
// are exactly what a viewer attached from the start received (a program
// writing text, escapes, wide and combining characters, invalid bytes,
// cut into writes inside UTF-8 sequences), its input events are the
// input, the resize is there, times never decrease, and the recording
// ends with its marker.
func TestRecordingByteExact(t *testing.T) {
	live, c, _ := recordStream(t, 3000)
	if got := c.text("o"); got != live {
		i := 0
		for i < min(len(got), len(live)) && got[i] == live[i] {
			i++
		}
		t.Fatalf("recorded output (%d bytes) differs from the viewer's (%d bytes) at %d: %.60q vs %.60q",
			len(got), len(live), i, got[i:], live[i:])
	}
	if !strings.Contains(live, "END") || !strings.Contains(live, "日本語") || !strings.Contains(live, "\uFFFD") {
		t.Fatalf("the stream lacks what it should test: %.200q", live)
	}
	if got := c.text("i"); got != "go\n" {
		t.Fatalf("input events %q, want %q", got, "go\n")
	}
	if got := c.text("r"); got != "100x24" {
		t.Fatalf("resize events %q, want 100x24", got)
	}
	if c.hdr.Width != 80 || c.hdr.Height != 24 || c.hdr.Env["TERM"] != "xterm-256color" {
		t.Fatalf("header %+v", c.hdr)
	}
	prev := 0.0
	for _, e := range c.events {
		if e.Time < prev {
			t.Fatalf("event at offset %d: time %v after %v", e.Offset, e.Time, prev)
		}
		prev = e.Time
		if e.Type == "o" && len(c.raw) > 0 && e.Offset > 0 {
			end := bytes.IndexByte(c.raw[e.Offset:], '\n')
			if end+1 > record.MaxEventLine {
				t.Fatalf("event line of %d bytes", end+1)
			}
		}
	}
	last := c.events[len(c.events)-1]
	if last.Type != "m" || last.Data != "recording stopped: process exited with code 0" {
		t.Fatalf("last event %+v", last)
	}
}

// TestRecordingSeek: each keyframe, written into a fresh terminal and
// followed by the events from its offset to the next keyframe's, gives
// that keyframe's screen cell for cell (the emulator's own snapshot at
// that point of the stream); from any keyframe to the end, the
// terminal's final screen.
func TestRecordingSeek(t *testing.T) {
	_, c, final := recordStream(t, 3000)
	ks := c.keyframes()
	if len(ks) < 10 {
		t.Fatalf("%d keyframes, want many (one per 4 KiB)", len(ks))
	}
	if first := c.events[0].Offset; ks[0].Offset != first || ks[0].Time != 0 {
		t.Fatalf("first keyframe at offset %d time %v, the first event at %d", ks[0].Offset, ks[0].Time, first)
	}
	end := int64(len(c.raw))
	for i, k := range ks {
		e := fromKeyframe(k)
		next := end
		if i+1 < len(ks) {
			next = ks[i+1].Offset
			replayEvents(t, e, c.events, k.Offset, next)
			if d := screenDiff(e, fromKeyframe(ks[i+1])); len(d) > 0 {
				t.Fatalf("keyframe %d (offset %d) + events up to keyframe %d (offset %d):\n%s", i, k.Offset, i+1, next, strings.Join(d, "\n"))
			}
		}
		if i%5 == 0 || i == len(ks)-1 {
			e := fromKeyframe(k)
			replayEvents(t, e, c.events, k.Offset, end)
			if d := screenDiff(e, final); len(d) > 0 {
				t.Fatalf("keyframe %d (offset %d) + events to the end vs the terminal's screen:\n%s", i, k.Offset, strings.Join(d, "\n"))
			}
		}
	}
}

var _ = errors.New
var _ = slices.Sort[[]int]
var _ sync.Mutex
