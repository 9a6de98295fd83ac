package pty_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/pty"
)

func TestEchoRoundTrip(t *testing.T) {
	term := start(t, pty.Config{Command: sh("stty -echo; exec cat")})
	w := attach(t, term, 4096)
	// Wait until stty has run: the shell prints nothing, so send input
	// until it comes back once (echo off: only cat's copy).
	done := make(chan struct{})
	if err := term.Input([]byte("ping\n"), func() { close(done) }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("input never written")
	}
	var got strings.Builder
	for !strings.Contains(got.String(), "ping\r\n") {
		m, ok := w.pull(5 * time.Second)
		if !ok {
			t.Fatalf("no echo; got %q", got.String())
		}
		if m.Method == "terminal/output" {
			got.WriteString(m.Params.Data)
		}
	}
}

// TestExitAfterAllOutput: every byte the command wrote reaches a viewer
// that keeps up, before terminal/exit (ttyd and gotty lose the tail).
func TestExitAfterAllOutput(t *testing.T) {
	n := 20_000_000
	if raceEnabled {
		n = 3_000_000
	}
	for rep := 0; rep < 10; rep++ {
		// A viewer keeps up when it never falls more than ViewerBacklog
		// behind. The reader, which takes a flood's reads as one item, can
		// outrun this viewer (it copies and checks every message) on a busy
		// two-core machine: a backlog of the whole output keeps every byte
		// for it whatever the two's speeds.
		term := start(t, pty.Config{
			Command:       sh(fmt.Sprintf("read x; head -c %d /dev/zero | tr '\\0' a; exit 3", n)),
			ViewerBacklog: n,
		})
		w := attach(t, term, 64<<10)
		untilReady(t, w)
		if err := term.Input([]byte("\n"), nil); err != nil {
			t.Fatal(err)
		}
		ms := w.untilExitRaw(60*time.Second, nil)
		if st := w.v.Stats(); st.Snapshots != 1 || st.BytesDropped != 0 {
			t.Fatalf("rep %d: the viewer did not keep up (%+v); the test machine is too slow", rep, st)
		}
		text := strings.TrimPrefix(liveText(ms), "\r\n") // the tty's echo of our newline
		if len(text) != n || strings.Trim(text, "a") != "" {
			t.Fatalf("rep %d: got %d bytes (%q...), want %d 'a'", rep, len(text), text[:min(len(text), 20)], n)
		}
		if last := ms[len(ms)-1]; last.Params.Code == nil || *last.Params.Code != 3 {
			t.Fatalf("rep %d: exit = %+v, want code 3", rep, last.Params)
		}
		if st, ok := term.Exit(); !ok || st.Code != 3 || term.State() != pty.StateExited {
			t.Fatalf("rep %d: Exit() = %+v %v", rep, st, ok)
		}
		term.Close()
	}
}

func TestExitSignal(t *testing.T) {
	// The command waits for the viewer, so that its output is live, not
	// part of the first snapshot.
	term := start(t, pty.Config{Command: sh("stty -echo; read x; printf 'last words'; kill -9 $$")})
	w := attach(t, term, 4096)
	untilReady(t, w)
	if err := term.Input([]byte("\n"), nil); err != nil {
		t.Fatal(err)
	}
	ms := w.untilExit(10 * time.Second)
	if got := liveText(ms); !strings.HasSuffix(got, "last words") {
		t.Fatalf("output %q lacks the tail", got)
	}
	if s := ms[len(ms)-1].Params.Signal; s == nil || *s != "SIGKILL" {
		t.Fatalf("exit = %+v, want signal SIGKILL", ms[len(ms)-1].Params)
	}
}

func TestUTF8AcrossReadsAndInvalidBytes(t *testing.T) {
	// The euro sign arrives split over two writes (and so two reads);
	// \377 is invalid and must become U+FFFD.
	term := start(t, pty.Config{Command: sh(`stty -echo; read x; printf 'x\342\202'; sleep 0.3; printf '\254y\377z'`)})
	w := attach(t, term, 4096)
	untilReady(t, w)
	if err := term.Input([]byte("\n"), nil); err != nil {
		t.Fatal(err)
	}
	got := liveText(w.untilExit(10 * time.Second))
	if !strings.HasSuffix(got, "x€y\uFFFDz") {
		t.Fatalf("got %q, want suffix %q", got, "x€y\uFFFDz")
	}
}

