package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/ahp-dev/ahpd/flow"
)

var _ flow.Channel = (*Channel)(nil)

// Policy is what a viewer's queue does on overflow (PROTOCOL.md §8;
// docs/protocol-decisions.md, "Telemetry channels").
type Policy string

// The policies.
const (
	// DropOldest drops the oldest unsent batches (the default).
	DropOldest Policy = "drop-oldest"
	// DropNewest keeps what is queued and drops the batch that does not
	// fit.
	DropNewest Policy = "drop-newest"
	// CoalesceLatest merges the queued batches into the newest sample of
	// each series, carried by the newest seqs of the merged span; the
	// span's other seqs are reported dropped with the samples lost.
	CoalesceLatest Policy = "coalesce-latest-per-series"
)

// ParsePolicy accepts a policy name ("" is DropOldest).
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case "":
		return DropOldest, nil
	case DropOldest, DropNewest, CoalesceLatest:
		return p, nil
	}
	return "", fmt.Errorf("policy %s: want drop-oldest, drop-newest or coalesce-latest-per-series", strconv.Quote(s))
}

// Defaults of Config.
const (
	DefaultHistory         = 60 * time.Second
	DefaultHistoryBatches  = 1024
	DefaultHistoryBytes    = 2 << 20
	DefaultQueueBatches    = 512
	DefaultQueueBytes      = 1 << 20
	DefaultMaxBatchSamples = 256
	// DefaultMaxBatchBytes is also the largest batch: flow.MinPullSize,
	// the smallest message a Pull asks for when the receiver's
	// maximumMessageBytes allows it, so a batch (which cannot be split:
	// its seq is the channel's) never exceeds what a viewer may receive.
	DefaultMaxBatchBytes = flow.MinPullSize
)

