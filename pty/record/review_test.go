package record

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAuditKeepsTheFileCap: viewers that attach and detach without end on
// a terminal that prints nothing add audit lines only; the file still
// continues in a new one at MaxBytes, no file is larger, and every audit
// event is in one of them.
func TestAuditKeepsTheFileCap(t *testing.T) {
	lim := Limits{MaxBytes: 64 << 10, MaxTotalBytes: 64 << 20}
	s := testStore(t, lim)
	var snaps int
	r, err := s.Start(Params{Channel: "idle", Rows: 24, Cols: 80, Mode: Output, Snapshot: fakeScreen(&snaps)})
	if err != nil {
		t.Fatal(err)
	}
	r.Output(time.Now(), "$ ")
	const n = 2000 // about 300 KB of audit lines: five files' worth
	for i := range n {
		r.Audit(Audit{Event: "attach", Viewer: "c" + strconv.Itoa(i), Token: "tok-1", Role: "view", Remote: "127.0.0.1:40000"})
	}
	r.Stop("test over")

	ents, err := os.ReadDir(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	size := map[string]int64{}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		id := strings.TrimSuffix(strings.TrimSuffix(e.Name(), CastSuffix), IndexSuffix)
		size[id] += fi.Size()
	}
	if len(size) < 4 {
		t.Errorf("%d recordings for %d audit events of 64 KiB files: want the file continued at the cap", len(size), n)
	}
	seen := map[string]bool{}
	for id, sz := range size {
		if sz > lim.MaxBytes {
			t.Errorf("%s: %d bytes, cap %d", id, sz, lim.MaxBytes)
		}
		f, err := os.Open(filepath.Join(s.Dir(), id+IndexSuffix))
		if err != nil {
			t.Fatal(err)
		}
		ix, err := ReadIndex(f, false)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range ix.Audit {
			if a.Event == "attach" {
				seen[a.Viewer] = true
			}
		}
	}
	if len(seen) != n {
		t.Errorf("%d of %d audit events in the files", len(seen), n)
	}
}

