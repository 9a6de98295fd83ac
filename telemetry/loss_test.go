package telemetry_test

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/telemetry"
)

// viewer pulls from a Sub on its own goroutine: fast (whenever woken) or
// slow (one message per period). It keeps the raw texts for checking
// afterwards, and checks the queue's bounds at every pull.
type viewer struct {
	s      *telemetry.Sub
	wake   chan struct{}
	texts  []string
	period time.Duration
	maxQ   int64
	maxB   int
	maxE   int
	maxGap time.Duration // the longest time between two pulls
}

func newViewer(t *testing.T, c *telemetry.Channel, period time.Duration) *viewer {
	v := &viewer{wake: make(chan struct{}, 1), period: period}
	v.s = attach(t, c, func() {
		select {
		case v.wake <- struct{}{}:
		default:
		}
	})
	return v
}

// run pulls until stop is closed and the queue is then empty.
func (v *viewer) run(stop <-chan struct{}) {
	stopped := false
	last := time.Now()
	for range 10_000_000 {
		m, ok := v.s.Pull(true, 64<<10)
		now := time.Now()
		v.maxGap, last = max(v.maxGap, now.Sub(last)), now
		if st := v.s.Stats(); st.Queued > v.maxQ {
			v.maxQ = st.Queued
		}
		if e, b := v.s.QueueLen(); e > v.maxE || b > v.maxB {
			v.maxE, v.maxB = max(e, v.maxE), max(b, v.maxB)
		}
		if ok {
			v.texts = append(v.texts, m.Text) // batches' texts are immutable; dropped ones are copied below
			if m.Text[len(`{"jsonrpc":"2.0","method":"telemetry/d`)-1] == 'd' {
				v.texts[len(v.texts)-1] = string([]byte(m.Text))
			}
			if v.period > 0 && !stopped {
				select {
				case <-time.After(v.period):
				case <-stop:
					stopped = true
				}
			}
			continue
		}
		if stopped {
			return
		}
		select {
		case <-v.wake:
		case <-stop:
			stopped = true
		}
	}
}

// check walks what the viewer got: seqs contiguous from first to last,
// every sample index delivered in order or counted in a telemetry/dropped
// between its neighbours, up to total. It returns the samples lost.
func (v *viewer) check(t *testing.T, name string, firstSeq, lastSeq uint64, total int) (lost int64, ranges int) {
	t.Helper()
	var ms []msg
	for _, tx := range v.texts {
		ms = append(ms, decode(t, flow.Message{Text: tx, Size: flow.UTF16Len(tx)}))
	}
	if len(ms) == 0 || ms[0].Method != "channel/ready" {
		t.Fatalf("%s: first message is not channel/ready", name)
	}
	checkCoverage(t, ms, firstSeq, lastSeq)
	next := int64(0)
	for _, m := range ms {
		switch m.Method {
		case "telemetry/dropped":
			if m.Params.Count <= 0 {
				t.Fatalf("%s: dropped %d-%d with count %d", name, m.Params.FromSeq, m.Params.ToSeq, m.Params.Count)
			}
			next += m.Params.Count
			lost += m.Params.Count
			ranges++
		case "telemetry/samples":
			for _, x := range m.Params.Samples {
				if int64(x.Value) != next {
					t.Fatalf("%s: seq %d: sample %v, want %d (lost silently)", name, m.Params.Seq, x.Value, next)
				}
				if want := strconv.FormatInt(next%8, 10); x.Labels["s"] != want {
					t.Fatalf("%s: sample %d: label s=%q, want %q", name, next, x.Labels["s"], want)
				}
				next++
			}
		}
	}
	if next != int64(total) {
		t.Fatalf("%s: accounts for %d samples, want %d", name, next, total)
	}
	if got := v.s.Loss().Samples; got != lost {
		t.Errorf("%s: Loss().Samples = %d, telemetry/dropped counted %d", name, got, lost)
	}
	return lost, ranges
}

