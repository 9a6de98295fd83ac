package record

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseMode(t *testing.T) {
	for _, m := range []Mode{Off, Output, OutputInput} {
		if got, err := ParseMode(m.String()); err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", m.String(), got, err, m)
		}
	}
	for _, s := range []string{"", "on", "input", "Output"} {
		if _, err := ParseMode(s); err == nil {
			t.Errorf("ParseMode(%q) accepted", s)
		}
	}
}

func TestLimitsValidate(t *testing.T) {
	if err := (Limits{}).Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, c := range []struct {
		l    Limits
		want string
	}{
		{Limits{MaxBytes: 1000}, "MaxBytes"},
		{Limits{MaxBytes: 1 << 20, MaxTotalBytes: 1 << 19}, "MaxTotalBytes"},
		{Limits{KeyframeBytes: 10}, "KeyframeBytes"},
		{Limits{KeyframeInterval: time.Millisecond}, "KeyframeInterval"},
		{Limits{QueueBytes: 1000}, "QueueBytes"},
	} {
		if err := c.l.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", c.l, err, c.want)
		}
	}
}

func TestAppendTime(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0.000000"}, {time.Microsecond, "0.000001"}, {1500 * time.Millisecond, "1.500000"},
		{3*time.Hour + 7*time.Microsecond + 999, "10800.000007"}, {-time.Second, "0.000000"},
	} {
		if got := string(appendTime(nil, c.d)); got != c.want {
			t.Errorf("appendTime(%v) = %s, want %s", c.d, got, c.want)
		}
	}
}

// TestUTF8Carry: a sequence cut anywhere is held until whole, and
// invalid bytes become U+FFFD one each, as a decoder reads them.
func TestUTF8Carry(t *testing.T) {
	in := []byte("aé日🙂\xff\xc3(b\xe6\x97")
	want := "aé日🙂\uFFFD\uFFFD(b\uFFFD\uFFFD"
	for cut1 := 0; cut1 <= len(in); cut1++ {
		for cut2 := cut1; cut2 <= len(in); cut2++ {
			var c utf8Carry
			got := c.text(in[:cut1], false) + c.text(in[cut1:cut2], false) + c.text(in[cut2:], false) + c.text(nil, true)
			if got != want {
				t.Fatalf("cuts %d,%d: %q, want %q", cut1, cut2, got, want)
			}
		}
	}
}

// TestAppendEventsLineBound: output is cut into events of at most
// MaxEventLine bytes, never inside a UTF-8 sequence, whatever it escapes
// to, and the events' text is the output.
func TestAppendEventsLineBound(t *testing.T) {
	for _, s := range []string{
		strings.Repeat("x", 200<<10),
		strings.Repeat("\x1b", 100<<10),
		strings.Repeat("日本", 40<<10),
		strings.Repeat("a\x01🙂", 30<<10),
	} {
		b := appendEvents(nil, time.Second, 'o', s)
		var got strings.Builder
		for _, line := range bytes.SplitAfter(b, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			if len(line) > MaxEventLine {
				t.Fatalf("line of %d bytes", len(line))
			}
			e, err := ParseEvent(line)
			if err != nil {
				t.Fatal(err)
			}
			got.WriteString(e.Data)
		}
		if got.String() != s {
			t.Fatalf("events hold %d bytes, want %d", got.Len(), len(s))
		}
	}
}

func TestSafeChannelAndID(t *testing.T) {
	if got := SafeChannel("a b/c:d-é"); got != "a_b_c_d-__" {
		t.Fatalf("SafeChannel = %q", got)
	}
	for _, id := range []string{"t-20261207T150405Z", "a_b.c-d-20261207T150405Z-12"} {
		if !idPattern.MatchString(id) {
			t.Errorf("%q is not an id", id)
		}
	}
	for _, id := range []string{"../x-20261207T150405Z", "t-20261207T150405", "t"} {
		if idPattern.MatchString(id) {
			t.Errorf("%q is an id", id)
		}
	}
}

