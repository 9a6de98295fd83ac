package telemetry

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"sync/atomic"
	"unsafe"

	"github.com/ahp-dev/ahpd/flow"
)

var _ flow.Subscriber = (*Sub)(nil)

// entry is one item of a viewer's queue: a batch to send, or (b nil) a
// range of seqs dropped from it, [from, to] with count samples, to be sent
// as one telemetry/dropped.
type entry struct {
	b        *batch
	from, to uint64
	count    int64
}

func (e entry) first() uint64 {
	if e.b != nil {
		return e.b.seq
	}
	return e.from
}

// Sub is one viewer of a telemetry channel. Its queue holds the batches
// not yet pulled, in seq order, and in place of those its policy dropped,
// ranges to report; the seqs it covers are contiguous, from the first the
// viewer got (history or live) to the newest — or, when a CoalesceLatest
// viewer is behind, to the seq before its span (see goBehind). Batches
// are shared with the channel and the other viewers; only coalesced ones
// are its own.
//
// Bounds: at most QueueBatches batches and QueueBytes bytes of them, and
// no more ranges than batches plus two (adjacent ranges merge, so ranges
// are separated by batches, except once across the start of live ones);
// the coalesced batches hold at most CoalesceSeries samples and half the
// queue. Being behind costs a few words, however long the span.
type Sub struct {
	c      *Channel
	at     int // its index in c.subs, or in c.parked while behind; guarded by c.mu
	wakeFn func()
	budget *flow.Budget // the connection's queue budget (AttachRequest.Queue), or nil

	// Guarded by c.mu.
	q          deque[entry]
	qBatches   int
	qBytes     int64
	kept       int64 // the samples of the queued coalesced batches
	behind     bool  // CoalesceLatest: the seqs from span.from on are to coalesce
	span       span
	readyAfter uint64 // the first live seq: channel/ready comes before it
	readySent  bool
	initial    string
	waiting    bool // Pull found nothing: wake on news
	closed     bool
	loss       Loss
	charged    int64 // the bytes of qBytes taken from budget (see syncBudget)

	// The pulling goroutine's.
	buf  []byte
	sent atomic.Int64
}

// span is what a behind CoalesceLatest viewer will coalesce: the seqs
// from on, up to the newest when Pull reaches them. The channel's
// counters, less the bases, are the samples and bytes of the span's
// batches; lost is the samples counted lost already, in the ranges the
// span took over.
type span struct {
	from                   uint64
	baseSamples, baseBytes int64
	lost                   int64
}

// Loss counts what a viewer's policy dropped.
type Loss struct {
	Samples int64 // samples lost (the sum of the counts reported)
	Seqs    int64 // seqs reported in telemetry/dropped ranges pulled
	Bytes   int64 // bytes of the batches dropped
	Ranges  int64 // telemetry/dropped messages pulled
}

func (s *Sub) wake() {
	if s.wakeFn != nil {
		s.wakeFn()
	}
}

// full reports whether a batch of size bytes does not fit the viewer's
// queue or the connection's queue budget; c.mu is held.
func (s *Sub) full(size int64) bool {
	cfg := &s.c.cfg
	return s.qBatches+1 > cfg.QueueBatches || s.qBytes+size > cfg.QueueBytes || s.budgetRoom() < size
}

// budgetRoom is what the connection's queue budget has left for this
// viewer, counting what it dropped since the last syncBudget; c.mu is
// held.
func (s *Sub) budgetRoom() int64 {
	if s.budget == nil {
		return math.MaxInt64
	}
	return s.budget.Left() + s.charged - s.qBytes
}

// syncBudget brings what the viewer has taken from the connection's
// queue budget in line with its queued bytes: it takes what it queued
// since and gives back what it sent or dropped; c.mu is held.
func (s *Sub) syncBudget() {
	if s.budget == nil {
		return
	}
	switch d := s.qBytes - s.charged; {
	case d > 0:
		s.budget.Take(d)
	case d < 0:
		s.budget.Give(-d)
	}
	s.charged = s.qBytes
}

