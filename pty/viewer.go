package pty

import (
	"sort"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/internal/afterfunc"
	"github.com/ahp-dev/ahpd/internal/spare"
)

const (
	outPrefix = `{"jsonrpc":"2.0","method":"terminal/output","params":{"data":"`
	outSuffix = `"}}`
	// escOutPrefix and escOutSuffix are outPrefix and outSuffix escaped,
	// for a message given escaped (Message.Escaped).
	escOutPrefix = `{\"jsonrpc\":\"2.0\",\"method\":\"terminal/output\",\"params\":{\"data\":\"`
	escOutSuffix = `\"}}`
	readyMsg     = `{"jsonrpc":"2.0","method":"channel/ready","params":{}}`
	// outEnvelope16 is the UTF-16 size of a terminal/output message
	// without its data.
	outEnvelope16 = 2 * int64(len(outPrefix)+len(outSuffix))
	// maxGather bounds the items one Pull looks at.
	maxGather = 64
)

// Viewer is one subscriber to a Terminal's output. It implements
// flow.Source: its first pulls yield a snapshot (terminal/reset, the
// terminal/output that rebuilds the screen, channel/ready), then live
// output, terminal/resize notices and finally terminal/exit. Pull must be
// called from one goroutine at a time; everything else is safe for
// concurrent use.
type Viewer struct {
	t       *Terminal
	wake    func()
	control bool // may send input and resize (flow.RoleControl)

	// Guarded by t.resizeMu (size.go).
	sized              bool   // it asked for a size
	wantRows, wantCols int    // the size it asked for last
	activeAt           uint64 // when it last typed or resized (t.sizeClock); 0: never
	sizeGone           bool   // it left: its requests count no more

	// Guarded by t.mu.
	live      bool   // false: a snapshot must come before live output
	seq       uint64 // next item to deliver
	off       int    // byte offset of the cursor in that item's text
	pos       int64  // stream position of the cursor
	waiting   bool   // Pull found nothing to send; wake on news
	allowance int64  // output bytes it may fall behind: window + ViewerBacklog
	grace     int64  // after a snapshot: output it already was behind (see allowed)
	graceEnd  int64  // the stream position up to which grace applies
	dropped   int64
	lostAt    int64 // monoNow when it last lost its queue; 0: never (see snapDue)
	// quietSnaps counts the snapshots a viewer behind got before it had
	// been behind for snapStale: the terminal had paused (snapQuiet) or
	// exited. The tests tell the flood's pauses from the pacing by it.
	quietSnaps int64
	closed     bool
	snapTimer  *afterfunc.Timer // wakes a viewer whose snapshot was deferred (see snapDue)
	// Its place in Terminal.behind or Terminal.ahead while it is live and
	// not closed (cursors.go), and in Terminal.waiters (-1: none).
	heap *cursorHeap
	hkey int64
	hidx int
	widx int

	// Owned by the pulling goroutine.
	lastSnap time.Time // when the last snapshot started
	snap     *snapState
	exitSent bool
	refs     []*item
	buf      []byte // the last message's text, reused by the next Pull (flow.Source)

	sent      atomic.Int64
	snapshots atomic.Int64
}

// snapState is a viewer's progress through a snapshot.
type snapState struct {
	snap  *snapshot
	off   int // in the snapshot's esc
	stage int // 0 reset, 1 output, 2 ready
}

// snapshot is the emulator's state at one point of the stream, shared by
// the viewers that send it. A terminal keeps at most maxSnapshots of them
// (Terminal.snaps); an older one is dropped — its data set to nil — and a
// viewer still sending it starts over with a newer one (nextSnap). So a
// viewer that stops crediting halfway through a snapshot does not keep
// its text: 65,536 of them that joined a flooding terminal at different
// moments held 950 MiB of snapshot texts (TestMemoryBudgetUnderAttack).
type snapshot struct {
	data       atomic.Pointer[snapData]
	rows, cols int
	seq        uint64    // the first item the snapshot does not reflect
	pos        int64     // its stream position
	made       time.Time // when it was taken
}

