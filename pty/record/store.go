package record

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// File name suffixes of a recording.
const (
	CastSuffix  = ".cast"
	IndexSuffix = ".index.jsonl"
)

// startLayout is the START part of a recording id (UTC).
const startLayout = "20060102T150405Z"

// idPattern is a recording id: CHANNEL-START, "-N" added on a collision.
var idPattern = regexp.MustCompile(`^([A-Za-z0-9._-]+)-([0-9]{8}T[0-9]{6}Z)(?:-([0-9]+))?$`)

// Info describes a recording (one .cast and its index).
type Info struct {
	ID string
	// Key orders recordings by start, then by the "-N" of ids that started
	// in the same second: List is in descending Key order, eviction in
	// ascending. A list's page can continue after a Key, whether or not
	// its recording still exists.
	Key     string
	Channel string // the channel id as the file name holds it (see SafeChannel)
	Started time.Time
	// Ended is when the recording was closed (zero while Live).
	Ended time.Time
	Live  bool
	// Bytes is the size of the .cast; IndexBytes of the .index.jsonl.
	Bytes, IndexBytes int64
	// Duration is the time of the last event, in seconds.
	Duration   float64
	Rows, Cols int
	Title      string
	// Input says whether input was recorded ("i" events).
	Input bool
}

// StoreStats are counters of a Store.
type StoreStats struct {
	Bytes        int64 // bytes of recordings on disk
	Files        int   // recordings on disk (a .cast and its index count once)
	Live         int   // recordings being written
	DroppedBytes int64 // output bytes dropped (writer behind, or the disk cap), since OpenStore
	Evictions    int64 // recordings evicted for the total cap, since OpenStore
	// AuditDropped counts audit events not written (the total cap could
	// not be met, or the writer's queue was full), since OpenStore. Each
	// recording's index says how many of its own were dropped.
	AuditDropped int64
}

// file is a recording the Store knows of (Store.mu).
type file struct {
	Info
	// created is set once the files exist (Store.mu).
	created bool
	// gone is set when the file was evicted while live (a total cap
	// lowered below it): its writer writes nothing more to it, and its
	// Recorder continues in a new file at its next line.
	gone atomic.Bool
}

func (f *file) size() int64 { return f.Bytes + f.IndexBytes }

// shown reports whether List, Page and Info show f (Store.mu held): once
// its files exist (a file continued at MaxBytes is named before its
// writer creates it), and not an empty file found on disk.
func (f *file) shown() bool { return f.created && (f.Bytes > 0 || f.Rows > 0) }

// Option configures a Store.
type Option func(*Store)

// WithFileWrapper has the Store write every recording file through
// wrap(file): fault injection (a slow or failing disk) for tests, or
// throttling.
func WithFileWrapper(wrap func(w io.Writer) io.Writer) Option {
	return func(s *Store) { s.wrap = wrap }
}

// Store is a directory of recordings with its caps. It is safe for
// concurrent use.
type Store struct {
	dir  string
	log  *slog.Logger
	wrap func(io.Writer) io.Writer
	// opDone, if set (tests), is called by a writer after each op it
	// has written and accounted.
	opDone func()
	lim    atomic.Pointer[Limits]
	wg     sync.WaitGroup // the Recorders' writers

	dropped atomic.Int64
	// auditDropped counts audit events not written (StoreStats).
	auditDropped atomic.Int64

	// mu guards the files, their sizes and the live recorders.
	mu        sync.Mutex
	files     map[string]*file
	total     int64
	evictions int64
	recs      map[*Recorder]struct{}
	closed    bool
	// lastName is, per channel, the newest id allocated: an id freed by
	// an eviction is not given again, so ids keep their order.
	lastName map[string]lastName

	// idxMu serializes the reading of indexes (Index, Keyframe) and
	// guards idxCache, the summaries of the latest ones read: many
	// viewers asking for the index of one large recording cost one
	// parse, and what is parsed at once is one index (indexes.go).
	idxMu    sync.Mutex
	idxCache []*indexSummary
	// idxParsed counts the index bytes parsed (tests).
	idxParsed atomic.Int64
}

