package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
	"unsafe"

	"github.com/coder/websocket"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/internal/spare"
	"github.com/ahp-dev/ahpd/internal/wire"
)

// A TCPStream is the client end of one TCP channel (PROTOCOL.md §8): a
// byte stream each way, lossless across reconnects.
//
// Host→client: tcp/data messages are reassembled by one flow.Receiver
// kept for the stream's life, decoded into a buffer, and released (so
// credited) only once Read has handed their bytes to the caller; the
// window the stream granted therefore bounds that buffer. Offsets are
// checked: bytes at offsets already received are suppressed, a gap fails
// the stream.
//
// Client→host: Write turns bytes into tcp/input messages, each given its
// id, journal position and offset once and retained until the host's
// credit covers it; a message may join the journal only while the
// journal's uncredited bytes are below the host's window, which bounds
// it. A writer goroutine per connection frames the journal's messages
// under the host's limits, credit first.
//
// When the connection is lost, the stream dials again (with backoff, for
// a bounded time) and subscribes with resume: the host states what it
// accepted and released of the client's messages, the stream resends what
// follows with the same ids and offsets, and the host replays what
// follows the stream's own accepted position (§8). Its window counters
// continue in the journal's position space: a connection's SendWindow
// counts from the host's released position (base).
//
// Concurrency: Read, Write (with CloseWrite) and Close may be called from
// different goroutines; Writes are serialized. One mutex, mu, guards the
// stream's state; the connection's reader (onFrame, onCredit, end), the
// writer goroutine and the callers take it and never hold it across I/O.
type TCPStream struct {
	opts   TCPOptions
	ctx    context.Context // ends the run loop (Close)
	cancel context.CancelFunc
	wg     sync.WaitGroup // the run loop and the writer goroutines
	wmu    sync.Mutex     // serializes Write and CloseWrite

	mu sync.Mutex // guards everything below
	// changed is closed and replaced when the state that Write, Close and
	// the writer goroutine wait on changes; readable when there is
	// something new for Read. Two channels, so that a message received
	// does not wake the writer and a credit due does not wake Read (each
	// wake-up costs a thread hand-off on a busy machine).
	changed  chan struct{}
	readable chan struct{}
	channel  string      // the channel URI (known after the first subscribe)
	cur      *tcpBinding // the subscription in use; nil between connections
	token    string      // the newest resume token
	err      error       // why the stream failed; sticky
	closed   bool        // Close was called

	// host→client
	recv         *flow.Receiver    // kept across connections
	in           []tcpChunk        // received messages not yet released, oldest first
	inPos        int               // bytes of in[0] already read
	inOff        int64             // decoded bytes received: the next offset expected
	inEOF        bool              // tcp/eof received
	remoteClosed bool              // tcp/closed received
	finished     bool              // tcp/closed released: the channel may end
	hostEnded    bool              // the host ended the channel after tcp/closed
	creditWant   int64             // the newest consumedBytes to announce
	tuner        *flow.WindowTuner // sizes recv's window (nil: the host takes no channel/window)
	spare        spare.List        // decode buffers of released chunks, for reuse
	outSpare     spare.List        // memory of credited tcp/input texts, for reuse

	// client→host
	out         []tcpOut           // the journal: started, not yet credited
	outLast     flow.Position      // the newest message in the journal
	outReleased flow.Position      // the newest message the host credited
	outOff      int64              // decoded bytes written: the next offset
	wrClosed    bool               // CloseWrite queued tcp/eof
	hostLimits  flow.ReceiveLimits // the host's receive limits in force
	chunk       int                // the most bytes one tcp/input carries

	stats TCPStats
}

// TCPOptions configure OpenTCP.
type TCPOptions struct {
	// Dial returns a live, initialized connection to the daemon
	// (required). It may hand the same connection to several streams
	// (see Redialer): a stream ends its own subscription but never closes
	// a connection.
	Dial func(ctx context.Context) (*Conn, error)
	// Channel is an existing TCP channel to serve (ahp-tcp:/ID). When it
	// is empty, the first subscribe creates a channel to Host:Port.
	Channel string
	Host    string
	Port    int
	// Receive are the host→client limits asked for; zero: sized from
	// the connection's round trip (AutoReceive).
	Receive flow.ReceiveLimits
	// WindowCeiling bounds the receive window when the stream tunes it
	// to the path (a host that takes channel/window): default
	// AutoWindowMax, lowered to the host's maximum.
	WindowCeiling int64
	// RequestTimeout bounds one dial and one subscribe; default 15 s. A
	// subscribe that times out drops its connection.
	RequestTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between reconnect
	// attempts, which doubles from the first to the second; defaults
	// 100 ms and 5 s. The first attempt is immediate.
	MinBackoff, MaxBackoff time.Duration
	// ReconnectBudget bounds how long a stream whose connection was lost
	// tries to resume before it fails; default 60 s, the daemon's default
	// tcpRetain, after which the channel is gone anyway.
	ReconnectBudget time.Duration
	// CloseTimeout bounds how long Close waits, once both halves are
	// closed, for the host to end the channel; default 5 s.
	CloseTimeout time.Duration
	// OnEvent, if set, is called from the stream's goroutine when the
	// connection is lost and when the stream resumed; it must not block.
	OnEvent func(TCPEvent)
}