type snapData struct {
	// esc is the snapshot's text as the body of a JSON string
	// (flow.AppendEscaped), escaped once for all its viewers: 500 viewers
	// reconnecting to 100 terminals after an upgrade each escaped and
	// measured their ~0.8 MB again (make bench-upgrade).
	esc string
	// marks cut esc about every snapMarkBytes of text, each between two
	// characters, with the UTF-16 size of what is before it: the first
	// at 0, the last at len(esc). A viewer's message is cut to its budget
	// (snapCut) by a binary search over them and a scan of at most two
	// pieces, the same cut as a scan of the whole text would give.
	marks     []snapMark
	preview   string // for terminal/reset, escaped ("": none)
	preview16 int64  // its UTF-16 size
}

// snapMark is a point of snapData.esc: its offset, and the UTF-16 size of
// esc up to it.
type snapMark struct {
	off  int
	size int64
}

// snapMarkBytes is about how much text there is between two marks.
const snapMarkBytes = 4 << 10

// newSnapData escapes a snapshot's text and marks it.
func newSnapData(text string) *snapData {
	d := &snapData{marks: make([]snapMark, 1, len(text)/snapMarkBytes+2)}
	b := make([]byte, 0, len(text)+len(text)/16+16)
	var size int64
	for i := 0; i < len(text); {
		j := min(i+snapMarkBytes, len(text))
		for j < len(text) && !utf8.RuneStart(text[j]) {
			j++ // a character is escaped whole (an invalid byte is one)
		}
		var n int64
		b, n = flow.AppendEscapedLen(b, text[i:j])
		size += n
		d.marks = append(d.marks, snapMark{off: len(b), size: size})
		i = j
	}
	if len(b) > 0 {
		d.esc = unsafe.String(&b[0], len(b)) // b is not written to again
	}
	return d
}

// snapCut returns where a message that starts at off of d.esc (between
// two characters) ends to be at most budget UTF-16 bytes, and its size:
// the longest such piece.
func (d *snapData) snapCut(off int, budget int64) (end int, size int64) {
	// The first mark at or after off, and the piece up to it.
	i := sort.Search(len(d.marks), func(i int) bool { return d.marks[i].off >= off })
	n, size := escapedCut(d.esc[off:d.marks[i].off], budget)
	if off+n < d.marks[i].off {
		return off + n, size
	}
	// The furthest mark the rest of the budget reaches (sizes grow with
	// the marks), then as much of the piece after it as fits.
	base, rest := d.marks[i].size, budget-size
	j := sort.Search(len(d.marks), func(j int) bool { return d.marks[j].size-base > rest }) - 1
	size += d.marks[j].size - base
	rest -= d.marks[j].size - base
	if j+1 == len(d.marks) {
		return d.marks[j].off, size
	}
	n, more := escapedCut(d.esc[d.marks[j].off:d.marks[j+1].off], rest)
	return d.marks[j].off + n, size + more
}

// escapedCut returns the length of the longest prefix of esc, a JSON
// string body as flow.AppendEscaped writes it, that is at most budget
// UTF-16 bytes and ends between two characters (not within an escape or
// a UTF-8 sequence), and its size.
func escapedCut(esc string, budget int64) (n int, size int64) {
	for n < len(esc) {
		k, w := 1, int64(2)
		switch c := esc[n]; {
		case c == '\\':
			k = 2 // \n, \", \\ …
			if n+1 < len(esc) && esc[n+1] == 'u' {
				k = 6 // \u001b
			}
			w = 2 * int64(k)
		case c >= utf8.RuneSelf:
			var r rune
			r, k = utf8.DecodeRuneInString(esc[n:])
			if r >= 0x10000 {
				w = 4 // a surrogate pair
			}
		}
		if size+w > budget {
			break
		}
		n, size = n+k, size+w
	}
	return n, size
}

