package telemetry

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"slices"
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
	// CoalesceLatest replaces what the viewer missed with the newest
	// sample of each series it updated (at most CoalesceSeries of them),
	// carried by the newest seqs of that span; the span's other seqs are
	// reported dropped with the samples lost.
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
	// DefaultMaxSeries bounds the series a channel admits: with 10,000
	// series its index is a few MiB. A sample of a new series beyond it is
	// refused and counted (Stats.SeriesRefused).
	DefaultMaxSeries = 10_000
	// DefaultSeriesIdle is how long a series counts toward MaxSeries
	// after its last sample (Prometheus forgets a series after 5 min).
	DefaultSeriesIdle = 5 * time.Minute
	// DefaultCoalesceSeries bounds the series one coalescing viewer's
	// catch-up holds: about what half of DefaultQueueBytes holds of
	// samples of 100–200 bytes.
	DefaultCoalesceSeries = 4096
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
	// MaxSeries bounds the series (a name and its labels) the channel
	// admits, whatever its policy. A sample of a new series beyond it is
	// not published: it is counted in Stats.SeriesRefused and logged (at
	// most once a minute). Default DefaultMaxSeries; at least 1.
	MaxSeries int
	// SeriesIdle is how long a series without samples still counts
	// toward MaxSeries (and, under CoalesceLatest, how long its newest
	// sample is kept for viewers that are behind). Default
	// DefaultSeriesIdle; negative: until the channel closes.
	SeriesIdle time.Duration
	// CoalesceSeries bounds the series a CoalesceLatest viewer's
	// catch-up keeps (the most recently updated); the others of its span
	// are counted in its telemetry/dropped. Default
	// DefaultCoalesceSeries; at least 1.
	CoalesceSeries int
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
	if c.MaxSeries == 0 {
		c.MaxSeries = DefaultMaxSeries
	}
	if c.SeriesIdle == 0 {
		c.SeriesIdle = DefaultSeriesIdle
	}
	if c.CoalesceSeries == 0 {
		c.CoalesceSeries = DefaultCoalesceSeries
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
	case c.MaxSeries < 1:
		return errors.New("telemetry: MaxSeries: must be at least 1")
	case c.CoalesceSeries < 1:
		return errors.New("telemetry: CoalesceSeries: must be at least 1")
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

// batch is one telemetry/samples message. A published one is immutable
// (but for pins) and shared by the history and every viewer's queue; a
// coalesced one (Sub.coalesceSpan) is its viewer's own.
type batch struct {
	seq       uint64
	n         int64 // samples
	text      string
	size      int64     // UTF-16 bytes of text
	at        time.Time // when it was published (history age)
	coalesced bool
	pins      int32 // series whose newest sample is a part of text (seriesIndex; c.mu)
}

func makeBatch(seq uint64, body []byte, n int64, at time.Time) *batch {
	t := make([]byte, 0, len(samplesPrefix)+20+len(samplesMiddle)+len(body)+len(samplesSuffix))
	t = append(t, samplesPrefix...)
	t = strconv.AppendUint(t, seq, 10)
	t = append(t, samplesMiddle...)
	t = append(t, body...)
	t = append(t, samplesSuffix...)
	text := unsafe.String(unsafe.SliceData(t), len(t))
	return &batch{seq: seq, n: n, text: text, size: flow.UTF16Len(text), at: at}
}

// envelopeSize is the UTF-16 size of a telemetry/samples message with
// seq and an empty body.
func envelopeSize(seq uint64) int64 {
	var d [20]byte
	return 2 * int64(len(samplesPrefix)+len(strconv.AppendUint(d[:0], seq, 10))+len(samplesMiddle)+len(samplesSuffix))
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
	src     Source
	cancel  context.CancelFunc
	wg      sync.WaitGroup // the source
	once    sync.Once
	closing chan struct{} // closed when Close starts
	done    chan struct{} // closed when Close has finished

	// Publish's, under pubMu, which serializes it: hashing and encoding
	// happen outside mu, in seq order.
	pubMu  sync.Mutex
	enc    []byte // the encoding buffer
	hash   maphash.Hash
	hashes []uint64
	adm    []Sample   // the samples admitted, and their series
	admSer []*series  //
	parts  []bodyPart // CoalesceLatest: where each sample of a batch is in its body

	mu        sync.Mutex // guards what follows
	next      uint64     // the seq of the next batch
	hist      deque[*batch]
	histBytes int64
	subs      []*Sub // the viewers Publish pushes to; Sub.at is the index
	parked    []*Sub // the viewers behind (CoalesceLatest), which it skips
	closed    bool
	exitErr   error // the source ended with it
	batches   int64 // published
	samples   int64
	bytes     int64 // of the batches published
	dropped   int64 // samples the viewers' policies dropped, over all viewers ever
	index     seriesIndex
	refused   int64     // samples of new series refused beyond MaxSeries
	unlogged  int64     // of refused, not yet logged
	loggedAt  time.Time // when a refusal was last logged
	scratch   []coalescePart
	work      publishWork
}

// bodyPart is where a sample is in a batch's body, and its UTF-16 size.
type bodyPart struct {
	start, end int
	size       int64
}

// publishWork counts what Publish did for the viewers, for tests of its
// cost (export_test.go): queue entries it visited, and samples it encoded.
type publishWork struct {
	visited, encoded int64
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
	// Series is the series the channel holds (at most MaxSeries);
	// SeriesRefused the samples of new series refused beyond it, which
	// were not published: it never decreases.
	Series        int
	SeriesRefused int64
}

// New makes a channel and starts src (nil for a push channel, which gets
// its samples from Publish only).
func New(cfg Config, src Source) (*Channel, error) {
	return newChannel(cfg, src, nil)
}

// newChannel is New with init run on the channel before its source
// starts (NewRestored).
func newChannel(cfg Config, src Source, init func(*Channel)) (*Channel, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	c := &Channel{
		cfg: cfg, log: cfg.Logger.With("source", cfg.Source), src: src, cancel: cancel,
		closing: make(chan struct{}), done: make(chan struct{}),
		next: 1,
	}
	c.index.init()
	if init != nil {
		init(c)
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
	} else if s := c.SourceStatus(); s != "" {
		d.Detail += ", " + s // a scrape's last failure (its source goes on)
	}
	return d
}

// Source is the channel's source (nil for a push channel).
func (c *Channel) Source() Source { return c.src }

// SourceStatus is what went wrong with a source that goes on (a scrape's
// last failure), "" when nothing did or the source has no such report.
func (c *Channel) SourceStatus() string {
	if st, ok := c.src.(interface{ Status() string }); ok {
		return st.Status()
	}
	return ""
}

// Stats returns the channel's counters.
func (c *Channel) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Seq: c.next, Batches: c.batches, Samples: c.samples, Viewers: len(c.subs) + len(c.parked), Dropped: c.dropped, HistoryBytes: c.histBytes, HistoryLen: c.hist.Len(),
		Series: c.index.n, SeriesRefused: c.refused}
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
		subs := slices.Concat(c.subs, c.parked)
		c.hist = deque[*batch]{}
		c.histBytes = 0
		c.index = seriesIndex{}
		c.index.init()
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
// queue; it never waits for a viewer, and its cost is that of the samples
// plus O(1) per viewer. Every sample is checked first (Normalize; labels
// may be reordered in place): an invalid one refuses the whole call with
// a *SampleError naming its index, and nothing is published. A sample of
// a new series beyond MaxSeries is not published either, but the others
// are: it is counted (Stats.SeriesRefused) and logged, at most once a
// minute.
func (c *Channel) Publish(samples []Sample) error {
	for i := range samples {
		if err := samples[i].Normalize(); err != nil {
			return &SampleError{Index: i, Err: err}
		}
	}
	c.pubMu.Lock()
	defer c.pubMu.Unlock()
	hs := c.hashes[:0]
	for i := range samples {
		hs = append(hs, hashSeries(&c.hash, &samples[i]))
	}
	c.hashes = hs
	now := time.Now()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	adm, ser, toLog := c.admit(samples, hs, now)
	c.mu.Unlock()
	if toLog > 0 {
		c.log.Warn("telemetry channel at its series limit: samples of new series refused", "maxSeries", c.cfg.MaxSeries, "refused", toLog)
	}
	defer func() {
		// Let go of the caller's strings.
		clear(c.adm)
		clear(c.admSer)
		c.adm = c.adm[:0]
	}()
	coalesce := c.cfg.Policy == CoalesceLatest
	maxBody := c.cfg.MaxBatchBytes - batchOverhead
	for len(adm) > 0 {
		// Encode one batch's samples outside mu; the seq is added under it.
		body := c.enc[:0]
		parts := c.parts[:0]
		var n int
		var size int64
		for n < len(adm) && n < c.cfg.MaxBatchSamples {
			start := len(body)
			if n > 0 {
				body = append(body, ',')
			}
			body = adm[n].AppendJSON(body)
			sz := flow.UTF16Len(unsafe.String(unsafe.SliceData(body[start:]), len(body)-start))
			if n > 0 && size+sz > maxBody {
				body = body[:start]
				break
			}
			size += sz
			if coalesce {
				// The viewers' catch-up is made of these (Sub.coalesceSpan).
				if n > 0 {
					start, sz = start+1, sz-2 // without the comma
				}
				parts = append(parts, bodyPart{start, len(body), sz})
			}
			n++
		}
		c.enc, c.parts = body, parts
		if !coalesce {
			parts = nil
		}
		if err := c.publishBatch(body, ser[:n], parts); err != nil {
			return err
		}
		adm, ser = adm[n:], ser[n:]
	}
	return nil
}