func (o TCPOptions) withDefaults() TCPOptions {
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 15 * time.Second
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(5*time.Second, o.MinBackoff)
	}
	if o.ReconnectBudget <= 0 {
		o.ReconnectBudget = 60 * time.Second
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = 5 * time.Second
	}
	if o.WindowCeiling <= 0 {
		o.WindowCeiling = AutoWindowMax
	}
	return o
}

// The receive window of a TCP stream that asks for none (AutoReceive).
const (
	// AutoWindowMin is its floor: what a bulk stream has in flight on
	// loopback, ahead of an interactive neighbour's bytes on the same
	// connection. 512 KiB (192 KiB of data): on loopback a download
	// moves 0.53–0.62× a plain WebSocket relay's rate, against 0.43–0.57×
	// at 256 KiB, and an echo beside it keeps a p99 of 2.9–3.9 ms
	// (1.9–3.3 ms at 256 KiB; 5.4–6.5 ms at 1 MiB), on 2026-12-05.
	// docs/benchmarks.md, "TCP channels" and "What did not work, and why".
	AutoWindowMin = flow.OpeningMin
	// AutoWindowFloor is the least the stream's tuner lowers it to when
	// bytes queue on the path (flow.WindowTuner): 128 KiB, 48 KiB of data,
	// 4 ms of a 100 Mbit/s link, so that a keystroke's echo beside the
	// stream waits behind little. It starts at AutoWindowMin or more
	// and goes below it only on a path that queues.
	AutoWindowFloor = 128 << 10
	// AutoWindowMax is its ceiling: the memory one stream may make the
	// daemon hold in flight for it.
	AutoWindowMax = 16 << 20
	// AutoWindowRate is the window per second of round trip
	// (flow.OpeningRate): about 144 MiB/s of data for round trips up to
	// the ceiling's 42 ms.
	AutoWindowRate = flow.OpeningRate
)

// carriesOtherThanTCP reports whether c has (or is subscribing) a
// subscription that is not a TCP stream's: a terminal's or telemetry's.
func (c *Conn) carriesOtherThanTCP() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range []map[string]subscription{c.subs, c.psubs} {
		for _, s := range m {
			if _, ok := s.(*Sub); ok {
				return true
			}
		}
	}
	return false
}

// AutoReceive returns the receive limits a TCP stream asks for over a
// connection whose round trip is rtt, given the host's defaults and
// maximums from initialize: the default frame and message sizes and a
// window of rtt × AutoWindowRate within [AutoWindowMin, AutoWindowMax]
// and the host's maximum, so that a stream over a tunnel is not capped
// at window ÷ round trip (the host's default 1 MiB carries 384 KiB of
// data per round trip: under 8 MB/s at 50 ms). It returns zero limits
// (the host's defaults) when the host stated no defaults.
func AutoReceive(defaults, maximums flow.ReceiveLimits, rtt time.Duration) flow.ReceiveLimits {
	w := min(flow.OpeningWindow(rtt), AutoWindowMax)
	return WithWindow(defaults, maximums, (w+64<<10-1)&^(64<<10-1))
}

// WithWindow returns the host's default receive limits (from initialize)
// with a window of w, lowered to the host's maximum and raised to one
// frame so that the host takes it as it is; zero limits (the host's
// defaults) when the host stated no valid defaults.
func WithWindow(defaults, maximums flow.ReceiveLimits, w int64) flow.ReceiveLimits {
	if defaults.Validate() != nil {
		return flow.ReceiveLimits{}
	}
	if maximums.WindowBytes > 0 {
		w = min(w, maximums.WindowBytes)
	}
	limits := defaults
	limits.WindowBytes = max(w, defaults.MaximumFrameBytes)
	return limits
}

// TCPEventKind names a TCPEvent.
type TCPEventKind string

// Events of a TCPStream.
const (
	// TCPLost: the connection was lost (Err says how); the stream is
	// reconnecting.
	TCPLost TCPEventKind = "lost"
	// TCPResumed: the stream resumed on a new connection after Attempts
	// attempts.
	TCPResumed TCPEventKind = "resumed"
)

// TCPEvent reports a change of a stream's connection.
type TCPEvent struct {
	Kind     TCPEventKind
	Channel  string
	Err      error
	Attempts int
}

// TCPStats are a stream's counters.
type TCPStats struct {
	BytesRead    int64 // bytes Read returned
	BytesWritten int64 // bytes Write took
	Duplicates   int64 // received bytes at offsets already seen, suppressed
	Resumes      int64 // successful resumes
	Resent       int64 // client→host messages sent again after a resume
	// WindowChanges counts the channel/window the stream sent (its
	// receive window tuned to the path); HostWindowChanges those the
	// host sent for the other direction.
	WindowChanges     int64
	HostWindowChanges int64
}

// ErrSessionEnded means the daemon closed the connection on purpose (a
// kick, a revoked token: close 1008 with a reason that is not a
// connection's own trouble); coming back would undo the operator's
// decision, so the stream does not resume.
var ErrSessionEnded = errors.New("the daemon ended the session")

// sessionEndedError is ErrSessionEnded with the close that said so.
type sessionEndedError struct{ close websocket.CloseError }