// maxSnapshots bounds the snapshots a terminal keeps for its viewers, and
// snapReuse is how old the newest may be and still serve a viewer that
// needs one (when the log still holds the output after it): a snapshot
// is taken at most every snapReuse while viewers keep joining or falling
// behind a flood, so one lives at least maxSnapshots × snapReuse (4 s),
// time for a viewer on a slow link to receive it. With 10,000 lines of
// scrollback a snapshot is about 1.2 MB, so a terminal keeps at most
// about 20 MB of them.
const (
	maxSnapshots = 16
	snapReuse    = 250 * time.Millisecond
)

// ViewerStats are counters of one viewer: BytesDropped counts output
// dropped because the backlog overflowed; Queued, output queued and not
// yet pulled.
type ViewerStats = flow.SubscriberStats

var (
	_ flow.Source   = (*Viewer)(nil)
	_ flow.Finisher = (*Viewer)(nil)
)

// AttachWindow adds a viewer whose flow-control window is window UTF-16
// bytes. wake is called (never with a lock held that wake's implementer
// could need; it must not block) whenever the viewer has something new to
// pull; it may be nil. The viewer is view-only (Attach with
// flow.RoleControl makes one that may send input). It may fall behind by
// its window plus ViewerBacklog before its queue is dropped (PROTOCOL.md
// §8), since output it may still receive under its window is not a
// backlog. The shared log then keeps up to the largest such allowance
// among live viewers. Config.MaxViewers does not apply (Attach applies
// it).
func (t *Terminal) AttachWindow(wake func(), window int64) *Viewer {
	return t.attach(wake, window, 0)
}

// attach is AttachWindow, or nil when the terminal has limit viewers
// already (limit > 0).
func (t *Terminal) attach(wake func(), window int64, limit int) *Viewer {
	if wake == nil {
		wake = func() {}
	}
	v := &Viewer{t: t, wake: wake, allowance: int64(t.cfg.ViewerBacklog) + max(window, 0), hidx: -1, widx: -1}
	t.mu.Lock()
	if limit > 0 && len(t.viewers) >= limit {
		t.mu.Unlock()
		return nil
	}
	v.snapTimer = afterfunc.New(func() { v.wake() })
	t.viewers[v] = struct{}{}
	n := len(t.viewers)
	t.mu.Unlock()
	t.log.Debug("viewer attached", "pid", t.pid, "viewers", n)
	wake()
	return v
}

// SetWindow implements flow.WindowObserver: a viewer whose client changed
// its window (channel/window, PROTOCOL.md §6) may fall behind by the new
// window plus ViewerBacklog. A lower allowance applies at the next output;
// a higher one lets the shared log keep more for this viewer.
func (v *Viewer) SetWindow(window int64) {
	t := v.t
	t.mu.Lock()
	v.allowance = int64(t.cfg.ViewerBacklog) + max(window, 0)
	if v.heap == &t.behind && !v.closed {
		// Keys may lag (be too small), never lead: a smaller allowance
		// must move the key down at once (cursors.go).
		t.behind.fix(v, v.limit())
	}
	t.mu.Unlock()
}

var _ flow.WindowObserver = (*Viewer)(nil)

// allowed returns how far the viewer may fall behind the newest output
// (t.mu held): its allowance, plus — until it has caught up with what was
// output when its snapshot was taken — the output the emulator had not
// applied yet then. A snapshot shows the emulator's position, which may lag
// the log by up to EmulatorBacklog; without the grace, a viewer resumed
// from a snapshot could count as behind before its first pull and be
// snapshotted again.
func (v *Viewer) allowed() int64 {
	if v.pos < v.graceEnd {
		return v.allowance + v.grace
	}
	return v.allowance
}