// fakeScreen is a Params.Snapshot for tests without an emulator.
func fakeScreen(n *int) func() (int, int, string) {
	return func() (int, int, string) {
		*n++
		return 24, 80, "\x1b[Hscreen " + strings.Repeat("#", *n%7)
	}
}

// notifyWrites returns a channel that receives (one pending at most)
// each time a writer of s has written and accounted an op.
func notifyWrites(s *Store) <-chan struct{} {
	wrote := make(chan struct{}, 1)
	s.opDone = func() {
		select {
		case wrote <- struct{}{}:
		default:
		}
	}
	return wrote
}

// queued returns the bytes r's queue holds.
func queued(r *Recorder) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.qBytes
}

// waitWritten waits until r's writer has written its queue (wrote from
// notifyWrites).
func waitWritten(r *Recorder, wrote <-chan struct{}) {
	for queued(r) > 0 {
		<-wrote
	}
}

// blockedStore is a testStore whose writers' writes wait until unblock
// (which may be called more than once).
func blockedStore(t *testing.T, l Limits) (s *Store, unblock func()) {
	t.Helper()
	release := make(chan struct{})
	var once sync.Once
	unblock = func() { once.Do(func() { close(release) }) }
	s = testStore(t, l, WithFileWrapper(func(w io.Writer) io.Writer {
		return &blockingWriter{w: w, release: release}
	}))
	return s, unblock
}

func testStore(t *testing.T, l Limits, opts ...Option) *Store {
	t.Helper()
	s, err := OpenStore(filepath.Join(t.TempDir(), "rec"), l, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestStoreRoundTrip: what a Recorder records reads back through Open,
// Index and Keyframe; files and directory have their modes; List,
// unknown ids, and a store reopened from the directory.
func TestStoreRoundTrip(t *testing.T) {
	s := testStore(t, Limits{})
	var snaps int
	t0 := time.Now()
	r, err := s.Start(Params{Channel: "ch 1", Rows: 24, Cols: 80, Title: "sh", Term: "xterm", Mode: OutputInput, Snapshot: fakeScreen(&snaps), Time: t0})
	if err != nil {
		t.Fatal(err)
	}
	id := r.ID()
	r.OutputBytes(t0.Add(time.Millisecond), []byte("hello \xe6\x97"))
	r.OutputBytes(t0.Add(2*time.Millisecond), []byte("\xa5 world\x1b[1m\xff"))
	r.RecordInput(t0.Add(3*time.Millisecond), []byte("ls\r"))
	r.Resize(t0.Add(4*time.Millisecond), 30, 100)
	r.Output(t0.Add(time.Millisecond), "late\xff\xe6") // before the previous event: its time is clamped
	r.Audit(Audit{Event: "attach", Viewer: "v1", Token: "tok", Role: "control", Remote: "127.0.0.1:5"})
	r.Stop("test over")
	r.Stop("again") // no-op

	fi, err := os.Stat(s.Dir())
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("directory mode %v, %v", fi.Mode(), err)
	}
	for _, suf := range []string{CastSuffix, IndexSuffix} {
		fi, err := os.Stat(filepath.Join(s.Dir(), id+suf))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s mode %v, %v", suf, fi.Mode(), err)
		}
	}
	f, info, err := s.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if info.Live || info.Channel != "ch_1" || info.Rows != 24 || !info.Input || info.Title != "sh" {
		t.Fatalf("info %+v", info)
	}
	cr, err := NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	prev := 0.0
	for e, err := range cr.Events() {
		if err != nil {
			t.Fatal(err)
		}
		if e.Time < prev {
			t.Fatalf("time %v after %v", e.Time, prev)
		}
		prev = e.Time
		got = append(got, e.Type+":"+e.Data)
	}
	want := []string{"o:hello ", "o:日 world\x1b[1m\uFFFD", "i:ls\r", "r:100x30", "o:late\uFFFD\uFFFD", "m:recording stopped: test over"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("events\n%q\nwant\n%q", got, want)
	}
	ix, err := s.Index(id)
	if err != nil {
		t.Fatal(err)
	}
	if len(ix.Keyframes) != 1 || ix.Keyframes[0].Screen != "" || ix.Keyframes[0].Bytes == 0 {
		t.Fatalf("keyframes %+v", ix.Keyframes)
	}
	var events []string
	for _, a := range ix.Audit {
		events = append(events, a.Event+"="+a.Detail+a.Token)
	}
	if strings.Join(events, ",") != "record-on=output+input,attach=tok,record-off=test over" {
		t.Fatalf("audit %v", events)
	}
	k, err := s.Keyframe(id, 0)
	if err != nil || k.Screen != "\x1b[Hscreen #" || k.Rows != 24 || k.Cols != 80 {
		t.Fatalf("Keyframe = %+v, %v", k, err)
	}
	if _, err := s.Keyframe(id, 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Keyframe(1) = %v", err)
	}
	for _, bad := range []string{"nope", "../rec", id + "x"} {
		if _, _, err := s.Open(bad); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Open(%q) = %v, want ErrNotFound", bad, err)
		}
	}
	if l := s.List("ch 1"); len(l) != 1 || l[0].ID != id {
		t.Fatalf("List = %+v", l)
	}
	if l := s.List("other"); len(l) != 0 {
		t.Fatalf("List(other) = %+v", l)
	}
	// A store opened on the same directory finds it.
	s2, err := OpenStore(s.Dir(), Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	l := s2.List("")
	if len(l) != 1 || l[0].ID != id || l[0].Live || l[0].Duration != info.Duration || l[0].Rows != 24 || !l[0].Input || l[0].Bytes != info.Bytes {
		t.Fatalf("reopened List = %+v, want %+v", l, info)
	}
}

