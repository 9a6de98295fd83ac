package ctl

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahp-dev/ahpd/pty"
)

// predictRig drives a predictor in fake time (every call takes the time)
// and feeds everything it writes into a second emulator, term: the local
// terminal. After the host's output settles, term must equal the
// predictor's model of the host's screen, cell by cell and in attributes.
type predictRig struct {
	t    *testing.T
	p    *predictor
	term *pty.Screen
	now  time.Time
	out  bytes.Buffer // what was written since the last take
}

func (r *predictRig) Write(b []byte) (int, error) {
	r.term.Write(string(b))
	r.out.Write(b)
	return len(b), nil
}

func newPredictRig(t *testing.T, mode predictMode) *predictRig {
	r := &predictRig{t: t, p: newPredictor(mode), term: pty.NewScreen(24, 80), now: time.Unix(1000, 0)}
	r.p.setLocalSize(24, 80)
	r.p.reset(24, 80)
	r.p.setRTT(200 * time.Millisecond)
	return r
}

func (r *predictRig) host(s string) {
	r.t.Helper()
	if err := r.p.host([]byte(s), r.now, r); err != nil {
		r.t.Fatal(err)
	}
}

func (r *predictRig) key(s string) {
	r.t.Helper()
	r.p.key([]byte(s), r.now)
	if err := r.p.redraw(r); err != nil {
		r.t.Fatal(err)
	}
}

func (r *predictRig) tick(d time.Duration) {
	r.t.Helper()
	r.now = r.now.Add(d)
	if err := r.p.tick(r.now, r); err != nil {
		r.t.Fatal(err)
	}
}

// take returns what was written since the last take.
func (r *predictRig) take() string {
	s := r.out.String()
	r.out.Reset()
	return s
}

// cell returns what term shows at (x, y): SGR and text.
func (r *predictRig) cell(x, y int) string { return string(r.term.AppendCell(nil, x, y)) }

// predicted reports whether term shows s underlined at (x, y).
func (r *predictRig) predicted(x, y int, s string) bool {
	c := r.cell(x, y)
	return strings.HasSuffix(c, "m"+s) && strings.Contains(c, ";4")
}

// settled checks that term shows exactly the host's screen and cursor.
func (r *predictRig) settled(when string) {
	r.t.Helper()
	rows, cols := r.p.scr.Size()
	for y := range rows {
		for x := range cols {
			if got, want := r.cell(x, y), string(r.p.scr.AppendCell(nil, x, y)); got != want {
				r.t.Fatalf("%s: terminal cell (%d,%d) = %q, host's screen %q", when, x, y, got, want)
			}
		}
	}
	tx, ty, tp := r.term.Cursor()
	hx, hy, hp := r.p.scr.Cursor()
	if tx != hx || ty != hy || tp != hp {
		r.t.Fatalf("%s: terminal cursor (%d,%d,%v), host's (%d,%d,%v)", when, tx, ty, tp, hx, hy, hp)
	}
	if got, want := string(r.term.AppendPen(nil)), string(r.p.scr.AppendPen(nil)); got != want {
		r.t.Fatalf("%s: terminal pen %q, host's %q", when, got, want)
	}
}

// confirmOne gets prediction out of its tentative start: a key confirmed
// by its echo.
func (r *predictRig) confirmOne() {
	r.t.Helper()
	r.host("$ ")
	r.key("e")
	if r.predicted(2, 0, "e") {
		r.t.Fatal("the first key after a reset was shown (want tentative)")
	}
	r.now = r.now.Add(200 * time.Millisecond)
	r.host("e")
	r.settled("after the first echo")
	r.take()
}