type lastName struct {
	base string
	n    int
}

// OpenStore opens (creating it, mode 0700) the directory dir of
// recordings with limits l, and evicts the oldest recordings if the
// directory holds more than l.MaxTotalBytes.
func OpenStore(dir string, l Limits, log *slog.Logger, opts ...Option) (*Store, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	l = l.WithDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	s := &Store{dir: dir, log: log, files: map[string]*file{}, recs: map[*Recorder]struct{}{}, lastName: map[string]lastName{}}
	for _, o := range opts {
		o(s)
	}
	s.lim.Store(&l)
	if err := s.scan(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.evictLocked(0, nil)
	s.mu.Unlock()
	return s, nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// Limits returns the limits in force.
func (s *Store) Limits() Limits { return *s.lim.Load() }

// SetLimits changes the limits; recordings being written take them at
// their next event. A lower total cap evicts at once.
func (s *Store) SetLimits(l Limits) error {
	if err := l.Validate(); err != nil {
		return err
	}
	l = l.WithDefaults()
	s.lim.Store(&l)
	s.mu.Lock()
	s.evictLocked(0, nil)
	s.mu.Unlock()
	return nil
}

// scan reads what the directory holds.
func (s *Store) scan() error {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		var id string
		switch {
		case strings.HasSuffix(name, CastSuffix):
			id = strings.TrimSuffix(name, CastSuffix)
		case strings.HasSuffix(name, IndexSuffix):
			id = strings.TrimSuffix(name, IndexSuffix)
		default:
			continue
		}
		if !e.Type().IsRegular() || s.files[id] != nil {
			continue
		}
		f, ok := s.load(id)
		if ok {
			s.files[id] = f
			s.total += f.size()
		}
	}
	return nil
}

// load reads a recording's Info from its files (scan).
func (s *Store) load(id string) (*file, bool) {
	m := idPattern.FindStringSubmatch(id)
	if m == nil {
		return nil, false
	}
	f := &file{Info: Info{ID: id, Channel: m[1]}, created: true}
	f.Started, _ = time.Parse(startLayout, m[2])
	base := filepath.Join(s.dir, id)
	if fi, err := os.Stat(base + CastSuffix); err == nil {
		f.Bytes = fi.Size()
		f.Ended = fi.ModTime()
		if h, last, err := readSummary(base + CastSuffix); err == nil {
			f.Rows, f.Cols, f.Title, f.Duration = h.Height, h.Width, h.Title, last
			if h.Timestamp > 0 {
				f.Started = time.Unix(h.Timestamp, 0).UTC()
			}
		}
	}
	if fi, err := os.Stat(base + IndexSuffix); err == nil {
		f.IndexBytes = fi.Size()
		if ix, err := os.Open(base + IndexSuffix); err == nil {
			_, _ = scanIndex(ix, func(_ int64, l IndexLine) bool {
				if l.Type == "audit" && l.Audit.Event == "record-on" {
					f.Input = l.Audit.Detail == OutputInput.String()
					return false
				}
				return l.Type != "audit" || l.Audit.Event != "record-off"
			})
			_ = ix.Close()
		}
	}
	f.Key = sortKey(f.Started, id)
	return f, true
}

// sortKey orders recordings by start, then by the "-N" of ids that
// started in the same second.
func sortKey(t time.Time, id string) string {
	n := 1
	if m := idPattern.FindStringSubmatch(id); m != nil && m[3] != "" {
		n, _ = strconv.Atoi(m[3])
	}
	return fmt.Sprintf("%s %06d %s", t.UTC().Format(startLayout), n, id)
}

// readSummary reads a .cast's header and the time of its last event:
// the first line, and the last lines from the end backwards, a window of
// 4 KiB first, doubled while it holds no event, up to 128 KiB (an event
// line is at most MaxEventLine). A store opened on a directory of tens
// of thousands of recordings reads a few KiB of each.
func readSummary(path string) (Header, float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return Header{}, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Header{}, 0, err
	}
	size := fi.Size()
	buf := make([]byte, 4<<10)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return Header{}, 0, err
	}
	var h Header
	hdrEnd := int64(bytes.IndexByte(buf[:n], '\n'))
	if hdrEnd < 0 {
		// A header longer than the window (a long title or env): read
		// it as a Reader does.
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return Header{}, 0, err
		}
		r, err := NewReader(f)
		if err != nil {
			return Header{}, 0, err
		}
		h, hdrEnd = r.Header(), r.Offset()-1
	} else if h, err = ParseHeader(buf[:hdrEnd]); err != nil {
		return Header{}, 0, fmt.Errorf("line 1: %w", err)
	}
	body := hdrEnd + 1 // where the events start
	for window := int64(4 << 10); ; window *= 2 {
		start := max(body, size-window)
		if int64(cap(buf)) < size-start {
			buf = make([]byte, size-start)
		}
		b := buf[:size-start]
		if _, err := f.ReadAt(b, start); err != nil && !errors.Is(err, io.EOF) {
			return h, 0, err
		}
		if start > body {
			// Skip to the first whole line of the window.
			k := bytes.IndexByte(b, '\n')
			if k < 0 {
				b = nil
			} else {
				b = b[k+1:]
			}
		}
		// The last line that is an event (a recording being written
		// may end in part of one).
		for len(b) > 0 {
			k := bytes.LastIndexByte(b[:len(b)-1], '\n')
			if e, err := ParseEvent(bytes.TrimSuffix(b[k+1:], []byte("\n"))); err == nil {
				return h, e.Time, nil
			}
			b = b[:k+1]
		}
		if start == body || window >= 128<<10 {
			return h, 0, nil
		}
	}
}

