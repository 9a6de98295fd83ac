package record

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ahp-dev/ahpd/flow"
)

// Params describe a new recording.
type Params struct {
	// Channel is the channel id the recording's name starts with.
	Channel string
	// Rows and Cols are the terminal's size now (the header's).
	Rows, Cols int
	// Title and Term go into the header (title, env TERM); may be empty.
	Title, Term string
	// Mode is Output or OutputInput.
	Mode Mode
	// Snapshot returns the terminal's screen as of the events recorded so
	// far: its size and the text that rebuilds it on a fresh terminal of
	// that size. Start and the Recorder's event methods call it (for a
	// keyframe); the caller makes sure nothing changes the screen
	// meanwhile (see Recorder).
	Snapshot func() (rows, cols int, screen string)
	// Time is when the recording starts. Default: time.Now().
	Time time.Time
}

// Recorder writes one terminal's recording: events go into a queue of at
// most Limits.QueueBytes, which a goroutine of its own writes to disk.
// The event methods never wait for the disk: what does not fit in the
// queue is dropped and accounted ("m" marker "dropped N bytes", an index
// line "dropped", StoreStats.DroppedBytes), and a keyframe follows so that
// the recording is right again from there.
//
// The methods are safe for concurrent use; a keyframe is exact only if
// the caller does not change the screen between a call to an event method
// and the output it records: the terminal calls them with its emulator
// locked, each before it applies the event.
type Recorder struct {
	s     *Store
	log   *slog.Logger
	snap  func() (rows, cols int, screen string)
	input bool
	chn   string
	title string
	term  string
	wake  chan struct{} // event methods, lazy → writer (cap 1)
	// lazy wakes the writer flushDelay after a line it was not woken for
	// (armed, r.mu): output that stops short of a chunk is written then.
	lazy *time.Timer
	done chan struct{} // closed by the writer when it ends

	// mu guards the queue and the recording's state below.
	mu      sync.Mutex
	q       []op
	qBytes  int64
	free    [][]byte // written chunks for reuse (while idle, at most freeChunks)
	stopped bool
	cur     *file         // the file being recorded into
	start   time.Time     // its time zero
	last    time.Duration // its latest event time
	size    int64         // its bytes once the queue is written (.cast and index)
	events  int           // its event lines
	opened  int64         // size once its opening lines were queued
	rows    int
	cols    int
	kfBytes int64         // output since the latest keyframe
	kfAt    time.Duration // time of the latest keyframe
	kfOut   bool          // output since the latest keyframe
	kfWant  bool          // a keyframe is due (output was dropped)
	kfNeed  int64         // queue bytes the latest keyframe took or would have taken
	armed   bool          // lazy is pending
	dropped int64         // output bytes dropped and not yet marked
	// lostAudit counts audit events the queue had no room for, not yet
	// handed to the writer (op.lost) to be marked in the index.
	lostAudit int64
	outUTF8   utf8Carry // OutputBytes
	inUTF8    utf8Carry // Input
}

// opKind is what an op asks the writer to do.
type opKind uint8

const (
	opCast     opKind = iota // write event lines (b) to the .cast
	opIndex                  // write an index line (b)
	opKeyframe               // write a keyframe line: pre, the .cast's size, b
	opOpen                   // close the files and create f's, starting with b (the header)
	opEnd                    // close the files and end
)

// op is one entry of a Recorder's queue.
type op struct {
	kind  opKind
	b     []byte
	pre   []byte
	t     time.Duration // the latest event time in it
	f     *file         // opOpen
	force bool          // not subject to the total cap (a header, a file's first keyframe)
	audit bool          // opIndex: b is an audit event
	lost  int64         // audit events dropped before this op for want of room in the queue
}

func (o *op) bytes() int64 { return int64(len(o.b) + len(o.pre)) }

// Queue chunks: event lines are appended to a chunk of chunkBytes while
// they fit; the writer writes a chunk at a time.
const (
	chunkBytes = 128 << 10
	freeChunks = 1
	// rotateRoom is kept free in a file for the lines that close it.
	rotateRoom = 512
	// slack is how far lines that must not be lost (markers, audit)
	// may take the queue beyond QueueBytes.
	slack = MaxEventLine
)