func TestPredictConfirm(t *testing.T) {
	r := newPredictRig(t, predictAlways)
	r.confirmOne()
	r.key("c")
	if !r.predicted(3, 0, "c") {
		t.Fatalf("c not shown underlined at once: cell %q, wrote %q", r.cell(3, 0), r.take())
	}
	if x, y, _ := r.term.Cursor(); x != 4 || y != 0 {
		t.Fatalf("cursor at (%d,%d) after the prediction, want (4,0)", x, y)
	}
	r.key("ho")
	if !r.predicted(4, 0, "h") || !r.predicted(5, 0, "o") {
		t.Fatalf("ho not shown: %q %q", r.cell(4, 0), r.cell(5, 0))
	}
	r.now = r.now.Add(100 * time.Millisecond)
	r.host("c") // a partial echo: the rest stays predicted
	if r.predicted(3, 0, "c") || !r.predicted(5, 0, "o") {
		t.Fatalf("after echo of c: %q %q", r.cell(3, 0), r.cell(5, 0))
	}
	r.host("ho")
	r.settled("after the whole echo")
	if len(r.p.pending) != 0 {
		t.Fatalf("%d predictions pending after their echo", len(r.p.pending))
	}
	// A later key is shown at once again (the epoch stays confirmed).
	r.key("x")
	if !r.predicted(6, 0, "x") {
		t.Fatalf("x not shown")
	}
}

// The echo comes back with the shell's colours: the text confirms, the
// cell then shows the host's attributes, not the underline.
func TestPredictConfirmColoured(t *testing.T) {
	r := newPredictRig(t, predictAlways)
	r.confirmOne()
	r.key("l")
	r.host("\x1b[32ml\x1b[m")
	r.settled("after a coloured echo")
}

func TestPredictContradict(t *testing.T) {
	r := newPredictRig(t, predictAlways)
	r.confirmOne()
	r.key("ab")
	r.host("X") // the program shows something else where a was predicted
	r.settled("after a contradiction")
	if len(r.p.pending) != 0 {
		t.Fatalf("%d predictions left after a contradiction", len(r.p.pending))
	}
	// Tentative now: a key is not shown until one is confirmed.
	r.host("Y")
	r.key("c")
	if r.predicted(5, 0, "c") || strings.Contains(r.take(), "c") {
		t.Fatal("a key was shown right after a contradiction")
	}
	r.host("c") // confirmed: shown again
	r.key("d")
	if !r.predicted(6, 0, "d") {
		t.Fatalf("d not shown after a confirmation: %q", r.cell(6, 0))
	}
	r.host("d")
	r.settled("after d")
}

// read -s: nothing is echoed. The shown prediction expires after two
// round trips and a margin, is repaired, and prediction turns tentative.
func TestPredictTimeoutPassword(t *testing.T) {
	r := newPredictRig(t, predictAlways)
	r.confirmOne()
	r.host("\r\nPassword: ")
	r.key("s")
	if !r.predicted(10, 1, "s") {
		t.Fatalf("s not shown: %q", r.cell(10, 1))
	}
	d, ok := r.p.deadline()
	if want := r.now.Add(2*200*time.Millisecond + predictMargin); !ok || !d.Equal(want) {
		t.Fatalf("deadline %v, %v; want %v", d, ok, want)
	}
	r.tick(549 * time.Millisecond)
	if !r.predicted(10, 1, "s") {
		t.Fatal("expired early")
	}
	r.tick(time.Millisecond)
	r.settled("after the expiry")
	for _, k := range []string{"e", "c", "r"} {
		r.key(k)
		r.tick(10 * time.Millisecond)
		r.settled("a tentative key at a password prompt")
	}
	r.tick(time.Second)
	r.settled("after the tentative keys expired")
	if len(r.p.pending) != 0 {
		t.Fatalf("%d pending", len(r.p.pending))
	}
	// Enter: the program writes; nothing of the secret is left.
	r.key("\r")
	r.host("\r\n$ ")
	r.settled("after Enter")
}

