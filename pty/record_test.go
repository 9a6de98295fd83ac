package pty_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cpty "github.com/creack/pty"

	"github.com/ahp-dev/ahpd/flow"
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

// castsOf returns the recordings of a store, oldest first.
func castsOf(t testing.TB, s *record.Store) []record.Info {
	l := s.List("")
	slices.Reverse(l)
	return l
}

// dirBytes is the size of the files in dir.
func dirBytes(t testing.TB, dir string) (total int64, files map[string]int64) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	files = map[string]int64{}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			continue // evicted meanwhile
		}
		total += fi.Size()
		stem := strings.TrimSuffix(strings.TrimSuffix(e.Name(), record.CastSuffix), record.IndexSuffix)
		files[stem] += fi.Size()
	}
	return total, files
}

// floodText is what floodWriter writes, as the PTY hands it over (ONLCR).
func floodText(n int) string {
	var b strings.Builder
	for i := 0; n > 0; i++ {
		line := fmt.Sprintf("%08d flood flood flood flood flood flood flood flood flood\n", i)
		if len(line) > n {
			line = line[:n]
		}
		n -= len(line)
		b.WriteString(strings.ReplaceAll(line, "\n", "\r\n"))
	}
	return b.String()
}

// diskWatch checks the caps after every write the store makes.
type diskWatch struct {
	mu        sync.Mutex
	t         testing.TB
	dir       string
	lim       record.Limits
	maxTotal  int64
	maxFile   int64
	checks    int
	violation string
}

type watchedWriter struct {
	w  io.Writer
	dw *diskWatch
}

func (w watchedWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.dw.check()
	return n, err
}

func (dw *diskWatch) check() {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	total, files := dirBytes(dw.t, dw.dir)
	dw.checks++
	dw.maxTotal = max(dw.maxTotal, total)
	for id, n := range files {
		dw.maxFile = max(dw.maxFile, n)
		if n > dw.lim.MaxBytes+record.MaxEventLine && dw.violation == "" {
			dw.violation = fmt.Sprintf("%s holds %d bytes, cap %d", id, n, dw.lim.MaxBytes)
		}
	}
	if total > dw.lim.MaxTotalBytes+record.MaxEventLine && dw.violation == "" {
		dw.violation = fmt.Sprintf("the directory holds %d bytes, cap %d", total, dw.lim.MaxTotalBytes)
	}
}

// TestRecordingCapsUnderFlood: a program floods tens of MiB through a
// recorded terminal with small caps. After every write the store makes,
// no file (.cast and index) and not the directory exceeds its cap by
// more than one event line; the oldest files were evicted first (what is
// left is a chain of files, each continued in the next, ending with the
// newest); every file starts with a keyframe; and the output they hold
// is the end of what the program wrote.
func TestRecordingCapsUnderFlood(t *testing.T) {
	flood := 32 << 20
	if raceEnabled {
		flood = 8 << 20
	}
	lim := record.Limits{MaxBytes: 256 << 10, MaxTotalBytes: 1 << 20, KeyframeBytes: 64 << 10, QueueBytes: 1 << 20}
	dw := &diskWatch{t: t, lim: lim}
	store := openStore(t, lim, record.WithFileWrapper(func(w io.Writer) io.Writer { return watchedWriter{w, dw} }))
	dw.dir = store.Dir()
	term := start(t, pty.Config{
		Command:    []string{os.Args[0]},
		Env:        append(os.Environ(), pty.FloodWriterEnv+"="+strconv.Itoa(flood)),
		Record:     record.Output,
		Recordings: store,
		Channel:    "flood",
	})
	if err := term.Input([]byte("\n"), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-term.Exited():
	case <-time.After(5 * time.Minute):
		t.Fatal("the flood did not end")
	}
	term.Close()
	dw.mu.Lock()
	t.Logf("%d MiB flooded: %d checks, at most %d bytes in the directory, %d in a file; %+v",
		flood>>20, dw.checks, dw.maxTotal, dw.maxFile, store.Stats())
	if dw.violation != "" {
		t.Fatal(dw.violation)
	}
	dw.mu.Unlock()
	st := store.Stats()
	if st.Evictions == 0 {
		t.Fatalf("no eviction: %+v", st)
	}
	files := castsOf(t, store)
	var out strings.Builder
	for i, info := range files {
		c := readCast(t, store, info.ID)
		if ks := c.keyframes(); len(ks) == 0 || ks[0].Offset != c.events[0].Offset {
			t.Fatalf("%s does not start with a keyframe", info.ID)
		}
		last := c.events[len(c.events)-1]
		want := "recording stopped: process exited with code 0"
		if i+1 < len(files) {
			want = "continued in " + files[i+1].ID
		}
		if last.Type != "m" || last.Data != want {
			t.Fatalf("%s (%d of %d) ends with %+v, want marker %q: a file in the middle was evicted", info.ID, i, len(files), last, want)
		}
		out.WriteString(c.text("o"))
	}
	if st.DroppedBytes > 0 {
		t.Logf("the writer dropped %d bytes: the suffix check is skipped", st.DroppedBytes)
		return
	}
	want := floodText(flood)
	if got := out.String(); !strings.HasSuffix(want, got) || len(got) < 512<<10 {
		t.Fatalf("the files hold %d bytes that are not the end of the flood (%.80q…)", len(got), got)
	}
}

