package tcp

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/internal/statebuf"
)

// An upgrade in place (docs/upgrade.md) hands a TCP channel to the binary
// ahpd re-executes: Freeze stops its reader and writer without closing
// the socket and writes what the channel holds — the resume journal of
// what was sent and not credited, the client→host positions, the target's
// bytes read and not yet sent, the client's bytes accepted and not yet
// written, the half-closes, the resume tokens — into a state; Adopt, in
// the new binary, carries on with the same socket. A client that resumes
// with its token after the upgrade reconciles its positions with the
// journal as after any reconnect (PROTOCOL.md §8): nothing lost, nothing
// twice.

// Frozen is a channel Freeze stopped: a duplicate of its socket
// (close-on-exec) and its state for Adopt.
type Frozen struct {
	Conn  *os.File
	State []byte
}

// handoverVersion is the version of the state Freeze writes; Adopt and
// CheckState refuse any other.
const handoverVersion = 1

// HandoverVersion is the version of the state Freeze writes.
func HandoverVersion() int { return handoverVersion }

// ErrState is wrapped by the errors of Adopt and CheckState about the
// state they were given.
var ErrState = errors.New("tcp: hand-over state")

// Bounds of a state's parts: generous multiples of what a channel holds
// (two read buffers, a journal under tcpMaxRetainedBytes, a receive
// window's input); the state is checksummed and written by ahpd, so these
// only keep a damaged one from asking for more than it holds.
const (
	maxStateTarget  = 300      // host:port of a 255-byte name
	maxStateToken   = 64       // a resume token (22 bytes)
	maxStateText    = 64 << 20 // one journalled message
	maxStateRecords = 1 << 24  // journalled messages
	maxStateWrites  = 1 << 20  // queued writes
	maxStateInput   = 64 << 20 // one queued write
)

// frozenWrite ends a write that Freeze cut short after wrote bytes of the
// first n queued items: the items written leave the queue as a write
// that succeeded would have them leave it, and the rest of a partial one
// stays. c.mu is held.
func (c *Channel) frozenWrite(n int, wrote int64) {
	k, size := 0, int64(0)
	for k < n && wrote >= int64(len(c.wq[k].data)) {
		wrote -= int64(len(c.wq[k].data))
		size += int64(len(c.wq[k].data))
		c.written = c.wq[k].pos
		c.spare.Put(c.wq[k].buf)
		c.wq[k] = writeItem{}
		k++
	}
	if k < n && wrote > 0 {
		c.wq[k].data = c.wq[k].data[wrote:]
		size += wrote
	}
	c.wq = c.wq[k:]
	c.bytesIn += size
}

// Freeze stops the channel for an upgrade in place: its reader and writer
// stop (a write under way keeps what it did not write), the retention
// timer stops, and the channel ends without closing the socket: Frozen
// holds a duplicate of it and the state Adopt takes. It refuses a channel
// that a connection holds (close the connections first), one still
// dialing, and one that failed, reset or ended; the caller closes those.
func (c *Channel) Freeze() (Frozen, error) {
	c.mu.Lock()
	var why string
	switch {
	case c.freezed:
		why = "frozen already"
	case c.ended || c.dialErr != nil:
		why = "the channel has ended"
	case c.conn == nil:
		why = "still dialing"
	case c.reset != nil:
		why = c.reset.Message
	case c.holder != nil || c.waiting != nil:
		why = "a connection holds it"
	}
	if why != "" {
		c.mu.Unlock()
		return Frozen{}, fmt.Errorf("tcp: cannot freeze %s: %s", c.target, why)
	}
	c.freezed = true
	close(c.frozen)
	conn := c.conn
	c.stopRetain()
	c.mu.Unlock()
	// A deadline in the past ends a read or write under way at once and
	// every later one; nothing in the channel sets another.
	past := time.Unix(1, 0)
	_ = conn.SetReadDeadline(past)
	_ = conn.SetWriteDeadline(past)
	c.wg.Wait() // the dialer, reader, writer and budget loop
	c.mu.Lock()
	if c.reset != nil {
		why := c.reset.Message
		c.mu.Unlock()
		c.end()
		return Frozen{}, fmt.Errorf("tcp: cannot freeze %s: %s", c.target, why)
	}
	state := c.encodeState()
	c.ended = true
	c.mu.Unlock()
	f, err := conn.File() // a duplicate, close-on-exec
	c.end()               // closes conn; the duplicate keeps the socket
	if err != nil {
		return Frozen{}, fmt.Errorf("tcp: %s: the socket: %w", c.target, err)
	}
	c.log.Info("tcp channel frozen for an upgrade", "journal_bytes", len(state))
	return Frozen{Conn: f, State: state}, nil
}

