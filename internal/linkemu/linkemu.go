package linkemu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultQueue is the bottleneck queue of a direction whose Params.Queue
// is 0.
const DefaultQueue = 1 << 20

// maxChunk is the most the proxy reads from a sender at once.
const maxChunk = 256 << 10

// minChunk is the least a chunk is cut to on a slow link (one Ethernet
// segment's payload).
const minChunk = 1460

// Params describes one direction of a link. The zero value is a link
// without delay, jitter or rate limit, with the default queue.
type Params struct {
	// Delay is the one-way propagation delay added to every chunk.
	Delay time.Duration
	// Jitter bounds a random extra delay in [-Jitter, +Jitter] per chunk
	// (the sum with Delay is at least 0); chunks keep their order.
	Jitter time.Duration
	// Rate is the bandwidth in bytes per second; 0 means unlimited.
	Rate int64
	// Queue is the bottleneck buffer in bytes: the bytes read from the
	// sender and not yet serialised at Rate (with Rate 0: all the bytes
	// the direction holds). 0 means DefaultQueue.
	Queue int64
	// Seed seeds the jitter; the n-th connection's generator is seeded
	// with Seed and n, so a run with the same seed draws the same delays.
	Seed uint64
}

// Validate reports a negative field.
func (p Params) Validate() error {
	switch {
	case p.Delay < 0:
		return fmt.Errorf("linkemu: Delay %v is negative", p.Delay)
	case p.Jitter < 0:
		return fmt.Errorf("linkemu: Jitter %v is negative", p.Jitter)
	case p.Rate < 0:
		return fmt.Errorf("linkemu: Rate %d is negative", p.Rate)
	case p.Queue < 0:
		return fmt.Errorf("linkemu: Queue %d is negative", p.Queue)
	}
	return nil
}

func (p Params) withDefaults() Params {
	if p.Queue == 0 {
		p.Queue = DefaultQueue
	}
	return p
}

// chunkSize is the most one read takes: 256 KiB, or 1 ms of the rate.
func (p Params) chunkSize() int {
	n := int64(maxChunk)
	if p.Rate > 0 {
		n = min(n, max(p.Rate/1000, minChunk))
	}
	return int(min(n, max(p.Queue, 1)))
}

// bound is the most a direction of one connection holds.
func (p Params) bound() int64 {
	b := p.Queue
	if p.Rate > 0 {
		b += int64(float64(p.Rate)*(p.Delay+p.Jitter).Seconds()) + int64(p.chunkSize())
	}
	return b
}

// DirStats counts one direction of a Link over all its connections.
type DirStats struct {
	Held    int64 // bytes read from senders and not yet written, now
	MaxHeld int64 // the most Held has been
	Bytes   int64 // bytes delivered
}

// Stats is what Link.Stats returns.
type Stats struct {
	Up, Down DirStats
}

// dirCounters is the atomic form of DirStats.
type dirCounters struct {
	held, maxHeld, bytes atomic.Int64
}

func (c *dirCounters) add(n int64) {
	h := c.held.Add(n)
	for {
		m := c.maxHeld.Load()
		if h <= m || c.maxHeld.CompareAndSwap(m, h) {
			return
		}
	}
}

func (c *dirCounters) load() DirStats {
	return DirStats{Held: c.held.Load(), MaxHeld: c.maxHeld.Load(), Bytes: c.bytes.Load()}
}

// Link is a running emulated link: a listener on 127.0.0.1 whose
// connections are forwarded to the target.
type Link struct {
	target   string
	up, down Params
	ln       net.Listener
	ctx      context.Context // cancelled by Close: stops dials
	cancel   context.CancelFunc
	wg       sync.WaitGroup // the accept loop and every connection's goroutines
	stats    [2]dirCounters // [0] up, [1] down

	mu     sync.Mutex // guards the fields below
	closed bool
	conns  map[*pair]struct{}
	nconns uint64 // connections accepted so far, for the seeds
}

// Start listens on an ephemeral port of 127.0.0.1 and forwards each
// connection to target through a link with the parameters up (from the
// connecting client to target) and down (back).
func Start(target string, up, down Params) (*Link, error) {
	return StartOn("127.0.0.1:0", target, up, down)
}