// Config describes a telemetry channel. Sizes are UTF-16 bytes of the
// messages' text (PROTOCOL.md §4).
type Config struct {
	// Source names the source kind, for Describe ("system", "push", …).
	Source string
	// Title is what Describe reports as the title ("" for none).
	Title string
	// History is how old a batch may be and still be replayed to a new
	// subscriber. Default DefaultHistory; negative: no history.
	History time.Duration
	// HistoryBatches and HistoryBytes bound the history kept. Defaults
	// DefaultHistoryBatches, DefaultHistoryBytes.
	HistoryBatches int
	HistoryBytes   int64
	// QueueBatches and QueueBytes bound each viewer's queue of unsent
	// batches; beyond them Policy applies. Defaults DefaultQueueBatches,
	// DefaultQueueBytes. QueueBytes must hold two of the largest batches.
	QueueBatches int
	QueueBytes   int64
	// Policy is the overflow policy; default DropOldest.
	Policy Policy
	// MaxBatchSamples and MaxBatchBytes bound one batch (a
	// telemetry/samples message, whole). Defaults DefaultMaxBatchSamples
	// and DefaultMaxBatchBytes, which is also the maximum.
	MaxBatchSamples int
	MaxBatchBytes   int64
	// Logger; nil: discard.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.History == 0 {
		c.History = DefaultHistory
	}
	if c.HistoryBatches == 0 {
		c.HistoryBatches = DefaultHistoryBatches
	}
	if c.HistoryBytes == 0 {
		c.HistoryBytes = DefaultHistoryBytes
	}
	if c.QueueBatches == 0 {
		c.QueueBatches = DefaultQueueBatches
	}
	if c.QueueBytes == 0 {
		c.QueueBytes = DefaultQueueBytes
	}
	if c.Policy == "" {
		c.Policy = DropOldest
	}
	if c.MaxBatchSamples == 0 {
		c.MaxBatchSamples = DefaultMaxBatchSamples
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate checks the config (after defaults); the error names the field.
func (c Config) Validate() error {
	c = c.withDefaults()
	if _, err := ParsePolicy(string(c.Policy)); err != nil {
		return fmt.Errorf("telemetry: Policy: %v", err)
	}
	switch {
	case c.HistoryBatches < 0 || c.HistoryBytes < 0:
		return errors.New("telemetry: HistoryBatches, HistoryBytes: must not be negative")
	case c.QueueBatches < 2:
		return errors.New("telemetry: QueueBatches: must be at least 2")
	case c.MaxBatchSamples < 1:
		return errors.New("telemetry: MaxBatchSamples: must be at least 1")
	case c.MaxBatchBytes < MaxSampleBytes+batchOverhead || c.MaxBatchBytes > DefaultMaxBatchBytes:
		return fmt.Errorf("telemetry: MaxBatchBytes: must be %d–%d (one sample and the envelope; flow.MinPullSize)", MaxSampleBytes+batchOverhead, DefaultMaxBatchBytes)
	case c.QueueBytes < 2*c.MaxBatchBytes:
		return fmt.Errorf("telemetry: QueueBytes: must hold two batches (%d)", 2*c.MaxBatchBytes)
	}
	return nil
}

// The messages of PROTOCOL.md §8.
const (
	samplesPrefix = `{"jsonrpc":"2.0","method":"telemetry/samples","params":{"seq":`
	samplesMiddle = `,"samples":[`
	samplesSuffix = `]}}`
	droppedPrefix = `{"jsonrpc":"2.0","method":"telemetry/dropped","params":{"fromSeq":`
	readyMsg      = `{"jsonrpc":"2.0","method":"channel/ready","params":{}}`
	// batchOverhead is the UTF-16 size of a telemetry/samples message
	// without its samples, with the longest seq.
	batchOverhead = 2 * int64(len(samplesPrefix)+16+len(samplesMiddle)+len(samplesSuffix))
)

// batch is one telemetry/samples message. It is immutable once made and
// shared by the history and every viewer's queue.
type batch struct {
	seq     uint64
	n       int64 // samples
	text    string
	size    int64     // UTF-16 bytes of text
	at      time.Time // when it was published (history age)
	samples []Sample  // kept for CoalesceLatest only
}

func makeBatch(seq uint64, body []byte, n int64, at time.Time, samples []Sample) *batch {
	t := make([]byte, 0, len(samplesPrefix)+20+len(samplesMiddle)+len(body)+len(samplesSuffix))
	t = append(t, samplesPrefix...)
	t = strconv.AppendUint(t, seq, 10)
	t = append(t, samplesMiddle...)
	t = append(t, body...)
	t = append(t, samplesSuffix...)
	text := unsafe.String(unsafe.SliceData(t), len(t))
	return &batch{seq: seq, n: n, text: text, size: flow.UTF16Len(text), at: at, samples: samples}
}

// Publisher takes samples: a Channel, or a test's fake.
type Publisher interface {
	Publish(samples []Sample) error
}

// Source produces samples for a channel until its context is done.
type Source interface {
	// Run publishes samples to p until ctx is done, then returns nil. An
	// error ends the source (the channel is then exited, and its
	// Describe detail says why); the channel does not restart it.
	Run(ctx context.Context, p Publisher) error
}

// Channel is a telemetry channel (PROTOCOL.md §8): samples from one
// source, batched, numbered by a channel-wide seq and served to any
// number of viewers, each through its own bounded queue. Publishing never
// waits for a viewer.
type Channel struct {
	cfg     Config
	log     *slog.Logger
	cancel  context.CancelFunc
	wg      sync.WaitGroup // the source
	once    sync.Once
	closing chan struct{} // closed when Close starts
	done    chan struct{} // closed when Close has finished

	pubMu sync.Mutex // serializes Publish: encoding happens outside mu, in seq order
	enc   []byte     // Publish's encoding buffer (pubMu)

	mu        sync.Mutex // guards what follows
	next      uint64     // the seq of the next batch
	hist      deque[*batch]
	histBytes int64
	subs      map[*Sub]struct{}
	closed    bool
	exitErr   error // the source ended with it
	batches   int64 // published
	samples   int64
	dropped   int64 // samples the viewers' policies dropped, over all viewers ever
}

// Stats are a channel's counters.
type Stats struct {
	Seq     uint64 // the seq of the next batch
	Batches int64  // published
	Samples int64  // published
	Viewers int
	// Dropped is the samples the viewers' policies dropped (reported in
	// telemetry/dropped ranges), summed over every viewer the channel
	// had: it never decreases.
	Dropped      int64
	HistoryBytes int64
	HistoryLen   int
}

// New makes a channel and starts src (nil for a push channel, which gets
// its samples from Publish only).
func New(cfg Config, src Source) (*Channel, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	c := &Channel{
		cfg: cfg, log: cfg.Logger.With("source", cfg.Source), cancel: cancel,
		closing: make(chan struct{}), done: make(chan struct{}),
		next: 1, subs: map[*Sub]struct{}{},
	}
	if src != nil {
		c.wg.Go(func() {
			err := src.Run(ctx, c)
			if err != nil && ctx.Err() == nil {
				c.log.Info("telemetry source ended", "err", err)
				c.mu.Lock()
				c.exitErr = err
				c.mu.Unlock()
			}
		})
	}
	return c, nil
}

// Kind is "telemetry".
func (c *Channel) Kind() string { return "telemetry" }

// Config returns the channel's config, with defaults.
func (c *Channel) Config() Config { return c.cfg }

// State is running, exited once the source ended, closed after Close.
func (c *Channel) State() flow.ChannelState {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return flow.StateClosed
	case c.exitErr != nil:
		return flow.StateExited
	}
	return flow.StateRunning
}

