package record

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// writeRecording writes a recording's .cast (a header and one event) and
// its index lines into dir, as id.
func writeRecording(t *testing.T, dir, id string, index string) {
	t.Helper()
	cast := `{"version":2,"width":80,"height":24,"timestamp":1765119845}` + "\n" + `[0.1, "o", "hi"]` + "\n"
	if err := os.WriteFile(filepath.Join(dir, id+CastSuffix), []byte(cast), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, id+IndexSuffix), []byte(index), 0o600); err != nil {
		t.Fatal(err)
	}
}

// indexLines returns n keyframe lines (screens of screen bytes, told
// apart by their first byte) and an audit line after each, from time t0.
func indexLines(n, screen int, t0 float64) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"type":"keyframe","time":%g,"offset":%d,"rows":24,"cols":80,"screen":"%c%s"}`+"\n", t0+float64(i), 100+i, 'a'+rune(i%26), strings.Repeat("x", screen))
		fmt.Fprintf(&b, `{"type":"audit","time":%g,"event":"attach","viewer":"v%d","token":"t","role":"view","remote":"127.0.0.1:1"}`+"\n", t0+float64(i)+0.5, i)
	}
	return b.String()
}

// TestIndexSummaries: Index and Keyframe answer what the whole file says
// (ReadIndex), also as a live index grows, a partial last line included
// once it is whole; what was appended is all that is parsed again; and
// many viewers asking at once for one large index cost one parse.
func TestIndexSummaries(t *testing.T) {
	dir := t.TempDir()
	const id = "term-20261207T000000Z"
	first := indexLines(5, 1000, 0)
	writeRecording(t, dir, id, first)
	s, err := OpenStore(dir, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check := func(when string) {
		t.Helper()
		f, err := os.Open(filepath.Join(dir, id+IndexSuffix))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		want, err := ReadIndex(f, true)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Index(id)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Keyframes) != len(want.Keyframes) || !reflect.DeepEqual(got.Audit, want.Audit) || got.Dropped != want.Dropped {
			t.Fatalf("%s: Index has %d keyframes, %d audit lines; the file %d, %d", when, len(got.Keyframes), len(got.Audit), len(want.Keyframes), len(want.Audit))
		}
		for n, wk := range want.Keyframes {
			if g := got.Keyframes[n]; g.Screen != "" || g.Offset != wk.Offset || g.Bytes != len(wk.Screen) {
				t.Fatalf("%s: Index's keyframe %d = %+v", when, n, g)
			}
			k, err := s.Keyframe(id, n)
			if err != nil || k.Screen != wk.Screen || k.Offset != wk.Offset {
				t.Fatalf("%s: Keyframe(%d) = offset %d, screen %.8q…, %v; want offset %d, %.8q…", when, n, k.Offset, k.Screen, err, wk.Offset, wk.Screen)
			}
		}
		if _, err := s.Keyframe(id, len(want.Keyframes)); err == nil {
			t.Fatalf("%s: Keyframe past the last answered", when)
		}
	}
	check("at first")
	if p := s.idxParsed.Load(); p != int64(len(first)) {
		t.Fatalf("parsed %d bytes, want the file's %d", p, len(first))
	}
	check("again")
	if p := s.idxParsed.Load(); p != int64(len(first)) {
		t.Fatalf("parsed %d bytes after asking again, want still %d", p, len(first))
	}

	// A live index grows, its last line half written.
	more := indexLines(3, 500, 10)
	half := `{"type":"dropped","time":20,"by`
	f, err := os.OpenFile(filepath.Join(dir, id+IndexSuffix), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(more + half); err != nil {
		t.Fatal(err)
	}
	check("grown")
	if p := s.idxParsed.Load(); p != int64(len(first)+len(more)) {
		t.Fatalf("parsed %d bytes in all, want %d: only what was appended, up to the last whole line", p, len(first)+len(more))
	}
	if _, err := f.WriteString(`tes":7}` + "\n"); err != nil {
		t.Fatal(err)
	}
	check("the last line whole")
	if ix, _ := s.Index(id); ix.Dropped != 7 {
		t.Fatalf("dropped %d, want 7", ix.Dropped)
	}

	// Many viewers at once, a large index: one parse.
	const big = "big-20261207T000000Z"
	writeRecording(t, dir, big, indexLines(200, 64<<10, 0))
	s2, err := OpenStore(dir, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if ix, err := s2.Index(big); err != nil || len(ix.Keyframes) != 200 {
				t.Errorf("Index: %v", err)
			}
		})
	}
	wg.Wait()
	fi, _ := os.Stat(filepath.Join(dir, big+IndexSuffix))
	if p := s2.idxParsed.Load(); p != fi.Size() {
		t.Fatalf("16 viewers at once parsed %d bytes, want the file's %d once", p, fi.Size())
	}
}