// admit returns the samples whose series the channel holds or takes in
// (MaxSeries), and their series; it counts the others, and returns how
// many refusals to log now; c.mu is held.
func (c *Channel) admit(samples []Sample, hs []uint64, now time.Time) (adm []Sample, ser []*series, toLog int64) {
	if c.cfg.SeriesIdle > 0 {
		c.index.expire(now.Add(-c.cfg.SeriesIdle))
	}
	adm, ser = samples, c.admSer[:0]
	var refused int64
	for i := range samples {
		s := &samples[i]
		e := c.index.find(hs[i], s)
		if e == nil {
			if c.index.n >= c.cfg.MaxSeries {
				if refused == 0 { // copy the others from now on
					adm = append(c.adm[:0], samples[:i]...)
				}
				refused++
				continue
			}
			e = c.index.add(hs[i], s, now)
		}
		e.lastAt = now
		ser = append(ser, e)
		if refused > 0 {
			adm = append(adm, *s)
		}
	}
	if refused > 0 {
		c.adm = adm
	}
	c.admSer = ser
	if refused > 0 {
		c.refused += refused
		c.unlogged += refused
		if c.loggedAt.IsZero() || now.Sub(c.loggedAt) >= time.Minute {
			toLog, c.unlogged, c.loggedAt = c.unlogged, 0, now
		}
	}
	return adm, ser, toLog
}