// Describe gives the title and, as the detail, the source kind and policy
// (or why the source ended).
func (c *Channel) Describe() flow.Description {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := flow.Description{Title: c.cfg.Title, Detail: c.cfg.Source + ", " + string(c.cfg.Policy)}
	if c.exitErr != nil {
		d.Detail = c.cfg.Source + " ended: " + c.exitErr.Error()
	}
	return d
}

// Stats returns the channel's counters.
func (c *Channel) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Seq: c.next, Batches: c.batches, Samples: c.samples, Viewers: len(c.subs), Dropped: c.dropped, HistoryBytes: c.histBytes, HistoryLen: c.hist.Len()}
}

// Done is closed once Close has finished.
func (c *Channel) Done() <-chan struct{} { return c.done }

// Close stops the source (and waits for it), ends every viewer with
// channel-closed and refuses new ones; idempotent.
func (c *Channel) Close() error {
	c.once.Do(func() {
		close(c.closing)
		c.cancel()
		c.wg.Wait()
		c.mu.Lock()
		c.closed = true
		subs := make([]*Sub, 0, len(c.subs))
		for s := range c.subs {
			subs = append(subs, s)
		}
		c.hist = deque[*batch]{}
		c.histBytes = 0
		c.mu.Unlock()
		for _, s := range subs {
			s.wake()
		}
		close(c.done)
	})
	<-c.done
	return nil
}

// SampleError is Publish's error for an invalid sample: Index is its
// index in the call, Err wraps ErrInvalidSample.
type SampleError struct {
	Index int
	Err   error
}

func (e *SampleError) Error() string { return fmt.Sprintf("samples[%d]: %v", e.Index, e.Err) }
func (e *SampleError) Unwrap() error { return e.Err }

// ErrClosed is returned by Publish once the channel is closed.
var ErrClosed = errors.New("telemetry channel closed")