func (e *sessionEndedError) Error() string {
	return fmt.Sprintf("%v (%s)", ErrSessionEnded, e.close.Reason)
}

func (e *sessionEndedError) Unwrap() []error { return []error{ErrSessionEnded, e.close} }

// ResumeTimeoutError means a stream whose connection was lost could not
// resume within its TCPOptions.ReconnectBudget.
type ResumeTimeoutError struct {
	Budget   time.Duration // TCPOptions.ReconnectBudget
	Attempts int
	Err      error // the last attempt's
}

func (e *ResumeTimeoutError) Error() string {
	return fmt.Sprintf("could not resume within %v (%d attempts): %v", e.Budget, e.Attempts, e.Err)
}

func (e *ResumeTimeoutError) Unwrap() error { return e.Err }

// ErrResumeMismatch means the host's resume positions do not fit the
// stream's journal: the stream cannot go on without losing or repeating
// bytes.
var ErrResumeMismatch = errors.New("resume: the host's positions do not match the stream's journal")

// tcpChunk is one received logical message, held until released.
type tcpChunk struct {
	data   []byte        // decoded tcp/data bytes, duplicates suppressed (nil for other messages)
	buf    []byte        // the memory data is in, reused once the chunk is released
	end    flow.Position // the message's end, to release
	closed bool          // tcp/closed
}

// tcpOut is one journaled client→host message.
type tcpOut struct {
	id, start, end int64 // message id and journal positions
	class          flow.Class
	text           string
	plain          [2]int // text[plain[0]:plain[1]] is base64: nothing to escape (flow.Message.PlainFrom)
	mem            []byte // text's memory when the stream may reuse it once the host credits it
}

// OpenTCP subscribes to (or creates) a TCP channel over a connection
// from opts.Dial and returns the stream. Its errors are the host's
// (-32003 not allowed, -32008 connect failed, -32007 busy, …) as *Error,
// or the dial's.
func OpenTCP(ctx context.Context, opts TCPOptions) (*TCPStream, error) {
	if opts.Dial == nil {
		return nil, errors.New("client: TCPOptions.Dial is required")
	}
	if opts.Channel == "" && (opts.Host == "" || opts.Port < 1 || opts.Port > 65535) {
		return nil, errors.New("client: TCPOptions needs Channel, or Host and a Port in 1–65535")
	}
	opts = opts.withDefaults()
	s := &TCPStream{opts: opts, channel: opts.Channel, changed: make(chan struct{}), readable: make(chan struct{}),
		// A bulk stream's messages reuse memory; an idle one pins at
		// most 2 × 4 MiB.
		spare: spare.List{Count: 4, MaxCap: 1 << 20}, outSpare: spare.List{Count: 4, MaxCap: 1 << 20}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	rctx, cancel := context.WithTimeout(ctx, opts.RequestTimeout)
	b, err := s.attempt(rctx, false)
	cancel()
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.cancel()
		if b != nil {
			s.leave(b)
		}
		s.wg.Wait()
		return nil, err
	}
	s.wg.Go(func() { s.run(b) })
	return s, nil
}

// ReceiveLimits returns the host→client limits in force, as the first
// subscribe negotiated them (they hold across resumes).
func (s *TCPStream) ReceiveLimits() flow.ReceiveLimits {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recv == nil {
		return flow.ReceiveLimits{}
	}
	return s.recv.Limits()
}

// HostWindow returns the host's receive window in force for the stream's
// client→host data (its channel/window changes it).
func (s *TCPStream) HostWindow() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hostLimits.WindowBytes
}

// Channel returns the channel's URI.
func (s *TCPStream) Channel() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.channel
}

// Stats returns the stream's counters.
func (s *TCPStream) Stats() TCPStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Err returns why the stream failed, or nil.
func (s *TCPStream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Read reads bytes the target sent. It returns io.EOF after the target's
// tcp/eof and every byte before it, and the stream's error once it failed
// (a reset is a *ResetError with code tcp-reset, wrapped): a failure
// discards what was buffered, as a reset socket does.
func (s *TCPStream) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		switch {
		case s.err != nil:
			return 0, s.err
		case s.closed:
			return 0, net.ErrClosed
		case len(s.in) > 0:
			// popLocked leaves a chunk with unread bytes at the head.
			n := copy(p, s.in[0].data[s.inPos:])
			s.inPos += n
			s.stats.BytesRead += int64(n)
			s.popLocked()
			return n, nil
		case s.inEOF:
			return 0, io.EOF
		}
		s.waitReadLocked()
	}
}