// TestIndexCacheBound: the store keeps the summaries of at most
// indexCacheEntries indexes, and none of an index with more than
// indexCacheLines keyframe and audit lines (it is summarized anew, still
// right).
func TestIndexCacheBound(t *testing.T) {
	dir := t.TempDir()
	for i := range indexCacheEntries + 4 {
		writeRecording(t, dir, fmt.Sprintf("r%02d-20261207T000000Z", i), indexLines(2, 10, 0))
	}
	const huge = "huge-20261207T000000Z"
	writeRecording(t, dir, huge, indexLines(indexCacheLines/2+1, 1, 0)) // one more line than the bound
	s, err := OpenStore(dir, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range indexCacheEntries + 4 {
		if _, err := s.Index(fmt.Sprintf("r%02d-20261207T000000Z", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(s.idxCache); n != indexCacheEntries {
		t.Fatalf("%d summaries kept, want the bound %d", n, indexCacheEntries)
	}
	before := s.idxParsed.Load()
	for range 2 {
		ix, err := s.Index(huge)
		if err != nil || len(ix.Keyframes)+len(ix.Audit) != indexCacheLines+2 {
			t.Fatalf("Index of the huge one: %v", err)
		}
	}
	fi, _ := os.Stat(filepath.Join(dir, huge+IndexSuffix))
	if p := s.idxParsed.Load() - before; p != 2*fi.Size() {
		t.Fatalf("two reads of an index past the bound parsed %d bytes, want twice its %d (not kept)", p, fi.Size())
	}
	for _, c := range s.idxCache {
		if c.id == huge {
			t.Fatal("an index past indexCacheLines was kept")
		}
	}
}

// TestStorePage: Page is List filtered and cut, for every page size,
// cursor and filter: walking the pages from the newest lists every
// recording the filter keeps exactly once, in List's order, and "more"
// is true on every page but the last.
func TestStorePage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = 300
	for i := range n {
		at := t0.Add(time.Duration(i/3) * time.Second) // three a second: ids with -N
		id := fmt.Sprintf("c%d-%s", i%4, at.Format(startLayout))
		if i%3 != 0 {
			id += "-" + strconv.Itoa(i%3+1)
		}
		cast := fmt.Sprintf(`{"version":2,"width":80,"height":24,"timestamp":%d}`+"\n"+`[0.5,"o","hi"]`+"\n", at.Unix())
		if err := os.WriteFile(filepath.Join(dir, id+CastSuffix), []byte(cast), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, err := OpenStore(dir, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := len(s.List("")); got != n {
		t.Fatalf("List: %d recordings, want %d", got, n)
	}
	odd := func(i Info) bool { return i.Started.Second()%2 == 1 }
	for _, tc := range []struct {
		channel string
		keep    func(Info) bool
	}{{"", nil}, {"c1", nil}, {"", odd}, {"c2", odd}, {"nope", nil}} {
		var want []string
		for _, i := range s.List(tc.channel) {
			if tc.keep == nil || tc.keep(i) {
				want = append(want, i.ID)
			}
		}
		for _, size := range []int{1, 2, 7, 100, 1000} {
			var got []string
			before := ""
			for pages := 0; ; pages++ {
				if pages > n+1 {
					t.Fatalf("channel %q size %d: more than %d pages", tc.channel, size, n+1)
				}
				page, more := s.Page(tc.channel, before, size, tc.keep)
				if len(page) > size || more && len(page) != size {
					t.Fatalf("channel %q size %d: a page of %d, more %v", tc.channel, size, len(page), more)
				}
				for _, i := range page {
					got = append(got, i.ID)
				}
				if !more {
					break
				}
				before = page[len(page)-1].Key
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("channel %q size %d: pages list\n%v\nwant\n%v", tc.channel, size, got, want)
			}
		}
	}
	if page, more := s.Page("", "", 0, nil); page != nil || more {
		t.Fatalf("Page of size 0 = %v, %v", page, more)
	}
}

// TestReadSummary: a store opened on a directory learns each recording's
// header and the time of its last event from the file's first line and
// its last ones: whatever the header's length, with a last line cut
// short (a recording being written when the daemon stopped), with a last
// event line longer than the first window read, and with no event.
func TestReadSummary(t *testing.T) {
	dir := t.TempDir()
	ev := func(tm float64, text string) string {
		return string(appendEvent(nil, time.Duration(tm*1e6)*time.Microsecond, 'o', text))
	}
	var many strings.Builder
	for i := range 2000 {
		many.WriteString(ev(float64(i)/10, "line "+strconv.Itoa(i)+"\r\n"))
	}
	long := strings.Repeat("x", 60<<10)
	for _, tc := range []struct {
		name, title, events string
		last                float64
	}{
		{"short", "sh", ev(0.5, "hi") + ev(1.25, "there"), 1.25},
		{"many", "sh", many.String(), 199.9},
		{"cut", "sh", ev(0.5, "hi") + ev(2.5, "there") + `[3.0, "o", "unfin`, 2.5},
		{"long-last", "sh", ev(0.5, "hi") + ev(7.5, long), 7.5},
		{"long-last-cut", "sh", ev(0.5, "hi") + ev(7.5, long) + `[9.0, "o", "` + long[:5000], 7.5},
		{"long-title", strings.Repeat("t", 10<<10), ev(0.5, "hi") + ev(4.0, "x"), 4.0},
		{"no-events", "sh", "", 0},
		{"no-events-cut", "sh", `[1.0, "o", "x`, 0},
	} {
		hdr := appendHeader(nil, Header{Width: 80, Height: 24, Timestamp: 1767225600, Title: tc.title})
		path := filepath.Join(dir, tc.name+CastSuffix)
		if err := os.WriteFile(path, append(hdr, tc.events...), 0o600); err != nil {
			t.Fatal(err)
		}
		h, last, err := readSummary(path)
		if err != nil || h.Width != 80 || h.Height != 24 || h.Title != tc.title || last != tc.last {
			t.Errorf("%s: header %dx%d title of %d bytes, last %v, %v; want 80x24, %d bytes, %v", tc.name, h.Width, h.Height, len(h.Title), last, err, len(tc.title), tc.last)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "bad"+CastSuffix), []byte("not a header\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readSummary(filepath.Join(dir, "bad"+CastSuffix)); !errors.Is(err, ErrFormat) {
		t.Errorf("a file without a header: %v, want ErrFormat", err)
	}
}