func TestPredictBackspaceAndArrows(t *testing.T) {
	r := newPredictRig(t, predictAlways)
	r.confirmOne()
	r.key("ab")
	r.host("ab")
	r.key("\x7f")
	if c := r.cell(4, 0); c != "\x1b[0;4m " {
		t.Fatalf("backspace: cell (4,0) = %q, want an underlined blank", c)
	}
	if x, _, _ := r.term.Cursor(); x != 4 {
		t.Fatalf("backspace: cursor at %d, want 4", x)
	}
	r.host("\b \b")
	r.settled("after backspace's echo")
	r.key("\x1b[D")
	if x, _, _ := r.term.Cursor(); x != 3 {
		t.Fatalf("left: cursor at %d, want 3", x)
	}
	r.host("\b")
	r.settled("after left's echo")
	r.key("\x1b[C")
	if x, _, _ := r.term.Cursor(); x != 4 {
		t.Fatalf("right: cursor at %d, want 4", x)
	}
	r.host("a")
	r.settled("after right's echo")
	// Right at the end of the text is not predicted.
	r.take()
	r.key("\x1b[C")
	if r.take() != "" {
		t.Fatal("right over nothing was predicted")
	}
	// A typed key, deleted at once, before either echo.
	r.host("x")
	r.key("q")
	r.key("\x7f")
	r.host("q")
	r.host("\b \b")
	r.settled("after q and its deletion")
}

// In the middle of a line's text a line editor inserts and deletes,
// moving the rest of the text: so does the prediction; not when the
// text would reach the right margin.
func TestPredictMidLine(t *testing.T) {
	r := newPredictRig(t, predictAlways)
	r.confirmOne()
	r.key("abc")
	r.host("abc")
	r.key("\x1b[D\x1b[D")
	r.host("\b\b")
	r.key("x")
	if !r.predicted(4, 0, "x") || !r.predicted(5, 0, "b") || !r.predicted(6, 0, "c") {
		t.Fatalf("insertion: cells %q %q %q", r.cell(4, 0), r.cell(5, 0), r.cell(6, 0))
	}
	if x, _, _ := r.term.Cursor(); x != 5 {
		t.Fatalf("insertion: cursor at %d, want 5", x)
	}
	r.key("\x7f") // deleted at once: the line is as it was
	if !r.predicted(4, 0, "b") || !r.predicted(5, 0, "c") || !r.predicted(6, 0, " ") {
		t.Fatalf("deletion: cells %q %q %q", r.cell(4, 0), r.cell(5, 0), r.cell(6, 0))
	}
	r.host("xbc\b\b")
	r.host("\bbc \b\b\b")
	r.settled("after the echoes")
	if len(r.p.pending) != 0 {
		t.Fatalf("%d pending after the echoes", len(r.p.pending))
	}
	// The line's text reaches the margin: no prediction.
	r.host("\x1b[2;1H" + strings.Repeat("-", 79) + "\x1b[2;5H")
	r.take()
	r.key("y")
	if got := r.take(); got != "" || len(r.p.pending) != 0 {
		t.Fatalf("predicted an insertion that reaches the margin: %q", got)
	}
}

func TestPredictAltScreen(t *testing.T) {
	r := newPredictRig(t, predictAlways)
	r.confirmOne()
	r.key("v")
	r.host("\x1b[?1049h\x1b[H\x1b[2J~")
	r.settled("after the switch to the alternate screen")
	r.take()
	r.key("ihello")
	if got := r.take(); got != "" {
		t.Fatalf("a key was predicted on the alternate screen: %q", got)
	}
	r.host("hello")
	r.host("\x1b[?1049l")
	r.settled("back on the normal screen")
}

// Output that ends inside an escape sequence: nothing is drawn until it
// is complete.
func TestPredictNotInsideSequence(t *testing.T) {
	r := newPredictRig(t, predictAlways)
	r.confirmOne()
	r.host("\x1b[3")
	r.take()
	r.key("z")
	if got := r.take(); got != "" {
		t.Fatalf("wrote %q inside a host sequence", got)
	}
	r.host("1m")
	if !r.predicted(3, 0, "z") {
		t.Fatalf("z not drawn once the sequence ended: %q", r.cell(3, 0))
	}
	r.host("z\x1b[m")
	r.settled("after z")
}