// frozenState is a decoded state: what Adopt puts back.
type frozenState struct {
	target, remote    string
	tokens            []string
	hasJournal        bool
	limits            flow.ReceiveLimits
	accepted, recvRel flow.Position
	released          flow.Position
	records           []flow.JournalRecord
	pend              [][]byte
	outOff, inOff     int64
	readEOF, eofSent  bool
	closedOK, inEOF   bool
	writeClosed       bool
	written           flow.Position
	wq                []writeItem
	bytesIn, bytesOut int64
	resumes           int64
}

func appendPos(b []byte, p flow.Position) []byte {
	return statebuf.AppendInt(statebuf.AppendInt(b, p.MessageID), p.Position)
}

func readPos(r *statebuf.Reader, what string) flow.Position {
	return flow.Position{MessageID: r.Int(what+" id", flow.MaxSafeInteger), Position: r.Int(what+" position", flow.MaxSafeInteger)}
}

// encodeState writes the stopped channel's state; c.mu is held.
func (c *Channel) encodeState() []byte {
	b := statebuf.AppendInt(nil, handoverVersion)
	b = statebuf.AppendString(b, c.target)
	b = statebuf.AppendString(b, c.remote)
	b = statebuf.AppendInt(b, int64(len(c.tokens)))
	for _, t := range c.tokens {
		b = statebuf.AppendString(b, t)
	}
	b = statebuf.AppendBool(b, c.journal != nil)
	if c.journal != nil {
		l := c.recv.Limits()
		b = statebuf.AppendInt(b, l.WindowBytes)
		b = statebuf.AppendInt(b, l.MaximumFrameBytes)
		b = statebuf.AppendInt(b, l.MaximumMessageBytes)
		b = appendPos(b, c.recv.Accepted())
		b = appendPos(b, c.recv.Released())
		b = appendPos(b, c.journal.Released())
		recs := c.journal.Records()
		b = statebuf.AppendInt(b, int64(len(recs)))
		for _, r := range recs {
			// The id and positions follow from the released position and
			// the texts (flow.RestoreJournal checks the same).
			b = statebuf.AppendInt(b, int64(r.Class))
			b = statebuf.AppendInt(b, int64(r.PlainFrom))
			b = statebuf.AppendInt(b, int64(r.PlainTo))
			b = statebuf.AppendString(b, r.Text)
		}
	}
	b = statebuf.AppendInt(b, int64(len(c.pend)))
	for _, p := range c.pend {
		b = statebuf.AppendBytes(b, p)
	}
	b = statebuf.AppendInt(b, c.outOff)
	b = statebuf.AppendInt(b, c.inOff)
	for _, f := range []bool{c.readEOF, c.eofSent, c.closedOK, c.inEOF, c.writeClosed} {
		b = statebuf.AppendBool(b, f)
	}
	b = appendPos(b, c.written)
	b = statebuf.AppendInt(b, int64(len(c.wq)))
	for _, w := range c.wq {
		b = statebuf.AppendBool(b, w.eof)
		b = appendPos(b, w.pos)
		b = statebuf.AppendBytes(b, w.data)
	}
	b = statebuf.AppendInt(b, c.bytesIn)
	b = statebuf.AppendInt(b, c.bytesOut)
	return statebuf.AppendInt(b, c.resumes)
}