// TestLossInvariants: a push producer at ≥ 50,000 samples/s for 3 s, a fast
// viewer, a slow one and one that never pulls. Publish never waits for a
// viewer; the fast viewer loses nothing; the slow one gets telemetry/dropped
// and every seq and sample is accounted for exactly; no queue exceeds its
// bounds.
func TestLossInvariants(t *testing.T) {
	if testing.Short() {
		t.Skip("3 s of load")
	}
	const (
		rate     = 50_000
		duration = 3 * time.Second
		chunk    = 250
	)
	cfg := telemetry.Config{Source: "push"}
	c := newChannel(t, cfg)
	cfg = c.Config()
	fast := newViewer(t, c, 0)
	slow := newViewer(t, c, 5*time.Millisecond)
	stalled := attach(t, c, nil)
	stalled.Pull(true, 64<<10) // channel/ready, then nothing

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { fast.run(stop) })
	wg.Go(func() { slow.run(stop) })

	total := 0
	var slowest, inPublish time.Duration
	var published time.Duration // from start until the last Publish returned
	buf := make([]telemetry.Sample, chunk)
	start := time.Now()
	for time.Since(start) < duration {
		target := int(time.Since(start).Seconds()*rate) + chunk
		for total < target {
			for i := range buf {
				n := total + i
				buf[i] = telemetry.Sample{T: float64(time.Now().UnixMilli()), Name: "load_test", Value: float64(n),
					Labels: []telemetry.Label{{Name: "s", Value: strconv.Itoa(n % 8)}}}
			}
			t0 := time.Now()
			if err := c.Publish(buf); err != nil {
				t.Fatal(err)
			}
			slowest = max(slowest, time.Since(t0))
			inPublish += time.Since(t0)
			total += chunk
		}
		published = time.Since(start)
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()

	// The producer keeps its pace: Publish never waits for a viewer (the
	// stalled one never pulls). Under the race detector on a loaded
	// machine the pace itself may not be reachable (Publish is ~10×
	// slower there), so the rate is checked without it, where 50,000/s is
	// a few percent of what Publish does (BenchmarkPublishFanout). The
	// rate is over the time until the last Publish returned: the loop
	// publishes at most a chunk ahead of the pace, so the last sleep
	// overshooting by a few ms on a loaded machine put it under 50,000/s
	// (49,908 in one CI run) without any Publish having waited.
	// Where the machine itself holds the producer back (make
	// test-stress), the pace is not reached either: what Publish must not
	// do is wait, so time spent in it beyond half the run is a failure
	// and a missed pace without that only a figure.
	r := float64(total) / published.Seconds()
	if r < rate && !raceEnabled && inPublish > elapsed/2 {
		t.Errorf("producer published %.0f samples/s, want ≥ %d; Publish took %v of %v", r, rate, inPublish, elapsed)
	}
	last := c.Stats().Seq - 1
	t.Logf("published %d samples (%.0f/s) in %d batches in %v; %v in Publish, the slowest %v", total, r, last, elapsed, inPublish, slowest)

	// The fast viewer is woken by every batch: it loses samples only when
	// it does not pull for the ~0.5 s its queue holds. A busy machine can
	// hold its goroutine back that long; then the test says nothing.
	if lost, ranges := fast.check(t, "fast", 1, last, total); lost != 0 || ranges != 0 {
		if fast.maxGap >= 100*time.Millisecond {
			t.Skipf("inconclusive: the fast viewer lost %d samples in %d ranges, but the machine held it %v between two pulls", lost, ranges, fast.maxGap)
		}
		t.Errorf("fast viewer lost %d samples in %d ranges, want none (at most %v between two pulls)", lost, ranges, fast.maxGap)
	}
	lost, ranges := slow.check(t, "slow", 1, last, total)
	if lost == 0 {
		t.Error("slow viewer lost nothing: the test did not overflow its queue")
	}
	t.Logf("slow viewer: %d messages, %d samples lost in %d ranges", len(slow.texts), lost, ranges)

	for _, v := range []*viewer{fast, slow} {
		if v.maxQ > cfg.QueueBytes || v.maxB > cfg.QueueBatches || v.maxE > 2*v.maxB+2 {
			t.Errorf("queue reached %d bytes, %d batches, %d entries; bounds %d, %d, 2×batches+2", v.maxQ, v.maxB, v.maxE, cfg.QueueBytes, cfg.QueueBatches)
		}
	}
	if st := stalled.Stats(); st.Queued > cfg.QueueBytes {
		t.Errorf("stalled viewer holds %d bytes, more than %d", st.Queued, cfg.QueueBytes)
	}
	if e, b := stalled.QueueLen(); b > cfg.QueueBatches || e > 2*b+2 {
		t.Errorf("stalled viewer holds %d entries, %d batches", e, b)
	}
	if st := c.Stats(); st.HistoryBytes > cfg.HistoryBytes || st.HistoryLen > cfg.HistoryBatches {
		t.Errorf("history holds %d bytes, %d batches; bounds %d, %d", st.HistoryBytes, st.HistoryLen, cfg.HistoryBytes, cfg.HistoryBatches)
	}
	// The stalled viewer's queue is the newest batches after one range.
	ms := pullAll(t, stalled)
	checkCoverage(t, ms, 1, last)
	if len(ms) == 0 || ms[0].Method != "telemetry/dropped" {
		t.Errorf("stalled viewer: first message %v, want telemetry/dropped", summary(ms[:1]))
	}
	// The channel's Dropped (ahpd_telemetry_dropped_samples_total) is the
	// sum of what its viewers' policies dropped.
	if got, want := c.Stats().Dropped, fast.s.Loss().Samples+slow.s.Loss().Samples+stalled.Loss().Samples; got != want {
		t.Errorf("Stats().Dropped = %d, viewers lost %d", got, want)
	}
}