// TestRecordingSlowDiskNeverStalls: with every write of the store
// blocked, a program floods the terminal: it runs to its end and a viewer
// gets every byte, while the recording drops what its queue cannot hold
// and counts it; once the disk moves again the recording says so (marker,
// index line).
func TestRecordingSlowDiskNeverStalls(t *testing.T) {
	const flood = 8 << 20
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock()
	store := openStore(t, record.Limits{QueueBytes: 256 << 10}, record.WithFileWrapper(func(w io.Writer) io.Writer {
		return blockedWriter{w, release}
	}))
	term := start(t, pty.Config{
		Command:       []string{os.Args[0]},
		Env:           append(os.Environ(), pty.FloodWriterEnv+"="+strconv.Itoa(flood)),
		Record:        record.Output,
		Recordings:    store,
		ViewerBacklog: 64 << 20,
	})
	id, _ := term.Recording()
	w := attach(t, term, 1<<20)
	untilReady(t, w)
	if err := term.Input([]byte("\n"), nil); err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		m, ok := w.pullRaw(2 * time.Minute)
		if !ok {
			t.Fatalf("the terminal stalled with the disk blocked: %d bytes of output", got)
		}
		if m.Class == flow.Lifecycle {
			break
		}
		got += strings.Count(m.Text, `\n`) // a line feed, escaped, is never cut
	}
	if want := strings.Count(floodText(flood), "\n") + 1; got != want { // + the echo of the line typed
		t.Fatalf("the viewer got %d lines, want %d", got, want)
	}
	dropped := store.Stats().DroppedBytes
	if dropped < flood-(1<<20) {
		t.Fatalf("%d bytes dropped of %d with the disk blocked", dropped, flood)
	}
	unblock()
	term.Close()
	c := readCast(t, store, id)
	var marked int64
	for _, e := range c.events {
		if n, ok := strings.CutPrefix(e.Data, "dropped "); e.Type == "m" && ok {
			k, _ := strconv.ParseInt(strings.TrimSuffix(n, " bytes"), 10, 64)
			marked += k
		}
	}
	var indexed int64
	for _, l := range c.index {
		indexed += l.Dropped
	}
	if marked != dropped || indexed != dropped {
		t.Fatalf("markers say %d, index %d, store %d bytes dropped", marked, indexed, dropped)
	}
}

type blockedWriter struct {
	w       io.Writer
	release chan struct{}
}

func (b blockedWriter) Write(p []byte) (int, error) {
	<-b.release
	return b.w.Write(p)
}