// blockingWriter blocks every write until released: a disk that stalls.
type blockingWriter struct {
	w       io.Writer
	release chan struct{}
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	<-b.release
	return b.w.Write(p)
}

// TestSlowDiskDrops: with the writer stalled, recording never blocks;
// output beyond the queue is dropped and counted; once the disk moves
// again, the file has the marker, the index line and a keyframe after
// it, and the queue stayed within its bound.
func TestSlowDiskDrops(t *testing.T) {
	s, unblock := blockedStore(t, Limits{QueueBytes: 256 << 10})
	defer unblock()
	wrote := notifyWrites(s)
	var snaps int
	r, err := s.Start(Params{Channel: "c", Rows: 24, Cols: 80, Mode: Output, Snapshot: fakeScreen(&snaps)})
	if err != nil {
		t.Fatal(err)
	}
	chunk := strings.Repeat("y\r\n", 10<<10)
	const n = 100 // 3 MiB
	var maxQ int64
	for range n {
		r.Output(time.Now(), chunk)
		maxQ = max(maxQ, queued(r))
	}
	if bound := int64(256<<10) + slack + 4<<10; maxQ > bound {
		t.Fatalf("queue held %d bytes, bound %d", maxQ, bound)
	}
	dropped := s.Stats().DroppedBytes
	if dropped < int64(n*len(chunk))-(512<<10) {
		t.Fatalf("dropped %d bytes of %d with a stalled disk", dropped, n*len(chunk))
	}
	unblock()
	r.Flush()
	waitWritten(r, wrote) // the writer catches up
	r.Output(time.Now(), "after\r\n")
	id := r.ID()
	r.Stop("done")
	f, _, err := s.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cr, err := NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var marker *Event
	var out, marked int64
	for e, err := range cr.Events() {
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == "o" {
			out += int64(len(e.Data))
		}
		if n, ok := strings.CutPrefix(e.Data, "dropped "); e.Type == "m" && ok {
			k, err := strconv.ParseInt(strings.TrimSuffix(n, " bytes"), 10, 64)
			if err != nil {
				t.Fatalf("marker %q", e.Data)
			}
			marked += k
			marker = &e
		}
	}
	if marker == nil || marked != dropped {
		t.Fatalf("markers say %d bytes dropped (last %+v), want %d", marked, marker, dropped)
	}
	if out+dropped != int64(n*len(chunk)+len("after\r\n")) {
		t.Fatalf("recorded %d + dropped %d != written %d", out, dropped, n*len(chunk)+7)
	}
	ix, err := s.Index(id)
	if err != nil {
		t.Fatal(err)
	}
	if ix.Dropped != dropped {
		t.Fatalf("index dropped %d, want %d", ix.Dropped, dropped)
	}
	if last := ix.Keyframes[len(ix.Keyframes)-1]; last.Offset <= marker.Offset {
		t.Fatalf("no keyframe after the drop marker (last at %d, marker at %d)", last.Offset, marker.Offset)
	}
}