// push queues b under the channel's policy and reports whether the viewer
// should be woken; c.mu is held.
func (s *Sub) push(b *batch) bool {
	if s.closed {
		return false
	}
	s.c.work.visited++
	switch {
	case !s.full(b.size):
		s.pushBatch(b)
	case s.c.cfg.Policy == DropNewest:
		s.dropNew(b)
	case s.c.cfg.Policy == CoalesceLatest && s.readySent:
		s.goBehind(b)
	default: // DropOldest, and CoalesceLatest during the initial replay
		for s.full(b.size) && s.qBatches > 0 {
			s.dropOldest()
		}
		if s.full(b.size) {
			// The connection's other viewers hold its queue budget: this
			// one has nothing left to drop but the new batch.
			s.dropNew(b)
			break
		}
		s.pushBatch(b)
	}
	s.syncBudget()
	w := s.waiting
	s.waiting = false
	return w
}

func (s *Sub) pushBatch(b *batch) {
	s.q.Push(entry{b: b})
	s.qBatches++
	s.qBytes += b.size
}

// mergeable reports whether range b directly follows range a and may be
// reported with it: not across the start of live batches while
// channel/ready is still to come.
func (s *Sub) mergeable(a, b entry) bool {
	if a.to+1 != b.from {
		return false
	}
	return s.readySent || a.to >= s.readyAfter || b.from < s.readyAfter
}

// dropOldest drops the oldest queued batch; c.mu is held.
func (s *Sub) dropOldest() {
	for i := 0; i < s.q.Len(); i++ {
		s.c.work.visited++
		if s.q.At(i).b != nil {
			s.dropAt(i)
			return
		}
	}
}

// dropAt replaces the batch at i with a dropped range, merged with its
// neighbours; c.mu is held.
func (s *Sub) dropAt(i int) {
	b := s.q.At(i).b
	s.qBatches--
	s.qBytes -= b.size
	if b.coalesced {
		s.kept -= b.n
	}
	s.lost(b)
	d := entry{from: b.seq, to: b.seq, count: b.n}
	s.q.Set(i, d)
	if i+1 < s.q.Len() {
		if nx := s.q.At(i + 1); nx.b == nil && s.mergeable(d, nx) {
			d.to, d.count = nx.to, d.count+nx.count
			s.q.Set(i+1, d)
			s.q.RemoveAt(i)
		}
	}
	if i > 0 {
		if pv := s.q.At(i - 1); pv.b == nil && s.mergeable(pv, d) {
			pv.to, pv.count = d.to, pv.count+d.count
			s.q.Set(i, pv)
			s.q.RemoveAt(i - 1)
		}
	}
}

func (s *Sub) lost(b *batch) {
	s.loss.Samples += b.n
	s.c.dropped += b.n
	s.loss.Bytes += b.size
}

// dropNew reports b dropped after what is queued (DropNewest); c.mu is
// held.
func (s *Sub) dropNew(b *batch) {
	s.lost(b)
	d := entry{from: b.seq, to: b.seq, count: b.n}
	if s.q.Len() > 0 {
		if t := s.q.Back(); t.b == nil && s.mergeable(t, d) {
			t.to, t.count = d.to, t.count+d.count
			s.q.Set(s.q.Len()-1, t)
			return
		}
	}
	s.q.Push(d)
}

// goBehind starts the span a CoalesceLatest viewer coalesces once Pull
// reaches it (coalesceSpan) with b, whose queue is full: the entries after
// the last coalesced batch still queued (all of them, if none is) leave
// the queue for the span, which then takes every batch published until
// Pull reaches it. Being behind holds no batch and costs Publish nothing:
// the channel parks the viewer (Channel.parked) and skips it until then.
// Each entry leaves the queue once, so this is O(1) amortised per batch
// pushed. c.mu is held.
func (s *Sub) goBehind(b *batch) {
	samples, bytes, lost := b.n, b.size, int64(0)
	from := b.seq
	for s.q.Len() > 0 {
		e := s.q.Back()
		if e.b != nil && e.b.coalesced {
			break
		}
		s.c.work.visited++
		s.q.PopBack()
		from = e.first()
		if e.b != nil {
			s.qBatches--
			s.qBytes -= e.b.size
			samples += e.b.n
			bytes += e.b.size
		} else {
			samples += e.count
			lost += e.count
		}
	}
	if s.q.Len() == 0 {
		s.q.Clear()
	}
	s.behind = true
	s.span = span{from: from, baseSamples: s.c.samples - samples, baseBytes: s.c.bytes - bytes, lost: lost}
}