// TestChunking: messages fit maxMessageBytes (UTF-16 size, escaping
// included) and never split a UTF-8 sequence, for escape-heavy, CJK and
// emoji output; the concatenation is exactly the output.
func TestChunking(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 300_000; i++ {
		fmt.Fprintf(&b, "\x1b[1;3%dm漢字😀\x1b[0m\"q\\\t%d 한국어 🇩🇪 e\u0301\r\n", i%8, i)
	}
	content := b.String()
	file := filepath.Join(t.TempDir(), "content")
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, max := range []int64{1024, 1500, 64 << 10} {
		term := start(t, pty.Config{Command: sh("stty raw -echo; read x; cat " + file)})
		w := attach(t, term, max)
		untilReady(t, w)
		// A newline, not a return: once stty has made the tty raw, a
		// return is no longer turned into the newline that ends read.
		if err := term.Input([]byte("\n"), nil); err != nil {
			t.Fatal(err)
		}
		ms := w.untilExit(30 * time.Second)
		// The tty echoes the newline if it arrives before stty ran.
		if got := strings.TrimPrefix(liveText(ms), "\r\n"); got != content {
			t.Fatalf("max %d: output differs (%d vs %d bytes)", max, len(got), len(content))
		}
		// pull (via decode) already checked size, UTF-8 and JSON of each.
		term.Close()
	}
}

// TestQueries: each query is answered exactly once by the host, with the
// state at that point of the stream, and never reaches a viewer, live or
// in a snapshot; a query split across reads is still recognized.
func TestQueries(t *testing.T) {
	dir := t.TempDir()
	got := filepath.Join(dir, "got")
	want := "\x1b[?1;2c" + "\x1b[1;5R" + "\x1b]11;rgb:0000/0000/0000\x07" + "\x1b[0n" + "\x1b[1;9R"
	// The script prints R once the tty is raw and waits: the test sends
	// the newline then, so that everything after is live output (not in
	// the first snapshot) and nothing is echoed.
	script := fmt.Sprintf(`stty raw -echo; printf R; read x; printf '\rAB\033[cCD\033[6nEF\033]11;?\007GH\033[5n'; printf '\033['; sleep 0.3; printf '6nIJ'; head -c %d > %s; printf done`, len(want), got)
	term := start(t, pty.Config{Command: sh(script)})
	w := attach(t, term, 4096)
	untilReady(t, w)
	for seen := ""; !strings.Contains(seen, "R"); {
		m, ok := w.pull(5 * time.Second)
		if !ok {
			t.Fatal("the script did not start")
		}
		seen += m.Params.Data
	}
	if err := term.Input([]byte("\n"), nil); err != nil {
		t.Fatal(err)
	}
	ms := w.untilExit(10 * time.Second)
	live := strings.TrimPrefix(liveText(ms), "\r")
	if live != "ABCDEFGHIJdone" {
		t.Fatalf("viewer output %q, want the queries removed", live)
	}
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Fatalf("PTY received %q, want %q", b, want)
	}
	if st := term.Stats(); st.Replies != 5 || st.RepliesLost != 0 {
		t.Fatalf("stats %+v, want 5 replies", st)
	}
	// A fresh viewer's snapshot holds no query either.
	w2 := attach(t, term, 4096)
	for _, m := range w2.untilExit(5 * time.Second) {
		if strings.Contains(m.Params.Data, "6n") || strings.Contains(m.Params.Data, "11;?") || strings.Contains(m.Params.Data, "\x1b[c") {
			t.Fatalf("snapshot contains a query: %q", m.Params.Data)
		}
	}
}

