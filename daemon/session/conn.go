package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/coder/websocket"

	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/daemon/events"
	"github.com/ahp-dev/ahpd/daemon/registry"
	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/internal/afterfunc"
	"github.com/ahp-dev/ahpd/internal/spare"
	"github.com/ahp-dev/ahpd/internal/wire"
)

// closeError ends a connection with a WebSocket close code.
type closeError struct {
	code    websocket.StatusCode
	reason  string
	stalled bool // the socket takes no more bytes: nothing more is flushed to it
}

func (e *closeError) Error() string { return fmt.Sprintf("close %d: %s", e.code, e.reason) }

func closeWith(code websocket.StatusCode, format string, args ...any) error {
	return &closeError{code: code, reason: fmt.Sprintf(format, args...)}
}

// stallClose is the 1008 close of a stalled socket (its reason starts with
// wire.ReasonOutputStalled).
func stallClose(format string, args ...any) error {
	return &closeError{code: websocket.StatusPolicyViolation, reason: fmt.Sprintf(format, args...), stalled: true}
}

// transport is what a connection needs of its WebSocket (a
// *websocket.Conn; tests use an in-memory one). Read and Write are called
// by one goroutine each, Ping by a third; Close and CloseNow may come from
// any goroutine and end pending calls.
type transport interface {
	Read(ctx context.Context) (websocket.MessageType, []byte, error)
	Write(ctx context.Context, typ websocket.MessageType, p []byte) error
	// Ping sends a ping and waits for its pong.
	Ping(ctx context.Context) error
	// Close sends a close frame and waits (bounded) for the peer's.
	Close(code websocket.StatusCode, reason string) error
	// CloseNow drops the connection without a close frame.
	CloseNow() error
}

var _ transport = (*websocket.Conn)(nil)

// inbound is one WebSocket message from the reader goroutine.
type inbound struct {
	data     []byte
	binary   bool
	overflow bool // inbound messages waiting passed maxBufferedBytes
}

// release is a client→host message whose consumer is done with it.
type release struct {
	sub *subscription
	pos flow.Position
}

// subscription is one delivery generation on one channel. Owned by the
// connection's run loop, except inQueue which wake() guards with
// conn.wakeMu.
type subscription struct {
	id      string
	ch      *registry.Channel
	sub     flow.Subscriber
	stream  *flow.Stream // nil while pending
	ended   bool
	inQueue bool // guarded by conn.wakeMu

	// A pending subscription (no stream yet) waits for its Subscriber to
	// be Ready (a lease, a dial); its subscribe request is answered then.
	// It is in conn.pending, not conn.subs, so no message reaches it
	// before.
	reqID   json.RawMessage // the subscribe request's id
	send    flow.ReceiveLimits
	receive flow.ReceiveLimits
	created bool // the subscribe created the channel: the result names it

	// tuner sizes the host's receive window for the client's data
	// (a TCP channel's tcp/input) from what the host measures
	// (PROTOCOL.md §6, "Changing a window"); nil: fixed.
	tuner      *flow.WindowTuner
	tunedExtra int64 // the largest tuned window beyond the first one, taken from conn.queued

	// Audit of a recorded terminal (recordings.go): the bytes of input
	// this viewer sent while it recorded, and the recording its first
	// keystroke was recorded in ("" none yet).
	inputBytes   int64
	inputAudited string
}

// pending reports whether s waits for its Subscriber to be Ready.
func (s *subscription) pending() bool { return s.stream == nil }