// Start starts a recording into a new file and returns its Recorder.
func (s *Store) Start(p Params) (*Recorder, error) {
	if p.Mode != Output && p.Mode != OutputInput {
		return nil, errorf("Params.Mode is %v, want output or output+input", p.Mode)
	}
	if p.Snapshot == nil || p.Rows < 1 || p.Cols < 1 {
		return nil, errorf("Params needs a Snapshot and a size (%dx%d)", p.Rows, p.Cols)
	}
	if p.Time.IsZero() {
		p.Time = time.Now()
	}
	r := &Recorder{s: s, log: s.log, snap: p.Snapshot, input: p.Mode == OutputInput, chn: p.Channel,
		title: p.Title, term: p.Term, wake: make(chan struct{}, 1), done: make(chan struct{}),
		rows: p.Rows, cols: p.Cols}
	r.lazy = time.AfterFunc(time.Hour, func() { signal(r.wake) })
	r.lazy.Stop()
	s.mu.Lock()
	f, err := s.allocLocked(p.Channel, p.Time, p.Rows, p.Cols, p.Title, r.input)
	s.mu.Unlock()
	if err != nil {
		r.lazy.Stop()
		return nil, err
	}
	cf, xf, err := s.create(f)
	if err != nil {
		s.forget(f)
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = cf.Close()
		_ = xf.Close()
		s.forget(f)
		return nil, ErrClosed
	}
	s.recs[r] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	r.mu.Lock()
	r.open(p.Time, f)
	r.mu.Unlock()
	go r.writer(cf, xf)
	// The daemon logs the start at info, with the channel (service); the
	// store says it at debug, for a pty used without the daemon.
	r.log.Debug("recording started", "recording", f.ID, "mode", p.Mode.String())
	return r, nil
}

func errorf(format string, args ...any) error {
	return fmt.Errorf("record: "+format, args...)
}

// ID returns the id of the file being recorded into (it changes when a
// file reaches Limits.MaxBytes).
func (r *Recorder) ID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur.ID
}

// Live reports whether the recording goes on (Stop, or the Store's
// Close, ends it).
func (r *Recorder) Live() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.stopped
}

// Input reports whether input is recorded.
func (r *Recorder) Input() bool { return r.input }

// Done is closed once the recording is stopped and written.
func (r *Recorder) Done() <-chan struct{} { return r.done }

// open starts file f at time start: header, record-on, keyframe (r.mu
// held). The first file's writer has it open already; a later one's
// writer opens it (opOpen).
func (r *Recorder) open(start time.Time, f *file) {
	rows, cols, screen := r.snap()
	r.rows, r.cols = rows, cols
	r.s.mu.Lock()
	f.Rows, f.Cols = rows, cols
	r.s.mu.Unlock()
	h := Header{Width: cols, Height: rows, Timestamp: start.Unix(), Title: r.title}
	if r.term != "" {
		h.Env = map[string]string{"TERM": r.term}
	}
	hdr := appendHeader(nil, h)
	if r.cur == nil {
		r.push(op{kind: opCast, b: hdr, force: true})
	} else {
		r.push(op{kind: opOpen, b: hdr, f: f, force: true})
	}
	r.cur, r.start, r.last, r.size, r.events = f, start, 0, int64(len(hdr)), 0
	mode := Output
	if r.input {
		mode = OutputInput
	}
	r.index(appendAudit(nil, Audit{Event: "record-on", Detail: mode.String()}), true, true)
	r.keyframeOf(0, true, rows, cols, screen)
	r.opened = r.size
}