// WriteTo writes the bytes the target sends to w until tcp/eof (then it
// returns nil) or an error, as io.Copy does with Read but without the
// copy: each message's bytes go to w from the stream's own memory, and
// are released (credited) once w took them. It must not run alongside
// Read.
func (s *TCPStream) WriteTo(w io.Writer) (int64, error) {
	var total int64
	// What one write takes: at most len(vec) messages. bufs is declared
	// once: WriteTo takes its address, so it lives on the heap.
	var vec [8][]byte
	var bufs net.Buffers
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		switch {
		case s.err != nil:
			return total, s.err
		case s.closed:
			return total, net.ErrClosed
		case len(s.in) > 0:
			// popLocked leaves a chunk with unread bytes at the head;
			// only Read and WriteTo pop chunks, so these stay while w
			// writes them. The chunks received by now go in one write
			// (writev, when w is a socket): one wake-up of the reader
			// at the other end instead of one per message.
			bufs = append(vec[:0], s.in[0].data[s.inPos:])
			for _, c := range s.in[1:min(len(s.in), len(vec))] {
				bufs = append(bufs, c.data)
			}
			s.mu.Unlock()
			n64, err := bufs.WriteTo(w)
			s.mu.Lock()
			clear(vec[:])
			total += n64
			if s.err != nil || s.closed || len(s.in) == 0 {
				if err != nil {
					return total, err
				}
				continue // failed meanwhile: what was buffered is gone
			}
			// What w took is read, also when it failed after some.
			s.stats.BytesRead += n64
			for n := int(n64); n > 0 && len(s.in) > 0; {
				k := min(n, len(s.in[0].data)-s.inPos)
				s.inPos += k
				n -= k
				s.popLocked()
			}
			if err != nil {
				return total, err
			}
			continue
		case s.inEOF:
			return total, nil
		}
		s.waitReadLocked()
	}
}

// Write sends p to the target. It returns once every byte is in the
// journal (it is then sent, and resent after a reconnect, until the host
// credits it), waiting while the host's window is full.
func (s *TCPStream) Write(p []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	total := 0
	for len(p) > 0 {
		s.mu.Lock()
		for {
			if err := s.writeErrLocked(); err != nil {
				s.mu.Unlock()
				return total, err
			}
			if s.outLast.Position-s.outReleased.Position < s.hostLimits.WindowBytes {
				break
			}
			s.waitLocked()
		}
		n, off := min(len(p), s.chunk), s.outOff
		mem := s.outSpare.Get()
		s.mu.Unlock()
		// Only Write and CloseWrite (serialized by wmu) change outOff, so
		// the message can be encoded without the lock.
		mem, plain := appendTCPInput(mem[:0], off, p[:n])
		s.mu.Lock()
		if err := s.writeErrLocked(); err != nil {
			s.mu.Unlock()
			return total, err
		}
		s.appendOutLocked(unsafe.String(unsafe.SliceData(mem), len(mem)), flow.Data)
		last := &s.out[len(s.out)-1]
		last.plain, last.mem = plain, mem
		s.outOff += int64(n)
		s.stats.BytesWritten += int64(n)
		s.mu.Unlock()
		p, total = p[n:], total+n
	}
	return total, nil
}

// CloseWrite half-closes the stream: tcp/eof follows the bytes written.
func (s *TCPStream) CloseWrite() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wrClosed {
		return nil
	}
	if err := s.writeErrLocked(); err != nil {
		return err
	}
	s.wrClosed = true
	s.appendOutLocked(fmt.Sprintf(`{"jsonrpc":"2.0","method":"tcp/eof","params":{"offset":%d}}`, s.outOff), flow.Lifecycle)
	return nil
}

// Close ends the stream and waits for its goroutines. When both halves
// are closed it first waits (CloseTimeout at most) for the host to end
// the channel; otherwise it leaves the channel at once, and the daemon
// closes the socket when its retention (tcpRetain) expires. It is
// idempotent.
func (s *TCPStream) Close() error {
	s.mu.Lock()
	graceful := !s.closed && s.err == nil && s.wrClosed && s.inEOF
	if graceful {
		t := time.AfterFunc(s.opts.CloseTimeout, func() {
			s.mu.Lock()
			s.broadcastLocked()
			s.mu.Unlock()
		})
		deadline := time.Now().Add(s.opts.CloseTimeout)
		for !s.hostEnded && s.err == nil && time.Now().Before(deadline) {
			s.waitLocked()
		}
		t.Stop()
	}
	s.mu.Unlock()
	s.Abort()
	s.wg.Wait()
	return nil
}

// Abort ends the stream without waiting: Read and Write return
// net.ErrClosed, and the stream's goroutines leave the channel. Close
// waits for them.
func (s *TCPStream) Abort() {
	s.mu.Lock()
	s.closed = true
	s.broadcastLocked()
	s.mu.Unlock()
	s.cancel()
}

func (s *TCPStream) writeErrLocked() error {
	switch {
	case s.err != nil:
		return s.err
	case s.closed:
		return net.ErrClosed
	case s.wrClosed:
		return errors.New("tcp stream: write after CloseWrite")
	}
	return nil
}

// waitLocked waits for the next change of state; mu is released while
// waiting.
func (s *TCPStream) waitLocked() {
	ch := s.changed
	s.mu.Unlock()
	<-ch
	s.mu.Lock()
}

// waitReadLocked is waitLocked for Read: it waits for the next message
// (or the stream's end).
func (s *TCPStream) waitReadLocked() {
	ch := s.readable
	s.mu.Unlock()
	<-ch
	s.mu.Lock()
}

// broadcastLocked wakes every waiter.
func (s *TCPStream) broadcastLocked() {
	s.wakeLocked()
	s.wakeReadLocked()
}