const fidelityScript = "\x1b]0;fidelity title\x07" +
	"\x1b[1;31mbold red\x1b[0m \x1b[38;5;123mindexed\x1b[48;2;10;20;30mrgb\x1b[0m\r\n" +
	"漢字テスト😀 wide 한국어 e\u0301\r\n" +
	"%s" + // scrollback filler
	"\x1b[5;10Hmoved\x1b[2A\x1b[3Dq" +
	"\x1b[3;20r\x1b[20;1Hscrolled in region\n\n\n" +
	"\x1b[44mblue erase\x1b[K\x1b[0m" +
	"\x1b(0lqqk\x1b(B" +
	"\x1b[1;79H漢" + "\x1b[2;80H\x1b[32m😀wrapped\x1b[0m" +
	"\x1b7\x1b[?1049h\x1b[H\x1b[33malternate screen\x1b[0m\r\n\x1b[35m漢字 in alt\x1b[2;10r" +
	"\x1b[?1h\x1b=\x1b[?2004h\x1b[?1002h\x1b[?1006h\x1b[?1004h\x1b[?25l\x1b[4 q" +
	"\x1b[1;4;7m\x1b[12;7H"

// TestSnapshotFidelity: a viewer that applies a fresh snapshot shows, cell
// for cell, what a viewer that saw the whole stream shows: both screens,
// scrollback, cursor, pen, title, scroll regions and modes.
func TestSnapshotFidelity(t *testing.T) {
	// 40 lines of scrollback, and 3,000: a snapshot long enough to carry
	// a preview of its screen.
	for _, n := range []int{40, 3000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) { testSnapshotFidelity(t, n) })
	}
}

func testSnapshotFidelity(t *testing.T, lines int) {
	var filler strings.Builder
	for i := 0; i < lines; i++ {
		fmt.Fprintf(&filler, "\x1b[3%dmscrollback line %d\x1b[0m with text\r\n", i%8, i)
	}
	stream := fmt.Sprintf(fidelityScript, filler.String())
	file := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(file, []byte(stream), 0o600); err != nil {
		t.Fatal(err)
	}
	// The reference saw the whole stream.
	ref := pty.NewEmulator(24, 80, 10000)
	ref.Write(stream)

	term := start(t, pty.Config{Command: sh("stty raw -echo; cat " + file + "; sleep 0.2"), Scrollback: 10000})
	first := attach(t, term, 4096) // attached from the start
	msFirst := first.untilExit(10 * time.Second)
	late := attach(t, term, 1024) // attached after everything happened
	msLate := late.untilExit(10 * time.Second)
	if msLate[0].Method != "terminal/reset" {
		t.Fatalf("late viewer starts with %s", msLate[0].Method)
	}
	// A long snapshot's reset carries a preview that shows its screen.
	preview := msLate[0].Params.Preview
	if long := lines > 1000; long != (preview != nil) {
		t.Fatalf("%d lines of scrollback: preview %v, want one: %v", lines, preview != nil, long)
	}
	if preview != nil {
		e := pty.NewEmulator(24, 80, 10000)
		e.Write(pty.PreviewBefore + *preview)
		for y := 0; y < 24; y++ {
			if got, want := e.LineText(y), ref.LineText(y); got != want {
				t.Errorf("preview row %d = %q, want %q", y, got, want)
			}
		}
	}

	for name, ms := range map[string][]msg{"whole stream": msFirst, "snapshot": msLate} {
		e := pty.NewEmulator(24, 80, 10000)
		replay(e, ms)
		if d := pty.Diff(ref, e); len(d) > 0 {
			t.Errorf("%s viewer differs from the reference:\n%s", name, strings.Join(d, "\n"))
		}
	}
	if ref.Title() != "fidelity title" || !ref.Alt() || ref.ScrollbackLen() == 0 {
		t.Fatalf("script did not exercise title/alt/scrollback")
	}
	term.WithEmulator(func(e *pty.Emulator) {
		if d := pty.Diff(ref, e); len(d) > 0 {
			t.Errorf("host emulator differs from the reference:\n%s", strings.Join(d, "\n"))
		}
	})
}