// publishBatch publishes one batch: its body, its samples' series and,
// under CoalesceLatest, where each is in the body.
func (c *Channel) publishBatch(body []byte, ser []*series, parts []bodyPart) error {
	now := time.Now()
	var wake []*Sub
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	n := int64(len(ser))
	b := makeBatch(c.next, body, n, now)
	c.next++
	c.batches++
	c.samples += n
	c.bytes += b.size
	c.work.encoded += n
	off := len(b.text) - len(samplesSuffix) - len(body)
	for i, e := range ser {
		if parts == nil {
			c.index.touch(e, b, "", 0)
			continue
		}
		p := parts[i]
		c.index.touch(e, b, b.text[off+p.start:off+p.end], p.size)
	}
	if c.cfg.History > 0 && c.cfg.HistoryBatches > 0 && b.size <= c.cfg.HistoryBytes {
		c.hist.Push(b)
		c.histBytes += b.size
	}
	c.trimHistory(now)
	// Backwards, so that a viewer parked (replaced by the last) is
	// replaced by one already visited.
	for i := len(c.subs) - 1; i >= 0; i-- {
		s := c.subs[i]
		if s.push(b) {
			wake = append(wake, s)
		}
		if s.behind {
			moveSub(&c.subs, &c.parked, s)
		}
	}
	c.mu.Unlock()
	for _, s := range wake {
		s.wake()
	}
	return nil
}

// moveSub moves s from the list from (where s.at is its index) to the
// end of to; c.mu is held.
func moveSub(from, to *[]*Sub, s *Sub) {
	removeSub(from, s)
	s.at = len(*to)
	*to = append(*to, s)
}

// removeSub removes s from the list l, where s.at is its index; c.mu is
// held.
func removeSub(l *[]*Sub, s *Sub) {
	subs := *l
	last := subs[len(subs)-1]
	last.at = s.at
	subs[s.at] = last
	subs[len(subs)-1] = nil
	*l = subs[:len(subs)-1]
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
		b := c.hist.At(i)
		s.q.Push(entry{b: b})
		s.qBatches++
		s.qBytes += b.size
	}
	s.syncBudget()
	s.readyAfter = c.next
	s.initial = flow.InitialLive
	if s.qBatches > 0 {
		s.initial = flow.InitialReplay
	}
	s.at = len(c.subs)
	c.subs = append(c.subs, s)
	n, replay := len(c.subs)+len(c.parked), s.qBatches // read under c.mu: the producer pushes to s once it is in c.subs
	c.mu.Unlock()
	c.log.Debug("telemetry viewer attached", "viewers", n, "replay", replay)
	return s, nil
}
