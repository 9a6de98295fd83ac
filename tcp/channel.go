package tcp

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/internal/afterfunc"
	"github.com/ahp-dev/ahpd/internal/spare"
)

var (
	_ flow.Channel    = (*Channel)(nil)
	_ flow.Subscriber = (*Sub)(nil)
)

// Config describes a TCP channel to create.
type Config struct {
	Host string // a host name or an address, as requested
	Port uint16
	// Allow admits the target (required).
	Allow *AllowList
	// DialTimeout bounds the dial; default 10 s (PROTOCOL.md §8).
	DialTimeout time.Duration
	// Retain returns how long a channel without a consumer waits for a
	// resume (the tcpRetain limit); read each time the consumer leaves.
	// Nil: DefaultRetain.
	Retain func() time.Duration
	// Logger; nil: discard.
	Logger *slog.Logger
	// Budget, when set, counts the memory of the channel's resume journal
	// (flow.Journal.SetBudget): what was sent and not yet credited, kept
	// across connections, and the released memory the journal keeps for
	// the next messages. It should outlive connections (a token's budget,
	// inside the daemon's total), as the journal does. While it has no
	// room for a message (Left below flow.MinPullSize), the channel makes
	// no more tcp/data and stops reading the target; it goes on once
	// credit or another channel gives memory back (Budget.Freed). The
	// journal's memory goes back when the channel ends. Nil: none.
	Budget *flow.Budget
	// MaxRetained returns the cap on what the journal retains for a
	// resume: the UTF-16 bytes sent and not yet credited (the unit of
	// windowBytes), whatever window the client asked. No tcp/data starts
	// while the journal retains that much; credit that releases it lets
	// the next one start. Read before each message (with the channel's
	// lock held: it must not block). Nil, or a value ≤ 0:
	// DefaultMaxRetained.
	MaxRetained func() int64
}

// DefaultRetain is tcpRetain's default.
const DefaultRetain = 60 * time.Second

// DefaultMaxRetained is the default cap on a channel's retained bytes
// (Config.MaxRetained): 4 MiB in the window's unit, UTF-16 bytes, which
// is about 2 MiB of memory for tcp/data's base64 text and 1.5 MiB of the
// target's bytes.
const DefaultMaxRetained = 4 << 20

// readSize is the size of each of the two buffers the reader fills from
// the socket.
const readSize = 64 << 10

// maxTokens is how many resume tokens of a channel stay valid: the newest
// and the ones before it, for a client that lost a subscribe result.
const maxTokens = 4

// Channel is a TCP channel: one socket, one consumer at a time.
type Channel struct {
	cfg     Config
	target  string
	log     *slog.Logger
	closing chan struct{} // closed when Close starts
	done    chan struct{} // closed when Close has finished
	dialed  chan struct{} // closed when the dial has finished
	frozen  chan struct{} // closed when Freeze starts: the reader and writer stop, the socket stays open
	once    sync.Once     // closes closing
	cancel  context.CancelFunc
	wg      sync.WaitGroup // the dialer, reader and writer
	// gen counts the lease changes; the retention timer ends the channel
	// only if no consumer took it since it was armed (armedAt).
	gen, armedAt atomic.Int64

	more   chan struct{} // a read buffer was emptied (cap 1)
	wsig   chan struct{} // the write queue grew (cap 1)
	starve chan struct{} // Pull found no room in cfg.Budget (cap 1); budgetLoop waits for it

	mu      sync.Mutex
	conn    *net.TCPConn
	remote  string
	dialErr error
	holder  *Sub // holds the lease
	waiting *Sub // the newest attach waiting for the lease
	journal *flow.Journal
	recv    *flow.Receiver
	tokens  []string
	retain  *afterfunc.Timer // the retention timer; armed while no consumer holds the channel
	retainD time.Duration    // its duration when last armed
	ended   bool             // Close ran, or the channel finished
	freezed bool             // Freeze ran

	// target→client
	pend     [][]byte // filled read buffers, oldest first (at most 2)
	free     [][]byte // empty read buffers
	outOff   int64    // decoded bytes handed out as tcp/data
	readEOF  bool
	eofSent  bool
	closedOK bool // tcp/closed was handed out
	reset    *flow.Reset

	// client→target
	wq          []writeItem
	spare       spare.List    // memory of written items, for the next decodes
	inOff       int64         // decoded bytes accepted from the client
	inEOF       bool          // tcp/eof accepted
	written     flow.Position // the last client message written (or suppressed)
	writeClosed bool          // the socket's write half is closed

	bytesIn, bytesOut, resumes int64
}