// TestLogFreedWhenViewersCatchUpOrLeave: output the log keeps only for
// a viewer behind is dropped as soon as that viewer leaves, or has caught
// up, not at the terminal's next output: a quiet terminal must not keep a
// flood's worth of memory for viewers that no longer need it.
func TestLogFreedWhenViewersCatchUpOrLeave(t *testing.T) {
	const flood = 3_000_000
	cfg := pty.Config{Command: sh(fmt.Sprintf("read x; head -c %d /dev/zero | tr '\\0' a; read y", flood)), ViewerBacklog: 8 << 20}
	// behind starts the terminal and has it flood past a viewer that
	// pulls nothing, until the emulator has applied it all: the log then
	// keeps the flood for that viewer alone.
	behind := func(t *testing.T) (*pty.Terminal, *viewer) {
		t.Helper()
		term := start(t, cfg)
		w := attach(t, term, 64<<10)
		untilReady(t, w)
		if err := term.Input([]byte("\n"), nil); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for st := term.Stats(); st.BytesRead < flood || st.EmulatorLag > 0; st = term.Stats() {
			if time.Now().After(deadline) {
				t.Fatalf("the flood was not read and applied within 30 s: %+v", st)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if got := term.Stats().Retained; got < flood/2 {
			t.Fatalf("the log keeps %d bytes for a viewer %d bytes behind; the test no longer tests anything", got, flood)
		}
		return term, w
	}

	t.Run("leaves", func(t *testing.T) {
		term, w := behind(t)
		w.v.Close()
		if got := term.Stats().Retained; got != 0 {
			t.Fatalf("the log keeps %d bytes after its only viewer left", got)
		}
	})

	t.Run("catches up", func(t *testing.T) {
		term, w := behind(t)
		got := 0
		for got < flood {
			m, ok := w.pullRaw(10 * time.Second)
			if !ok {
				t.Fatalf("the viewer got %d of %d bytes", got, flood)
			}
			got += strings.Count(m.Text, "a")
		}
		if m, ok := w.pullRaw(100 * time.Millisecond); ok { // finds the end
			t.Fatalf("more output after the flood: %.80q", m.Text)
		}
		if got := term.Stats().Retained; got != 0 {
			t.Fatalf("the log keeps %d bytes for a viewer that caught up", got)
		}
	})
}

// TestSlowViewer: one viewer never pulls during a flood while another pulls
// continuously. The fast one gets every byte in order; the slow one's
// queue stays within its bound and, when it pulls, it gets reset +
// snapshot + channel/ready, then the rest.
func TestSlowViewer(t *testing.T) {
	const backlog = 1 << 20
	// 3.4 MB in bursts of 10,000 lines (69 KB) 10 ms apart: far more than
	// the slow viewer's backlog, at a pace the fast one keeps up with
	// whatever the reader's speed, even under -race on a busy machine (at
	// full speed the reader, which takes a flood's reads as one item, can
	// outrun a test viewer that copies every message).
	const lines, burst = 500_000, 10_000
	cfg := pty.Config{Command: sh(fmt.Sprintf("read x; i=0; while [ $i -lt %d ]; do seq $((i+1)) $((i+%d)); i=$((i+%d)); sleep 0.01; done", lines, burst, burst)), ViewerBacklog: backlog}
	term := start(t, cfg)
	slow := attach(t, term, 64<<10)
	fast := attach(t, term, 64<<10)
	untilReady(t, slow)
	untilReady(t, fast)
	if err := term.Input([]byte("\n"), nil); err != nil {
		t.Fatal(err)
	}
	var maxQueued, maxRetained int64
	fms := fast.untilExitRaw(60*time.Second, func() {
		maxQueued = max(maxQueued, slow.v.Stats().Queued)
		maxRetained = max(maxRetained, term.Stats().Retained)
	})
	if st := fast.v.Stats(); st.Snapshots != 1 || st.BytesDropped != 0 {
		t.Fatalf("the fast viewer did not keep up (%+v); the test machine is too slow", st)
	}
	var b strings.Builder
	b.WriteString(liveText(fms))
	var want strings.Builder
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&want, "%d\r\n", i)
	}
	if !strings.HasSuffix(b.String(), want.String()) {
		t.Fatalf("fast viewer lost or reordered output (%d bytes, want %d)", b.Len(), want.Len())
	}
	const readSize = 64 << 10
	if maxQueued > backlog+readSize {
		t.Fatalf("slow viewer queued %d bytes, bound %d", maxQueued, backlog+readSize)
	}
	if maxRetained > 1<<20+readSize {
		t.Fatalf("terminal retained %d bytes, bound %d", maxRetained, 1<<20+readSize)
	}
	ms := slow.untilExit(10 * time.Second)
	if ms[0].Method != "terminal/reset" {
		t.Fatalf("slow viewer first message %s", ms[0].Method)
	}
	ready := 0
	for _, m := range ms {
		if m.Method == "channel/ready" {
			ready++
		}
	}
	st := slow.v.Stats()
	if ready != 1 || st.BytesDropped == 0 || st.Snapshots != 2 {
		t.Fatalf("slow viewer: %d ready, stats %+v", ready, st)
	}
	// What it shows equals what the fast viewer shows.
	a, c := pty.NewEmulator(24, 80, 10000), pty.NewEmulator(24, 80, 10000)
	replay(a, ms)
	c.Write(b.String())
	for y := 0; y < 24; y++ {
		if a.LineText(y) != c.LineText(y) {
			t.Fatalf("row %d: slow %q, fast %q", y, a.LineText(y), c.LineText(y))
		}
	}
}