// decodeState reads and checks a state as Adopt would use it.
func decodeState(state []byte) (*frozenState, error) {
	r := statebuf.NewReader(state)
	if v := r.Uint("version", 1<<20); r.Err() == nil && v != handoverVersion {
		return nil, fmt.Errorf("%w: version %d, this ahpd reads version %d", ErrState, v, handoverVersion)
	}
	const maxInt = flow.MaxSafeInteger
	s := &frozenState{target: r.String("target", maxStateTarget), remote: r.String("remote", maxStateTarget)}
	for range r.Int("tokens", maxTokens) {
		s.tokens = append(s.tokens, r.String("token", maxStateToken))
	}
	if s.hasJournal = r.Bool("journal"); s.hasJournal {
		s.limits = flow.ReceiveLimits{WindowBytes: r.Int("window", maxInt), MaximumFrameBytes: r.Int("frame", maxInt), MaximumMessageBytes: r.Int("message", maxInt)}
		s.accepted, s.recvRel = readPos(r, "accepted"), readPos(r, "client released")
		s.released = readPos(r, "journal released")
		last := s.released
		for range r.Int("records", maxStateRecords) {
			rec := flow.JournalRecord{ID: last.MessageID + 1, Start: last.Position,
				Class: flow.Class(r.Int("class", 255)), PlainFrom: int(r.Int("plain from", maxStateText)), PlainTo: int(r.Int("plain to", maxStateText)),
				Text: r.String("text", maxStateText)}
			if r.Err() != nil {
				break
			}
			rec.End = rec.Start + flow.UTF16Len(rec.Text)
			s.records = append(s.records, rec)
			last = flow.Position{MessageID: rec.ID, Position: rec.End}
		}
	}
	for range r.Int("read buffers", 2) {
		p := r.Bytes("read buffer", readSize)
		if r.Err() == nil && len(p) == 0 {
			r.Fail("an empty read buffer")
		}
		s.pend = append(s.pend, p)
	}
	s.outOff, s.inOff = r.Int("sent offset", maxInt), r.Int("received offset", maxInt)
	s.readEOF, s.eofSent, s.closedOK, s.inEOF, s.writeClosed = r.Bool("read eof"), r.Bool("eof sent"), r.Bool("closed sent"), r.Bool("eof received"), r.Bool("write closed")
	s.written = readPos(r, "written")
	for range r.Int("writes", maxStateWrites) {
		w := writeItem{eof: r.Bool("eof"), pos: readPos(r, "write"), data: r.Bytes("write data", maxStateInput)}
		if r.Err() != nil {
			break
		}
		s.wq = append(s.wq, w)
	}
	s.bytesIn, s.bytesOut, s.resumes = r.Int("bytes in", maxInt), r.Int("bytes out", maxInt), r.Int("resumes", maxInt)
	if err := r.End(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrState, err)
	}
	// What the channel's code relies on.
	var why string
	switch {
	case s.target == "":
		why = "no target"
	case s.hasJournal && len(s.tokens) == 0:
		why = "a subscribed channel without a resume token"
	case !s.hasJournal && (len(s.tokens) > 0 || len(s.wq) > 0 || s.inOff > 0 || s.outOff > 0 || s.eofSent):
		why = "traffic on a channel never subscribed to"
	case s.eofSent && !s.readEOF, s.closedOK && !(s.eofSent && s.writeClosed), s.writeClosed && !s.inEOF:
		why = "half-closes out of order"
	}
	if why == "" && s.hasJournal {
		if _, err := flow.RestoreJournal(s.released, s.records); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrState, err)
		}
		if _, err := flow.RestoreReceiver(s.limits, s.accepted, s.recvRel); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrState, err)
		}
		prev := s.written
		for i, w := range s.wq {
			switch {
			case w.pos.Position <= prev.Position || w.pos.MessageID <= prev.MessageID:
				why = fmt.Sprintf("queued write %d at %v after %v", i, w.pos, prev)
			case w.pos.Position > s.accepted.Position:
				why = fmt.Sprintf("queued write %d at %v beyond accepted %v", i, w.pos, s.accepted)
			case w.eof && (i != len(s.wq)-1 || len(w.data) > 0):
				why = "a queued eof that is not last and empty"
			}
			prev = w.pos
		}
	}
	if why != "" {
		return nil, fmt.Errorf("%w: %s", ErrState, why)
	}
	return s, nil
}