// Close detaches the viewer. Later pulls return nothing.
func (v *Viewer) Close() {
	t := v.t
	t.mu.Lock()
	if v.closed {
		t.mu.Unlock()
		return
	}
	if v.live {
		t.untrackLocked(v)
	}
	t.unwaitLocked(v)
	v.closed = true // Pull arms snapTimer no more, nor tracks it (startSnapshot)
	delete(t.viewers, v)
	n := len(t.viewers)
	// Output kept for this viewer alone goes now, not at the terminal's
	// next output: a viewer that leaves behind a flood (or with a large
	// window) would keep its window of output in the log while the
	// terminal is quiet.
	wake := t.trimLocked(nil)
	t.mu.Unlock()
	t.wakeAll(wake)
	v.snapTimer.Stop()
	v.leaveSize()
	t.log.Debug("viewer detached", "pid", t.pid, "viewers", n)
}

// Stats returns the viewer's counters.
func (v *Viewer) Stats() ViewerStats {
	t := v.t
	t.mu.Lock()
	defer t.mu.Unlock()
	s := ViewerStats{
		BytesSent:    v.sent.Load(),
		BytesDropped: v.dropped,
		Snapshots:    v.snapshots.Load(),
	}
	if v.live && !v.closed {
		s.Queued = t.endPos - v.pos
	}
	return s
}

// Pull implements flow.Source.
func (v *Viewer) Pull(dataAllowed bool, maxMessageBytes int64) (flow.Message, bool) {
	maxMessageBytes = min(maxMessageBytes, maxOutputMessage)
	if v.snap != nil {
		if !dataAllowed {
			return flow.Message{}, false
		}
		return v.nextSnap(maxMessageBytes)
	}
	t := v.t
	t.mu.Lock()
	if v.closed {
		t.mu.Unlock()
		return flow.Message{}, false
	}
	if !v.live {
		if !dataAllowed {
			return v.wait()
		}
		if d := v.snapDue(); d > 0 {
			v.snapTimer.Reset(d)
			return v.wait()
		}
		if now := monoNow(); v.lostAt != 0 && now < v.lostAt+int64(snapStale) {
			if q := t.quietSince.Load(); t.exited || q != 0 && now >= q+int64(snapQuiet) {
				v.quietSnaps++
			}
		}
		t.mu.Unlock()
		v.startSnapshot()
		return v.nextSnap(maxMessageBytes)
	}
	// Skip items with nothing for viewers (queries only).
	if next := v.skipLocked(); next != v.seq {
		t.moveLocked(v, next, 0, v.pos)
	}
	if v.seq == t.endSeq {
		if t.retained >= trimCaughtUp && t.firstSeq < t.emuDoneSeq {
			// Caught up: output kept for this viewer goes now, not at
			// the terminal's next output (see Close).
			wake := t.trimLocked(nil)
			defer t.wakeAll(wake)
		}
		if t.exited && !v.exitSent {
			v.exitSent = true
			msg := t.exitMsg
			t.mu.Unlock()
			v.sent.Add(flow.UTF16Len(msg))
			return flow.Message{Text: msg, Class: flow.Lifecycle}, true
		}
		if dataAllowed && !t.exited {
			// Output wakes only a viewer that could take it: one refused
			// data (its window is full, or its connection's budget is
			// spent) is pulled again by its Sender when that changes.
			t.waitOutputLocked(v)
		}
		return v.wait()
	}
	if !dataAllowed {
		return v.wait()
	}
	refs := v.refs[:0]
	for s := v.seq; s < t.endSeq && len(refs) < maxGather; s++ {
		refs = append(refs, t.items[s-t.firstSeq])
	}
	v.refs = refs
	seq, off, pos := v.seq, v.off, v.pos
	shared := len(t.viewers) > 1
	t.mu.Unlock()

	var m flow.Message
	if refs[0].resize {
		it := refs[0]
		m.Text = resizeMsg(it.rows, it.cols)
		m.Size = 2 * int64(len(m.Text))
		seq++
	} else {
		b := v.nextBuf()
		var escaped bool
		b, m.Size, seq, off, pos, escaped = v.buildOutput(b, refs, seq, off, pos, maxMessageBytes, shared)
		if escaped {
			m.Escaped = v.setBuf(b)
		} else {
			m.Text = v.setBuf(b)
		}
	}
	clear(v.refs)

	t.mu.Lock()
	if v.live && !v.closed {
		t.moveLocked(v, seq, off, pos)
	}
	t.mu.Unlock()
	v.sent.Add(m.Size)
	m.Class = flow.Data
	return m, true
}