// A scroll while a prediction is drawn: the glyph is taken back before the
// host's bytes, so it does not scroll away with the line.
func TestPredictScroll(t *testing.T) {
	r := newPredictRig(t, predictAlways)
	r.host(strings.Repeat("\r\n", 23))
	r.confirmOne()
	r.key("k")
	if !r.predicted(3, 23, "k") {
		t.Fatalf("k not shown: %q", r.cell(3, 23))
	}
	r.host("\r\nbackground job done\r\n$ ")
	r.tick(time.Second)
	r.settled("after a scroll and the expiry")
}

// The last column: the prediction is drawn there, the cursor's pending
// wrap is made again before the host's bytes.
func TestPredictLastColumn(t *testing.T) {
	r := newPredictRig(t, predictAlways)
	r.confirmOne()
	r.host(strings.Repeat("-", 76))
	r.key("w")
	if !r.predicted(79, 0, "w") {
		t.Fatalf("w not shown in the last column: %q", r.cell(79, 0))
	}
	r.key("v") // a wrap is not predicted
	r.host("w")
	r.settled("after w in the last column")
	r.host("v")
	r.settled("after the wrap")
}

func TestPredictResetAndEnter(t *testing.T) {
	r := newPredictRig(t, predictAlways)
	r.confirmOne()
	r.key("ls")
	r.p.reset(24, 80) // terminal/reset: the terminal gets RIS
	r.term.Reset(24, 80)
	if len(r.p.pending) != 0 {
		t.Fatal("predictions kept over a snapshot")
	}
	r.host("$ ls")
	r.settled("after the snapshot")
	r.key("x")
	if r.predicted(4, 0, "x") {
		t.Fatal("shown right after a snapshot")
	}
	r.host("x")
	r.key("\r")
	r.key("y") // after Enter: held until the host writes
	if len(r.p.pending) != 0 {
		t.Fatalf("predicted after Enter: %d pending", len(r.p.pending))
	}
	r.host("\r\n")
	r.settled("after Enter's echo")
}

func TestPredictAutoThreshold(t *testing.T) {
	p := newPredictor(predictAuto)
	if p.active() {
		t.Fatal("active before any sample")
	}
	var srtt time.Duration
	p.shown = p.epoch // as if a prediction had been confirmed
	for _, tc := range []struct {
		rtt  time.Duration
		want bool
	}{
		{10 * time.Millisecond, false},
		{200 * time.Millisecond, true}, // srtt 57.5ms
		{10 * time.Millisecond, true},  // 45.6
		{10 * time.Millisecond, true},  // 36.7
		{10 * time.Millisecond, true},  // 30.0
		{10 * time.Millisecond, true},  // 25.0: above the low mark
		{10 * time.Millisecond, true},  // 21.3
		{10 * time.Millisecond, false}, // 18.5
		{25 * time.Millisecond, false}, // 20.1: below the high mark
		{100 * time.Millisecond, true}, // 40.1
	} {
		srtt = smoothRTT(srtt, tc.rtt)
		p.setRTT(srtt)
		if p.active() != tc.want {
			t.Fatalf("sample %v: srtt %v, active %v, want %v", tc.rtt, p.srtt, p.active(), tc.want)
		}
	}
	if p.shown >= p.epoch {
		t.Errorf("after auto turned off and on: epoch %d shown (want tentative, epoch %d)", p.shown, p.epoch)
	}
	if n := newPredictor(predictNever); n.active() {
		t.Fatal("never is active")
	}
}

func TestPredictFlag(t *testing.T) {
	for s, want := range map[string]predictMode{"auto": predictAuto, "always": predictAlways, "never": predictNever} {
		if m, err := parsePredict(s); err != nil || m != want {
			t.Errorf("parsePredict(%q) = %v, %v", s, m, err)
		}
	}
	var out, errOut bytes.Buffer
	code := Main([]string{"attach", "--predict", "sometimes", "shell"}, strings.NewReader(""), &out, &errOut)
	if want := `--predict "sometimes": want auto, always or never`; code != 2 || !strings.Contains(errOut.String(), want) || strings.Count(errOut.String(), "\n") != 1 {
		t.Fatalf("attach --predict sometimes: exit %d, stderr %q; want exit 2 with %q", code, errOut.String(), want)
	}
}