// conn is one viewer connection. Three goroutines serve it: the reader
// (WebSocket → inbox), the writer (out → WebSocket) and the run loop, which
// owns every other field and all flow state. A ping on a timer keeps it
// alive (startPings). All end when the connection ends, and serve waits
// for them.
type conn struct {
	srv    *Server
	ws     transport
	log    *slog.Logger
	id     string
	remote string
	wire   *countingConn // the socket's byte counts; nil if not ours
	bearer string        // token from the Authorization header, if any
	opened time.Time

	// channels/watch: the watcher goroutine (started by run, stopped and
	// waited for by serve) signals changed; run sends channels/changed at
	// most every channelsChangedEvery.
	watchStop   func()
	watchDone   chan struct{}
	watchWG     sync.WaitGroup
	changed     chan struct{}
	changedNext time.Time   // run's: the earliest next channels/changed
	changedTmr  *time.Timer // run's: re-signals a change held back
	changedHeld bool        // run's: a change waits for changedTmr

	// Owned by run.
	limits        config.Limits
	sender        *flow.Sender
	subs          map[string]*subscription
	pending       map[string]*subscription // subscribes waiting for Ready
	nextSub       int
	grant         auth.Grant
	attached      bool // grant is counted by auth.Tokens.Attach; Detach at close
	initialized   bool
	clientName    string
	clientVersion string
	// windowUpdates: the client said in initialize that it takes
	// channel/window from the host (PROTOCOL.md §6).
	windowUpdates bool
	// Round-trip samples for the tuned subscriptions (autowindow.go):
	// rttLoop pings while tunedCount > 0 and hands each round trip to
	// the run loop on rttSample; rttWake starts it; rttBusy is when a
	// tuned subscription last released bytes (unix nanoseconds).
	tuned      map[*subscription]struct{}
	tunedCount atomic.Int32
	rttSample  chan time.Duration
	rttWake    chan struct{}
	rttBusy    atomic.Int64
	partial    int64 // bytes of incomplete client→host messages, all subscriptions
	fatal      error // set where a return value cannot carry it; run closes with it
	lastWrite  time.Time
	lastAlive  time.Time
	check      *time.Timer         // the next checkTimers; see checkBy
	checkAt    time.Time           // when check fires
	free       [maxFreeBufs][]byte // frame buffers to reuse, largest first (see getBuf)
	frame      flow.Frame
	// reassembly is the one client→host reassembly buffer the
	// connection keeps between messages, lent to the receiver of the
	// subscription whose frame starts a message (at most maxKeptBuf).
	reassembly []byte
	// queued is the budget of what kinds queue for this connection's
	// subscribers (flow.AttachRequest.Queue) and of its subscriptions'
	// state (subscriptionCost), queueMax bytes inside its token's budget;
	// made at initialize.
	queued      *flow.Budget
	queueMax    int64
	inbox       chan inbound         // reader → run
	inBytes     atomic.Int64         // bytes waiting in inbox (+1 KiB each)
	out         chan []byte          // run → writer
	batch       [][]byte             // pump's items of one pass, for out
	written     chan []byte          // writer → run: the slice it finished
	writeFailed chan struct{}        // closed by the writer when a write fails
	alive       chan struct{}        // pinger → run: a pong arrived
	pingFailed  chan error           // pinger → run: a ping failed (cap 1)
	kick        chan string          // control plane → run
	queries     chan chan ViewerInfo // control plane → run
	wakeSig     chan struct{}        // producers → run
	wakeMu      sync.Mutex           // guards woken, releases
	woken       []*subscription      // subscriptions whose Source has news
	releases    []release            // client→host messages consumed

	// Counters, read by the control plane.
	stats connStats

	// token is the credential's id and parent once attached, for the
	// control plane (kick revokes a reconnect token), and its grant, for
	// RecheckTokens.
	token atomic.Pointer[tokenRef]
	// muted is set when the connection's token was revoked or expired:
	// the writer writes nothing more but the close frame.
	muted atomic.Bool
	// budgeted: attachToken took the token's budget (releaseBudget at
	// close).
	budgeted bool
	// tokenDirty asks run to check its token again (a revocation); set
	// with a wakeSig.
	tokenDirty atomic.Bool
}

// tokenRef names the token a connection authenticated with.
type tokenRef struct {
	ID, Parent string
	grant      auth.Grant
}

type connStats struct {
	framesIn, framesOut, bytesIn, bytesOut atomic.Int64
	droppedNotifications                   atomic.Int64
	resets                                 atomic.Int64
	windowChanges                          atomic.Int64 // channel/window the host sent
}

func (c *conn) wake(s *subscription) {
	c.wakeMu.Lock()
	if !s.inQueue {
		s.inQueue = true
		c.woken = append(c.woken, s)
	}
	c.wakeMu.Unlock()
	select {
	case c.wakeSig <- struct{}{}:
	default:
	}
}

func (c *conn) released(s *subscription, p flow.Position) {
	c.wakeMu.Lock()
	c.releases = append(c.releases, release{s, p})
	c.wakeMu.Unlock()
	select {
	case c.wakeSig <- struct{}{}:
	default:
	}
}

// serve runs the connection until it ends and returns after every
// goroutine it started has stopped.
func (c *conn) serve(shutdown context.Context) {
	// The reader's hand-off to run and the pings get a context of their
	// own, ended only after the close below: the WebSocket library drops
	// the connection when a Read, Write or Ping context ends, and at
	// shutdown we want a 1001 close frame, not a dropped socket. The
	// Reads and Writes get one that never ends (ioWait): for one that
	// can, the library arms and disarms a context.AfterFunc around every
	// Read and Write, a few per keystroke and per frame. Nothing needs
	// it: a Read or Write blocked on the socket ends when the close below
	// closes the socket, which Close does once the close handshake is
	// done or its own timeouts (5 s to write the close frame, 5 s for the
	// peer's) have passed, and CloseNow (checkTimers' stall) at once.
	ioCtx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { c.readLoop(ioCtx) })
	wg.Go(c.writeLoop)
	stopPings := c.startPings(ioCtx)
	wg.Go(func() { c.rttLoop(ioCtx) })

	err := c.run(shutdown)
	c.stopWatch()
	if c.attached {
		c.srv.tokens.Detach(c.grant.ID)
	}
	defer func() {
		if c.budgeted {
			c.srv.releaseBudget(c.grant)
		}
	}()
	code, reason := websocket.StatusNormalClosure, ""
	var ce *closeError
	switch {
	case errors.As(err, &ce):
		code, reason = ce.code, ce.reason
	case err != nil:
		code, reason = websocket.StatusInternalError, "internal error"
	}
	for _, s := range c.subs {
		c.endSub(s)
	}
	for _, s := range c.pending {
		c.endSub(s)
	}
	if (ce == nil || !ce.stalled) && !c.muted.Load() {
		c.flushControl(2 * time.Second)
	}
	close(c.out) // the writer finishes what it holds, then exits
	c.log.Info("connection closing", "conn", c.id, "code", int(code), "reason", reason)
	// Close sends the close frame after the writer's pending frames and
	// waits (bounded by the library, 5 s) for the peer's.
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_ = c.ws.Close(code, reason)
	}()
	// A connection whose token was revoked gets a second for the
	// handshake: the revoke promises its end within one.
	wait := 5 * time.Second
	if c.muted.Load() {
		wait = time.Second / 2
	}
	select {
	case <-closed:
	case <-time.After(wait):
		_ = c.ws.CloseNow()
		<-closed
	}
	cancel()
	stopPings()
	wg.Wait()
}