// wakeLocked wakes Write, Close and the writer goroutine.
func (s *TCPStream) wakeLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// wakeReadLocked wakes Read.
func (s *TCPStream) wakeReadLocked() {
	close(s.readable)
	s.readable = make(chan struct{})
}

func (s *TCPStream) failLocked(err error) {
	if s.err == nil {
		s.err = err
	}
	s.broadcastLocked()
}

// appendOutLocked journals one client→host message.
func (s *TCPStream) appendOutLocked(text string, class flow.Class) {
	e := tcpOut{id: s.outLast.MessageID + 1, start: s.outLast.Position, class: class, text: text}
	e.end = e.start + 2*int64(len(text)) // tcp/input and tcp/eof are ASCII
	s.out = append(s.out, e)
	s.outLast = flow.Position{MessageID: e.id, Position: e.end}
	s.wakeLocked()
}

// releaseOutLocked drops the journaled messages that end at or before
// pos, which the host credited.
func (s *TCPStream) releaseOutLocked(pos int64) {
	for len(s.out) > 0 && s.out[0].end <= pos {
		s.outReleased = flow.Position{MessageID: s.out[0].id, Position: s.out[0].end}
		if !s.framingLocked(s.out[0].id) {
			s.outSpare.Put(s.out[0].mem)
		}
		s.out[0] = tcpOut{}
		s.out = s.out[1:]
	}
	s.wakeLocked()
}

// outBoundaryLocked reports whether p is the end of a journaled message
// or the released position.
func (s *TCPStream) outBoundaryLocked(p flow.Position) bool {
	if p == s.outReleased {
		return true
	}
	for _, e := range s.out {
		if e.end >= p.Position {
			return e.end == p.Position && e.id == p.MessageID
		}
	}
	return false
}

// popLocked releases the messages at the head of the buffer that are
// read (or carry no bytes), and sets the credit to announce when the
// receiver's policy says so (the writer goroutine sends it).
func (s *TCPStream) popLocked() {
	var last flow.Position
	popped := false
	finished := s.finished
	for len(s.in) > 0 && s.inPos >= len(s.in[0].data) {
		if s.in[0].closed {
			s.finished = true
		}
		last = s.in[0].end
		s.spare.Put(s.in[0].buf)
		s.in[0] = tcpChunk{}
		s.in = s.in[1:]
		s.inPos, popped = 0, true
	}
	if !popped {
		return
	}
	before := s.recv.Released().Position
	consumed, send, err := s.recv.Release(last)
	if err != nil {
		s.failLocked(fmt.Errorf("tcp stream: %w", err)) // a broken internal invariant
		return
	}
	windowChanged := false
	if s.tuner != nil && s.cur != nil {
		// The writer announces a changed window.
		if _, windowChanged = s.cur.conn.tune(s.tuner, s.recv, last.Position-before); windowChanged {
			s.stats.WindowChanges++
		}
	}
	if send {
		// Also for tcp/closed: the host ends the channel once the
		// client released it (§8).
		s.creditWant = consumed
	}
	switch {
	case s.finished != finished:
		s.broadcastLocked() // wakes the writer too
	case send || windowChanged:
		s.wakeLocked()
	}
}

// receiveLocked takes one complete host→client message.
func (s *TCPStream) receiveLocked(text []byte, end flow.Position) error {
	method, params := splitEnvelope(text)
	c := tcpChunk{end: end}
	switch method {
	case "tcp/data":
		off, data, err := parseTCPData(s.spare.Get(), params)
		if err != nil {
			return err
		}
		c.buf = data
		switch {
		case s.inEOF:
			return fmt.Errorf("tcp/data after tcp/eof")
		case off > s.inOff:
			return fmt.Errorf("tcp/data: gap: offset %d, but %d bytes were received", off, s.inOff)
		}
		skip := min(s.inOff-off, int64(len(data)))
		s.stats.Duplicates += skip
		c.data = data[skip:]
		s.inOff += int64(len(c.data))
	case "tcp/eof":
		off, err := parseOffset(params)
		if err != nil {
			return err
		}
		if off != s.inOff {
			return fmt.Errorf("tcp/eof: offset %d, but %d bytes were received", off, s.inOff)
		}
		s.inEOF = true
	case "tcp/closed":
		s.remoteClosed = true
		c.closed = true
	default:
		// channel/ready and messages this client does not know carry no
		// bytes: released in order.
	}
	s.in = append(s.in, c)
	s.popLocked()
	if c.data != nil {
		s.wakeReadLocked()
	} else {
		s.broadcastLocked()
	}
	return nil
}

// run is the stream's goroutine: it watches the subscription in use and,
// when its connection is lost, resumes on a new one.
func (s *TCPStream) run(b *tcpBinding) {
	for {
		select {
		case <-b.done:
		case <-s.ctx.Done():
			s.leave(b)
			return
		}
		s.mu.Lock()
		why := b.endErr
		stop := s.closed || s.err != nil || s.hostEnded || s.finished
		if !stop {
			if err := lostFor(why); err != nil {
				s.failLocked(err)
				stop = true
			}
		}
		channel := s.channel
		s.mu.Unlock()
		if stop {
			return
		}
		s.event(TCPEvent{Kind: TCPLost, Channel: channel, Err: why})
		nb, attempts, err := s.reconnect()
		if err != nil {
			s.mu.Lock()
			if !s.closed {
				s.failLocked(err)
			}
			s.mu.Unlock()
			return
		}
		b = nb
		s.mu.Lock()
		s.stats.Resumes++
		s.mu.Unlock()
		s.event(TCPEvent{Kind: TCPResumed, Channel: channel, Attempts: attempts})
	}
}