// push appends o to the queue (r.mu held).
func (r *Recorder) push(o op) {
	r.q = append(r.q, o)
	r.qBytes += o.bytes()
	signal(r.wake)
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// clock returns the event time of at in the current file: never before
// the previous event's (r.mu held).
func (r *Recorder) clock(at time.Time) time.Duration {
	d := at.Sub(r.start)
	if d < r.last {
		d = r.last
	}
	r.last = d
	return d
}

// room reports whether n more bytes fit in the queue (with slack for
// lines that must not be lost).
func (r *Recorder) room(n int64, lim *Limits, must bool) bool {
	bound := lim.QueueBytes
	if must {
		bound += slack
	}
	return r.qBytes+n <= bound
}

// index queues an index line (r.mu held); audit says it is an audit
// event, which is counted if it is dropped.
func (r *Recorder) index(line []byte, must, audit bool) bool {
	if !r.room(int64(len(line)), r.s.lim.Load(), must) {
		if audit {
			r.lostAudit++
			r.s.auditDropped.Add(1)
		}
		return false
	}
	r.size += int64(len(line))
	r.push(op{kind: opIndex, b: line, t: r.last, audit: audit, lost: r.lostAudit})
	r.lostAudit = 0
	return true
}

// keyframe queues a keyframe of the screen now at time d (r.mu held).
// Unless must, it is skipped when the queue has no room for it.
func (r *Recorder) keyframe(d time.Duration, must bool) {
	if !must && !r.room(r.kfNeed, r.s.lim.Load(), false) {
		// The last keyframe would not fit: a snapshot now would most
		// likely be thrown away, and one of a large screen costs more
		// than the output it follows (a 1000×1000 screen of colours is
		// megabytes), at every event until the queue has room.
		return
	}
	rows, cols, screen := r.snap()
	r.keyframeOf(d, must, rows, cols, screen)
}

// keyframeOf is keyframe of a screen taken.
func (r *Recorder) keyframeOf(d time.Duration, must bool, rows, cols int, screen string) {
	pre, b := keyframeParts(d, rows, cols, screen)
	n := int64(len(pre) + len(b) + 20)
	r.kfNeed = n
	lim := r.s.lim.Load()
	if !must {
		if !r.room(n, lim, false) {
			return
		}
		if r.events > 0 && r.size+n+rotateRoom > lim.MaxBytes {
			r.rotate(d) // the new file starts with a keyframe
			return
		}
	}
	r.kfWant, r.kfBytes, r.kfAt, r.kfOut = false, 0, d, false
	r.size += n
	r.push(op{kind: opKeyframe, pre: pre, b: b, t: d, force: must})
}

// keyframeParts returns a keyframe's index line up to its offset, and
// after it.
func keyframeParts(d time.Duration, rows, cols int, screen string) (pre, post []byte) {
	if !utf8.ValidString(screen) {
		screen = validUTF8([]byte(screen))
	}
	pre = append([]byte(`{"type":"keyframe","time":`), appendTime(nil, d)...)
	pre = append(pre, `,"offset":`...)
	b := append([]byte(`,"rows":`), strconv.Itoa(rows)...)
	b = append(b, `,"cols":`...)
	b = strconv.AppendInt(b, int64(cols), 10)
	b = append(b, `,"screen":"`...)
	b = flow.AppendEscaped(b, screen)
	return pre, append(b, "\"}\n"...)
}

// keyframeLine is a keyframe's whole index line.
func keyframeLine(d time.Duration, offset int64, rows, cols int, screen string) []byte {
	pre, post := keyframeParts(d, rows, cols, screen)
	return append(strconv.AppendInt(pre, offset, 10), post...)
}

// rotate closes the current file with a marker and continues in a new
// one that starts with a keyframe (r.mu held).
func (r *Recorder) rotate(d time.Duration) bool {
	start := r.start.Add(d)
	r.s.mu.Lock()
	f, err := r.s.allocLocked(r.chn, start, r.rows, r.cols, r.title, r.input)
	r.s.mu.Unlock()
	if err != nil {
		// The store is closed (and stops this recorder), or the names ran out.
		return false
	}
	r.line(d, 'm', "continued in "+f.ID, true)
	r.index(appendAudit(nil, Audit{Time: seconds(d), Event: "record-off", Detail: "continued in " + f.ID}), true, true)
	r.open(start, f)
	return true
}

func seconds(d time.Duration) float64 { return float64(d.Microseconds()) / 1e6 }

// Results of line.
const (
	lineQueued  = iota
	lineDropped // no room in the queue
	lineLong    // the line would be longer than MaxEventLine: cut text
)

// line queues one event line of text (valid UTF-8) (r.mu held).
func (r *Recorder) line(d time.Duration, typ byte, text string, must bool) int {
	lim := r.s.lim.Load()
	var c *op
	need := len(text) + len(text)/8 + 64 // the line, unless it escapes much
	if k := len(r.q) - 1; k >= 0 && r.q[k].kind == opCast && cap(r.q[k].b)-len(r.q[k].b) >= need && !r.q[k].force {
		c = &r.q[k]
	} else {
		var b []byte
		if n := len(r.free); n > 0 && cap(r.free[n-1]) >= need {
			b, r.free = r.free[n-1], r.free[:n-1]
		} else {
			b = make([]byte, 0, max(chunkBytes, need))
		}
		r.q = append(r.q, op{kind: opCast, b: b})
		c = &r.q[len(r.q)-1]
	}
	mark := len(c.b)
	c.b = appendEvent(c.b, d, typ, text)
	n := int64(len(c.b) - mark)
	if n > MaxEventLine && len(text) > utf8.UTFMax {
		c.b = c.b[:mark]
		r.dropEmpty()
		return lineLong
	}
	if !r.room(n, lim, must) {
		c.b = c.b[:mark]
		r.dropEmpty()
		return lineDropped
	}
	if !must && r.events > 0 && (r.size+n+rotateRoom > lim.MaxBytes || r.cur.gone.Load()) {
		c.b = c.b[:mark]
		r.dropEmpty()
		if !r.rotate(d) {
			return lineDropped
		}
		return r.line(d, typ, text, must)
	}
	c.t = d
	r.qBytes += n
	r.size += n
	r.events++
	switch {
	case len(c.b) >= chunkBytes*3/4 || must:
		// Most of a chunk: worth a write. Less waits for more, or for
		// flushDelay: a write per line would cost the writer a wake-up
		// and a system call per line.
		signal(r.wake)
	case !r.armed:
		r.armed = true
		r.lazy.Reset(flushDelay)
	}
	return lineQueued
}

// flushDelay is the longest an event line waits in the queue for more
// before it is written.
const flushDelay = 20 * time.Millisecond

// Flush hands the event lines queued so far to the writer now, rather
// than when a chunk is full or flushDelay has passed.
func (r *Recorder) Flush() { signal(r.wake) }

// dropEmpty removes an empty chunk at the end of the queue (r.mu held).
func (r *Recorder) dropEmpty() {
	if k := len(r.q) - 1; k >= 0 && r.q[k].kind == opCast && len(r.q[k].b) == 0 {
		r.free = append(r.free, r.q[k].b)
		r.q[k] = op{}
		r.q = r.q[:k]
	}
}

// before does what is due before an event at d of about need bytes: the
// marker of dropped output (once the event fits too), and a keyframe
// (r.mu held).
func (r *Recorder) before(d time.Duration, need int64) {
	lim := r.s.lim.Load()
	if r.dropped > 0 && r.room(128+need, lim, false) {
		n := r.dropped
		r.dropped = 0
		r.line(d, 'm', "dropped "+strconv.FormatInt(n, 10)+" bytes", true)
		r.index(appendDropped(nil, d, n, 0), true, false)
		r.log.Warn("recording dropped output: the writer is behind", "recording", r.cur.ID, "bytes", n)
	}
	if r.kfWant || r.kfBytes >= lim.KeyframeBytes || r.kfOut && d-r.kfAt >= lim.KeyframeInterval {
		r.keyframe(d, false)
	}
}

// event records text (valid UTF-8) as events of type typ at at.
func (r *Recorder) event(at time.Time, typ byte, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || text == "" {
		return
	}
	d := r.clock(at)
	r.before(d, int64(min(len(text), pieceBytes)+32))
	for len(text) > 0 {
		n := runeCut(text, min(len(text), pieceBytes))
		ok := r.line(d, typ, text[:n], false)
		for ok == lineLong {
			n = runeCut(text, n/2) // escapes made the line too long
			ok = r.line(d, typ, text[:n], false)
		}
		if ok == lineDropped && typ == 'o' {
			r.dropped += int64(n)
			r.kfWant = true
			r.s.dropped.Add(int64(n))
		}
		if typ == 'o' {
			r.kfBytes += int64(n)
			r.kfOut = true
		}
		text = text[n:]
	}
}

// Output records output text at time at. Invalid UTF-8 becomes U+FFFD
// (use OutputBytes for raw bytes that may cut a sequence).
func (r *Recorder) Output(at time.Time, text string) {
	// Escaping turns each invalid byte into U+FFFD (flow.AppendEscaped),
	// and text is cut only before a byte that starts a sequence: no pass
	// to check it first.
	r.event(at, 'o', text)
}

// OutputBytes records raw output: a UTF-8 sequence cut at the end of p
// waits for the next call, and invalid bytes become U+FFFD.
func (r *Recorder) OutputBytes(at time.Time, p []byte) {
	r.mu.Lock()
	text := r.outUTF8.text(p, false)
	r.mu.Unlock()
	r.event(at, 'o', text)
}

// RecordInput records input (an "i" event) if the recording's mode is
// OutputInput; it holds a cut UTF-8 sequence as OutputBytes does.
func (r *Recorder) RecordInput(at time.Time, p []byte) {
	if !r.input {
		return
	}
	r.mu.Lock()
	text := r.inUTF8.text(p, false)
	r.mu.Unlock()
	r.event(at, 'i', text)
}

// Resize records a size change (an "r" event "COLSxROWS").
func (r *Recorder) Resize(at time.Time, rows, cols int) {
	r.event(at, 'r', strconv.Itoa(cols)+"x"+strconv.Itoa(rows))
	r.mu.Lock()
	r.rows, r.cols = rows, cols
	r.mu.Unlock()
}

// Marker records a marker (an "m" event).
func (r *Recorder) Marker(at time.Time, label string) {
	if !utf8.ValidString(label) {
		label = validUTF8([]byte(label))
	}
	r.event(at, 'm', label)
}

// Audit records an audit event in the index; its Time is set to now.
func (r *Recorder) Audit(a Audit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	d := r.clock(time.Now())
	a.Time = seconds(d)
	line := appendAudit(nil, a)
	// An audit line continues the file at MaxBytes as output does:
	// viewers that attach and detach on an idle terminal must not take
	// one file past its cap (and then the directory's, evicting the
	// other recordings and dropping what follows).
	if r.size > r.opened && (r.size+int64(len(line))+rotateRoom > r.s.lim.Load().MaxBytes || r.cur.gone.Load()) && r.rotate(d) {
		a.Time = seconds(r.last)
		line = appendAudit(nil, a)
	}
	if !r.index(line, true, true) {
		r.log.Warn("recording dropped an audit event: the writer is behind", "recording", r.cur.ID, "event", a.Event)
	}
}

// Stop ends the recording with a marker "recording stopped: reason" and
// waits until its writer has written it all and closed the files.
// Stopping a stopped Recorder waits likewise.
func (r *Recorder) Stop(reason string) {
	r.stop(reason)
	<-r.done
}

// stop queues the end of the recording without waiting for the writer.
func (r *Recorder) stop(reason string) {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	d := r.clock(time.Now())
	if r.dropped > 0 {
		r.line(d, 'm', "dropped "+strconv.FormatInt(r.dropped, 10)+" bytes", true)
		r.index(appendDropped(nil, d, r.dropped, 0), true, false)
		r.dropped = 0
	}
	if !utf8.ValidString(reason) {
		reason = validUTF8([]byte(reason))
	}
	r.line(d, 'm', "recording stopped: "+reason, true)
	r.index(appendAudit(nil, Audit{Time: seconds(d), Event: "record-off", Detail: reason}), true, true)
	r.push(op{kind: opEnd})
	r.stopped = true
	id := r.cur.ID
	r.mu.Unlock()
	r.s.mu.Lock()
	delete(r.s.recs, r)
	r.s.mu.Unlock()
	r.log.Info("recording stopped", "recording", id, "reason", reason)
}

// appendAudit appends an audit index line.
func appendAudit(b []byte, a Audit) []byte {
	b = append(b, `{"type":"audit","time":`...)
	b = appendTime(b, time.Duration(a.Time*1e6)*time.Microsecond)
	for _, kv := range [...]struct{ k, v string }{
		{"event", a.Event}, {"viewer", a.Viewer}, {"token", a.Token}, {"role", a.Role},
		{"remote", a.Remote}, {"detail", a.Detail},
	} {
		if kv.v == "" && kv.k != "event" {
			continue
		}
		b = append(b, ',', '"')
		b = append(b, kv.k...)
		b = append(b, '"', ':')
		v := kv.v
		if !utf8.ValidString(v) {
			v = validUTF8([]byte(v))
		}
		b = flow.AppendJSONString(b, v)
	}
	return append(b, "}\n"...)
}

// appendDropped appends a "dropped" index line: n bytes of output and
// audit events ("audit" only when some were).
func appendDropped(b []byte, d time.Duration, n, audit int64) []byte {
	b = append(b, `{"type":"dropped","time":`...)
	b = appendTime(b, d)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, n, 10)
	if audit > 0 {
		b = append(b, `,"audit":`...)
		b = strconv.AppendInt(b, audit, 10)
	}
	return append(b, "}\n"...)
}

