package record

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/bench/termbench"
)

// BenchmarkRecorderOutput records 64 KiB pieces of numbered lines (as a
// flood reaches the recorder) into a file, and reports the CPU of this
// process per MB of output: the formatting, the queue, the writer and
// the file system's share of the write.
func BenchmarkRecorderOutput(b *testing.B) { benchOutput(b, 64<<10) }

// BenchmarkRecorderOutput4K is BenchmarkRecorderOutput in pieces of
// 4 KiB, as a terminal's reads of a flood come.
func BenchmarkRecorderOutput4K(b *testing.B) { benchOutput(b, 4<<10) }

// BenchmarkRecorderOutputDiscard is BenchmarkRecorderOutput with the
// files' writes discarded: the recorder's own share.
func BenchmarkRecorderOutputDiscard(b *testing.B) {
	benchOutput(b, 64<<10, WithFileWrapper(func(io.Writer) io.Writer { return io.Discard }))
}

func benchOutput(b *testing.B, size int, opts ...Option) {
	var sb strings.Builder
	for i := 0; sb.Len() < size; i++ {
		fmt.Fprintf(&sb, "%08d flood flood flood flood flood flood flood flood flood\r\n", i)
	}
	piece := sb.String()[:size]
	s, err := OpenStore(filepath.Join(b.TempDir(), "rec"), Limits{MaxTotalBytes: 4 << 30}, nil, opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	wrote := notifyWrites(s)
	var snaps int
	r, err := s.Start(Params{Channel: "b", Rows: 24, Cols: 80, Mode: Output, Snapshot: fakeScreen(&snaps)})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(piece)))
	cpu := termbench.CPUTime()
	n := 0
	lim := s.Limits()
	for b.Loop() {
		for queued(r)+2*int64(len(piece)) > lim.QueueBytes { // as fast as the writer goes, dropping nothing
			r.Flush()
			<-wrote
		}
		r.Output(time.Now(), piece)
		n++
	}
	r.Stop("done")
	cpu = termbench.CPUTime() - cpu
	b.ReportMetric(cpu.Seconds()*1e3/(float64(n*len(piece))/1e6), "cpu-ms/MB")
	if d := s.Stats().DroppedBytes; d > 0 {
		b.ReportMetric(float64(d)/float64(n*len(piece)), "dropped-frac")
	}
}

// BenchmarkAppendEvent formats 64 KiB of ahpbench's text file (111-byte
// lines ending in "\r\n" after the tty's newline translation) as one
// output event line: the escaping a recorded flood costs the emulator's
// goroutine.
func BenchmarkAppendEvent(b *testing.B) {
	line := strings.Repeat("the quick brown fox jumps over the lazy dog 0123456789 ", 2) + "\r\n"
	text := strings.Repeat(line, (32<<10)/len(line)+1)[:32<<10]
	buf := make([]byte, 0, 2*len(text)+64)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		buf = appendEvent(buf[:0], 1234567*time.Microsecond, 'o', text)
	}
}

// BenchmarkStoreList100k and BenchmarkStorePage100k: the first page of
// recordings/list (1000) in a directory of 100,000 recordings, with List
// (a copy and sort of them all) and with Page (one pass).
func BenchmarkStoreList100k(b *testing.B) { benchStoreList(b, false) }
func BenchmarkStorePage100k(b *testing.B) { benchStoreList(b, true) }

func benchStoreList(b *testing.B, page bool) {
	s, err := OpenStore(filepath.Join(b.TempDir(), "rec"), Limits{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.mu.Lock()
	for i := range 100_000 {
		at := t0.Add(time.Duration(i) * time.Second)
		id := fmt.Sprintf("c%d-%s", i%50, at.Format(startLayout))
		s.files[id] = &file{Info: Info{ID: id, Key: sortKey(at, id), Channel: fmt.Sprintf("c%d", i%50), Started: at, Bytes: 1000, Rows: 24, Cols: 80}, created: true}
	}
	s.mu.Unlock()
	for b.Loop() {
		if page {
			if p, more := s.Page("", "", 1000, nil); len(p) != 1000 || !more {
				b.Fatal(len(p), more)
			}
		} else if l := s.List(""); len(l) != 100_000 {
			b.Fatal(len(l))
		}
	}
}

// BenchmarkOpenStore20k opens a store on a directory of 20,000 finished
// recordings (each a .cast of 200 event lines and its index), what a
// daemon does when it starts.
func BenchmarkOpenStore20k(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "rec")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	var events []byte
	for i := range 200 {
		events = appendEvent(events, time.Duration(i)*time.Second, 'o', "line "+strconv.Itoa(i)+" of some output\r\n")
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 20_000 {
		at := t0.Add(time.Duration(i) * time.Second)
		id := fmt.Sprintf("c%d-%s", i%50, at.Format(startLayout))
		cast := append(appendHeader(nil, Header{Width: 80, Height: 24, Timestamp: at.Unix(), Title: "sh"}), events...)
		index := appendAudit(nil, Audit{Event: "record-on", Detail: "output"})
		if os.WriteFile(filepath.Join(dir, id+CastSuffix), cast, 0o600) != nil || os.WriteFile(filepath.Join(dir, id+IndexSuffix), index, 0o600) != nil {
			b.Fatal("writing the recordings failed")
		}
	}
	for b.Loop() {
		s, err := OpenStore(dir, Limits{MaxTotalBytes: 64 << 30}, nil)
		if err != nil {
			b.Fatal(err)
		}
		if st := s.Stats(); st.Files != 20_000 {
			b.Fatalf("%d recordings", st.Files)
		}
		s.Close()
	}
}
