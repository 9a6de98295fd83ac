package tcp

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unsafe"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/internal/b64"
	"github.com/ahp-dev/ahpd/internal/wire"
)

// Sub is one subscription to a TCP channel: while it holds the lease, the
// channel's consumer.
type Sub struct {
	c   *Channel
	req flow.AttachRequest

	// guarded by c.mu
	ready  bool
	result flow.AttachResult
	err    error
	end    *flow.Reset
	closed bool

	// the connection's owner goroutine's
	text      []byte
	stats     flow.SubscriberStats
	readySent bool // channel/ready, the subscription's first new message
}

// Attach adds a subscriber. A first subscribe takes the channel; later
// ones must resume (PROTOCOL.md §8): without a resume member the channel
// is busy (-32007). A resume supersedes the connection that holds the
// channel; its subscriber is Ready once that one has let go.
func (c *Channel) Attach(req flow.AttachRequest) (flow.Subscriber, error) {
	if req.Role != flow.RoleControl {
		return nil, &flow.Error{Code: flow.ErrCodeForbidden, Message: "forbidden: a TCP channel's consumer needs role control"}
	}
	if req.Release == nil {
		return nil, fmt.Errorf("tcp: AttachRequest.Release is required")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.dialErr != nil:
		return nil, c.dialErr
	case c.ended || c.freezed:
		if req.Resume != nil {
			return nil, &flow.Error{Code: flow.ErrCodeResumeFailed, Message: "resume failed: the tcp channel has ended"}
		}
		return nil, &flow.Error{Code: flow.ErrCodeChannelNotFound, Message: "channel not available: the tcp channel has ended"}
	case req.Resume == nil && (c.journal != nil || c.holder != nil || c.waiting != nil):
		return nil, &flow.Error{Code: flow.ErrCodeChannelBusy, Message: "channel busy: a TCP channel has one consumer (a reconnect resumes with its token)"}
	case req.Resume != nil && c.journal == nil:
		return nil, &flow.Error{Code: flow.ErrCodeResumeFailed, Message: "resume failed: the channel was never subscribed to"}
	case req.Resume != nil && !slices.Contains(c.tokens, req.Resume.Token):
		return nil, &flow.Error{Code: flow.ErrCodeResumeFailed, Message: "resume failed: unknown resume token (use the newest)"}
	}
	s := &Sub{c: c, req: req}
	old := c.waiting
	if old != nil {
		old.end = &flow.Reset{Code: flow.CodeSuperseded, Message: "a newer resume of this channel came first"}
	}
	c.waiting = s
	h := c.holder
	if h != nil {
		h.end = &flow.Reset{Code: flow.CodeSuperseded, Message: "another connection resumed this channel"}
	}
	// Wake without c.mu: the callers' locks are theirs.
	defer func() { wake(old); wake(h) }()
	return s, nil
}

// Ready lends the lease once the dial is done and no other subscription
// holds it. A resume reconciles the client's positions with the journal
// here; if it cannot, the resume fails (-32006) and the channel closes.
func (s *Sub) Ready() (flow.AttachResult, bool, error) {
	c := s.c
	c.mu.Lock()
	if s.ready || s.err != nil {
		defer c.mu.Unlock()
		return s.result, s.ready, s.err
	}
	switch {
	case c.dialErr != nil:
		s.err = c.dialErr
	case s.end != nil:
		s.err = &flow.Error{Code: flow.ErrCodeResumeFailed, Message: "resume failed: " + s.end.Message}
	case c.ended:
		s.err = &flow.Error{Code: flow.ErrCodeResumeFailed, Message: "resume failed: the tcp channel has ended"}
	case c.conn == nil || c.holder != nil:
		c.mu.Unlock()
		return flow.AttachResult{}, false, nil // dialing, or the old holder has not let go yet
	}
	if s.err != nil {
		c.mu.Unlock()
		return flow.AttachResult{}, false, s.err
	}
	res := flow.AttachResult{Initial: flow.InitialLive}
	if c.journal == nil {
		c.journal, c.recv = flow.NewJournal(), flow.NewReceiver(s.req.Receive)
		if c.cfg.Budget != nil {
			c.journal.SetBudget(c.cfg.Budget)
		}
	} else {
		if c.reset != nil {
			return s.failResume("the target reset the connection meanwhile (" + c.reset.Message + ")")
		}
		r := s.req.Resume
		rp, err := c.journal.Resume(r.Accepted, r.Released)
		if err != nil {
			return s.failResume(err.Error())
		}
		// What the writer wrote while no connection held the channel is
		// released now; the result tells the client.
		if c.written.Position > c.recv.Released().Position {
			if _, _, err := c.recv.Release(c.written); err != nil {
				return s.failResume("client→host positions: " + err.Error())
			}
		}
		res.Initial, res.ResumeFrom = flow.InitialReplay, &rp
		c.resumes++
	}
	tok := newToken()
	c.tokens = append(c.tokens, tok)
	if len(c.tokens) > maxTokens {
		c.tokens = slices.Delete(c.tokens, 0, len(c.tokens)-maxTokens)
	}
	res.Resume = &flow.ResumeResult{Token: tok, Accepted: c.recv.Accepted(), Released: c.recv.Released()}
	res.Journal, res.Receiver = c.journal, c.recv
	c.holder, c.waiting = s, nil
	c.stopRetain()
	s.ready, s.result = true, res
	c.mu.Unlock()
	c.log.Info("tcp consumer attached", "initial", res.Initial)
	return res, true, nil
}