// coalescePart is a series' newest sample as coalesceSpan takes it.
type coalescePart struct {
	id   uint64
	json string
	size int64
}

// coalesceSpan replaces the span the viewer is behind on, seqs [from, to]
// up to the newest, with the newest sample of each series the span
// updated: of those, the most recently updated, at most CoalesceSeries
// and what fits half the queue and the connection's budget, in the order
// their series first appeared on the channel, in as few batches as they
// need (k). These take the span's newest seqs, to−k+1 … to; one
// telemetry/dropped {from, to−k, count} precedes them, count being every
// sample of the span not delivered (ranges it took over included; it may
// be 0). A series forgotten by the channel (SeriesIdle) is counted so.
// The walk visits only the series it keeps: the channel's index lists
// them by their newest seq. Called by Pull when the queue is empty; c.mu
// is held.
func (s *Sub) coalesceSpan() {
	c := s.c
	cfg := &c.cfg
	sp := s.span
	moveSub(&c.parked, &c.subs, s)
	s.behind, s.span = false, span{}
	to := c.next - 1
	seqs := int64(to-sp.from) + 1
	total, in := c.samples-sp.baseSamples, c.bytes-sp.baseBytes
	roomBytes := min(cfg.QueueBytes/2, s.budgetRoom())
	roomBatches := min(int64(cfg.QueueBatches/2), seqs)

	parts := c.scratch[:0]
	var sum int64
	for e := c.index.list.prev; e != &c.index.list && e.lastSeq >= sp.from && len(parts) < cfg.CoalesceSeries; e = e.prev {
		if sum+e.size+2 > roomBytes {
			break
		}
		sum += e.size + 2
		parts = append(parts, coalescePart{id: e.id, json: e.json, size: e.size})
	}
	slices.SortFunc(parts, func(a, b coalescePart) int { return cmp.Compare(a.id, b.id) })

	// Cut them into batches as Publish does.
	type chunk struct {
		first, n int
		body     int64
	}
	var chunks []chunk
	maxBody := cfg.MaxBatchBytes - batchOverhead
	var delivered, bytes int64
	for i := 0; i < len(parts); {
		ch := chunk{first: i}
		for i < len(parts) && ch.n < cfg.MaxBatchSamples {
			sz := parts[i].size
			if ch.n > 0 {
				sz += 2
			}
			if ch.n > 0 && ch.body+sz > maxBody {
				break
			}
			ch.body += sz
			ch.n++
			i++
		}
		chunks = append(chunks, ch)
		delivered += int64(ch.n)
		bytes += ch.body + batchOverhead
	}
	// Keep the newest chunks that fit; a seq is left for the range if
	// anything is lost.
	for len(chunks) > 0 {
		k := int64(len(chunks))
		if k <= roomBatches && bytes <= roomBytes && (k < seqs || delivered == total) {
			break
		}
		delivered -= int64(chunks[0].n)
		bytes -= chunks[0].body + batchOverhead
		chunks = chunks[1:]
	}

	k := uint64(len(chunks))
	count := total - delivered
	s.loss.Samples += count - sp.lost
	c.dropped += count - sp.lost
	if uint64(seqs) > k {
		s.q.Push(entry{from: sp.from, to: to - k, count: count})
	}
	// The batches' texts are written now, in memory of their own: a
	// sample's encoding is a part of its batch's text, which it would
	// otherwise keep, beyond what the queue counts.
	var out int64
	for i, ch := range chunks {
		seq := to - k + 1 + uint64(i)
		n := len(samplesPrefix) + 20 + len(samplesMiddle) + ch.n + len(samplesSuffix)
		for _, p := range parts[ch.first : ch.first+ch.n] {
			n += len(p.json)
		}
		t := make([]byte, 0, n)
		t = append(t, samplesPrefix...)
		t = strconv.AppendUint(t, seq, 10)
		t = append(t, samplesMiddle...)
		for j, p := range parts[ch.first : ch.first+ch.n] {
			if j > 0 {
				t = append(t, ',')
			}
			t = append(t, p.json...)
		}
		t = append(t, samplesSuffix...)
		b := &batch{seq: seq, n: int64(ch.n), text: unsafe.String(unsafe.SliceData(t), len(t)), size: envelopeSize(seq) + ch.body, coalesced: true}
		s.pushBatch(b)
		s.kept += b.n
		out += b.size
	}
	s.loss.Bytes += max(0, in-out)
	clear(parts)
	c.scratch = parts[:0]
}