// skipLocked returns the first item at or after the cursor with something
// for the viewer: a resize, or text it has not pulled (t.mu held).
func (v *Viewer) skipLocked() uint64 {
	t := v.t
	seq, off := v.seq, v.off
	for seq < t.endSeq {
		it := t.items[seq-t.firstSeq]
		if it.resize || off < len(it.text) {
			break
		}
		seq++
		off = 0
	}
	return seq
}

// trimCaughtUp is how much output the log must hold for a viewer that
// caught up to trim it: less (an echo) goes at the next output, as before,
// without a trim per keystroke.
const trimCaughtUp = 64 << 10

// nextBuf returns the message buffer, empty: the Sender is done with a
// text when it pulls the next message, so each text is built in place in
// the same memory, without a copy.
func (v *Viewer) nextBuf() []byte {
	if v.buf == nil {
		v.buf = msgBufs.Get()
	}
	return v.buf[:0]
}

// Finished implements flow.Finisher: the Sender is done with the text of
// the message pulled last. The viewer gives its message buffer back (to
// msgBufs, for the next viewer that has output to send), whatever more
// says: only the message the Sender has started counts in the
// connection's budget, and a buffer kept between messages would not. A
// viewer whose window is full may never be pulled again, one starved for
// its token's budget waits for it, and with a thousand subscriptions on a
// connection each waits a whole round of the scheduler for its next turn:
// 65,536 such viewers held 460 MiB of buffers outside every budget
// (TestMemoryBudgetUnderAttack). A flood's viewer takes a buffer back at
// its next Pull, a sync.Pool round trip per message of up to 128 KiB. One
// whose window is full also drops its list of items to pull (maxGather
// pointers).
func (v *Viewer) Finished(more bool) {
	if v.buf != nil {
		msgBufs.Put(v.buf)
		v.buf = nil
	}
	if !more {
		v.refs = nil
	}
}

// maxOutputMessage bounds a viewer's messages, output and snapshot
// (UTF-16 bytes), below what the Sender allows, which may be the viewer's
// maximumMessageBytes (up to 16 MiB): a larger one saves no write (a
// frame is at most maximumFrameBytes and the connection's transport holds
// 64 KiB), and each viewer builds its messages in a buffer of its own
// while it sends (idle viewers, and those whose window is full, hand
// theirs to msgBufs: see wait and Finished).
const maxOutputMessage = 128 << 10

// msgBufs holds the large message buffers that idle viewers, and viewers
// whose window is full, gave up (see wait and Finished), for the next viewer that has output to send: a viewer that keeps
// up with a flood goes idle between the reader's bursts, and without the
// pool it would grow a new buffer after each one (twice the output in
// allocations, and the garbage collections they cost). The pool holds only
// what viewers handed in, and the garbage collector empties it within two
// cycles.
var msgBufs = spare.Pool{MaxCap: maxPooledBuf}

// snapBufs holds the buffers snapshots were written into, for the next
// (takeSnapshot): one of a full scrollback is about a megabyte, and the
// garbage collector empties the pool within two cycles.
var snapBufs = spare.Pool{MaxCap: 64 << 20}

// maxPooledBuf bounds the buffers msgBufs keeps: a message of
// maxOutputMessage UTF-16 bytes takes at most 3/2 of that in UTF-8 bytes
// (and ASCII escaped twice, as messages of ASCII are, fits too), so a
// buffer of this size holds any message, and none taken from the pool is
// much larger than the message it carries, which is what the
// connection's budget counts.
const maxPooledBuf = 2 * maxOutputMessage