// failResume refuses a resume that cannot be reconciled and closes the
// channel (PROTOCOL.md §8); c.mu is held and released.
func (s *Sub) failResume(why string) (flow.AttachResult, bool, error) {
	c := s.c
	s.err = &flow.Error{Code: flow.ErrCodeResumeFailed, Message: "resume failed: " + why}
	c.ended = true
	c.mu.Unlock()
	c.log.Info("tcp resume failed; closing the channel", "why", why)
	c.end()
	return flow.AttachResult{}, false, s.err
}

var (
	dataPrefix   = `{"jsonrpc":"2.0","method":"tcp/data","params":{"offset":`
	dataMiddle   = `,"data":"`
	dataSuffix   = `"}}`
	dataOverhead = int64(len(dataPrefix)+20+len(dataMiddle)+len(dataSuffix)) * 2
)

// maxDataMessage bounds a tcp/data message (UTF-16 bytes, about 24 KiB
// of the stream) below what the Sender allows, a quarter of the client's
// window: with messages of up to 256 KiB (the default 1 MiB window) a
// download through the Go client moved 227 MB/s at 3.15 s of ahpd CPU
// per GiB, against 315–339 MB/s and 2.22–2.29 s with these
// (bench/tcpbench -only 'in process', docs/benchmarks.md).
const maxDataMessage = 64 << 10

// readyMsg ends a subscription's initial content (PROTOCOL.md §3): for
// TCP, nothing on a first subscribe, the journal's replay on a resume.
const readyMsg = `{"jsonrpc":"2.0","method":"channel/ready","params":{}}`