// Ready reports the viewer ready at once: it starts with the history
// replay, or live.
func (s *Sub) Ready() (flow.AttachResult, bool, error) {
	return flow.AttachResult{Initial: s.initial}, true, nil
}

// Pull hands out, in seq order, the queued batches as telemetry/samples
// and the dropped ranges as telemetry/dropped, with channel/ready after the
// replay. What it returns has left the queue: the policy never drops it.
// A batch larger than a receiver's maximumMessageBytes below
// flow.MinPullSize (which cannot be split: its seq is the channel's) is
// reported dropped instead.
func (s *Sub) Pull(dataAllowed bool, maxMessageBytes int64) (flow.Message, bool) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	defer s.syncBudget()
	if s.closed || c.closed || !dataAllowed {
		s.waiting = true
		return flow.Message{}, false
	}
	for {
		if !s.readySent && (s.q.Len() == 0 || s.q.Front().first() >= s.readyAfter) {
			s.readySent = true
			return s.sentMsg(flow.Message{Text: readyMsg, Class: flow.Data, Size: 2 * int64(len(readyMsg))})
		}
		if s.q.Len() == 0 {
			if s.behind {
				s.coalesceSpan()
				continue
			}
			s.waiting = true
			return flow.Message{}, false
		}
		e := s.q.Front()
		if e.b == nil {
			s.q.PopFront()
			s.loss.Ranges++
			s.loss.Seqs += int64(e.to-e.from) + 1
			t := append(s.buf[:0], droppedPrefix...)
			t = strconv.AppendUint(t, e.from, 10)
			t = append(t, `,"toSeq":`...)
			t = strconv.AppendUint(t, e.to, 10)
			t = append(t, `,"count":`...)
			t = strconv.AppendInt(t, e.count, 10)
			t = append(t, `}}`...)
			s.buf = t
			return s.sentMsg(flow.Message{Text: unsafe.String(unsafe.SliceData(t), len(t)), Class: flow.Data, Size: 2 * int64(len(t))})
		}
		if e.b.size > maxMessageBytes && maxMessageBytes < flow.MinPullSize {
			s.dropAt(0)
			continue
		}
		s.q.PopFront()
		s.qBatches--
		s.qBytes -= e.b.size
		if e.b.coalesced {
			s.kept -= e.b.n
		}
		return s.sentMsg(flow.Message{Text: e.b.text, Class: flow.Data, Size: e.b.size})
	}
}

func (s *Sub) sentMsg(m flow.Message) (flow.Message, bool) {
	s.sent.Add(m.Size)
	return m, true
}

// Deliver refuses client messages: a telemetry channel takes none.
func (s *Sub) Deliver(method string, _ json.RawMessage, _ func()) error {
	return &flow.Reset{Code: flow.CodeProtocolError, Message: "a telemetry channel takes no client messages, got " + strconv.Quote(method)}
}

// Request answers no kind requests.
func (s *Sub) Request(method string, _ json.RawMessage) (any, error) {
	return nil, &flow.Error{Code: flow.ErrCodeMethodNotFound, Message: "method not found on a telemetry channel: " + strconv.Quote(method)}
}

// End is channel-closed once the channel is closed.
func (s *Sub) End() *flow.Reset {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return &flow.Reset{Code: flow.CodeChannelClosed, Message: "the telemetry channel was closed"}
	}
	return nil
}

// Stats returns the viewer's counters: Queued is the bytes of its queued
// batches, BytesDropped those of the batches its policy dropped.
func (s *Sub) Stats() flow.SubscriberStats {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return flow.SubscriberStats{BytesSent: s.sent.Load(), BytesDropped: s.loss.Bytes, Queued: s.qBytes}
}

// Loss returns what the viewer's policy dropped so far.
func (s *Sub) Loss() Loss {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return s.loss
}

// Close detaches the viewer; idempotent.
func (s *Sub) Close() {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if s.behind {
		removeSub(&c.parked, s)
	} else {
		removeSub(&c.subs, s)
	}
	s.q.Clear()
	s.qBatches, s.qBytes, s.kept = 0, 0, 0
	s.behind, s.span = false, span{}
	s.syncBudget()
}