// TestSlowViewerOverflowAfterStart: a viewer that took its snapshot and
// then stopped pulling is reset and resnapshotted.
func TestSlowViewerOverflowAfterStart(t *testing.T) {
	term := start(t, pty.Config{Command: sh("read x; seq 1 100000"), ViewerBacklog: 4096})
	w := attach(t, term, 4096)
	for {
		m, ok := w.pull(5 * time.Second)
		if !ok {
			t.Fatal("no snapshot")
		}
		if m.Method == "channel/ready" {
			break
		}
	}
	if err := term.Input([]byte("go\n"), nil); err != nil {
		t.Fatal(err)
	}
	// Wait for exit without pulling: the output overflows the backlog. A
	// viewer is judged behind only on output the emulator has applied, so
	// wait for the emulator too (it lags under the race detector).
	deadline := time.After(10 * time.Second)
	for term.State() != pty.StateExited || term.Stats().EmulatorLag > 0 {
		select {
		case <-w.wake:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("no exit, or the emulator never caught up: %+v", term.Stats())
		}
	}
	ms := w.untilExit(5 * time.Second)
	if ms[0].Method != "terminal/reset" || w.v.Stats().Snapshots != 2 || w.v.Stats().BytesDropped == 0 {
		t.Fatalf("first %s, stats %+v", ms[0].Method, w.v.Stats())
	}
}

// TestInputQueueBound: Input never blocks; beyond InputQueue bytes it
// fails with ErrInputFull; Close calls every done.
func TestInputQueueBound(t *testing.T) {
	const bound = 8 << 10
	term := start(t, pty.Config{Command: sh("stty -icanon -echo; sleep 30"), InputQueue: bound})
	chunk := make([]byte, 1024)
	accepted := 0
	doneCount := make(chan struct{}, 1000)
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := term.Input(chunk, func() { doneCount <- struct{}{} })
		if errors.Is(err, pty.ErrInputFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		accepted++
		if time.Now().After(deadline) || accepted > 900 {
			t.Fatalf("queue never filled after %d KiB", accepted)
		}
	}
	// What is queued and not yet written stays within the bound.
	if pending := (accepted - len(doneCount)) * len(chunk); pending > bound+len(chunk) {
		t.Fatalf("%d bytes pending, bound %d", pending, bound)
	}
	term.Close()
	for i := 0; i < accepted; i++ {
		select {
		case <-doneCount:
		case <-time.After(5 * time.Second):
			t.Fatalf("done called %d times, want %d", i, accepted)
		}
	}
	if err := term.Input(chunk, nil); !errors.Is(err, pty.ErrClosed) {
		t.Fatalf("Input after Close = %v", err)
	}
}