// Pull hands out channel/ready (the Sender replays a resume's journal
// before it pulls), then the socket's bytes as tcp/data, then tcp/eof and
// tcp/closed as lifecycle messages, in that order. channel/ready and
// tcp/data are data messages (PROTOCOL.md §4): they start only while the
// window, the retained cap and the budget have room (room).
func (s *Sub) Pull(dataAllowed bool, maxMessageBytes int64) (flow.Message, bool) {
	c := s.c
	c.mu.Lock()
	if s != c.holder || s.end != nil || c.reset != nil || c.ended {
		c.mu.Unlock()
		return flow.Message{}, false
	}
	if !s.readySent {
		// Credit-gated like any data message: after a resume's replay
		// the client may hold a full window it has not released yet, and
		// channel/ready waits for its credit as tcp/data would.
		if s.room(dataAllowed) == 0 {
			c.mu.Unlock()
			return flow.Message{}, false
		}
		s.readySent = true
		c.mu.Unlock()
		return flow.Message{Text: readyMsg, Class: flow.Data, Size: int64(len(readyMsg)) * 2}, true
	}
	var m flow.Message
	switch {
	case len(c.pend) > 0:
		limit := s.room(dataAllowed)
		if limit == 0 {
			c.mu.Unlock()
			return flow.Message{}, false
		}
		// Base64 takes 4 characters per 3 bytes, each 2 UTF-16 bytes.
		n := int((min(maxMessageBytes, limit)-dataOverhead)/8) * 3
		buf := c.pend[0]
		n = max(min(n, len(buf)), min(3, len(buf)))
		// Built in the journal's memory and kept there as it is (Owned).
		t := c.journal.Buffer(int(dataOverhead/2) + (n+2)/3*4)
		t = append(t, dataPrefix...)
		t = strconv.AppendInt(t, c.outOff, 10)
		t = append(t, dataMiddle...)
		plainFrom := len(t)
		t = b64.AppendEncode(t, buf[:n])
		plainTo := len(t)
		t = append(t, dataSuffix...)
		c.outOff += int64(n)
		c.bytesOut += int64(n)
		if n == len(buf) {
			c.pend = c.pend[1:]
			c.free = append(c.free, buf[:0])
			select {
			case c.more <- struct{}{}:
			default:
			}
		} else {
			c.pend[0] = buf[n:]
		}
		m = flow.Message{Text: unsafe.String(unsafe.SliceData(t), len(t)), Class: flow.Data, Size: int64(len(t)) * 2,
			PlainFrom: plainFrom, PlainTo: plainTo, Owned: true} // base64: nothing to escape
	case c.readEOF && !c.eofSent:
		c.eofSent = true
		s.text = fmt.Appendf(s.text[:0], `{"jsonrpc":"2.0","method":"tcp/eof","params":{"offset":%d}}`, c.outOff)
		m = flow.Message{Text: string(s.text), Class: flow.Lifecycle}
	case c.eofSent && c.writeClosed && !c.closedOK:
		c.closedOK = true
		m = flow.Message{Text: `{"jsonrpc":"2.0","method":"tcp/closed","params":{}}`, Class: flow.Lifecycle}
	default:
		// Once the client has released tcp/closed, the channel has ended
		// (PROTOCOL.md §8). The journal is ours to read here: the
		// connection that holds the lease calls Pull.
		finished := c.closedOK && c.journal.Released() == c.journal.Last()
		c.mu.Unlock()
		if finished {
			c.log.Info("tcp channel finished")
			c.end()
		}
		return flow.Message{}, false
	}
	c.mu.Unlock()
	s.stats.BytesSent += m.Size
	if m.Size == 0 {
		s.stats.BytesSent += flow.UTF16Len(m.Text)
	}
	return m, true
}

// room returns the largest data message (UTF-16 bytes) that may start
// now, or 0 when none may: the window is shut (dataAllowed), the journal
// retains its cap (Config.MaxRetained; credit that releases it wakes the
// subscription), or the budget has no room for a message (budgetLoop
// wakes it once it has). A refusal leaves the read buffers full, so the
// reader stops reading the socket: the target's writes wait in its
// kernel buffers (PROTOCOL.md §8, backpressure). c.mu is held, and the
// journal is the caller's: Pull runs on the holder's owner goroutine.
func (s *Sub) room(dataAllowed bool) int64 {
	c := s.c
	if !dataAllowed || c.journal.RetainedBytes() >= c.maxRetained() {
		return 0
	}
	b := c.cfg.Budget
	if b == nil {
		return maxDataMessage
	}
	left := b.Left()
	if left < flow.MinPullSize && c.journal.Len() == 0 && c.journal.Memory() > 0 {
		// All the journal holds is released memory kept for the next
		// messages: give it back rather than wait for it, or channels
		// that each keep some could together spend the budget and wait
		// for each other.
		c.journal.Discard()
		left = b.Left()
	}
	if left < flow.MinPullSize {
		select {
		case c.starve <- struct{}{}:
		default:
		}
		return 0
	}
	// The text is ASCII (one byte of memory per 2 UTF-16 bytes): it fits
	// in what is left.
	return min(maxDataMessage, 2*left)
}