// When a viewer that lost its queue gets its snapshot (snapDue). Each
// snapshot repaints the screen and the whole scrollback (10,000 lines,
// about 1.2 MB, a fifth of a second of a browser's time), so a viewer
// slower than a flood must not be sent one after another while the flood
// lasts: that is most of what it would parse, and the flood's end would
// wait behind them (docs/benchmarks-browser.md).
const (
	// snapInterval is the shortest time between the starts of two
	// snapshots of one viewer.
	snapInterval = 250 * time.Millisecond
	// snapQuiet: a viewer behind gets its snapshot once the program has
	// written nothing for this long (the flood is over, or paused), so
	// the end of a flood shows at once.
	snapQuiet = 50 * time.Millisecond
	// snapStale: while the terminal keeps writing, a viewer behind gets
	// its snapshot this long after it lost its queue, so that a flood
	// too fast for it still shows progress, once a second.
	snapStale = time.Second
)

// snapDue returns how long the viewer (not live; t.mu held) must still
// wait for its snapshot: 0 for a new viewer, else until snapInterval
// after its last snapshot and until the terminal is quiet for snapQuiet
// (the reader found the PTY empty and nothing came since: a reader held
// back by the emulator is not quiet) or the viewer has been behind for
// snapStale, whichever comes first. A
// viewer behind shows the screen of its last snapshot (or of the output
// before it lost its queue) meanwhile.
func (v *Viewer) snapDue() time.Duration {
	t := v.t
	pace := snapInterval - time.Since(v.lastSnap)
	if v.lostAt == 0 || t.exited {
		return pace // a new viewer; or no more output will come
	}
	now := monoNow()
	wait := v.lostAt + int64(snapStale) - now
	if q := t.quietSince.Load(); q != 0 {
		wait = min(wait, q+int64(snapQuiet)-now)
	} else {
		wait = min(wait, int64(snapQuiet)) // look again then
	}
	return max(pace, time.Duration(wait))
}

// idleBuf is the largest message buffer a viewer keeps while it has
// nothing to send: a viewer that negotiated large messages does not hold
// one while idle, and an idle viewer holds no more than an echo's. With
// 64 KiB, each idle viewer that had been sent a few KiB kept its own
// buffer of them: 200 such viewers held 4.5 MiB, a third of what they
// cost the daemon (docs/benchmarks-memory.md); now they share msgBufs.
const idleBuf = 1 << 10

// wait ends a Pull that has nothing to send (t.mu held, and released):
// the viewer is woken on news, and drops large message buffers (the Sender
// is done with the last text, since it pulled again).
func (v *Viewer) wait() (flow.Message, bool) {
	v.waiting = true
	v.t.mu.Unlock()
	if cap(v.buf) > idleBuf {
		msgBufs.Put(v.buf) // kept only up to maxPooledBuf
		v.buf = nil
	}
	return flow.Message{}, false
}