func (s *TCPStream) event(e TCPEvent) {
	if s.opts.OnEvent != nil {
		s.opts.OnEvent(e)
	}
}

// lostFor returns the stream's error for a subscription that ended with
// why, or nil when a resume may bring it back (the connection was lost).
func lostFor(why error) error {
	var re *ResetError
	if errors.As(why, &re) {
		switch re.Code {
		case flow.CodeTCPReset:
			return fmt.Errorf("the target reset the connection: %w", re)
		case flow.CodeSuperseded:
			return fmt.Errorf("another client resumed this channel: %w", re)
		case flow.CodeChannelClosed:
			return fmt.Errorf("the channel was closed before its end: %w", re)
		}
		return fmt.Errorf("the daemon reset the subscription: %w", re)
	}
	var ce websocket.CloseError
	if errors.As(why, &ce) && ce.Code == websocket.StatusPolicyViolation && !wire.Transient(ce.Reason) {
		// An operator's decision (a kick, a revoked token): coming back
		// would undo it. The close stays in the chain for the reason.
		return &sessionEndedError{ce}
	}
	return nil
}

// reconnect resumes the stream on a new connection, retrying with
// backoff within the budget.
func (s *TCPStream) reconnect() (*tcpBinding, int, error) {
	start := time.Now()
	backoff := s.opts.MinBackoff
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(s.ctx, s.opts.RequestTimeout)
		b, err := s.attempt(ctx, true)
		cancel()
		if err == nil {
			return b, attempt, nil
		}
		if s.ctx.Err() != nil {
			return nil, attempt, net.ErrClosed
		}
		if permanentTCP(err) {
			return nil, attempt, fmt.Errorf("resume: %w", err)
		}
		if time.Since(start)+backoff > s.opts.ReconnectBudget {
			return nil, attempt, &ResumeTimeoutError{Budget: s.opts.ReconnectBudget, Attempts: attempt, Err: err}
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			return nil, attempt, net.ErrClosed
		}
		backoff = min(2*backoff, s.opts.MaxBackoff)
	}
}

// permanentTCP reports errors a further attempt cannot fix.
func permanentTCP(err error) bool {
	if errors.Is(err, ErrResumeMismatch) {
		return true
	}
	var e *Error
	if errors.As(err, &e) {
		switch e.Code {
		case flow.ErrCodeUnauthorized, flow.ErrCodeForbidden, flow.ErrCodeChannelNotFound, flow.ErrCodeResumeFailed:
			return true
		}
	}
	return false
}

// attempt dials and subscribes once; resume asks for the stream's
// channel from its positions. A binding returned with an error is routed
// and must be left.
func (s *TCPStream) attempt(ctx context.Context, resume bool) (*tcpBinding, error) {
	conn, err := s.opts.Dial(ctx)
	if err != nil {
		return nil, err
	}
	b := &tcpBinding{s: s, conn: conn, done: make(chan struct{})}
	params := map[string]any{}
	s.mu.Lock()
	switch {
	case resume:
		// No subscription is in use: the receiver is ours alone.
		s.recv.Resume()
		params["channel"] = s.channel
		params["flowControl"] = map[string]any{"receive": s.recv.Limits()}
		params["resume"] = flow.ResumeRequest{Token: s.token, Accepted: s.recv.Accepted(), Released: s.recv.Released()}
	case s.opts.Channel != "":
		params["channel"] = s.opts.Channel
	default:
		params["create"] = map[string]any{"type": "tcp", "host": s.opts.Host, "port": s.opts.Port}
	}
	if !resume {
		limits := s.opts.Receive
		if limits == (flow.ReceiveLimits{}) {
			fc := conn.init.Capabilities.FlowControl
			if conn.WindowUpdates() && conn.carriesOtherThanTCP() {
				// The stream tunes its window (flow.WindowTuner) and
				// shares its connection with a terminal or telemetry
				// (whose frames would wait behind its bytes on the
				// path): it opens at AutoWindowMin and slow-starts,
				// rather than putting a round trip's guess in flight at
				// once, which at 200 ms queued a second of the link
				// ahead of every keystroke's echo. A connection of TCP
				// streams only (ahpctl forward's) opens at the guess:
				// slow start from 512 KiB cost a 32 MiB download at
				// 200 ms a quarter of its rate (docs/benchmarks.md,
				// "Real links").
				limits = WithWindow(fc.ClientDefaults, fc.Maximums, AutoWindowMin)
			} else {
				limits = AutoReceive(fc.ClientDefaults, fc.Maximums, conn.RTT())
			}
		}
		if limits != (flow.ReceiveLimits{}) {
			params["flowControl"] = map[string]any{"receive": limits}
		}
	}
	s.mu.Unlock()
	err = conn.call(ctx, "subscribe", params, nil, b)
	if err != nil && ctx.Err() != nil {
		// The answer may still come, and its subscription would hold the
		// channel: this connection is not trusted further. Once its
		// reader has ended, no init can follow.
		s.mu.Lock()
		routed := b.id != ""
		s.mu.Unlock()
		if !routed {
			conn.abort()
			<-conn.Done()
		}
	}
	s.mu.Lock()
	routed, initErr := b.id != "", b.initErr
	s.mu.Unlock()
	switch {
	case !routed && err == nil:
		return nil, initErr
	case !routed:
		return nil, err // refused, or the connection ended
	case initErr != nil:
		return b, initErr
	}
	// Routed and attached (a ctx error that raced the answer is moot);
	// a reset right after the result has ended b already, which run sees.
	s.wg.Go(b.writeLoop)
	return b, nil
}