// Deliver takes tcp/input and tcp/eof (PROTOCOL.md §8). Offsets count
// decoded bytes: bytes at offsets already seen are suppressed, a gap is a
// protocol error. The client is credited (AttachRequest.Release) once the
// bytes are written to the socket.
func (s *Sub) Deliver(method string, params json.RawMessage, _ func()) error {
	var off int64
	var data []byte
	var err error
	c := s.c
	var buf []byte // the memory tcp/input's data is decoded into
	switch method {
	case "tcp/input":
		c.mu.Lock()
		buf = c.spare.Get()
		c.mu.Unlock()
		off, data, err = wire.DecodeTCPDataInto(buf, method, params)
		buf = data
	case "tcp/eof":
		off, err = wire.DecodeTCPOffset(method, params)
	default:
		return &flow.Reset{Code: flow.CodeProtocolError, Message: "unknown method on a tcp channel: " + strconv.Quote(method)}
	}
	if err != nil {
		return &flow.Reset{Code: flow.CodeProtocolError, Message: err.Error()}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s != c.holder {
		return &flow.Reset{Code: flow.CodeSuperseded, Message: "another connection holds this channel"}
	}
	it := writeItem{pos: c.recv.Accepted()}
	switch {
	case method == "tcp/eof" && c.inEOF:
		if off != c.inOff {
			return &flow.Reset{Code: flow.CodeProtocolError, Message: fmt.Sprintf("tcp/eof: offset %d, but the stream ended at %d", off, c.inOff)}
		}
		// a repeated tcp/eof: suppressed, credited in order
	case c.inEOF:
		if off+int64(len(data)) > c.inOff {
			return &flow.Reset{Code: flow.CodeProtocolError, Message: "tcp/input after tcp/eof"}
		}
	case off > c.inOff:
		return &flow.Reset{Code: flow.CodeProtocolError, Message: fmt.Sprintf("%s: gap: offset %d, but %d bytes were received", method, off, c.inOff)}
	case method == "tcp/eof":
		if off != c.inOff {
			return &flow.Reset{Code: flow.CodeProtocolError, Message: fmt.Sprintf("tcp/eof: offset %d, but %d bytes were received", off, c.inOff)}
		}
		c.inEOF, it.eof = true, true
	default:
		if skip := c.inOff - off; skip > 0 {
			data = data[min(skip, int64(len(data))):] // already seen: suppressed
		}
		c.inOff += int64(len(data))
		it.data, it.buf = data, buf
	}
	c.wq = append(c.wq, it)
	select {
	case c.wsig <- struct{}{}:
	default:
	}
	return nil
}

// Request answers no kind requests: a TCP channel has none.
func (s *Sub) Request(method string, _ json.RawMessage) (any, error) {
	return nil, &flow.Error{Code: flow.ErrCodeMethodNotFound, Message: "method not found on a tcp channel: " + strconv.Quote(method)}
}

// End is superseded, tcp-reset, or channel-closed once the channel ended.
func (s *Sub) End() *flow.Reset {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case s.end != nil:
		return s.end
	case !s.ready:
		return nil // a pending subscribe is answered by Ready
	case c.reset != nil:
		return c.reset
	case c.ended:
		return &flow.Reset{Code: flow.CodeChannelClosed, Message: "the tcp channel has ended"}
	}
	return nil
}

// Unsubscribed ends the channel when its consumer unsubscribes: the
// client is done with it, so it is not retained for a resume (that is for
// a lost connection). After tcp/closed the socket has closed both ways;
// before it, bytes may be in flight either way and the target gets a
// reset (RST), as from a local socket closed with unread data.
func (s *Sub) Unsubscribed() {
	c := s.c
	c.mu.Lock()
	if s != c.holder || c.ended {
		c.mu.Unlock()
		return
	}
	abort := !c.closedOK
	conn := c.conn
	c.mu.Unlock()
	if abort && conn != nil {
		_ = conn.SetLinger(0)
	}
	c.log.Info("tcp channel closed by its consumer", "abort", abort)
	c.end()
}

// Stats returns the subscriber's counters.
func (s *Sub) Stats() flow.SubscriberStats {
	st := s.stats
	c := s.c
	c.mu.Lock()
	if s == c.holder {
		for _, b := range c.pend {
			st.Queued += int64(len(b))
		}
	}
	c.mu.Unlock()
	return st
}

// Close lets go of the channel: a holder's leaving starts the retention
// timer (or, after a reset, ends the channel) and lets a waiting resume
// take the lease.
func (s *Sub) Close() {
	c := s.c
	c.mu.Lock()
	if s.closed {
		c.mu.Unlock()
		return
	}
	s.closed = true
	if c.waiting == s {
		c.waiting = nil
	}
	var w *Sub
	finish := false
	if c.holder == s {
		c.holder = nil
		w = c.waiting
		switch {
		case c.ended:
			// The Sender that was lent the journal has closed this
			// subscription's stream: its memory can go back.
			c.discardJournal()
		case c.reset != nil:
			finish = true
		case w == nil:
			c.startRetain()
		}
	}
	c.mu.Unlock()
	if finish {
		c.end()
	}
	wake(w)
}