// Publish numbers samples into batches and hands them to every viewer's
// queue; it never waits for a viewer. Every sample is checked first
// (Normalize; labels may be reordered in place): an invalid one refuses
// the whole call with a *SampleError naming its index, and nothing is
// published.
func (c *Channel) Publish(samples []Sample) error {
	for i := range samples {
		if err := samples[i].Normalize(); err != nil {
			return &SampleError{Index: i, Err: err}
		}
	}
	c.pubMu.Lock()
	defer c.pubMu.Unlock()
	maxBody := c.cfg.MaxBatchBytes - batchOverhead
	for len(samples) > 0 {
		// Encode one batch's samples outside mu; the seq is added under it.
		body := c.enc[:0]
		var n int
		var size int64
		for n < len(samples) && n < c.cfg.MaxBatchSamples {
			start := len(body)
			if n > 0 {
				body = append(body, ',')
			}
			body = samples[n].AppendJSON(body)
			sz := flow.UTF16Len(unsafe.String(unsafe.SliceData(body[start:]), len(body)-start))
			if n > 0 && size+sz > maxBody {
				body = body[:start]
				break
			}
			size += sz
			n++
		}
		c.enc = body
		var kept []Sample
		if c.cfg.Policy == CoalesceLatest {
			kept = append([]Sample(nil), samples[:n]...)
		}
		if err := c.publishBatch(body, int64(n), kept); err != nil {
			return err
		}
		samples = samples[n:]
	}
	return nil
}

func (c *Channel) publishBatch(body []byte, n int64, kept []Sample) error {
	now := time.Now()
	var wake []*Sub
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	b := makeBatch(c.next, body, n, now, kept)
	c.next++
	c.batches++
	c.samples += n
	if c.cfg.History > 0 && c.cfg.HistoryBatches > 0 && b.size <= c.cfg.HistoryBytes {
		c.hist.Push(b)
		c.histBytes += b.size
	}
	c.trimHistory(now)
	for s := range c.subs {
		if s.push(b) {
			wake = append(wake, s)
		}
	}
	c.mu.Unlock()
	for _, s := range wake {
		s.wake()
	}
	return nil
}

// trimHistory drops batches beyond the history's bounds; c.mu is held.
func (c *Channel) trimHistory(now time.Time) {
	for c.hist.Len() > 0 {
		b := c.hist.Front()
		if c.hist.Len() <= c.cfg.HistoryBatches && c.histBytes <= c.cfg.HistoryBytes && now.Sub(b.at) <= c.cfg.History {
			break
		}
		c.hist.PopFront()
		c.histBytes -= b.size
	}
}

// Attach adds a viewer. Its queue starts with the recent history (the
// initial replay), then channel/ready, then live batches from the current
// seq (PROTOCOL.md §8). Any role may view; a telemetry channel takes no
// client messages.
func (c *Channel) Attach(req flow.AttachRequest) (flow.Subscriber, error) {
	s := &Sub{c: c, wakeFn: req.Wake, budget: req.Queue}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, &flow.Error{Code: flow.ErrCodeChannelNotFound, Message: "channel not available: the telemetry channel is closed"}
	}
	c.trimHistory(time.Now())
	// The newest history that fits the queue, oldest first.
	first, bytes := c.hist.Len(), int64(0)
	for first > 0 && c.hist.Len()-first < c.cfg.QueueBatches-1 {
		b := c.hist.At(first - 1)
		if bytes+b.size > c.cfg.QueueBytes-c.cfg.MaxBatchBytes || bytes+b.size > s.budgetRoom() {
			break
		}
		bytes += b.size
		first--
	}
	for i := first; i < c.hist.Len(); i++ {
		s.q.Push(entry{b: c.hist.At(i)})
		s.qBatches++
		s.qBytes += c.hist.At(i).size
	}
	s.syncBudget()
	s.readyAfter = c.next
	s.initial = flow.InitialLive
	if s.qBatches > 0 {
		s.initial = flow.InitialReplay
	}
	c.subs[s] = struct{}{}
	n, replay := len(c.subs), s.qBatches // read under c.mu: the producer pushes to s once it is in c.subs
	c.mu.Unlock()
	c.log.Debug("telemetry viewer attached", "viewers", n, "replay", replay)
	return s, nil
}