// flushControl writes what the control lane still holds (e.g. the error
// response that explains a close) before the close frame, for at most d.
func (c *conn) flushControl(d time.Duration) {
	timeout := time.After(d)
	for {
		if err := c.pump(); err != nil {
			return
		}
		if c.sender.InFlight() == 0 && !c.sender.Pending() {
			return
		}
		select {
		case b := <-c.written:
			c.sender.Written(len(b))
		case <-c.writeFailed:
			return
		case <-timeout:
			return
		}
	}
}

// ioWait is the context of the connection's Reads and Writes (see serve).
var ioWait = context.Background()

func (c *conn) readLoop(ctx context.Context) {
	defer close(c.inbox)
	for {
		typ, b, err := c.read(ioWait)
		if err != nil {
			return
		}
		m := inbound{data: b, binary: typ != websocket.MessageText}
		n := c.inBytes.Add(int64(len(b)) + 1024)
		if n > c.srv.host.Limits().MaxBufferedBytes {
			select {
			case c.inbox <- inbound{overflow: true}:
			case <-ctx.Done():
			}
			return
		}
		select {
		case c.inbox <- m:
		case <-ctx.Done():
			return
		}
	}
}

// maxKeptInbound bounds an inbound message buffer that is read into
// again (inBufs).
const maxKeptInbound = 256 << 10

// inBufs is the memory inbound messages are read into, shared by every
// connection: the reader takes a buffer once a message has begun and the
// run loop gives it back once it has handled the message, so an idle
// connection holds none (each kept up to five before, about 14 KiB per
// idle viewer). The garbage collector empties the pool.
var inBufs = spare.Pool{MaxCap: maxKeptInbound}

// read reads the next message, into memory from inBufs when the transport
// can (a *websocket.Conn can; the tests' in-memory pipe cannot).
func (c *conn) read(ctx context.Context) (websocket.MessageType, []byte, error) {
	ws, ok := c.ws.(wire.MessageReader)
	if !ok {
		return c.ws.Read(ctx)
	}
	return wire.ReadMessageInto(ctx, ws, inBufs.Get)
}

func (c *conn) writeLoop() {
	var batch [][]byte
	write := func(b []byte) error {
		if c.muted.Load() {
			return nil // its token was revoked: nothing more goes out
		}
		return c.ws.Write(ioWait, websocket.MessageText, b)
	}
	for b := range c.out {
		// Corked: the frame, and any queued behind it, leave in one
		// write to the socket (countingConn.cork), without a
		// frame-sized buffer per connection.
		c.wire.cork()
		batch = append(batch[:0], b)
		err := write(b)
	more:
		for err == nil {
			select {
			case b, ok := <-c.out:
				if !ok {
					break more
				}
				batch = append(batch, b)
				err = write(b)
			default:
				break more
			}
		}
		if uerr := c.wire.uncork(); err == nil {
			err = uerr
		}
		if err != nil {
			close(c.writeFailed)
			// Drain so run never blocks; it ends on the reader's exit.
			for range c.out {
			}
			return
		}
		for i, b := range batch {
			c.written <- b
			batch[i] = nil
		}
		// Let the other connections' writers and owners run before this
		// one writes again. The daemon runs on one P (internal/procs),
		// and a connection whose owner and writer hand each other frames
		// would keep it for a whole time slice (10 ms, megabytes
		// compressed): after an upgrade in place, 500 viewers' snapshots
		// went out one connection after another, and the last viewer's
		// screen came only after every other viewer's whole scrollback
		// (make bench-upgrade: last screen back 2.4–3.5 s after the
		// request; 1.3–1.5 s with this). A yield costs well under a
		// microsecond against a batch's compression and write.
		runtime.Gosched()
	}
}

