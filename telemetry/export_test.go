package telemetry

import (
	"time"

	dto "github.com/prometheus/client_model/go"
)

// QueueLen returns the viewer's queue length in entries and batches.
func (s *Sub) QueueLen() (entries, batches int) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.q.Len(), s.qBatches
}

// PublishWork returns what Publish did for the viewers so far: queue
// entries it visited and samples it encoded (see publishWork).
func (c *Channel) PublishWork() (visited, encoded int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.work.visited, c.work.encoded
}

// Coalesced returns the samples (one per series) the viewer's queued
// coalesced batches hold, and whether it is behind (a span to coalesce
// when Pull reaches it).
func (s *Sub) Coalesced() (series int64, behind bool) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.kept, s.behind
}

// PinnedBytes returns the bytes of batch texts the series index keeps for
// its newest samples, and their bound.
func (c *Channel) PinnedBytes() (pinned, bound int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.index.pinned, maxPinned
}

// HeldOf returns the bytes of a command's output a state carries, read
// and not yet parsed (nil: none, or no command's child).
func HeldOf(state []byte) []byte {
	r, err := decodeState(state)
	if err != nil || r.child == nil {
		return nil
	}
	return r.child.held
}

// Adapter is a scrape source's converter of metric families to samples
// (promAdapter), built from cfg's filters, histogram mode, quantiles and
// MaxSeries.
type Adapter struct{ a promAdapter }

// NewAdapter checks cfg (its URL may be any valid one) and returns its
// converter.
func NewAdapter(cfg ScrapeConfig) (*Adapter, error) {
	t, err := cfg.build()
	if err != nil {
		return nil, err
	}
	return &Adapter{t.adapter}, nil
}

// Adapt converts one scrape's families at now; it returns the samples
// and how many were invalid or beyond MaxSeries.
func (a *Adapter) Adapt(fams []*dto.MetricFamily, now time.Time) (out []Sample, invalid, beyond int) {
	out, st := a.a.adapt(fams, now)
	return out, st.Invalid, st.Beyond
}

// Remembered is the number of cumulative values kept for rates.
func (a *Adapter) Remembered() int { return len(a.a.prev) }

// BucketQuantile is bucketQuantile.
func BucketQuantile(q float64, bounds, cum []float64) float64 { return bucketQuantile(q, bounds, cum) }