// FuzzPredict feeds random host output and keys in random order: once
// the host's output settles and every prediction has expired, the
// terminal shows exactly the host's screen.
func FuzzPredict(f *testing.F) {
	f.Add([]byte("$ "), []byte("abc\x7f\x1b[D"), []byte("ab\b \b\x1b[31mX"))
	f.Add([]byte("\x1b[?1049h"), []byte("hello\r"), []byte("\x1b[?1049lhel"))
	f.Add([]byte("\x1b[24;1H"), []byte("xyz"), []byte("\r\n\r\nxy"))
	f.Fuzz(func(t *testing.T, a, keys, b []byte) {
		r := newPredictRig(t, predictAlways)
		r.host(string(a))
		r.host("!") // leave any sequence a left open
		r.key("e")
		r.host("e")
		for i := range keys {
			r.key(string(keys[i : i+1]))
			if i < len(b) {
				r.host(string(b[i : i+1]))
			}
			r.tick(time.Duration(i%3) * 100 * time.Millisecond)
		}
		if len(b) > len(keys) {
			r.host(string(b[len(keys):]))
		}
		r.host("\x1b\\") // end a string sequence b may have left open
		r.tick(time.Minute)
		if len(r.p.pending) != 0 {
			t.Fatalf("%d pending after a minute", len(r.p.pending))
		}
		r.settled("after everything")
	})
}