// startPings pings the peer every heartbeat interval and tells the run
// loop when a pong arrived or a ping failed, until ctx ends; stop waits
// for a ping under way. Each ping runs on a timer's goroutine, which
// exists only from the ping to its pong: an idle connection keeps no
// goroutine (and its 8 KiB stack) for its heartbeat.
func (c *conn) startPings(ctx context.Context) (stop func()) {
	var (
		mu      sync.Mutex // guards stopped and the Resets of t
		stopped bool
		t       *afterfunc.Timer
	)
	again := func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped && ctx.Err() == nil {
			t.Reset(c.srv.host.Limits().HeartbeatInterval)
		}
	}
	t = afterfunc.New(func() {
		if ctx.Err() != nil {
			return
		}
		iv := c.srv.host.Limits().HeartbeatInterval
		pctx, cancel := context.WithTimeout(ctx, 3*iv)
		err := c.ws.Ping(pctx)
		cancel()
		if err == nil {
			select {
			case c.alive <- struct{}{}:
			default:
			}
			again()
			return
		}
		if ctx.Err() != nil {
			return
		}
		// No pong within 3 intervals, or the ping could not even be
		// written (the library then drops the socket): tell the run loop,
		// so the close is logged and reported for what it is.
		select {
		case c.pingFailed <- err:
		default:
		}
	})
	again()
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
		t.Stop()
	}
}

// run is the connection's owner loop.
func (c *conn) run(ctx context.Context) error {
	now := time.Now()
	c.checkAt = c.nextCheck(now)
	c.check = time.NewTimer(c.checkAt.Sub(now))
	defer c.check.Stop()
	for {
		if c.fatal != nil {
			return c.fatal
		}
		// Before any further message: a revoked token sends no more input.
		if c.tokenDirty.Load() && c.tokenDirty.Swap(false) {
			if err := c.checkToken(); err != nil {
				return err
			}
		}
		if err := c.pump(); err != nil {
			return err
		}
		c.idleBufs()
		select {
		case <-ctx.Done():
			return closeWith(c.srv.goingAway())
		case reason := <-c.kick:
			return c.kicked(reason)
		case reply := <-c.queries:
			reply <- c.info()
		case m, ok := <-c.inbox:
			if !ok {
				return nil // the peer closed or the socket failed
			}
			c.inBytes.Add(-int64(len(m.data)) - 1024)
			c.lastAlive = time.Now()
			if m.binary {
				return closeWith(websocket.StatusUnsupportedData, "binary messages are not supported; send JSON text")
			}
			if m.overflow {
				return closeWith(websocket.StatusPolicyViolation, wire.ReasonTooMany+" inbound bytes waiting (maxBufferedBytes)")
			}
			if err := c.handle(m.data); err != nil {
				return err
			}
			// Nothing keeps an inbound message past handle (it decodes
			// into memory of its own): a reader may read into it again.
			inBufs.Put(m.data)
		case b := <-c.written:
			c.sender.Written(len(b))
			c.stats.framesOut.Add(1)
			c.stats.bytesOut.Add(int64(len(b)))
			c.lastWrite = time.Now()
			c.putBuf(b)
		case <-c.alive:
			c.lastAlive = time.Now()
		case d := <-c.rttSample:
			c.lastAlive = time.Now()
			c.onRTT(c.lastAlive, d)
		case err := <-c.pingFailed:
			if time.Since(c.lastAlive) < 3*c.srv.host.Limits().HeartbeatInterval {
				// Traffic arrived meanwhile: the peer is alive but the
				// socket could not take a ping; that is an output stall.
				c.srv.events.Publish(events.Event{Kind: "viewer.stalled", Viewer: c.id, Detail: "ping could not be written"})
				return stallClose("%s: ping could not be written (%v)", wire.ReasonOutputStalled, err)
			}
			return c.noPong()
		case <-c.changed:
			if err := c.channelsChanged(); err != nil {
				return err
			}
		case <-c.wakeSig:
			c.drainWakes()
		case <-c.sharedFreed():
			c.sender.WakeStarved()
		case <-c.check.C:
			// Not the time received: that is when the timer fell due,
			// which may be a while ago if the loop was busy.
			now := time.Now()
			if err := c.checkTimers(now); err != nil {
				return err
			}
			c.checkAt = c.nextCheck(now)
			c.check.Reset(c.checkAt.Sub(now))
		}
	}
}

// sharedFreed returns the shared budget's (the token's) Freed channel while a
// subscription of this connection waits for room in it, else nil (a nil
// channel never fires in the run loop's select).
func (c *conn) sharedFreed() <-chan struct{} {
	if !c.sender.SharedStarved() {
		return nil
	}
	return c.sender.Shared().Freed()
}

func (c *conn) drainWakes() {
	c.wakeMu.Lock()
	woken, rel := c.woken, c.releases
	c.woken, c.releases = nil, nil
	for _, s := range woken {
		s.inQueue = false
	}
	c.wakeMu.Unlock()
	for _, s := range woken {
		// Closing a terminal wakes its viewers (the process exits): reset
		// at once rather than at the next checkTimers.
		switch {
		case s.ended, c.resetIfClosed(s):
		case s.pending():
			if err := c.start(s); err != nil && c.fatal == nil {
				c.fatal = err
			}
		default:
			c.sender.Wake(s.stream)
		}
	}
	for _, r := range rel {
		if r.sub.ended || r.sub.stream == nil {
			continue
		}
		recv := r.sub.stream.Receiver()
		before := recv.Released().Position
		_, send, err := recv.Release(r.pos)
		if err != nil {
			c.resetSub(r.sub, flow.CodeProtocolError, err.Error())
			continue
		}
		c.tune(r.sub, r.pos.Position-before)
		if send {
			c.sender.QueueCredit(r.sub.stream)
		}
	}
}