// StartOn is Start listening on addr, which must be a loopback address
// (the linkemu command's -listen).
func StartOn(addr, target string, up, down Params) (*Link, error) {
	if host, _, err := net.SplitHostPort(addr); err != nil || !net.ParseIP(host).IsLoopback() {
		return nil, fmt.Errorf("linkemu: listen address %q: want a loopback host:port", addr)
	}
	if err := up.Validate(); err != nil {
		return nil, fmt.Errorf("up: %w", err)
	}
	if err := down.Validate(); err != nil {
		return nil, fmt.Errorf("down: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("linkemu: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Link{
		target: target, up: up.withDefaults(), down: down.withDefaults(),
		ln: ln, ctx: ctx, cancel: cancel, conns: map[*pair]struct{}{},
	}
	l.wg.Go(l.accept)
	return l, nil
}

// Addr returns the address clients connect to.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// Stats returns the bytes held and delivered per direction.
func (l *Link) Stats() Stats {
	return Stats{Up: l.stats[0].load(), Down: l.stats[1].load()}
}

// Close stops accepting, closes every forwarded connection on both sides
// and returns when all of the Link's goroutines have ended.
func (l *Link) Close() error {
	l.mu.Lock()
	l.closed = true
	for p := range l.conns {
		p.abort(false)
	}
	l.mu.Unlock()
	l.cancel()
	err := l.ln.Close()
	l.wg.Wait()
	return err
}

func (l *Link) accept() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return // closed
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			c.Close()
			return
		}
		n := l.nconns
		l.nconns++
		l.mu.Unlock()
		l.wg.Go(func() { l.serve(c.(*net.TCPConn), n) })
	}
}

// serve dials the target for the client c and forwards until both
// directions have ended.
func (l *Link) serve(c *net.TCPConn, n uint64) {
	var d net.Dialer
	tc, err := d.DialContext(l.ctx, "tcp", l.target)
	if err != nil {
		c.SetLinger(0)
		c.Close()
		return
	}
	p := &pair{client: c, target: tc.(*net.TCPConn), done: make(chan struct{})}
	// The bottleneck queue is the link's buffer: the proxy's own receive
	// buffers stay small, so that the sender's bytes wait there or in the
	// sender's socket, as they would at a full router, and not in a
	// megabyte of kernel buffer ahead of the emulated queue.
	_ = c.SetReadBuffer(socketReadBuffer)
	_ = p.target.SetReadBuffer(socketReadBuffer)
	p.dirs[0] = newDir(p, l.up, &l.stats[0], n, c, p.target)
	p.dirs[1] = newDir(p, l.down, &l.stats[1], n, p.target, c)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		p.abort(false)
		return
	}
	l.conns[p] = struct{}{}
	l.mu.Unlock()

	var wg sync.WaitGroup
	for _, d := range p.dirs {
		wg.Go(d.read)
		wg.Go(d.write)
	}
	wg.Wait()
	p.abort(false) // both directions ended: close both sides
	l.mu.Lock()
	delete(l.conns, p)
	l.mu.Unlock()
	for _, d := range p.dirs {
		d.stats.held.Add(-d.held) // what an abort left behind
	}
}

// socketReadBuffer is the proxy's receive buffer per socket.
const socketReadBuffer = 64 << 10

// pair is one forwarded connection: the client's socket and the target's.
type pair struct {
	client, target *net.TCPConn
	dirs           [2]*dir
	once           sync.Once
	done           chan struct{} // closed by abort
}

// abort closes both sockets (with an RST if reset) and wakes every
// goroutine of the pair.
func (p *pair) abort(reset bool) {
	p.once.Do(func() {
		if reset {
			p.client.SetLinger(0)
			p.target.SetLinger(0)
		}
		p.client.Close()
		p.target.Close()
		close(p.done)
		for _, d := range p.dirs {
			if d == nil {
				continue
			}
			d.mu.Lock()
			d.aborted = true
			d.cond.Broadcast()
			d.mu.Unlock()
		}
	})
}

// chunk is a piece of the stream in flight, or its end (buf nil).
type chunk struct {
	buf []byte
	due time.Time // when it is delivered
}

// dir is one direction of a pair: its reader fills the queue from src,
// its writer empties it into dst.
type dir struct {
	p        *pair
	params   Params
	stats    *dirCounters
	src, dst *net.TCPConn
	rng      *rand.Rand // the reader's
	chunk    int
	bound    int64

	// Owned by the reader.
	lastLeave time.Time // when the bottleneck finishes its last chunk
	lastDue   time.Time // the last chunk's delivery time

	mu      sync.Mutex // guards the fields below
	cond    *sync.Cond // signalled when queue, held or aborted change
	queue   []chunk
	held    int64 // bytes in queue, and in the writer's hands
	aborted bool
}