// TestTotalCapWithLiveRecordings: when only recordings being written
// are left to fill the directory, further lines are dropped (and
// accounted, and marked once there is room again) rather than written
// past the total cap; Close stops them all.
func TestTotalCapWithLiveRecordings(t *testing.T) {
	lim := Limits{MaxBytes: 64 << 10, MaxTotalBytes: 128 << 10}
	s := testStore(t, lim)
	wrote := notifyWrites(s)
	var snaps int
	var rs []*Recorder
	for i := range 3 {
		r, err := s.Start(Params{Channel: "c" + strconv.Itoa(i), Rows: 24, Cols: 80, Mode: Output, Snapshot: fakeScreen(&snaps)})
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	line := strings.Repeat("z", 1000) + "\r\n"
	for range 50 { // 50 KB each: no file reaches MaxBytes, none can be evicted
		for _, r := range rs {
			r.Output(time.Now(), line)
			r.Flush()
		}
	}
	for _, r := range rs { // written (or dropped) while all three are live
		waitWritten(r, wrote)
	}
	if st := s.Stats(); st.DroppedBytes == 0 || st.Live != 3 || st.Evictions != 0 {
		t.Fatalf("stats %+v: want drops, three live, no eviction", st)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Live() {
			t.Fatalf("%s still live after Close", r.ID())
		}
		r.Output(time.Now(), "after close") // nothing, no panic
	}
	st := s.Stats()
	var total int64
	ents, _ := os.ReadDir(s.Dir())
	for _, e := range ents {
		fi, _ := e.Info()
		total += fi.Size()
	}
	// Headers and first keyframes are written whatever the cap: at most
	// one event line past it.
	if total != st.Bytes || total > lim.MaxTotalBytes+MaxEventLine {
		t.Fatalf("%d bytes on disk (store says %d), cap %d", total, st.Bytes, lim.MaxTotalBytes)
	}
	if st.Live != 0 {
		t.Fatalf("stats %+v: want nothing live", st)
	}
}

// TestLazyWrite: an event line short of a chunk is written flushDelay
// after it, not before (unless Flush), and one wake-up writes what came
// meanwhile.
func TestLazyWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := OpenStore(filepath.Join(t.TempDir(), "rec"), Limits{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var snaps int
		r, err := s.Start(Params{Channel: "c", Rows: 24, Cols: 80, Mode: Output, Snapshot: fakeScreen(&snaps)})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(s.Dir(), r.ID()+CastSuffix)
		has := func(s string) bool {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			return strings.Contains(string(b), s)
		}
		synctest.Wait() // the header and the first keyframe are written
		r.Output(time.Now(), "one")
		time.Sleep(flushDelay / 2)
		r.Output(time.Now(), "two")
		synctest.Wait()
		if has("one") || has("two") {
			t.Fatal("written before flushDelay")
		}
		time.Sleep(flushDelay / 2)
		synctest.Wait()
		if !has("one") || !has("two") {
			t.Fatal("not written flushDelay after the first line")
		}
		r.Output(time.Now(), "three")
		r.Flush()
		synctest.Wait()
		if !has("three") {
			t.Fatal("not written at Flush")
		}
		r.Stop("done")
	})
}