// kicked is the close for an operator's kick.
func (c *conn) kicked(reason string) error {
	c.srv.events.Publish(events.Event{Kind: "viewer.kicked", Viewer: c.id, Detail: reason})
	return closeWith(websocket.StatusPolicyViolation, "%s", reason)
}

// attachToken counts the connection on its token once initialize
// succeeded; a ticket's connection holds its reconnect token from then on.
func (c *conn) attachToken() error {
	if !c.grant.Admin {
		g, err := c.srv.tokens.Attach(c.grant, c.srv.cfg.MaxConnectionsPerToken)
		if err != nil {
			return c.tokenEnded(err)
		}
		c.grant, c.attached = g, true
		c.token.Store(&tokenRef{ID: g.ID, Parent: g.Parent, grant: g})
	}
	b := c.srv.budgetFor(c.grant)
	c.budgeted = true
	if !c.grant.Admin && b.Left() < flow.MinPullSize {
		// The admin's connection is always admitted: it runs on the
		// floor of what it may send (sharedFloor) when the total is spent.
		if n, ok := c.srv.refuseLog.allow(c.srv.now()); ok { // a client retrying in a loop must not flood the log
			c.log.Warn("connection refused: memory budget spent", "conn", c.id, "maxTotalBufferedBytes", c.srv.budget.Max(), "maxBufferedBytesPerToken", c.srv.cfg.PerTokenBufferedBytes(), "suppressed", n)
		}
		return closeWith(websocket.StatusPolicyViolation, "%s (maxBufferedBytesPerToken, maxTotalBufferedBytes); try again later", wire.ReasonMemoryBudget)
	}
	c.sender.SetShared(b)
	c.queued = b.Child(c.queueMax)
	return nil
}

// checkToken closes the connection if its token was revoked or expired.
func (c *conn) checkToken() error {
	if !c.attached {
		return nil
	}
	if err := c.srv.tokens.Check(c.grant); err != nil {
		// A kick revokes the token too: the operator's reason wins.
		select {
		case reason := <-c.kick:
			return c.kicked(reason)
		default:
		}
		return c.tokenEnded(err)
	}
	return nil
}

// tokenEnded is the close for a revoked or expired token.
func (c *conn) tokenEnded(err error) error {
	if errors.Is(err, auth.ErrTokenBusy) {
		return closeWith(websocket.StatusPolicyViolation, "%s connections with this token (maxConnectionsPerToken %d)", wire.ReasonTooMany, c.srv.cfg.MaxConnectionsPerToken)
	}
	c.muted.Store(true) // nothing more for it, but the close
	reason := wire.ReasonTokenRevoked
	if errors.Is(err, auth.ErrTokenExpired) {
		reason = wire.ReasonTokenExpired
	}
	c.srv.events.Publish(events.Event{Kind: "viewer.kicked", Viewer: c.id, Detail: reason})
	return closeWith(websocket.StatusPolicyViolation, "%s", reason)
}

func (c *conn) checkTimers(now time.Time) error {
	if err := c.checkToken(); err != nil {
		return err
	}
	l := c.srv.host.Limits()
	for _, s := range c.subs {
		c.resetIfClosed(s) // one that no wake-up reported
	}
	for _, s := range c.pending {
		c.resetIfClosed(s)
	}
	if !c.initialized && now.Sub(c.opened) > l.InitializeTimeout {
		return closeWith(websocket.StatusPolicyViolation, "initialize not received within %v", l.InitializeTimeout)
	}
	if c.sender.InFlight() > 0 && now.Sub(c.lastWrite) > l.MaxOutputStall {
		c.srv.events.Publish(events.Event{Kind: "viewer.stalled", Viewer: c.id, Detail: "output stalled; closing"})
		c.ws.CloseNow() // no close frame can get through a stalled socket
		return stallClose("%s for %v (maxOutputStall)", wire.ReasonOutputStalled, l.MaxOutputStall)
	}
	if now.Sub(c.lastAlive) > 3*l.HeartbeatInterval {
		return c.noPong()
	}
	return nil
}

// resetIfClosed ends s if its subscriber reports an end, or the operator
// closed its channel, so that it releases the channel (§7), and reports
// whether it did.
func (c *conn) resetIfClosed(s *subscription) bool {
	end := s.sub.End()
	if end == nil && s.ch.Closed() {
		end = &flow.Reset{Code: flow.CodeChannelClosed, Message: "the channel was closed"}
	}
	if end == nil {
		return false
	}
	c.resetSub(s, end.Code, end.Message)
	return true
}

// maxCheckInterval bounds the time between two checkTimers: a limit
// lowered at run time takes effect within it, and a closed channel whose
// subscription was not woken is reset within it. An idle connection wakes
// this often (a 100 ms ticker cost an idle viewer 0.2 % of a core here).
const maxCheckInterval = time.Second