// setBuf keeps b as the message buffer and returns its bytes as the text.
func (v *Viewer) setBuf(b []byte) string {
	v.buf = b
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// buildOutput packs as much output from refs (starting at off in refs[0])
// as fits in one terminal/output message of at most max UTF-16 bytes,
// appended to b. With other viewers attached (shared), a whole item is
// escaped once into a form they all copy (item.escaped); a lone viewer
// escapes it straight into b, and a viewer that attaches later escapes it
// for sharing when it reads it. Only an item cut by the limit is escaped
// piecewise. A message of
// ASCII items is written escaped twice, as its frames carry it
// (Message.Escaped, reported by escaped), so that no frame escapes it
// again; an item of the other kind ends the message.
func (v *Viewer) buildOutput(b []byte, refs []*item, seq uint64, off int, pos int64, max int64, shared bool) (_ []byte, size int64, _ uint64, _ int, _ int64, escaped bool) {
	ascii := refs[0].ascii
	budget := max - outEnvelope16
	used := int64(0)
	if ascii {
		b = append(b, escOutPrefix...)
	} else {
		b = append(b, outPrefix...)
	}
	for _, it := range refs {
		if it.resize || (it.ascii != ascii && it.text != "") {
			break
		}
		if off == 0 {
			var n16 int64
			whole := false
			if !shared && it.readers.Add(1) == 1 {
				// The only viewer, and the first to read it: no
				// shared copy, which nobody else would read.
				if b, n16, whole = appendWhole(b, it.text, ascii, budget-used); !whole {
					it.readers.Add(-1) // it did not read it after all
				}
			} else if esc, esc16 := it.escaped(); used+esc16 <= budget {
				b, n16, whole = append(b, esc...), esc16, true
			}
			if whole {
				used += n16
				pos += int64(len(it.text))
				seq++
				continue
			}
		}
		var k int
		var n16 int64
		if ascii {
			b, k, n16 = flow.AppendEscapedTwicePrefix(b, it.text[off:], budget-used)
		} else if k, n16 = flow.EscapedPrefix(it.text[off:], budget-used); k > 0 {
			b = flow.AppendEscaped(b, it.text[off:off+k])
		}
		if k > 0 {
			used += n16
			off += k
			pos += int64(k)
			if off == len(it.text) {
				// The rest of an item a message before took the start
				// of: the items after it may fit too. (A message of the
				// rest alone would be a small one after each large one.)
				seq++
				off = 0
				continue
			}
		}
		break
	}
	if ascii {
		b = append(b, escOutSuffix...)
	} else {
		b = append(b, outSuffix...)
	}
	return b, outEnvelope16 + used, seq, off, pos, ascii
}

// appendWhole appends s as a message holds it (appendText) if the UTF-16
// size n16 it adds to the message is at most room, and reports whether
// it did. When s fits as plain ASCII (2 bytes a byte) it is escaped and
// measured in one pass, and taken back in the rare case escapes make it
// too large; otherwise (the last item of a message) it is measured first.
func appendWhole(b []byte, s string, ascii bool, room int64) (_ []byte, n16 int64, ok bool) {
	if 2*int64(len(s)) <= room {
		mark := len(b)
		if b, n16 = appendText(b, s, ascii); n16 <= room {
			return b, n16, true
		}
		return b[:mark], 0, false
	}
	if n16 = flow.EscapedLen(s); n16 <= room {
		b, _ = appendText(b, s, ascii)
		return b, n16, true
	}
	return b, 0, false
}

func resizeMsg(rows, cols int) string {
	b := make([]byte, 0, 80)
	b = append(b, `{"jsonrpc":"2.0","method":"terminal/resize","params":{"rows":`...)
	b = strconv.AppendInt(b, int64(rows), 10)
	b = append(b, `,"cols":`...)
	b = strconv.AppendInt(b, int64(cols), 10)
	b = append(b, "}}"...)
	return string(b)
}

// resetMsg returns a snapshot's terminal/reset and its UTF-16 size, with
// the preview (its JSON string body, escaped once per snapshot by
// escapePreview, and that body's UTF-16 size) when there is one and the
// message then stays within max.
func resetMsg(rows, cols int, preview string, preview16 int64, max int64) (string, int64) {
	const head, tail = `,"preview":"`, `"}}`
	b := make([]byte, 0, 64)
	b = append(b, `{"jsonrpc":"2.0","method":"terminal/reset","params":{"rows":`...)
	b = strconv.AppendInt(b, int64(rows), 10)
	b = append(b, `,"cols":`...)
	b = strconv.AppendInt(b, int64(cols), 10)
	if size := 2*int64(len(b)+len(head)+len(tail)) + preview16; preview != "" && size <= max {
		b = append(append(append(b, head...), preview...), tail...)
		return string(b), size
	}
	b = append(b, "}}"...)
	return string(b), 2 * int64(len(b))
}

// escapePreview returns a preview's JSON string body and its UTF-16 size,
// as resetMsg takes them: once per snapshot, not once per viewer.
func escapePreview(preview string) (string, int64) {
	b, n16 := flow.AppendEscapedLen(make([]byte, 0, len(preview)+len(preview)/4), preview)
	return string(b), n16
}

// startSnapshot takes the emulator state and moves the viewer's cursor to
// exactly the point of the stream that state reflects, so snapshot plus
// the live output after it is what a viewer of the whole stream saw.
func (v *Viewer) startSnapshot() *snapData {
	t := v.t
	t.emuMu.Lock()
	t.mu.Lock()
	var snap *snapshot
	if n := len(t.snaps); n > 0 {
		// The newest serves if it is of the state now, or young, while
		// the log still holds the output after it (the viewer replays
		// that).
		if newest := t.snaps[n-1]; newest.seq >= t.firstSeq && (newest.seq == t.emuApplied || time.Since(newest.made) < snapReuse) {
			snap = newest
		}
	}
	if snap == nil {
		t.mu.Unlock()
		snap = t.takeSnapshot()
		t.mu.Lock()
	}
	first := !v.live && v.seq == 0 && v.pos == 0 && v.snapshots.Load() == 0
	if v.live && !v.closed {
		// Starting over (nextSnap): its cursor moves to the new snapshot.
		t.untrackLocked(v)
	}
	v.live = true
	v.seq, v.off, v.pos = snap.seq, 0, snap.pos
	v.grace, v.graceEnd = t.endPos-snap.pos, t.endPos
	if !v.closed {
		t.trackLocked(v)
	}
	t.mu.Unlock()
	d := snap.data.Load() // not dropped while emuMu is held
	t.emuMu.Unlock()
	v.snap = &snapState{snap: snap}
	v.lastSnap = time.Now()
	v.snapshots.Add(1)
	if !first {
		t.log.Debug("viewer resynchronized with a snapshot", "pid", t.pid)
	}
	return d
}

// takeSnapshot takes a snapshot of the emulator's state now (t.emuMu
// held) and keeps it, dropping the oldest beyond maxSnapshots.
func (t *Terminal) takeSnapshot() *snapshot {
	// The text is garbage once escaped: its buffer goes back to
	// snapBufs (100 terminals' snapshots after an upgrade were ~80 MB of
	// it, and twice that while snapshot copied it into a string).
	buf := t.emu.appendSnapshot(snapBufs.Get())
	var text string
	if len(buf) > 0 {
		text = unsafe.String(&buf[0], len(buf))
	}
	d := newSnapData(text) // copies it
	snapBufs.Put(buf)
	if len(buf) >= previewMin {
		d.preview, d.preview16 = escapePreview(t.emu.preview())
	}
	snap := &snapshot{rows: t.emu.rows, cols: t.emu.cols, seq: t.emuApplied, pos: t.emuPos, made: time.Now()}
	snap.data.Store(d)
	if len(t.snaps) == maxSnapshots {
		t.snaps[0].data.Store(nil) // its viewers start over (nextSnap)
		t.snaps = append(t.snaps[:0], t.snaps[1:]...)
	}
	t.snaps = append(t.snaps, snap)
	return snap
}

func (v *Viewer) nextSnap(max int64) (flow.Message, bool) {
	s := v.snap
	d := s.snap.data.Load()
	if d == nil && s.stage < 2 {
		// The terminal dropped this snapshot (maxSnapshots): start over
		// with a newer one, from its terminal/reset.
		d = v.startSnapshot()
		s = v.snap
	}
	var text string
	var size int64
	switch s.stage {
	case 0:
		text, size = resetMsg(s.snap.rows, s.snap.cols, d.preview, d.preview16, max)
		s.stage = 1
		if d.esc == "" {
			s.stage = 2
		}
	case 1:
		end, n16 := d.snapCut(s.off, max-outEnvelope16)
		b := append(v.nextBuf(), outPrefix...)
		b = append(b, d.esc[s.off:end]...)
		b = append(b, outSuffix...)
		text = v.setBuf(b)
		size = outEnvelope16 + n16
		s.off = end
		if s.off == len(d.esc) {
			s.stage = 2
		}
	default:
		text = readyMsg
		size = 2 * int64(len(text))
		v.snap = nil
	}
	v.sent.Add(size)
	return flow.Message{Text: text, Class: flow.Data, Size: size}, true
}