// maxChannel is the longest channel id a recording id holds whole: a
// channel id's longest (registry.ValidID). Cutting a shorter one would
// file two terminals' recordings under one name, and a token scoped to
// one would read the other's.
const maxChannel = 128

// SafeChannel returns the channel id as recording ids hold it: every
// character outside [A-Za-z0-9._-] replaced by '_' (at most maxChannel
// bytes). A valid channel id is returned unchanged.
func SafeChannel(channel string) string {
	b := []byte(channel)
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > maxChannel {
		b = b[:maxChannel]
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}

// allocLocked registers a new live recording of channel started at
// start (s.mu held); create makes its files.
func (s *Store) allocLocked(channel string, start time.Time, rows, cols int, title string, input bool) (*file, error) {
	if s.closed {
		return nil, ErrClosed
	}
	safe := SafeChannel(channel)
	base := safe + "-" + start.UTC().Format(startLayout)
	n0 := 1
	if last := s.lastName[safe]; last.base == base {
		n0 = last.n + 1
	}
	for n := n0; n < 1_000_000; n++ {
		id := base
		if n > 1 {
			id = fmt.Sprintf("%s-%d", base, n)
		}
		if s.files[id] != nil {
			continue
		}
		f := &file{Info: Info{ID: id, Channel: SafeChannel(channel), Started: start.UTC().Truncate(time.Second), Live: true,
			Rows: rows, Cols: cols, Title: title, Input: input}}
		f.Key = sortKey(f.Started, id)
		s.files[id] = f
		s.lastName[safe] = lastName{base, n}
		return f, nil
	}
	return nil, fmt.Errorf("record: too many recordings named %s", base)
}

// create creates f's files, mode 0600 (the .cast must not exist).
func (s *Store) create(f *file) (cast, index *os.File, err error) {
	path := filepath.Join(s.dir, f.ID)
	cast, err = os.OpenFile(path+CastSuffix, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("record: %w", err)
	}
	index, err = os.OpenFile(path+IndexSuffix, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		_ = cast.Close()
		_ = os.Remove(path + CastSuffix)
		return nil, nil, fmt.Errorf("record: %w", err)
	}
	s.mu.Lock()
	f.created = true
	s.mu.Unlock()
	return cast, index, nil
}

// forget unregisters a recording whose files could not be created.
func (s *Store) forget(f *file) {
	s.mu.Lock()
	if s.files[f.ID] == f {
		delete(s.files, f.ID)
		s.total -= f.size()
	}
	s.mu.Unlock()
}

// reserve accounts n more bytes of f (cast or index), evicting the
// oldest recordings that are not live until the total fits. It reports
// false (nothing accounted) when it cannot fit: the bytes are dropped.
// force accounts them anyway (a header, a file's first keyframe).
func (s *Store) reserve(f *file, index bool, n int64, force bool, dur float64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.gone.Load() {
		return false // evicted: neither on disk nor in the total
	}
	if !s.evictLocked(n, f) && !force {
		return false
	}
	if index {
		f.IndexBytes += n
	} else {
		f.Bytes += n
	}
	f.Duration = max(f.Duration, dur)
	s.total += n
	return true
}

// unreserve takes back bytes accounted but not written.
func (s *Store) unreserve(f *file, index bool, n int64) {
	s.mu.Lock()
	if index {
		f.IndexBytes -= n
	} else {
		f.Bytes -= n
	}
	if !f.gone.Load() { // an eviction took its bytes out of the total
		s.total -= n
	}
	s.mu.Unlock()
}

// evictLocked removes the oldest recordings that are not live (nor keep)
// until n more bytes fit under MaxTotalBytes, and reports whether they
// do. A live recording is evicted only if it alone exceeds the total.
func (s *Store) evictLocked(n int64, keep *file) bool {
	max := s.lim.Load().MaxTotalBytes
	if s.total+n <= max {
		return true
	}
	var old []*file
	for _, f := range s.files {
		if f != keep && (!f.Live || f.size() > max) {
			old = append(old, f)
		}
	}
	slices.SortFunc(old, func(a, b *file) int { return cmp.Compare(a.Key, b.Key) })
	for _, f := range old {
		if s.total+n <= max {
			break
		}
		base := filepath.Join(s.dir, f.ID)
		err1 := os.Remove(base + CastSuffix)
		err2 := os.Remove(base + IndexSuffix)
		if err1 != nil && !errors.Is(err1, fs.ErrNotExist) || err2 != nil && !errors.Is(err2, fs.ErrNotExist) {
			s.log.Warn("recording: evicting failed", "recording", f.ID, "err", cmp.Or(err1, err2))
			continue
		}
		delete(s.files, f.ID)
		s.total -= f.size()
		s.evictions++
		f.gone.Store(true)
		s.log.Info("recording evicted", "recording", f.ID, "bytes", f.size(), "reason", "recordingsMaxTotalBytes")
	}
	return s.total+n <= max
}

// closeFile marks f as no longer written.
func (s *Store) closeFile(f *file, now time.Time) {
	s.mu.Lock()
	f.Live, f.Ended = false, now
	s.mu.Unlock()
}

// List returns the recordings of channel (as given to Start; "" for
// all), newest first: every page of Page at once.
func (s *Store) List(channel string) []Info {
	all, _ := s.Page(channel, "", math.MaxInt-1, nil)
	return all
}

// Page returns a page of List(channel): the n newest recordings whose
// Key is below before ("": from the newest) and that keep reports true
// for (nil: all), newest first, and whether more follow. It costs a pass
// over the recordings' entries, not a sort of them all: a page of a
// directory of 100,000 recordings is a few milliseconds. keep is called
// with the Store's lock held and must not call the Store.
func (s *Store) Page(channel, before string, n int, keep func(Info) bool) (page []Info, more bool) {
	if n < 1 {
		return nil, false
	}
	safe := ""
	if channel != "" {
		safe = SafeChannel(channel)
	}
	// h is a min-heap on Key of the newest n+1 found so far: the one
	// past n tells whether more follow.
	h := make([]*file, 0, min(n+1, 1024))
	less := func(i, j int) bool { return h[i].Key < h[j].Key }
	down := func(i int) {
		for {
			c := 2*i + 1
			if c >= len(h) {
				return
			}
			if c+1 < len(h) && less(c+1, c) {
				c++
			}
			if !less(c, i) {
				return
			}
			h[i], h[c] = h[c], h[i]
			i = c
		}
	}
	s.mu.Lock()
	for _, f := range s.files {
		if safe != "" && f.Channel != safe || !f.shown() || before != "" && f.Key >= before {
			continue
		}
		if len(h) == n+1 && f.Key <= h[0].Key {
			continue
		}
		if keep != nil && !keep(f.Info) {
			continue
		}
		if len(h) < n+1 {
			h = append(h, f)
			for i := len(h) - 1; i > 0 && less(i, (i-1)/2); i = (i - 1) / 2 {
				h[i], h[(i-1)/2] = h[(i-1)/2], h[i]
			}
			continue
		}
		h[0] = f
		down(0)
	}
	page = make([]Info, len(h))
	for i, f := range h {
		page[i] = f.Info
	}
	s.mu.Unlock()
	slices.SortFunc(page, func(a, b Info) int { return cmp.Compare(b.Key, a.Key) })
	if len(page) > n {
		return page[:n], true
	}
	return page, false
}

// Info returns a recording's Info.
func (s *Store) Info(id string) (Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.files[id]
	if f == nil || !f.created {
		return Info{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return f.Info, nil
}

// Open opens a recording's .cast for reading. A live recording grows
// while it is read; its last line may be incomplete.
func (s *Store) Open(id string) (io.ReadSeekCloser, Info, error) {
	info, err := s.Info(id)
	if err != nil {
		return nil, Info{}, err
	}
	f, err := os.Open(filepath.Join(s.dir, id+CastSuffix))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Info{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if err != nil {
		return nil, Info{}, fmt.Errorf("record: %w", err)
	}
	return f, info, nil
}

// Index returns a recording's index, keyframes without their screens.
func (s *Store) Index(id string) (*Index, error) {
	sum, err := s.summary(id)
	if err != nil {
		return nil, err
	}
	return &Index{Keyframes: slices.Clone(sum.ix.Keyframes), Audit: slices.Clone(sum.ix.Audit), Dropped: sum.ix.Dropped, DroppedAudit: sum.ix.DroppedAudit}, nil
}

// Keyframe returns keyframe n (0 the first) of a recording, with its
// screen: it reads that one line of the index (the summary knows where).
func (s *Store) Keyframe(id string, n int) (Keyframe, error) {
	sum, err := s.summary(id)
	if err != nil {
		return Keyframe{}, err
	}
	if n < 0 || n >= len(sum.kfAt) {
		return Keyframe{}, fmt.Errorf("%w: %q has no keyframe %d", ErrNotFound, id, n)
	}
	f, err := os.Open(filepath.Join(s.dir, id+IndexSuffix))
	if errors.Is(err, fs.ErrNotExist) {
		return Keyframe{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if err != nil {
		return Keyframe{}, fmt.Errorf("record: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(sum.kfAt[n], io.SeekStart); err != nil {
		return Keyframe{}, fmt.Errorf("record: %w", err)
	}
	var k Keyframe
	found := false
	if _, err := scanIndex(f, func(_ int64, l IndexLine) bool {
		k, found = l.Keyframe, l.Type == "keyframe"
		return false
	}); err != nil {
		return Keyframe{}, err
	}
	if !found {
		return Keyframe{}, fmt.Errorf("%w: %q: keyframe %d is not where its index put it", ErrFormat, id, n)
	}
	k.Bytes = len(k.Screen)
	return k, nil
}

// Stats returns the store's counters.
func (s *Store) Stats() StoreStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := StoreStats{Bytes: s.total, Files: len(s.files), DroppedBytes: s.dropped.Load(), Evictions: s.evictions, AuditDropped: s.auditDropped.Load()}
	for _, f := range s.files {
		if f.Live {
			st.Live++
		}
	}
	return st
}

// Close stops every recording being written (reason "store closed") and
// returns once their writers have ended. Start fails afterwards.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	recs := make([]*Recorder, 0, len(s.recs))
	for r := range s.recs {
		recs = append(recs, r)
	}
	s.mu.Unlock()
	for _, r := range recs {
		r.stop("store closed")
	}
	s.wg.Wait()
	return nil
}