// nextCheck returns when checkTimers must next run: at the earliest
// deadline it enforces, and within maxCheckInterval.
func (c *conn) nextCheck(now time.Time) time.Time {
	l := c.srv.host.Limits()
	next := now.Add(maxCheckInterval)
	later := func(t time.Time) {
		if t.Before(next) {
			next = t
		}
	}
	if !c.initialized {
		later(c.opened.Add(l.InitializeTimeout))
	}
	if c.sender.InFlight() > 0 {
		later(c.lastWrite.Add(l.MaxOutputStall))
	}
	later(c.lastAlive.Add(3 * l.HeartbeatInterval))
	if c.attached && c.grant.Idle == 0 && !c.grant.Expires.IsZero() {
		later(c.grant.Expires) // closed "token expired" on time
	}
	// Past deadlines (a check that fired late) are checked at once; the
	// timer's resolution is the runtime's, about a millisecond.
	return next.Add(time.Millisecond)
}

// checkBy brings the next checkTimers forward to t if it is due later.
func (c *conn) checkBy(t time.Time) {
	if t.Before(c.checkAt) {
		c.checkAt = t
		c.check.Reset(time.Until(t))
	}
}

// noPong is the close for a peer silent for three heartbeat intervals.
func (c *conn) noPong() error {
	return closeWith(websocket.StatusPolicyViolation, "%s for %v", wire.ReasonNoPong, 3*c.srv.host.Limits().HeartbeatInterval)
}

// pump hands frames to the writer while the transport has room. With
// nothing to send it takes no frame buffer: an idle connection handling
// inbound messages does not take one from frameBufs and give it back on
// every pass of the run loop.
//
// What one pass hands out goes to the writer together at the end: sent as
// each was made, the writer (on another P) would start writing the first
// while the next was still being made, and a flood's frames would leave
// in a write each instead of one corked write.
func (c *conn) pump() error {
	batch := c.batch[:0]
	defer func() {
		for i, b := range batch {
			c.out <- b // never blocks: out holds the transport bound
			batch[i] = nil
		}
		c.batch = batch[:0]
	}()
	for c.sender.Pending() {
		buf := c.getBuf()
		b, err := c.sender.Next(buf)
		if err != nil {
			var se *flow.StreamError
			if errors.As(err, &se) {
				if s := c.subs[se.Stream.SubscriptionID()]; s != nil {
					c.resetSub(s, flow.ResetCode(se.Err), se.Err.Error())
				}
				continue
			}
			return err
		}
		if b == nil {
			c.putBuf(buf)
			break
		}
		if cap(buf) > 0 && unsafe.SliceData(b) != unsafe.SliceData(buf) {
			// b is a queued control message, or a frame that outgrew buf:
			// buf itself was not used.
			c.putBuf(buf)
		}
		if c.sender.InFlight() == 1 {
			c.lastWrite = time.Now() // the first item in flight starts the stall clock
			c.checkBy(c.nextCheck(c.lastWrite))
		}
		batch = append(batch, b)
	}
	return nil
}

// Frame buffers: frames vary from a few hundred bytes (credit) to the
// negotiated maximum, so the largest kept buffer is handed out first and
// the smallest is dropped when the list is full; a buffer larger than
// maxKeptBuf is never kept. Together they bound what a connection holds
// idle to maxFreeBufs × maxKeptBuf.
const (
	maxFreeBufs = 3
	maxKeptBuf  = 2 << 20
)

func (c *conn) getBuf() []byte {
	b := c.free[0]
	if b == nil {
		return frameBufs.Get()
	}
	copy(c.free[:], c.free[1:])
	c.free[maxFreeBufs-1] = nil
	return b
}

// frameBufs holds the frame buffers of idle connections, shared by every
// connection: a connection with nothing being written and nothing
// waiting to be gives its buffers up (idleBufs) and takes one
// from here for its next frame, so an idle viewer holds none (it kept up
// to maxFreeBufs, each the size of the largest frames it had been sent:
// 16 KiB after a few KiB of output, 3 × 64 KiB after a flood). The
// garbage collector empties the pool.
var frameBufs = spare.Pool{MaxCap: maxKeptBuf}

// idleBufs hands the connection's free frame buffers to frameBufs once
// it is idle, nothing being written and nothing waiting to be: none is
// needed until the next frame. A busy connection keeps them.
func (c *conn) idleBufs() {
	if c.sender.InFlight() > 0 || c.sender.Pending() {
		return
	}
	for i, b := range c.free {
		if b == nil {
			return
		}
		frameBufs.Put(b)
		c.free[i] = nil
	}
}

func (c *conn) putBuf(b []byte) {
	if cap(b) == 0 || cap(b) > maxKeptBuf {
		return
	}
	b = b[:0]
	// Insert in decreasing order of capacity; the smallest falls off.
	for i := range c.free {
		if cap(b) > cap(c.free[i]) {
			copy(c.free[i+1:], c.free[i:maxFreeBufs-1])
			c.free[i] = b
			return
		}
	}
}

// queue sends a control message (response, reset).
func (c *conn) queue(b []byte) error {
	if err := c.sender.Control(b); err != nil {
		return closeWith(websocket.StatusPolicyViolation, wire.ReasonTooMany+" unread responses: the client is not reading")
	}
	return nil
}

func (c *conn) respond(req *request, result any, rerr *RPCError) error {
	if req.isNotification() {
		return nil
	}
	return c.queue(encodeResponse(req.ID, result, rerr))
}

