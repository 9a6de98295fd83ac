package pty_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/pty"
)

// The size policy with several viewers (size.go): the most recently active
// control viewer's size decides.

// wantSize checks the PTY's size as the program sees it (TIOCGWINSZ) and
// as Size reports it.
func wantSize(t *testing.T, term *pty.Terminal, rows, cols int, when string) {
	t.Helper()
	r, c, err := term.WinSize()
	if err != nil {
		t.Fatalf("%s: TIOCGWINSZ: %v", when, err)
	}
	sr, sc := term.Size()
	if r != rows || c != cols || sr != rows || sc != cols {
		t.Fatalf("%s: the PTY is %dx%d (Size %dx%d), want %dx%d (rows x cols)", when, r, c, sr, sc, rows, cols)
	}
}

func resize(t *testing.T, sub flow.Subscriber, rows, cols int) {
	t.Helper()
	res, err := sub.Request("terminal/resize", json.RawMessage(fmt.Sprintf(`{"rows":%d,"cols":%d}`, rows, cols)))
	if err != nil {
		t.Fatalf("terminal/resize %dx%d = %v", rows, cols, err)
	}
	if b, _ := json.Marshal(res); string(b) != "{}" {
		t.Fatalf("terminal/resize %dx%d answered %s, want {}", rows, cols, b)
	}
}

// typeLine types "stty size\n" from sub and waits until w sees the shell
// print want ("rows cols"): the size the program sees after the keys.
func typeLine(t *testing.T, sub flow.Subscriber, w *viewer, want string) {
	t.Helper()
	rel := newReleases()
	if err := sub.Deliver("terminal/input", inputParams("stty size\n"), rel.release); err != nil {
		t.Fatalf("terminal/input = %v", err)
	}
	var got strings.Builder
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		m, ok := w.pull(time.Until(deadline))
		if !ok {
			break
		}
		got.WriteString(m.Params.Data)
		// The prompt may come before or after the echo of the keys.
		if s := got.String(); strings.Contains(s, "\n"+want+"\r\n") || strings.Contains(s, "$ "+want+"\r\n") {
			return
		}
	}
	t.Fatalf("stty size did not print %q within 10s; the output was %q", want, got.String())
}

// controlViewer attaches a control viewer to term, waits for its
// snapshot and has it tell its size, rows x cols (its first
// terminal/resize).
func controlViewer(t *testing.T, term *pty.Terminal, rows, cols int) (flow.Subscriber, *viewer) {
	t.Helper()
	sub, w := attachAs(t, term, flow.RoleControl)
	untilReady(t, w)
	resize(t, sub, rows, cols)
	return sub, w
}

func sizeTerm(t *testing.T) *pty.Terminal {
	return start(t, pty.Config{Command: sh("PS1='$ ' exec sh"), Rows: 24, Cols: 80})
}

// TestSizeSecondViewerDoesNotResize: the first control viewer's size
// applies (nobody decides yet); a second, smaller one connecting and
// telling its size changes nothing, and neither does the first typing.
func TestSizeSecondViewerDoesNotResize(t *testing.T) {
	term := sizeTerm(t)
	a, wa := controlViewer(t, term, 40, 120)
	wantSize(t, term, 40, 120, "after the first viewer told its size")
	controlViewer(t, term, 28, 87)
	wantSize(t, term, 40, 120, "after a second, smaller viewer connected")
	typeLine(t, a, wa, "40 120")
	wantSize(t, term, 40, 120, "after the deciding viewer typed")
}

// TestSizeActiveViewerDecides: a viewer that types, or resizes its window
// (a request after its first), decides the size.
func TestSizeActiveViewerDecides(t *testing.T) {
	term := sizeTerm(t)
	a, wa := controlViewer(t, term, 40, 120)
	b, wb := controlViewer(t, term, 28, 87)
	wantSize(t, term, 40, 120, "after b connected")
	typeLine(t, b, wb, "28 87") // the resize comes before b's keys reach the program
	wantSize(t, term, 28, 87, "after b typed")
	resize(t, a, 50, 130) // a resizes its window
	wantSize(t, term, 50, 130, "after a resized")
	resize(t, b, 30, 90) // and b its own
	wantSize(t, term, 30, 90, "after b resized")
	typeLine(t, a, wa, "50 130")
	wantSize(t, term, 50, 130, "after a typed")
}

// TestSizeRestoredWhenDeciderLeaves: when the deciding viewer leaves, the
// previous one's size applies again; when no viewer that was active is
// left, the size stays.
func TestSizeRestoredWhenDeciderLeaves(t *testing.T) {
	term := sizeTerm(t)
	a, wa := controlViewer(t, term, 40, 120)
	b, wb := controlViewer(t, term, 28, 87)
	c, _ := controlViewer(t, term, 33, 100) // c never types: it takes no part
	typeLine(t, b, wb, "28 87")
	b.Close()
	wantSize(t, term, 40, 120, "after b, which decided, left")
	typeLine(t, a, wa, "40 120")
	a.Close()
	wantSize(t, term, 40, 120, "after a left with only c, never active, there")
	resize(t, c, 34, 101) // c resizes its window: now it decides
	wantSize(t, term, 34, 101, "after c resized")
	c.Close()
	wantSize(t, term, 34, 101, "after the last viewer left")
}

// TestSizeViewOnlyIgnored: a view-only viewer's request is refused
// (-32003 forbidden, as before) and changes nothing, and a view-only
// viewer leaving does not take the size from the one deciding.
func TestSizeViewOnlyIgnored(t *testing.T) {
	term := sizeTerm(t)
	v, wv := attachAs(t, term, flow.RoleView)
	untilReady(t, wv)
	_, err := v.Request("terminal/resize", json.RawMessage(`{"rows":20,"cols":60}`))
	var e *flow.Error
	if !errors.As(err, &e) || e.Code != flow.ErrCodeForbidden {
		t.Fatalf("a view-only viewer's terminal/resize = %v, want -32003 forbidden", err)
	}
	wantSize(t, term, 24, 80, "after a view-only viewer asked")
	controlViewer(t, term, 40, 120) // the view-only viewer does not count as deciding
	wantSize(t, term, 40, 120, "after a control viewer told its size")
	v.Close()
	wantSize(t, term, 40, 120, "after the view-only viewer left")
}