// BenchmarkPredictHost is what the model of the host's screen costs attach
// on a flood (every chunk goes through it while --predict is not never),
// against writing the chunks alone.
func BenchmarkPredictHost(b *testing.B) {
	var text bytes.Buffer
	for i := 0; text.Len() < 64<<10; i++ {
		fmt.Fprintf(&text, "%6d  \x1b[32mok\x1b[m  the quick brown fox jumps over the lazy dog %d\r\n", i, i*i)
	}
	chunk := text.Bytes()
	b.Run("model", func(b *testing.B) {
		p := newPredictor(predictAuto)
		p.setLocalSize(24, 80)
		p.reset(24, 80)
		b.SetBytes(int64(len(chunk)))
		now := time.Unix(0, 0)
		for b.Loop() {
			if err := p.host(chunk, now, io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("write", func(b *testing.B) {
		b.SetBytes(int64(len(chunk)))
		for b.Loop() {
			_, _ = io.Discard.Write(chunk)
		}
	})
}

// TestPredictProbe: the round trip is sampled with one ping outstanding
// at most, every 2 s while idle and back to back (at least 100 ms apart)
// while predictions wait; each sample reaches the predictor.
func TestPredictProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		at := &attacher{pred: newPredictor(predictAuto)}
		var starts []time.Duration
		outstanding := 0
		begin := time.Now()
		ping := func(ctx context.Context) error {
			at.pmu.Lock()
			outstanding++
			if outstanding > 1 {
				t.Errorf("%d pings outstanding", outstanding)
			}
			starts = append(starts, time.Since(begin))
			at.pmu.Unlock()
			time.Sleep(150 * time.Millisecond)
			at.pmu.Lock()
			outstanding--
			at.pmu.Unlock()
			return nil
		}
		ctx, cancel := context.WithCancel(t.Context())
		kick := make(chan struct{}, 1)
		var wg sync.WaitGroup
		wg.Go(func() { at.probe(ctx, ping, kick) })

		time.Sleep(7 * time.Second) // idle: at 0, 2, 4 and 6 s
		at.pmu.Lock()
		idle := slices.Clone(starts)
		at.pmu.Unlock()
		at.lockPred()
		if srtt := time.Duration(at.srtt.Load()); srtt != 150*time.Millisecond || !at.pred.active() {
			t.Errorf("after idle pings: srtt %v, active %v; want 150ms, active", srtt, at.pred.active())
		}
		at.pred.pending = append(at.pred.pending, prediction{}) // a key waits for its echo
		at.unlockPred()
		if want := []time.Duration{0, 2 * time.Second, 4 * time.Second, 6 * time.Second}; !slices.Equal(idle, want) {
			t.Errorf("idle pings at %v, want %v", idle, want)
		}
		kick <- struct{}{}
		time.Sleep(time.Second)
		at.pmu.Lock()
		busy := slices.Clone(starts[len(idle):])
		at.pmu.Unlock()
		// At 7 s at once (the kick), then one per 150 ms round trip.
		if len(busy) != 7 || busy[0] != 7*time.Second || busy[1] != 7150*time.Millisecond {
			t.Errorf("busy pings at %v, want 7 from 7s, 150ms apart", busy)
		}
		cancel()
		wg.Wait()
	})
}

// A key attach sent without predicting it (the output goroutine was
// writing): the predictor no longer knows where the pending ones leave
// the cursor, and predicts nothing until they are resolved.
func TestPredictMissedKey(t *testing.T) {
	r := newPredictRig(t, predictAlways)
	r.confirmOne()
	r.key("a")
	r.p.missed() // "b" went to the host unpredicted
	r.key("c")
	if len(r.p.pending) != 1 || r.predicted(4, 0, "c") {
		t.Fatalf("predicted after a missed key: %d pending, cell (4,0) %q", len(r.p.pending), r.cell(4, 0))
	}
	r.host("abc")
	r.settled("after the echo of all three")
	r.key("d") // a new epoch: tentative
	if r.predicted(6, 0, "d") {
		t.Fatal("shown right after a missed key")
	}
	r.host("d")
	r.key("e")
	if !r.predicted(7, 0, "e") {
		t.Fatalf("e not shown once d was confirmed: %q", r.cell(7, 0))
	}
}

// While the channel has another viewer's size, its lines wrap elsewhere
// than this terminal's: no prediction until the sizes agree again.
func TestPredictOtherSize(t *testing.T) {
	r := newPredictRig(t, predictAlways)
	r.confirmOne()
	r.p.setLocalSize(30, 100)
	r.take()
	r.key("x")
	if got := r.take(); got != "" || len(r.p.pending) != 0 {
		t.Fatalf("predicted with a 24x80 channel in a 30x100 terminal: wrote %q", got)
	}
	r.p.setLocalSize(24, 80)
	r.host("x")
	r.key("y") // a new epoch: tentative
	r.host("y")
	r.key("z")
	if !r.predicted(5, 0, "z") {
		t.Fatalf("z not shown once the sizes agree: %q", r.cell(5, 0))
	}
}

// A space typed over a blank changes no cell: its echo confirms it by
// the cursor, also when it comes with the next key's echo.
func TestPredictSpace(t *testing.T) {
	r := newPredictRig(t, predictAlways)
	r.confirmOne()
	r.key(" ")
	r.host(" ")
	if len(r.p.pending) != 0 {
		t.Fatalf("a space's echo left %d pending", len(r.p.pending))
	}
	r.key(" ")
	r.key("x")
	r.host(" ") // the space alone: confirmed
	r.host("x")
	r.key(" ")
	r.p.missed() // y went to the host unpredicted
	r.host(" y")
	if len(r.p.pending) != 0 {
		t.Fatalf("the echo of a space and the next key left %d pending", len(r.p.pending))
	}
	r.settled("after spaces")
}

// At most maxPredictions keys wait for their echo; beyond that keys are
// not predicted (and none is until those are resolved).
func TestPredictBound(t *testing.T) {
	r := newPredictRig(t, predictAlways)
	r.confirmOne()
	for range 2 * maxPredictions {
		r.key("z")
	}
	if n := len(r.p.pending); n != maxPredictions {
		t.Fatalf("%d pending after %d keys with no echo, want %d", n, 2*maxPredictions, maxPredictions)
	}
	r.host(strings.Repeat("z", 2*maxPredictions))
	r.settled("after the echo")
	if len(r.p.pending) != 0 {
		t.Fatalf("%d pending after the echo", len(r.p.pending))
	}
}