func newDir(p *pair, params Params, stats *dirCounters, n uint64, src, dst *net.TCPConn) *dir {
	d := &dir{
		p: p, params: params, stats: stats, src: src, dst: dst,
		rng:   rand.New(rand.NewPCG(params.Seed, n)),
		chunk: params.chunkSize(), bound: params.bound(),
	}
	d.cond = sync.NewCond(&d.mu)
	return d
}

var bufs = sync.Pool{New: func() any { b := make([]byte, maxChunk); return &b }}

// room waits until the direction can take a read and returns how many
// bytes it may read, or 0 when the pair was aborted.
func (d *dir) room() int {
	d.mu.Lock()
	for !d.aborted && d.bound-d.held < int64(min(d.chunk, int(d.bound))) {
		d.cond.Wait()
	}
	room := d.bound - d.held
	aborted := d.aborted
	d.mu.Unlock()
	if aborted {
		return 0
	}
	n := min(int64(d.chunk), room)
	if d.params.Rate == 0 {
		return int(n)
	}
	// The bottleneck's backlog is what it has not serialised by now; wait
	// until n more bytes fit in its queue.
	for {
		// An idle bottleneck (lastLeave past, or never set) has none:
		// the rate times the zero time's distance overflowed int64 at
		// gigabit rates and left the queue never free.
		backlog := int64(0)
		if until := time.Until(d.lastLeave); until > 0 {
			backlog = int64(float64(d.params.Rate) * until.Seconds())
		}
		free := d.params.Queue - backlog
		if free >= n {
			return int(n)
		}
		wait := time.Duration(float64(n-free) / float64(d.params.Rate) * float64(time.Second))
		if !d.sleep(max(wait, 50*time.Microsecond)) {
			return 0
		}
	}
}

// sleep waits for t, or until the pair is aborted (then false).
func (d *dir) sleep(t time.Duration) bool {
	tm := time.NewTimer(t)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-d.p.done:
		return false
	}
}

// schedule returns the delivery time of n bytes read at now (n = 0: the
// end of the stream).
func (d *dir) schedule(now time.Time, n int) time.Time {
	leave := now
	if d.params.Rate > 0 {
		if leave.Before(d.lastLeave) {
			leave = d.lastLeave
		}
		leave = leave.Add(time.Duration(float64(n) / float64(d.params.Rate) * float64(time.Second)))
		d.lastLeave = leave
	}
	delay := d.params.Delay
	if j := d.params.Jitter; j > 0 {
		delay += time.Duration(d.rng.Int64N(int64(2*j)+1)) - j
	}
	due := leave.Add(max(delay, 0))
	if due.Before(d.lastDue) {
		due = d.lastDue // never overtake the chunk before
	}
	d.lastDue = due
	return due
}

func (d *dir) push(c chunk) {
	d.mu.Lock()
	d.queue = append(d.queue, c)
	n := int64(len(c.buf))
	d.held += n
	d.stats.add(n) // under mu, so that the counter never exceeds the bound
	d.cond.Broadcast()
	d.mu.Unlock()
}

// read is the reader goroutine.
func (d *dir) read() {
	for {
		n := d.room()
		if n == 0 {
			return
		}
		bp := bufs.Get().(*[]byte)
		m, err := d.src.Read((*bp)[:n])
		now := time.Now()
		if m > 0 {
			d.push(chunk{buf: (*bp)[:m], due: d.schedule(now, m)})
		} else {
			bufs.Put(bp)
		}
		if errors.Is(err, io.EOF) {
			d.push(chunk{due: d.schedule(now, 0)})
			return
		}
		if err != nil {
			d.p.abort(!errors.Is(err, net.ErrClosed))
			return
		}
	}
}

// write is the writer goroutine.
func (d *dir) write() {
	for {
		d.mu.Lock()
		for !d.aborted && len(d.queue) == 0 {
			d.cond.Wait()
		}
		if d.aborted {
			d.mu.Unlock()
			return
		}
		c := d.queue[0]
		d.queue[0] = chunk{}
		d.queue = d.queue[1:]
		d.mu.Unlock()

		if wait := time.Until(c.due); wait > 0 && !d.sleep(wait) {
			return
		}
		if c.buf == nil {
			d.dst.CloseWrite()
			return
		}
		_, err := d.dst.Write(c.buf)
		n := int64(len(c.buf))
		buf := c.buf[:cap(c.buf)]
		bufs.Put(&buf)
		d.mu.Lock()
		d.held -= n
		d.stats.held.Add(-n)
		d.cond.Broadcast()
		d.mu.Unlock()
		if err != nil {
			d.p.abort(true)
			return
		}
		d.stats.bytes.Add(n)
	}
}