// handle processes one inbound text message.
func (c *conn) handle(b []byte) error {
	if !c.initialized {
		return c.handleFirst(b)
	}
	// Credit is the message a client sends most: in the shape every
	// client writes it is read once, before anything else scans it (it
	// is not a frame).
	if c.fastCredit(b) {
		return nil
	}
	trim := strings.TrimLeft(unsafe.String(unsafe.SliceData(b), len(b)), " \t\r\n")
	if strings.HasPrefix(trim, "[") {
		return c.queue(encodeResponse(nil, nil, rpcErr(flow.ErrCodeInvalidRequest, "batches are not supported")))
	}
	if len(b) > 0 {
		err := flow.DecodeFrame(b, &c.frame)
		switch {
		case err == nil:
			return c.handleFrame(b)
		case errors.Is(err, flow.ErrNotFrame):
			// An ordinary message: decoded below.
		case errors.Is(err, flow.ErrBadJSON):
			return c.queue(encodeResponse(nil, nil, rpcErr(flow.ErrCodeParse, "parse error: "+err.Error())))
		default:
			// A channel/frame with bad params: reset its subscription if
			// it names one, else drop and count.
			if s := c.subs[c.frame.SubscriptionID]; s != nil {
				c.resetSub(s, flow.CodeProtocolError, err.Error())
				return nil
			}
			c.stats.droppedNotifications.Add(1)
			return nil
		}
	}
	var req request
	if err := json.Unmarshal(b, &req); err != nil {
		return c.queue(encodeResponse(nil, nil, rpcErr(flow.ErrCodeParse, "parse error: "+err.Error())))
	}
	if len(req.ID) > c.limits.MaxIDLength+2 || !validID(req.ID) {
		return c.queue(encodeResponse(nil, nil, rpcErr(flow.ErrCodeInvalidRequest, "invalid or too long id")))
	}
	if name := duplicateMember(b); name != "" {
		return c.respondOr(&req, rpcErr(flow.ErrCodeInvalidRequest, "invalid request: member "+quoteClient(name)+" appears twice in one object"))
	}
	if req.JSONRPC != "2.0" || req.Method == "" {
		return c.respondOr(&req, rpcErr(flow.ErrCodeInvalidRequest, `invalid request: need "jsonrpc":"2.0" and a method`))
	}
	return c.dispatch(&req)
}

// handleFirst handles a message before initialize succeeded: only an
// initialize request is accepted; anything else (a batch, invalid JSON, a
// frame, another method) gets -32001 and the connection closes (§2).
func (c *conn) handleFirst(b []byte) error {
	var req request
	if err := json.Unmarshal(b, &req); err == nil && req.Method == "initialize" && !req.isNotification() &&
		req.JSONRPC == "2.0" && len(req.ID) <= c.limits.MaxIDLength+2 && validID(req.ID) && duplicateMember(b) == "" {
		if err := c.dispatch(&req); err != nil || !c.initialized {
			return err
		}
		return c.attachToken()
	}
	id := req.ID
	if len(id) > c.limits.MaxIDLength+2 || !validID(id) {
		id = nil
	}
	_ = c.queue(encodeResponse(id, nil, rpcErr(flow.ErrCodeUnauthorized, "initialize first")))
	return closeWith(websocket.StatusPolicyViolation, "message before initialize")
}

// respondOr answers a request with rerr; a notification is dropped.
func (c *conn) respondOr(req *request, rerr *RPCError) error {
	if req.isNotification() {
		c.stats.droppedNotifications.Add(1)
		return nil
	}
	return c.queue(encodeResponse(req.ID, nil, rerr))
}

func (c *conn) handleFrame(raw []byte) error {
	f := &c.frame
	c.stats.framesIn.Add(1)
	c.stats.bytesIn.Add(int64(len(raw)))
	s := c.subs[f.SubscriptionID]
	if s == nil || s.ch.URI != f.Channel {
		c.stats.droppedNotifications.Add(1)
		return nil
	}
	if c.grant.Role != auth.RoleControl {
		// Client→host data needs the control role (§2); refuse it before
		// buffering any of it.
		c.resetSub(s, flow.CodeForbidden, "view role cannot send data")
		return nil
	}
	size := f.Size(raw)
	r := s.stream.Receiver()
	if c.reassembly != nil && r.UseBuffer(c.reassembly) {
		c.reassembly = nil
	}
	before := r.Buffered()
	msg, pos, err := r.Frame(size, f)
	c.partial += int64(r.Buffered() - before)
	if err != nil {
		c.resetSub(s, flow.ResetCode(err), err.Error())
		return nil
	}
	if msg == nil {
		// Incomplete messages of all subscriptions together stay within
		// a quarter of maxBufferedBytes.
		if c.partial > c.limits.MaxBufferedBytes/4 {
			c.resetSub(s, flow.CodeOverflow, "too many bytes of incomplete messages on this connection")
		}
		return nil
	}
	err = c.deliver(s, msg, pos)
	// The kind copied what it keeps (Deliver's contract): the memory
	// serves the connection's next message, so a bulk upload does not
	// grow a new buffer for each.
	if b := r.TakeBuffer(); cap(b) <= maxKeptBuf && cap(b) > cap(c.reassembly) {
		c.reassembly = b
	}
	return err
}