// TestRecordingAcrossHandOver: Freeze closes the recording with its
// marker; the terminal Adopt carries on (Config.Record) starts a new
// one whose first keyframe is the screen the first one ended on, and the
// two hold the output once, in order.
func TestRecordingAcrossHandOver(t *testing.T) {
	store := openStore(t, record.Limits{})
	term, err := pty.Start(pty.Config{
		Command:    sh("stty -echo; echo ready; read x; echo one; printf '\\033[31mred'; read x; echo two; read x"),
		Record:     record.Output,
		Recordings: store,
		Channel:    "h",
	})
	if err != nil {
		t.Fatal(err)
	}
	waitScreen(t, term, "ready")
	if err := term.Input([]byte("\n"), nil); err != nil {
		t.Fatal(err)
	}
	waitScreen(t, term, "red")
	id1, _ := term.Recording()
	fr, err := term.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	next, err := pty.Adopt(pty.Config{Record: record.Output, Recordings: store, Channel: "h"}, fr.Master, fr.Pid, fr.State)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	id2, mode := next.Recording()
	if id2 == "" || id2 == id1 || mode != record.Output {
		t.Fatalf("adopted terminal records %q (%v), the frozen one %q", id2, mode, id1)
	}
	if err := next.Input([]byte("\n"), nil); err != nil {
		t.Fatal(err)
	}
	waitScreen(t, next, "two")
	if err := next.Input([]byte("\n"), nil); err != nil {
		t.Fatal(err)
	}
	<-next.Exited()
	next.Close()
	c1, c2 := readCast(t, store, id1), readCast(t, store, id2)
	if last := c1.events[len(c1.events)-1]; last.Data != "recording stopped: upgrade in place" {
		t.Fatalf("first recording ends with %+v", last)
	}
	if got := c1.text("o") + c2.text("o"); got != "ready\r\none\r\n\x1b[31mredtwo\r\n" {
		t.Fatalf("output across the hand-over %q", got)
	}
	e := fromKeyframe(c1.keyframes()[0])
	replayEvents(t, e, c1.events, 0, int64(len(c1.raw)))
	if d := screenDiff(e, fromKeyframe(c2.keyframes()[0])); len(d) > 0 {
		t.Fatalf("the second recording's first keyframe is not the screen the first ended on:\n%s", strings.Join(d, "\n"))
	}
}