func TestResize(t *testing.T) {
	term := start(t, pty.Config{Command: sh("read x; stty size"), Rows: 24, Cols: 80})
	w := attach(t, term, 4096)
	untilReady(t, w) // so that the resize comes as a notice, not in the first snapshot
	if err := term.Resize(0, 10); !errors.Is(err, pty.ErrInvalidSize) {
		t.Fatalf("Resize(0,10) = %v", err)
	}
	if err := term.Resize(10, pty.MaxSize+1); !errors.Is(err, pty.ErrInvalidSize) {
		t.Fatalf("Resize(10,1001) = %v", err)
	}
	if err := term.Resize(30, 100); err != nil {
		t.Fatal(err)
	}
	if err := term.Input([]byte("\n"), nil); err != nil {
		t.Fatal(err)
	}
	ms := w.untilExit(10 * time.Second)
	sawResize := false
	for _, m := range ms {
		if m.Method == "terminal/resize" {
			sawResize = m.Params.Rows == 30 && m.Params.Cols == 100
		}
	}
	if !sawResize || !strings.Contains(liveText(ms), "30 100") {
		t.Fatalf("resize notice %v, output %q", sawResize, liveText(ms))
	}
	late := attach(t, term, 4096)
	if m, _ := late.pull(5 * time.Second); m.Method != "terminal/reset" || m.Params.Rows != 30 || m.Params.Cols != 100 {
		t.Fatalf("late snapshot starts with %+v", m)
	}
}

func TestCloseKillsAndWaits(t *testing.T) {
	term := start(t, pty.Config{Command: sh("trap '' HUP; echo ready; sleep 30"), KillTimeout: 200 * time.Millisecond})
	w := attach(t, term, 4096)
	for seen := ""; !strings.Contains(seen, "ready"); {
		m, ok := w.pull(5 * time.Second)
		if !ok {
			t.Fatal("shell not ready")
		}
		seen += m.Params.Data
	}
	began := time.Now()
	term.Close()
	// Without the kill, Close would wait for sleep's 30 s.
	if d := time.Since(began); d > 15*time.Second {
		t.Fatalf("Close took %v", d)
	}
	ms := w.untilExit(5 * time.Second)
	if s := ms[len(ms)-1].Params.Signal; s == nil || *s != "SIGKILL" {
		t.Fatalf("exit %+v (%v), want SIGKILL", ms[len(ms)-1].Params, *s)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg   pty.Config
		field string
	}{
		{pty.Config{}, ""},
		{pty.Config{Rows: -1}, "Rows"},
		{pty.Config{Cols: 5000}, "Cols"},
		{pty.Config{Scrollback: 2_000_000}, "Scrollback"},
		{pty.Config{ViewerBacklog: 100}, "ViewerBacklog"},
		{pty.Config{EmulatorBacklog: 100}, "EmulatorBacklog"},
		{pty.Config{InputQueue: 10}, "InputQueue"},
		{pty.Config{ReplyQueue: 10}, "ReplyQueue"},
		{pty.Config{KillTimeout: -1}, "KillTimeout"},
		{pty.Config{Command: []string{""}}, "Command"},
	}
	for _, tc := range tests {
		err := tc.cfg.Validate()
		if tc.field == "" && err != nil || tc.field != "" && (err == nil || !strings.Contains(err.Error(), tc.field)) {
			t.Errorf("Validate(%+v) = %v, want an error naming %q", tc.cfg, err, tc.field)
		}
	}
}

func TestDefaultShell(t *testing.T) {
	t.Setenv("SHELL", "/bin/sh")
	term := start(t, pty.Config{})
	w := attach(t, term, 4096)
	untilReady(t, w)
	if err := term.Input([]byte("echo $0; exit 7\n"), nil); err != nil {
		t.Fatal(err)
	}
	ms := w.untilExit(10 * time.Second)
	if !strings.Contains(liveText(ms), "-sh") {
		t.Fatalf("not a login shell: %q", liveText(ms))
	}
	if c := ms[len(ms)-1].Params.Code; c == nil || *c != 7 {
		t.Fatalf("exit %+v", ms[len(ms)-1].Params)
	}
}

// methodOf returns the method of a serialized notification without decoding it.
func methodOf(text string) string {
	_, rest, _ := strings.Cut(text, `"method":"`)
	m, _, _ := strings.Cut(rest, `"`)
	return m
}