// TestLiveFileEvictedByALowerCap: a total cap lowered below a recording
// being written evicts it; its bytes leave the total, nothing more is
// written to the deleted file, and what the terminal prints next goes
// into a new file, which the other recordings can still be written
// beside.
func TestLiveFileEvictedByALowerCap(t *testing.T) {
	s := testStore(t, Limits{MaxBytes: 1 << 20, MaxTotalBytes: 2 << 20})
	wrote := notifyWrites(s)
	var snaps int
	r, err := s.Start(Params{Channel: "big", Rows: 24, Cols: 80, Mode: Output, Snapshot: fakeScreen(&snaps)})
	if err != nil {
		t.Fatal(err)
	}
	first := r.ID()
	line := strings.Repeat("z", 1000) + "\r\n"
	for range 600 {
		r.Output(time.Now(), line)
	}
	r.Flush()
	waitWritten(r, wrote) // written
	if err := s.SetLimits(Limits{MaxBytes: 256 << 10, MaxTotalBytes: 256 << 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Info(first); err == nil {
		t.Fatalf("%s of 600 KB still listed under a 256 KiB total cap", first)
	}
	r.Output(time.Now(), "after the eviction\r\n")
	other, err := s.Start(Params{Channel: "other", Rows: 24, Cols: 80, Mode: Output, Snapshot: fakeScreen(&snaps)})
	if err != nil {
		t.Fatal(err)
	}
	other.Output(time.Now(), "beside it\r\n")
	r.Stop("test over")
	other.Stop("test over")

	var onDisk int64
	ents, _ := os.ReadDir(s.Dir())
	for _, e := range ents {
		fi, _ := e.Info()
		onDisk += fi.Size()
	}
	if st := s.Stats(); st.Bytes != onDisk {
		t.Errorf("Stats().Bytes = %d, the directory holds %d", st.Bytes, onDisk)
	}
	if r.ID() == first {
		t.Fatalf("still recording into the evicted %s", first)
	}
	for id, want := range map[string]string{r.ID(): "after the eviction", other.ID(): "beside it"} {
		b, err := os.ReadFile(filepath.Join(s.Dir(), id+CastSuffix))
		if err != nil || !bytes.Contains(b, []byte(want)) {
			t.Errorf("%s: %v, %q; want %q in it", id, err, b, want)
		}
	}
}

// gated is a disk that writes nothing until release is closed.
type gated struct {
	w       io.Writer
	release chan struct{}
}

func (g gated) Write(p []byte) (int, error) {
	<-g.release
	return g.w.Write(p)
}

// TestFullQueueSkipsKeyframeSnapshots: while the writer is behind and the
// last keyframe would not fit in its queue, output events do not take a
// snapshot each (of a large screen one costs more than the output it
// follows: a 1000×1000 screen of colours made the daemon spend 40 times
// the CPU of the same output unrecorded).
func TestFullQueueSkipsKeyframeSnapshots(t *testing.T) {
	release := make(chan struct{})
	s := testStore(t, Limits{KeyframeBytes: 4 << 10, QueueBytes: 128 << 10},
		WithFileWrapper(func(w io.Writer) io.Writer { return gated{w, release} }))
	snaps := 0
	screen := strings.Repeat("\x1b[38;5;1mx", 10000) // about 150 KB escaped: more than the queue
	r, err := s.Start(Params{Channel: "wide", Rows: 24, Cols: 80, Mode: Output,
		Snapshot: func() (int, int, string) { snaps++; return 24, 80, screen }})
	if err != nil {
		close(release)
		t.Fatal(err)
	}
	for range 1000 { // 200 KB of output behind a blocked disk: dropped, a keyframe due
		r.Output(time.Now(), strings.Repeat("y", 200))
	}
	got := snaps
	close(release)
	r.Stop("test over")
	if got > 10 {
		t.Errorf("%d snapshots for 1000 output events while the queue was full, want a few", got)
	}
	if st := s.Stats(); st.DroppedBytes == 0 {
		t.Errorf("stats %+v: want the output dropped behind the blocked disk", st)
	}
}

// TestAuditDropsCounted: audit events that cannot be written, because
// live recordings alone fill the total cap, are counted in the store's
// stats and, once there is room again, in the recording's index.
func TestAuditDropsCounted(t *testing.T) {
	// Files may be as large as the directory: none rotates (a rotated
	// file is no longer live and could be evicted to make room).
	lim := Limits{MaxBytes: 128 << 10, MaxTotalBytes: 128 << 10}
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
	// 132 KB of long lines, then short ones: the cap is full to the last
	// few bytes, less than an audit line.
	for _, line := range []struct {
		text string
		n    int
	}{{strings.Repeat("z", 1000) + "\r\n", 44}, {"zz\r\n", 300}} {
		for range line.n {
			for _, r := range rs {
				r.Output(time.Now(), line.text)
				r.Flush()
				waitWritten(r, wrote) // a write per line: a line that does not fit is dropped alone
			}
		}
	}
	if st := s.Stats(); st.DroppedBytes == 0 || st.AuditDropped != 0 {
		t.Fatalf("stats %+v: want output dropped and no audit event yet", st)
	}
	const n = 10
	for i := range n {
		rs[0].Audit(Audit{Event: "attach", Viewer: "v" + strconv.Itoa(i), Token: "tok", Role: "view", Remote: "127.0.0.1:1"})
	}
	waitWritten(rs[0], wrote)
	if st := s.Stats(); st.AuditDropped != n {
		t.Fatalf("stats %+v: want %d audit events dropped", st, n)
	}
	// Room again: the next line the writer handles marks the drops.
	if err := s.SetLimits(Limits{MaxBytes: 64 << 20, MaxTotalBytes: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	id := rs[0].ID()
	rs[0].Audit(Audit{Event: "detach", Viewer: "v0", Token: "tok", Role: "view", Remote: "127.0.0.1:1"})
	rs[0].Stop("test")
	ix, err := s.Index(id)
	if err != nil {
		t.Fatal(err)
	}
	if ix.DroppedAudit != n {
		t.Fatalf("index: %d audit events dropped, want %d", ix.DroppedAudit, n)
	}
	var events []string
	for _, a := range ix.Audit {
		events = append(events, a.Event)
	}
	if got := strings.Join(events, " "); got != "record-on detach record-off" {
		t.Fatalf("audit events %q, want record-on detach record-off", got)
	}
	if st := s.Stats(); st.AuditDropped != n {
		t.Fatalf("stats %+v: want %d audit events dropped", st, n)
	}
}

// TestContinuedFileHiddenUntilCreated: a recording continued at MaxBytes
// names its next file at once, and its writer creates the file when it
// gets there; until then List, Page and Info do not show it, so that no
// one is handed an id whose file does not exist.
func TestContinuedFileHiddenUntilCreated(t *testing.T) {
	s, unblock := blockedStore(t, Limits{MaxBytes: 64 << 10})
	defer unblock()
	var snaps int
	r, err := s.Start(Params{Channel: "c", Rows: 24, Cols: 80, Mode: Output, Snapshot: fakeScreen(&snaps)})
	if err != nil {
		t.Fatal(err)
	}
	first := r.ID()
	line := strings.Repeat("z", 1000) + "\r\n"
	for i := 0; r.ID() == first; i++ {
		if i > 200 {
			t.Fatal("no new file after 200 KB at a cap of 64 KiB")
		}
		r.Output(time.Now(), line)
	}
	next := r.ID()
	ids := func() []string {
		var out []string
		for _, i := range s.List("") {
			out = append(out, i.ID)
		}
		return out
	}
	if got := ids(); len(got) != 1 || got[0] != first {
		t.Fatalf("while the writer is held: List = %v, want only %s", got, first)
	}
	if page, _ := s.Page("", "", 10, nil); len(page) != 1 || page[0].ID != first {
		t.Fatalf("while the writer is held: Page = %v, want only %s", page, first)
	}
	if _, err := s.Info(next); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Info(%s) before its file exists: %v, want ErrNotFound", next, err)
	}
	unblock()
	r.Stop("done")
	if got := ids(); len(got) != 2 || got[0] != next || got[1] != first {
		t.Fatalf("after the writer: List = %v, want %s, %s", got, next, first)
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), next+CastSuffix)); err != nil {
		t.Fatal(err)
	}
}