// CheckState checks a Freeze state as Adopt would, without a socket:
// ahpd --upgrade-check runs it on every TCP channel before the old binary
// gives anything up.
func CheckState(state []byte) error {
	_, err := decodeState(state)
	return err
}

// Adopt carries on a channel that Freeze stopped (in the binary an upgrade
// in place re-executed): conn is the socket Frozen held, state its state.
// cfg is as for Create (Allow, Host and Port are not used: the target was
// admitted when it was dialed). The channel has no consumer: its
// retention timer starts, and a resume with one of its tokens takes it.
// Adopt takes conn, and closes it on error.
func Adopt(cfg Config, conn *os.File, state []byte) (*Channel, error) {
	defer conn.Close()
	s, err := decodeState(state)
	if err != nil {
		return nil, err
	}
	fc, err := net.FileConn(conn)
	if err != nil {
		return nil, fmt.Errorf("tcp: %s: the socket handed over: %w", s.target, err)
	}
	tc, ok := fc.(*net.TCPConn)
	if !ok {
		fc.Close()
		return nil, fmt.Errorf("tcp: %s: the descriptor handed over is not a TCP socket", s.target)
	}
	cfg.setDefaults()
	c := makeChannel(cfg)
	c.target, c.log = s.target, cfg.Logger.With("target", s.target)
	c.cancel = func() {}
	close(c.dialed)
	c.conn, c.remote, c.tokens = tc, s.remote, s.tokens
	if s.hasJournal {
		// Checked by decodeState.
		c.journal, _ = flow.RestoreJournal(s.released, s.records)
		c.recv, _ = flow.RestoreReceiver(s.limits, s.accepted, s.recvRel)
		if cfg.Budget != nil {
			c.journal.SetBudget(cfg.Budget)
		}
	}
	c.free = c.free[:0]
	for _, p := range s.pend {
		c.pend = append(c.pend, append(make([]byte, 0, readSize), p...))
	}
	for range 2 - len(s.pend) {
		c.free = append(c.free, make([]byte, readSize))
	}
	c.outOff, c.inOff = s.outOff, s.inOff
	c.readEOF, c.eofSent, c.closedOK, c.inEOF, c.writeClosed = s.readEOF, s.eofSent, s.closedOK, s.inEOF, s.writeClosed
	c.written = s.written
	for _, w := range s.wq {
		w.data = append([]byte(nil), w.data...)
		w.buf = w.data
		c.wq = append(c.wq, w)
	}
	c.bytesIn, c.bytesOut, c.resumes = s.bytesIn, s.bytesOut, s.resumes
	c.mu.Lock()
	if !c.readEOF {
		c.wg.Go(c.readLoop)
	}
	c.wg.Go(c.writeLoop)
	if cfg.Budget != nil {
		c.wg.Go(c.budgetLoop)
	}
	c.startRetain()
	c.mu.Unlock()
	if len(c.wq) > 0 {
		c.wsig <- struct{}{}
	}
	go c.reap()
	c.log.Info("tcp channel adopted", "remote", c.remote, "retained_bytes", c.Retained())
	return c, nil
}

// Retained returns the UTF-16 bytes the channel's journal retains for a
// resume (0 before its first subscribe).
func (c *Channel) Retained() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.journal == nil || c.ended {
		return 0
	}
	return c.journal.RetainedBytes()
}