// TestResnapshotGrace: a viewer resumed from a snapshot while the emulator
// lags the log by more than the viewer's allowance is not counted behind
// for output it could not have received yet: pulling steadily after its
// snapshot, it gets live output, not a second snapshot at once. The log
// it keeps for that stays within its allowance plus EmulatorBacklog.
func TestResnapshotGrace(t *testing.T) {
	const (
		backlog    = 512 << 10
		maxMessage = 1 << 20
		emuBacklog = 2 << 20
		readSize   = 64 << 10
		part1      = 1_088_895 // bytes of `seq 1 150000`, CRLF line ends
		total      = 2_448_895 // and with `seq 150001 320000`
	)
	term := start(t, pty.Config{
		Command:       sh("read x; seq 1 150000; read y; seq 150001 320000; read z"),
		ViewerBacklog: backlog, EmulatorBacklog: emuBacklog,
	})
	w := attach(t, term, maxMessage)
	untilReady(t, w)
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v, viewer %+v", what, term.Stats(), w.v.Stats())
			}
			time.Sleep(time.Millisecond)
		}
	}
	input := func(s string) {
		if err := term.Input([]byte(s), nil); err != nil {
			t.Fatal(err)
		}
	}
	// Part 1 while the emulator stands still; the viewer does not pull.
	// Once the emulator has caught up, the viewer is 1 MB behind (more
	// than its allowance) and has lost its queue.
	resume := term.StallEmulator()
	input("\n")
	waitFor("part 1 not read", func() bool { return term.Stats().BytesRead >= part1 })
	resume()
	waitFor("the viewer did not overflow", func() bool {
		return term.Stats().EmulatorLag == 0 && w.v.Stats().BytesDropped > 0
	})
	// Part 2 while the emulator stands still again, then the viewer
	// pulls: its snapshot is 1.3 MB behind the newest output.
	resume = term.StallEmulator()
	input("\n")
	waitFor("part 2 not read", func() bool { return term.Stats().BytesRead >= total })
	maxRetained := term.Stats().Retained
	resume()
	var methods []string
	for {
		m, ok := w.pullRaw(500 * time.Millisecond)
		if !ok {
			if w.v.Stats().Queued > 0 {
				t.Fatalf("the viewer stalled after %d messages", len(methods))
			}
			break // caught up: the command waits for input
		}
		methods = append(methods, methodOf(m.Text))
		maxRetained = max(maxRetained, term.Stats().Retained)
	}
	if methods[0] != "terminal/reset" {
		t.Fatalf("after falling behind, first message %s", methods[0])
	}
	if k := slices.Index(methods[1:], "terminal/reset"); k >= 0 {
		t.Fatalf("snapshotted again %d messages after the first snapshot, while pulling steadily", k+1)
	}
	if bound := int64(backlog + emuBacklog + readSize); maxRetained > bound {
		t.Fatalf("terminal retained %d bytes, bound %d", maxRetained, bound)
	}
}

// TestTitle: the window title a program sets (OSC 0, then OSC 2) is the
// terminal's Title and Describe().Title, and stays after it exits.
func TestTitle(t *testing.T) {
	term := start(t, pty.Config{Command: sh(`printf '\033]0;first\007'; read x; printf '\033]2;second title\033\\'; read y`)})
	w := attach(t, term, 64<<10)
	untilReady(t, w)
	deadline := time.Now().Add(10 * time.Second)
	for term.Title() != "first" {
		if time.Now().After(deadline) {
			t.Fatalf("Title() = %q, want %q", term.Title(), "first")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := term.Input([]byte("\n"), nil); err != nil {
		t.Fatal(err)
	}
	for term.Title() != "second title" {
		if time.Now().After(deadline) {
			t.Fatalf("Title() = %q, want %q", term.Title(), "second title")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := term.Input([]byte("\n"), nil); err != nil {
		t.Fatal(err)
	}
	w.untilExit(10 * time.Second)
	if d := term.Describe(); d.Title != "second title" || d.Detail != "code 0" {
		t.Fatalf("Describe() = %+v after the exit", d)
	}
}