// deliver hands a complete client→host logical message to its channel's
// subscriber; the client is credited once the subscriber releases it.
func (c *conn) deliver(s *subscription, msg []byte, pos flow.Position) error {
	// One scan, no reflection: a tcp/input carries up to a message of
	// base64 (encoding/json took half the daemon's CPU on uploads).
	method, params, err := flow.DecodeNotification(msg)
	if err != nil {
		c.resetSub(s, flow.CodeProtocolError, "logical message is not a JSON-RPC 2.0 notification")
		return nil
	}
	if s.ch.Type == "terminal" && method == "terminal/input" {
		c.auditInput(s, params)
	}
	if err := s.sub.Deliver(method, params, func() { c.released(s, pos) }); err != nil {
		var r *flow.Reset
		if errors.As(err, &r) {
			c.resetSub(s, r.Code, r.Message)
		} else {
			c.resetSub(s, flow.CodeProtocolError, err.Error())
		}
	}
	return nil
}

// resetSub ends a subscription with channel/reset (§7); a pending one
// gets an error response to its subscribe instead.
func (c *conn) resetSub(s *subscription, code, msg string) {
	if s.ended {
		return
	}
	if s.pending() {
		if err := c.refuse(s, rpcErr(flow.ErrCodeChannelNotFound, "channel not available: "+msg)); err != nil && c.fatal == nil {
			c.fatal = err
		}
		return
	}
	c.stats.resets.Add(1)
	c.log.Debug("subscription reset", "conn", c.id, "sub", s.id, "channel", s.ch.URI, "code", code)
	if err := c.sender.Control(flow.AppendReset(nil, s.ch.URI, s.id, code, boundMessage(msg))); err != nil {
		c.fatal = closeWith(websocket.StatusPolicyViolation, wire.ReasonTooMany+" unread responses: the client is not reading")
	}
	c.endSub(s)
}

// endSub releases a subscription's resources. A channel that the
// subscribe created and that never started (refused, or its connection
// ended first) is closed with it.
func (c *conn) endSub(s *subscription) {
	if s.ended {
		return
	}
	s.ended = true
	if s.stream != nil {
		c.audit(s, "detach", strconv.FormatInt(s.inputBytes, 10)+" bytes of input")
	}
	c.untune(s)
	if s.stream != nil {
		c.partial -= int64(s.stream.Receiver().Buffered())
		c.sender.Close(s.stream)
	}
	s.sub.Close()
	s.ch.Left()
	c.queued.Give(subscriptionCost)
	delete(c.subs, s.id)
	delete(c.pending, s.id)
	if s.created && s.stream == nil {
		c.srv.closeSoon(s.ch.URI)
	}
}

// channelsChangedEvery bounds how often a watching connection gets
// channels/changed: changes within it are sent as one.
const channelsChangedEvery = 250 * time.Millisecond

// channelsChangedMsg tells a connection that asked (channels/watch) that
// channels/list would answer differently now.
const channelsChangedMsg = `{"jsonrpc":"2.0","method":"channels/changed","params":{}}`

// watchChannels answers channels/watch: from now on the connection gets
// channels/changed whenever a channel is created, exits or is closed, or a
// viewer joins or leaves (PROTOCOL.md is silent: docs/protocol-decisions.md,
// "The first ten minutes"). Idempotent.
func (c *conn) watchChannels(req *request) error {
	if c.watchStop == nil {
		next, stop := c.srv.events.Watch()
		c.watchStop, c.watchDone, c.changed = stop, make(chan struct{}), make(chan struct{}, 1)
		done, changed := c.watchDone, c.changed
		c.watchWG.Go(func() {
			for {
				evs, lost, ok := next(done)
				if !ok {
					return
				}
				for _, e := range evs {
					if lost > 0 || strings.HasPrefix(e.Kind, "channel.") || e.Kind == "viewer.joined" || e.Kind == "viewer.left" {
						select {
						case changed <- struct{}{}:
						default:
						}
						break
					}
				}
			}
		})
	}
	return c.respond(req, map[string]any{}, nil)
}

// channelsChanged sends channels/changed, or holds it until
// channelsChangedEvery has passed since the last one.
func (c *conn) channelsChanged() error {
	now := time.Now()
	if now.Before(c.changedNext) {
		if !c.changedHeld {
			c.changedHeld = true
			changed := c.changed
			c.changedTmr = time.AfterFunc(c.changedNext.Sub(now), func() {
				select {
				case changed <- struct{}{}:
				default:
				}
			})
		}
		return nil
	}
	c.changedHeld = false
	c.changedNext = now.Add(channelsChangedEvery)
	return c.queue([]byte(channelsChangedMsg))
}

// stopWatch ends channels/watch's goroutine and timer, and waits.
func (c *conn) stopWatch() {
	if c.watchStop == nil {
		return
	}
	close(c.watchDone)
	c.watchWG.Wait()
	c.watchStop()
	if c.changedTmr != nil {
		c.changedTmr.Stop()
	}
}