// waitScreen waits until the terminal's screen shows s.
func waitScreen(t testing.TB, term *pty.Terminal, s string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		e := term.EmulatorCopy()
		for y := range 24 {
			if strings.Contains(e.LineText(y), s) {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the screen never showed %q", s)
}

// TestRecordingControl: StartRecording with the same mode keeps the
// recording, another mode or Off stops it (marker with the reason);
// RecordAudit lands in the index; a closed terminal refuses.
func TestRecordingControl(t *testing.T) {
	store := openStore(t, record.Limits{})
	term := start(t, pty.Config{Command: sh("exec cat"), Channel: "ctl"})
	if id, m := term.Recording(); id != "" || m != record.Off {
		t.Fatalf("Recording() = %q, %v before any", id, m)
	}
	term.RecordAudit(record.Audit{Event: "attach"}) // not recording: nothing
	id1, err := term.StartRecording(store, record.Output)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := term.StartRecording(store, record.Output); err != nil || again != id1 {
		t.Fatalf("StartRecording again = %q, %v; want %q", again, err, id1)
	}
	term.RecordAudit(record.Audit{Event: "attach", Viewer: "v1", Token: "tok1", Role: "control", Remote: "127.0.0.1:9"})
	if err := term.Input([]byte("secret\n"), nil); err != nil {
		t.Fatal(err)
	}
	waitScreen(t, term, "secret")
	id2, err := term.StartRecording(store, record.OutputInput)
	if err != nil || id2 == id1 {
		t.Fatalf("StartRecording(output+input) = %q, %v", id2, err)
	}
	if err := term.Input([]byte("typed\n"), nil); err != nil {
		t.Fatal(err)
	}
	waitScreen(t, term, "typed")
	if _, err := term.StartRecording(store, record.Off); err != nil {
		t.Fatal(err)
	}
	if id, _ := term.Recording(); id != "" {
		t.Fatalf("still recording %q", id)
	}
	c1, c2 := readCast(t, store, id1), readCast(t, store, id2)
	if c1.text("i") != "" || !strings.Contains(c1.text("o"), "secret") {
		t.Fatalf("output-only recording: input %q, output %q", c1.text("i"), c1.text("o"))
	}
	if last := c1.events[len(c1.events)-1]; last.Data != "recording stopped: recording mode changed to output+input" {
		t.Fatalf("first recording ends with %+v", last)
	}
	if c2.text("i") != "typed\n" {
		t.Fatalf("input recorded %q", c2.text("i"))
	}
	if last := c2.events[len(c2.events)-1]; last.Data != "recording stopped: recording switched off" {
		t.Fatalf("second recording ends with %+v", last)
	}
	var audit []string
	for _, l := range c1.index {
		if l.Type == "audit" {
			audit = append(audit, l.Audit.Event+":"+l.Audit.Token)
		}
	}
	if strings.Join(audit, ",") != "record-on:,attach:tok1,record-off:" {
		t.Fatalf("audit %v", audit)
	}
	term.Close()
	if _, err := term.StartRecording(store, record.Output); !errors.Is(err, pty.ErrClosed) {
		t.Fatalf("StartRecording on a closed terminal = %v", err)
	}
}

// TestRecordingPlaysInAsciinema: `asciinema cat` (Debian's asciinema)
// of a recording prints exactly the bytes the program wrote (as the PTY
// hands them over: ONLCR), UTF-8 sequences cut between writes included,
// after the echo of the line typed.
func TestRecordingPlaysInAsciinema(t *testing.T) {
	bin, err := exec.LookPath("asciinema")
	if err != nil {
		t.Skip("no asciinema (apt-get install asciinema)")
	}
	store := openStore(t, record.Limits{})
	term := start(t, pty.Config{
		Command:    []string{os.Args[0]},
		Env:        append(os.Environ(), pty.StreamWriterEnv+"=11:1500:valid"),
		Record:     record.Output,
		Recordings: store,
	})
	id, _ := term.Recording()
	if err := term.Input([]byte("go\n"), nil); err != nil {
		t.Fatal(err)
	}
	<-term.Exited()
	term.Close()
	var want bytes.Buffer
	want.WriteString("go\r\n") // the echo
	for _, w := range streamWrites(11, 1500, true) {
		want.Write(bytes.ReplaceAll(w, []byte("\n"), []byte("\r\n")))
	}
	// asciinema cat puts its terminal (/dev/tty) in raw mode: give it one.
	ptmx, tty, err := cpty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	go io.Copy(io.Discard, ptmx)
	var out bytes.Buffer
	cmd := exec.Command(bin, "cat", filepath.Join(store.Dir(), id+record.CastSuffix))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, &out, tty
	home := t.TempDir() // asciinema keeps its config (an install id) there
	cmd.Env = append(os.Environ(), "PYTHONIOENCODING=utf-8", "LC_ALL=C.UTF-8", "HOME="+home, "ASCIINEMA_CONFIG_HOME="+home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Run(); err != nil {
		t.Fatalf("asciinema cat: %v", err)
	}
	if got := out.Bytes(); !bytes.Equal(got, want.Bytes()) {
		i := 0
		for i < min(len(got), want.Len()) && got[i] == want.Bytes()[i] {
			i++
		}
		t.Fatalf("asciinema cat printed %d bytes, the program wrote %d; first difference at %d: %.60q vs %.60q",
			len(got), want.Len(), i, got[i:], want.Bytes()[i:])
	}
}

// TestLastRecordingAfterExit: a terminal that starts recorded and whose
// process exits at once has ended its recording (Recording says none),
// and LastRecording still names it, ended, so the daemon can announce a
// recording that was over before it asked.
func TestLastRecordingAfterExit(t *testing.T) {
	store := openStore(t, record.Limits{})
	term := start(t, pty.Config{Command: []string{"/bin/sh", "-c", "echo bye"}, Record: record.Output, Recordings: store, Channel: "bye"})
	select {
	case <-term.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("the process did not exit")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		id, m, live := term.LastRecording()
		if !strings.HasPrefix(id, "bye-") || m != record.Output {
			t.Fatalf("LastRecording() = %q, %v, %v; want bye-…, output", id, m, live)
		}
		if !live {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the recording is still live 30 s after the process exited")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if id, m := term.Recording(); id != "" || m != record.Off {
		t.Fatalf("Recording() = %q, %v after the recording ended, want none", id, m)
	}
	never := start(t, pty.Config{Command: []string{"/bin/sh", "-c", "true"}})
	if id, _, _ := never.LastRecording(); id != "" {
		t.Fatalf("an unrecorded terminal's LastRecording = %q", id)
	}
}