// leave ends b's subscription if it is still live: unsubscribe, bounded.
func (s *TCPStream) leave(b *tcpBinding) {
	s.mu.Lock()
	live := b.endErr == nil && b.id != ""
	b.stopWatchLocked()
	if s.cur == b {
		s.cur = nil
		s.broadcastLocked()
	}
	s.mu.Unlock()
	b.conn.unroute(b.id)
	if !live {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = b.conn.Call(ctx, "unsubscribe", map[string]string{"subscriptionId": b.id}, nil)
}

// attachLocked makes b the subscription in use, reconciling the host's
// resume positions with the journal.
func (s *TCPStream) attachLocked(b *tcpBinding, res *wire.SubscribeResult) error {
	if s.closed || s.err != nil {
		return net.ErrClosed
	}
	if res.Resume == nil || res.Resume.Token == "" {
		return errors.New("subscribe: the result has no resume token (not a TCP channel?)")
	}
	fc := res.FlowControl
	if err := fc.HostReceive.Validate(); err != nil {
		return fmt.Errorf("subscribe: hostReceive: %w", err)
	}
	if s.recv == nil {
		if err := fc.ClientReceive.Validate(); err != nil {
			return fmt.Errorf("subscribe: clientReceive: %w", err)
		}
		s.recv = flow.NewReceiver(fc.ClientReceive)
	}
	if s.channel == "" {
		if res.Channel == "" {
			return errors.New("subscribe {create}: the result names no channel")
		}
		s.channel = res.Channel
	}
	ha, hr := res.Resume.Accepted, res.Resume.Released
	switch {
	case hr.Position > ha.Position || hr.MessageID > ha.MessageID:
		return fmt.Errorf("%w: released %v beyond accepted %v", ErrResumeMismatch, hr, ha)
	case ha.Position > s.outLast.Position || ha.MessageID > s.outLast.MessageID:
		return fmt.Errorf("%w: accepted %v beyond the last message sent %v", ErrResumeMismatch, ha, s.outLast)
	case hr.Position < s.outReleased.Position:
		return fmt.Errorf("%w: released %v older than credited %v", ErrResumeMismatch, hr, s.outReleased)
	case !s.outBoundaryLocked(ha) || !s.outBoundaryLocked(hr):
		return fmt.Errorf("%w: accepted %v or released %v is not a message boundary", ErrResumeMismatch, ha, hr)
	}
	s.releaseOutLocked(hr.Position)
	// The new window counts from the host's released position; what the
	// host accepted and has not released is outstanding in it, and what
	// follows is sent again.
	win := flow.NewSendWindow(fc.HostReceive)
	for _, e := range s.out {
		if e.end > ha.Position {
			s.stats.Resent++
			continue
		}
		if err := win.Start(e.end-e.start, e.class); err != nil {
			return fmt.Errorf("%w: message %d no longer fits the host's limits: %v", ErrResumeMismatch, e.id, err)
		}
		win.Reserve(e.end - e.start)
		win.Finish()
	}
	b.win, b.base, b.nextSend = win, hr.Position, ha.MessageID+1
	b.creditSent = s.recv.Announced()
	b.windowSent = s.recv.Limits().WindowBytes // what the subscribe asked for
	if b.conn.WindowUpdates() {
		if s.tuner == nil {
			lim := s.recv.Limits()
			s.tuner = flow.NewWindowTuner(b.conn.AutoWindowConfig(lim, AutoWindowFloor, s.opts.WindowCeiling), lim.WindowBytes)
			b.conn.seedRTT(s.tuner)
		}
		tuner := s.tuner
		b.unwatch = b.conn.watchRTT(&rttWatch{sample: func(now time.Time, rtt time.Duration) {
			s.mu.Lock()
			tuner.OnRTT(now, rtt)
			s.mu.Unlock()
		}})
	}
	s.token = res.Resume.Token
	s.hostLimits = fc.HostReceive
	s.chunk = tcpInputBytes(win.PullSize())
	s.cur = b
	s.broadcastLocked()
	return nil
}

// tcpBinding is a stream's subscription on one connection.
type tcpBinding struct {
	s    *TCPStream
	conn *Conn
	done chan struct{} // closed when the subscription has ended (endErr)

	// Set by init on the reader goroutine before the subscribe returns;
	// read-only after.
	id string
	fc FlowControl

	// guarded by s.mu
	initErr    error
	endErr     error
	win        *flow.SendWindow // counts from base
	base       int64            // the journal position of the window's 0
	nextSend   int64            // id of the next message to frame
	creditSent int64            // the newest consumedBytes sent on this connection
	windowSent int64            // the receive window announced on this connection
	unwatch    func()           // ends the round-trip samples (autowindow.go)
	frag       flow.Fragmenter
	framing    bool // a message is being framed
}

func (b *tcpBinding) init(result json.RawMessage) string {
	var res wire.SubscribeResult
	err := json.Unmarshal(result, &res)
	if err == nil && res.SubscriptionID == "" {
		err = errors.New("no subscriptionId")
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		b.initErr = fmt.Errorf("subscribe: invalid result: %w", err)
		return ""
	}
	b.id, b.fc = res.SubscriptionID, res.FlowControl
	b.initErr = s.attachLocked(b, &res)
	return b.id
}

func (b *tcpBinding) onFrame(size int64, f *flow.Frame) {
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != b {
		return
	}
	text, end, err := s.recv.Frame(size, f)
	if err == nil && text != nil {
		err = s.receiveLocked(text, end)
	}
	if err != nil {
		s.failLocked(fmt.Errorf("the daemon broke the protocol: %w", err))
	}
}

// stopWatchLocked ends b's round-trip samples (s.mu held).
func (b *tcpBinding) stopWatchLocked() {
	if b.unwatch != nil {
		b.unwatch()
		b.unwatch = nil
	}
}

// onWindow takes the host's channel/window for client→host data: new
// tcp/input messages start under it, and Write journals up to it.
func (b *tcpBinding) onWindow(n int64) {
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != b || b.win == nil || n < b.win.Limits().MaximumFrameBytes {
		return
	}
	b.win.SetWindowBytes(n)
	s.hostLimits.WindowBytes = n
	s.chunk = tcpInputBytes(b.win.PullSize())
	s.stats.HostWindowChanges++
	s.broadcastLocked()
}

func (b *tcpBinding) onCredit(consumed int64) {
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != b {
		return
	}
	advanced, err := b.win.Credit(consumed - b.base)
	if err != nil {
		s.failLocked(fmt.Errorf("the daemon sent invalid credit: %w", err))
		return
	}
	if advanced {
		s.releaseOutLocked(consumed)
	}
}

func (b *tcpBinding) end(err error) {
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.endErr != nil {
		return
	}
	if err == nil {
		err = errors.New("connection closed")
	}
	var re *ResetError
	if errors.As(err, &re) && re.Code == flow.CodeChannelClosed && s.remoteClosed {
		s.hostEnded = true // the normal end after tcp/closed (§8)
	}
	b.endErr = err
	close(b.done)
	b.stopWatchLocked()
	if s.cur == b {
		s.cur = nil
	}
	s.broadcastLocked()
}

// writeLoop sends b's credit and frames while b is the subscription in
// use.
func (b *tcpBinding) writeLoop() {
	s := b.s
	var buf []byte
	for {
		s.mu.Lock()
		var msg []byte
		for msg == nil {
			if s.cur != b {
				s.mu.Unlock()
				return
			}
			msg = b.nextLocked(buf[:0])
			if msg == nil {
				s.waitLocked()
			}
		}
		s.mu.Unlock()
		if err := b.conn.SendRaw(context.Background(), msg); err != nil {
			// The reader reports the connection's end; make sure it ends.
			b.conn.abort()
			return
		}
		buf = msg
	}
}

// nextLocked returns the next message to send on b, or nil: credit
// first, then the frames of the journal's messages from nextSend, a new
// message only while the window lets it start (§5).
func (b *tcpBinding) nextLocked(dst []byte) []byte {
	s := b.s
	if w := s.recv.Limits().WindowBytes; w != b.windowSent && s.tuner != nil {
		b.windowSent = w
		return flow.AppendWindow(dst, s.channel, b.id, w)
	}
	if s.creditWant > b.creditSent {
		b.creditSent = s.creditWant
		return flow.AppendCredit(dst, s.channel, b.id, s.creditWant)
	}
	if !b.framing {
		if len(s.out) == 0 {
			return nil
		}
		i := b.nextSend - s.out[0].id
		if i < 0 || i >= int64(len(s.out)) {
			return nil
		}
		e := &s.out[i]
		if e.class == flow.Data && !b.win.MayStart() {
			return nil
		}
		err := b.win.Start(e.end-e.start, e.class)
		if err == nil {
			err = b.frag.Reset(s.channel, b.id, e.id, e.text, b.fc.HostReceive.MaximumFrameBytes)
			b.frag.Plain(e.plain[0], e.plain[1])
		}
		if err != nil {
			s.failLocked(fmt.Errorf("tcp stream: message %d: %w", e.id, err))
			return nil
		}
		b.framing = true
	}
	frame, payload, final := b.frag.Next(dst)
	b.win.Reserve(payload)
	if final {
		b.win.Finish()
		b.framing = false
		b.nextSend++
	}
	return frame
}

// framingLocked reports whether the subscription in use is cutting
// message id into frames now (its text must stay as it is).
func (s *TCPStream) framingLocked(id int64) bool {
	b := s.cur
	return b != nil && b.framing && b.nextSend == id
}