// writer writes the queue to the files until opEnd.
func (r *Recorder) writer(cf, xf *os.File) {
	defer r.s.wg.Done()
	defer close(r.done)
	defer r.lazy.Stop()
	w := fileWriter{r: r}
	r.mu.Lock()
	w.f = r.cur
	r.mu.Unlock()
	w.set(cf, xf)
	var batch []op
	for {
		<-r.wake
		r.mu.Lock()
		batch, r.q = r.q, batch[:0]
		if r.armed {
			r.armed = false
			r.lazy.Stop() // what it would wake the writer for is in batch
		}
		if len(batch) == 0 {
			// Idle: keep a few chunks for the next output, not a queue's
			// worth (they are reused while output floods).
			clear(r.free[min(len(r.free), freeChunks):])
			r.free = r.free[:min(len(r.free), freeChunks)]
		}
		r.mu.Unlock()
		for i := range batch {
			o := &batch[i]
			end := w.do(o)
			r.mu.Lock()
			r.qBytes -= o.bytes()
			if o.kind == opCast && cap(o.b) >= chunkBytes && int64(len(r.free)) < r.s.lim.Load().QueueBytes/chunkBytes {
				r.free = append(r.free, o.b[:0])
			}
			r.mu.Unlock()
			*o = op{}
			if r.s.opDone != nil {
				r.s.opDone()
			}
			if end {
				return
			}
		}
	}
}