// TestLossInvariantsPolicies: the same accounting for drop-newest and
// coalescing, deterministic: a viewer that pulls one message per
// publish of three batches.
func TestLossInvariantsPolicies(t *testing.T) {
	for _, p := range []telemetry.Policy{telemetry.DropOldest, telemetry.DropNewest, telemetry.CoalesceLatest} {
		t.Run(string(p), func(t *testing.T) {
			c := newChannel(t, telemetry.Config{Policy: p, QueueBatches: 16, MaxBatchSamples: 10})
			s := attach(t, c, nil)
			var ms []msg
			total := 0
			series := map[string]float64{}
			for range 300 {
				var b []telemetry.Sample
				for range 30 {
					name := "m" + strconv.Itoa(total%7)
					b = append(b, telemetry.Sample{T: 1, Name: name, Value: float64(total)})
					series[name] = float64(total)
					total++
				}
				if err := c.Publish(b); err != nil {
					t.Fatal(err)
				}
				if m, ok := s.Pull(true, 64<<10); ok {
					ms = append(ms, decode(t, m))
				}
				if e, n := s.QueueLen(); n > 16 || e > 2*n+2 {
					t.Fatalf("queue of %d entries, %d batches", e, n)
				}
			}
			ms = append(ms, pullAll(t, s)...)
			checkCoverage(t, ms, 1, c.Stats().Seq-1)
			var delivered, lost int64
			last := map[string]float64{}
			for _, m := range ms {
				delivered += int64(len(m.Params.Samples))
				lost += m.Params.Count
				for _, x := range m.Params.Samples {
					if v, ok := last[x.Name]; ok && x.Value <= v {
						t.Fatalf("series %s went back: %v after %v", x.Name, x.Value, v)
					}
					last[x.Name] = x.Value
				}
			}
			if delivered+lost != int64(total) || lost == 0 {
				t.Errorf("delivered %d + lost %d, want %d with some lost", delivered, lost, total)
			}
			if p != telemetry.DropNewest {
				for name, v := range series {
					if last[name] != v {
						t.Errorf("series %s: last delivered %v, newest published %v", name, last[name], v)
					}
				}
			}
		})
	}
}