type writeItem struct {
	data []byte // what is left to write after duplicates were suppressed
	buf  []byte // the memory data is in
	eof  bool
	pos  flow.Position
}

// Info is what the control plane shows of a TCP channel.
type Info struct {
	Target   string // host:port as requested
	Remote   string // the address dialed; "" before the dial
	BytesIn  int64  // decoded bytes written to the target (client→target)
	BytesOut int64  // decoded bytes read from the target and sent (target→client)
	Resumes  int64  // resumes that took the channel
	Consumer bool   // a subscription holds the channel now
	Phase    string // dialing, open, eof-received, eof-sent, half-closed, closed, reset, failed, ended
}

// ParseCreate parses the create member of a subscribe:
// {type:"tcp", host, port}. Errors are *flow.Error -32602.
func ParseCreate(params json.RawMessage) (host string, port uint16, err error) {
	var p struct {
		Type string `json:"type"`
		Host string `json:"host"`
		Port *int64 `json:"port"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return "", 0, &flow.Error{Code: flow.ErrCodeInvalidParams, Message: "create: " + err.Error()}
	}
	switch {
	case p.Host == "":
		return "", 0, &flow.Error{Code: flow.ErrCodeInvalidParams, Message: "create.host: required"}
	case len(p.Host) > 255:
		return "", 0, &flow.Error{Code: flow.ErrCodeInvalidParams, Message: "create.host: longer than 255 bytes"}
	case p.Port == nil:
		return "", 0, &flow.Error{Code: flow.ErrCodeInvalidParams, Message: "create.port: required"}
	case *p.Port < 1 || *p.Port > 65535:
		return "", 0, &flow.Error{Code: flow.ErrCodeInvalidParams, Message: "create.port: must be 1–65535"}
	}
	return p.Host, uint16(*p.Port), nil
}

// Admit checks a requested target against allow as Create does before it
// dials (an IPv4-mapped address as its IPv4 one): a target no rule admits
// is a *flow.Error -32003 naming it and the rule to add. It returns the
// host as Create dials it. The daemon answers channels/check with it
// (docs/protocol-decisions.md, "forward's checks at start").
func Admit(allow *AllowList, host string, port uint16) (string, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		host = a.Unmap().String()
	}
	if err := allow.Check(host, port); err != nil {
		return "", &flow.Error{Code: flow.ErrCodeForbidden, Message: err.Error()}
	}
	return host, nil
}

// Create checks the target against the allow-list and starts dialing it;
// it returns at once. A target the list does not admit is a *flow.Error
// -32003 naming it. The dial's outcome is reported by WaitDialed and by
// the Ready of the channel's first subscriber.
func Create(cfg Config) (*Channel, error) {
	if cfg.Allow == nil {
		return nil, errors.New("tcp: Config.Allow is required")
	}
	cfg.setDefaults()
	host, err := Admit(cfg.Allow, cfg.Host, cfg.Port)
	if err != nil {
		return nil, err
	}
	cfg.Host = host
	c := makeChannel(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.DialTimeout)
	c.cancel = cancel
	c.wg.Go(func() { c.dial(ctx) })
	if cfg.Budget != nil {
		c.wg.Go(c.budgetLoop)
	}
	go c.reap()
	return c, nil
}

// setDefaults fills in the defaults of DialTimeout, Retain and Logger.
func (cfg *Config) setDefaults() {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.Retain == nil {
		cfg.Retain = func() time.Duration { return DefaultRetain }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
}

// makeChannel returns a channel of cfg (defaulted, its host checked)
// that has not dialed: Create dials, Adopt takes a socket handed over.
func makeChannel(cfg Config) *Channel {
	c := &Channel{
		cfg:     cfg,
		target:  net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
		dialed:  make(chan struct{}),
		frozen:  make(chan struct{}),
		more:    make(chan struct{}, 1),
		wsig:    make(chan struct{}, 1),
		starve:  make(chan struct{}, 1),
		free:    [][]byte{make([]byte, readSize), make([]byte, readSize)},
		// A tcp/input decodes to at most 96 KiB under the default
		// hostReceive limits: two such buffers are kept for reuse.
		spare: spare.List{Count: 2, MaxCap: 128 << 10},
	}
	c.log = cfg.Logger.With("target", c.target)
	c.retain = afterfunc.New(c.retentionExpired)
	return c
}

// budgetLoop wakes the holder once cfg.Budget has room again after a Pull
// found none (starve): the Sender does not know why the Source gave
// nothing, and credit on this channel is not the only thing that frees
// the budget (another channel's, or its end, may). It ends with the
// channel; reap waits for it.
func (c *Channel) budgetLoop() {
	for {
		select {
		case <-c.starve:
		case <-c.closing:
			return
		case <-c.frozen:
			return
		}
		select {
		case <-c.cfg.Budget.Freed():
		case <-c.closing:
			return
		case <-c.frozen:
			return
		}
		c.mu.Lock()
		h := c.holder
		c.mu.Unlock()
		wake(h)
	}
}

// maxRetained returns the cap on the journal's retained bytes.
func (c *Channel) maxRetained() int64 {
	if c.cfg.MaxRetained != nil {
		if n := c.cfg.MaxRetained(); n > 0 {
			return n
		}
	}
	return DefaultMaxRetained
}

// discardJournal gives the journal's memory back once the channel has
// ended and no connection holds the lease (a holder's Sender may still
// use it until its subscriber Closes); c.mu is held.
func (c *Channel) discardJournal() {
	if c.ended && c.holder == nil && c.journal != nil {
		c.journal.Discard()
	}
}

// dial connects to the target: each address the name resolves to must be
// admitted too (AllowList.CheckAddr).
func (c *Channel) dial(ctx context.Context) {
	defer close(c.dialed)
	conn, err := c.connect(ctx)
	c.cancel()
	c.mu.Lock()
	if err == nil && c.ended {
		_ = conn.Close()
		err = errors.New("the channel was closed")
	}
	if err != nil {
		c.dialErr = err
		w := c.waiting
		c.mu.Unlock()
		c.log.Info("tcp connect failed", "err", err)
		// A channel whose dial failed is closed by whoever created it
		// (the subscribe it answers -32008, CreateTCP): not here, so that
		// the answer is the dial's error and not "closed".
		wake(w)
		return
	}
	c.conn, c.remote = conn, conn.RemoteAddr().String()
	if c.holder == nil {
		c.startRetain()
	}
	w := c.waiting
	c.wg.Go(c.readLoop)
	c.wg.Go(c.writeLoop)
	c.mu.Unlock()
	c.log.Info("tcp connected", "remote", c.remote)
	wake(w)
}

func (c *Channel) connect(ctx context.Context) (*net.TCPConn, error) {
	var addrs []netip.AddrPort
	if a, err := netip.ParseAddr(c.cfg.Host); err == nil {
		addrs = []netip.AddrPort{netip.AddrPortFrom(a, c.cfg.Port)}
	} else {
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", c.cfg.Host)
		if err != nil {
			return nil, &flow.Error{Code: flow.ErrCodeConnectFailed, Message: "connect failed: " + c.target + ": cannot resolve " + c.cfg.Host + ": " + dialReason(err)}
		}
		for _, ip := range ips {
			addrs = append(addrs, netip.AddrPortFrom(ip.Unmap(), c.cfg.Port))
		}
	}
	var firstErr error
	var d net.Dialer
	for _, ap := range addrs {
		if err := c.cfg.Allow.CheckAddr(c.cfg.Host, ap); err != nil {
			if firstErr == nil {
				firstErr = &flow.Error{Code: flow.ErrCodeForbidden, Message: err.Error()}
			}
			continue
		}
		conn, err := d.DialContext(ctx, "tcp", ap.String())
		if err == nil {
			return conn.(*net.TCPConn), nil
		}
		var fe *flow.Error
		if firstErr == nil || errors.As(firstErr, &fe) && fe.Code == flow.ErrCodeForbidden {
			firstErr = &flow.Error{Code: flow.ErrCodeConnectFailed, Message: "connect failed: " + c.target + ": " + dialReason(err)}
		}
		if ctx.Err() != nil {
			break
		}
	}
	if firstErr == nil {
		firstErr = &flow.Error{Code: flow.ErrCodeConnectFailed, Message: "connect failed: " + c.target + ": no address"}
	}
	return nil, firstErr
}

// dialReason says why a dial failed, in the words of PROTOCOL.md §8.
func dialReason(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "timed out"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "unreachable"
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		if dnsErr.IsTimeout {
			return "timed out"
		}
		return dnsErr.Err
	}
	return err.Error()
}

// WaitDialed waits for the dial: nil once connected, the *flow.Error of a
// failed dial (-32008, or -32003 for a name resolving to an address no
// rule admits), or ctx's error.
func (c *Channel) WaitDialed(ctx context.Context) error {
	select {
	case <-c.dialed:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dialErr
}

// Kind is "tcp".
func (c *Channel) Kind() string { return "tcp" }

// Target is host:port as requested.
func (c *Channel) Target() string { return c.target }

// State is running while the socket is open both ways or half, exited
// once tcp/closed was sent or the target reset, and closed after Close.
func (c *Channel) State() flow.ChannelState {
	select {
	case <-c.closing:
		return flow.StateClosed
	default:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closedOK || c.reset != nil || c.dialErr != nil {
		return flow.StateExited
	}
	return flow.StateRunning
}

// Describe gives the target as the title and the phase as the detail.
func (c *Channel) Describe() flow.Description {
	i := c.Info()
	return flow.Description{Title: i.Target, Detail: i.Phase}
}

// Info returns the channel's counters and phase.
func (c *Channel) Info() Info {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := Info{Target: c.target, Remote: c.remote, BytesIn: c.bytesIn, BytesOut: c.bytesOut, Resumes: c.resumes, Consumer: c.holder != nil}
	switch {
	case c.dialErr != nil:
		i.Phase = "failed"
	case c.reset != nil:
		i.Phase = "reset"
	case c.ended:
		i.Phase = "ended"
	case c.conn == nil:
		i.Phase = "dialing"
	case c.closedOK:
		i.Phase = "closed"
	case c.eofSent && c.writeClosed:
		i.Phase = "closed-both"
	case c.eofSent:
		i.Phase = "eof-sent"
	case c.writeClosed:
		i.Phase = "eof-received"
	default:
		i.Phase = "open"
	}
	if i.Phase != "failed" && i.Phase != "ended" && c.conn != nil && c.holder == nil {
		i.Phase += ", retained"
	}
	return i
}

// Done is closed once Close has released the socket and its goroutines.
func (c *Channel) Done() <-chan struct{} { return c.done }

// Close closes the socket and ends every subscriber; idempotent. It
// returns once the channel's goroutines have stopped.
func (c *Channel) Close() error {
	c.end()
	<-c.done
	return nil
}

// end starts closing the channel without waiting: the reaper does the
// rest. Safe with or without c.mu held.
func (c *Channel) end() { c.once.Do(func() { close(c.closing) }) }

// reap closes the channel once end was called: the socket, the timers,
// and every subscriber's End; then it waits for the dialer, reader and
// writer and closes done. It is the channel's goroutine from Create on,
// and Close waits for it.
func (c *Channel) reap() {
	<-c.closing
	c.cancel()
	c.mu.Lock()
	c.ended = true // no Reset of the timer after this
	conn, h, w := c.conn, c.holder, c.waiting
	c.discardJournal() // else the holder's Close does
	c.mu.Unlock()
	c.retain.Stop()
	if conn != nil {
		_ = conn.Close()
	}
	wake(h)
	wake(w)
	c.wg.Wait()
	close(c.done)
}

// startRetain starts the retention timer of a channel without a consumer;
// c.mu is held.
func (c *Channel) startRetain() {
	if c.ended {
		return
	}
	c.retainD = c.cfg.Retain()
	c.armedAt.Store(c.gen.Add(1))
	c.retain.Reset(c.retainD)
}

// stopRetain disarms it when a consumer takes the channel; c.mu is held
// (the callback does not take it).
func (c *Channel) stopRetain() {
	c.gen.Add(1)
	c.retain.Stop()
}

func (c *Channel) retentionExpired() {
	if c.armedAt.Load() == c.gen.Load() {
		c.log.Info("tcp channel retention expired; closing it")
		c.end()
	}
}

func wake(s *Sub) {
	if s != nil && s.req.Wake != nil {
		s.req.Wake()
	}
}

// newToken returns a fresh resume token.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// await waits until ready (checked under c.mu) holds, woken by sig; it
// returns true with c.mu held, or false, without it, once the channel
// ends or freezes.
func (c *Channel) await(ready func() bool, sig <-chan struct{}) bool {
	c.mu.Lock()
	for !ready() && !c.ended && !c.freezed {
		c.mu.Unlock()
		select {
		case <-sig:
		case <-c.closing:
			return false
		case <-c.frozen:
			return false
		}
		c.mu.Lock()
	}
	if c.ended || c.freezed {
		c.mu.Unlock()
		return false
	}
	return true
}

func (c *Channel) readLoop() {
	for {
		if !c.await(func() bool { return len(c.free) > 0 }, c.more) {
			return
		}
		buf := c.free[len(c.free)-1]
		c.free = c.free[:len(c.free)-1]
		conn := c.conn
		c.mu.Unlock()

		n, err := conn.Read(buf[:cap(buf)])
		c.mu.Lock()
		if n > 0 {
			c.pend = append(c.pend, buf[:n])
		} else {
			c.free = append(c.free, buf)
		}
		switch {
		case err == nil:
		case c.ended:
		case c.freezed && errors.Is(err, os.ErrDeadlineExceeded):
			// Freeze stopped the read; the socket is handed over.
		case errors.Is(err, io.EOF):
			c.readEOF = true
		default:
			c.reset = &flow.Reset{Code: flow.CodeTCPReset, Message: "reading from " + c.target + ": " + resetReason(err)}
		}
		h := c.holder
		stop := err != nil
		c.mu.Unlock()
		if stop && err != io.EOF && !errors.Is(err, os.ErrDeadlineExceeded) {
			c.log.Info("tcp read failed", "err", err)
		}
		wake(h)
		if stop {
			return
		}
	}
}

func resetReason(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset by the target"
	case errors.Is(err, syscall.EPIPE):
		return "broken pipe"
	}
	return err.Error()
}

func (c *Channel) writeLoop() {
	// What one write takes: at most len(vec) messages. bufs is declared
	// once: WriteTo takes its address, so it lives on the heap.
	var vec [8][]byte
	var bufs net.Buffers
	for {
		if !c.await(func() bool { return len(c.wq) > 0 }, c.wsig) {
			return
		}
		// The data queued by now goes in one write (writev): one
		// system call, and one wake-up of the target, instead of one per
		// message. An EOF is written alone, after the data before it.
		conn, n, eof := c.conn, 0, c.wq[0].eof
		bufs = vec[:0]
		if !eof {
			for n < len(c.wq) && n < len(vec) && !c.wq[n].eof {
				bufs = append(bufs, c.wq[n].data)
				n++
			}
		} else {
			n = 1
		}
		c.mu.Unlock()

		var err error
		var wrote int64
		if eof {
			err = conn.CloseWrite()
		} else {
			wrote, err = bufs.WriteTo(conn)
		}
		clear(vec[:])
		c.mu.Lock()
		if err != nil && c.freezed && errors.Is(err, os.ErrDeadlineExceeded) {
			// Freeze cut the write short: what was written leaves the
			// queue, the rest stays for the binary that adopts the socket.
			c.frozenWrite(n, wrote)
			c.mu.Unlock()
			return
		}
		last, size := c.wq[n-1], 0
		for i := range n {
			size += len(c.wq[i].data)
			c.spare.Put(c.wq[i].buf)
			c.wq[i] = writeItem{}
		}
		c.wq = c.wq[n:]
		if err != nil {
			h := c.holder
			if !c.ended {
				c.reset = &flow.Reset{Code: flow.CodeTCPReset, Message: "writing to " + c.target + ": " + resetReason(err)}
			}
			c.mu.Unlock()
			c.log.Info("tcp write failed", "err", err)
			wake(h)
			return
		}
		c.written = last.pos
		c.bytesIn += int64(size)
		if eof {
			c.writeClosed = true
		}
		h := c.holder
		c.mu.Unlock()
		if h != nil {
			// The connection holding the channel now credits the client,
			// whichever connection delivered the bytes.
			h.req.Release(last.pos)
			if eof {
				wake(h) // tcp/closed may follow
			}
		}
	}
}