// fileWriter is the writer goroutine's state.
type fileWriter struct {
	r        *Recorder
	f        *file
	cf, xf   *os.File
	cw, xw   io.Writer
	off      int64 // bytes written to the .cast
	broken   bool  // a write failed: drop until the next file
	dropped  int64 // bytes dropped for the total cap, not yet marked
	droppedT time.Duration
	// lostAudit counts audit events dropped (for the total cap, or by
	// the Recorder for want of room in the queue), not yet marked.
	lostAudit int64
}

func (w *fileWriter) set(cf, xf *os.File) {
	w.cf, w.xf, w.cw, w.xw, w.off, w.broken = cf, xf, io.Writer(cf), io.Writer(xf), 0, false
	if wrap := w.r.s.wrap; wrap != nil {
		w.cw, w.xw = wrap(cf), wrap(xf)
	}
}

func (w *fileWriter) close() {
	if w.cf != nil {
		_ = w.cf.Close()
		_ = w.xf.Close()
		w.cf, w.xf = nil, nil
	}
	w.r.s.closeFile(w.f, time.Now())
}

// do carries out one op and reports whether it was the last.
func (w *fileWriter) do(o *op) bool {
	switch o.kind {
	case opEnd:
		w.mark(o.t)
		w.close()
		return true
	case opOpen:
		w.close()
		w.f = o.f
		cf, xf, err := w.r.s.create(o.f)
		if err != nil {
			w.r.log.Warn("recording: creating the next file failed", "recording", o.f.ID, "err", err)
			w.broken = true
			return false
		}
		w.set(cf, xf)
		w.write(false, o.b, o.t, true)
	case opCast:
		w.mark(o.t)
		if !w.write(false, o.b, o.t, o.force) && !w.broken {
			w.dropped += int64(len(o.b))
			w.droppedT = o.t
			w.r.s.dropped.Add(int64(len(o.b)))
		}
	case opIndex:
		w.lostAudit += o.lost
		w.mark(o.t)
		if !w.write(true, o.b, o.t, o.force) && o.audit {
			w.lostAudit++
			w.r.s.auditDropped.Add(1)
		}
	case opKeyframe:
		line := append(strconv.AppendInt(o.pre, w.off, 10), o.b...)
		w.write(true, line, o.t, o.force)
	}
	return false
}

// mark writes the marker of bytes the total cap dropped, if any, and
// the index line of audit events dropped, if any.
func (w *fileWriter) mark(t time.Duration) {
	if w.broken {
		return
	}
	if w.dropped > 0 {
		n := w.dropped
		line := appendEvent(nil, w.droppedT, 'm', "dropped "+strconv.FormatInt(n, 10)+" bytes")
		if !w.write(false, line, w.droppedT, false) {
			return
		}
		w.dropped = 0
		w.write(true, appendDropped(nil, w.droppedT, n, 0), w.droppedT, true)
	}
	if w.lostAudit > 0 && w.write(true, appendDropped(nil, t, 0, w.lostAudit), t, false) {
		w.lostAudit = 0
	}
}

// write writes b to the .cast or the index if the total cap allows.
func (w *fileWriter) write(index bool, b []byte, t time.Duration, force bool) bool {
	if w.broken || len(b) == 0 {
		return false
	}
	n := int64(len(b))
	if !w.r.s.reserve(w.f, index, n, force, seconds(t)) {
		return false
	}
	dst := w.cw
	if index {
		dst = w.xw
	}
	k, err := dst.Write(b)
	if err != nil {
		w.r.s.unreserve(w.f, index, n-int64(k))
		w.broken = true
		w.r.log.Warn("recording: writing failed; the rest of this file is lost", "recording", w.f.ID, "err", err)
		return false
	}
	if !index {
		w.off += n
	}
	return true
}
