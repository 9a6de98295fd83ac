package telemetry_test

import (
	"bytes"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/telemetry"
)

// TestCoalescingManyViewersManySeries (issue 36): 32 connections of 128
// coalescing viewers each, which pull channel/ready and then nothing, and
// a producer of 200,000 distinct series. Publish visits a viewer once per
// batch until its queue is full, and each entry that leaves it once; then
// the viewer is behind, queues nothing, and Publish skips it: its work
// for the viewers is bounded by their queues' bounds, not by how much is
// published or how many series there are. When the viewers pull, each gets a
// telemetry/dropped and at most CoalesceSeries series, within its queue's
// and its connection's bounds; every seq and sample is accounted for, and
// what survives is the newest of the most recently updated series.
func TestCoalescingManyViewersManySeries(t *testing.T) {
	const (
		conns, perConn = 32, 128
		viewers        = conns * perConn
		series         = 200_000
		round          = 1000
		keep           = 256
	)
	c := newChannel(t, telemetry.Config{Source: "push", History: -1, Policy: telemetry.CoalesceLatest, MaxSeries: series, CoalesceSeries: keep})
	cfg := c.Config()
	budgets := make([]*flow.Budget, conns)
	subs := make([]*telemetry.Sub, 0, viewers)
	for i := range budgets {
		budgets[i] = flow.NewBudget(16 << 20) // a quarter of the default maxBufferedBytes
		for range perConn {
			s, err := c.Attach(flow.AttachRequest{Window: 1 << 20, Role: flow.RoleView, Queue: budgets[i]})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			if got := summary(pullAll(t, s)); !slices.Equal(got, []string{"ready"}) {
				t.Fatalf("before publishing: %v", got)
			}
			subs = append(subs, s.(*telemetry.Sub))
		}
	}

	buf := make([]telemetry.Sample, round)
	var lastVisited int64
	for r := range series / round {
		for i := range buf {
			n := r*round + i
			buf[i] = telemetry.Sample{T: 1000, Name: "m" + strconv.Itoa(n), Value: float64(n)}
		}
		if err := c.Publish(buf); err != nil {
			t.Fatal(err)
		}
		visited, encoded := c.PublishWork()
		st := c.Stats()
		if encoded != st.Samples {
			t.Fatalf("round %d: Publish encoded %d samples for %d published: it encodes for viewers", r, encoded, st.Samples)
		}
		// A viewer is visited once per batch it queues, once for the
		// batch it does not, and its queue's entries once.
		if bound := int64(viewers) * (2*int64(cfg.QueueBatches) + 1); visited > bound {
			t.Fatalf("round %d: Publish visited %d viewers and queue entries for %d batches, more than %d", r, visited, st.Batches, bound)
		}
		if r == series/round-1 && visited != lastVisited {
			t.Errorf("last round: Publish visited %d viewers and queue entries, want none (all behind)", visited-lastVisited)
		}
		lastVisited = visited
	}
	st := c.Stats()
	if st.Series != series || st.SeriesRefused != 0 {
		t.Fatalf("Stats: %d series, %d refused; want %d, 0", st.Series, st.SeriesRefused, series)
	}
	last := st.Seq - 1
	for i, s := range subs {
		if kept, behind := s.Coalesced(); !behind || kept != 0 {
			t.Fatalf("viewer %d: behind %v keeping %d series; want behind, keeping none", i, behind, kept)
		}
		if q := s.Stats().Queued; q != 0 {
			t.Fatalf("viewer %d: %d bytes queued while behind, want 0", i, q)
		}
	}
	for i, b := range budgets {
		if b.Used() != 0 {
			t.Fatalf("connection %d: budget counts %d bytes for viewers that queue nothing", i, b.Used())
		}
	}

	// Each viewer pulls once: the telemetry/dropped before its catch-up.
	firsts := make([]msg, len(subs))
	for i, s := range subs {
		m, ok := s.Pull(true, 64<<10)
		if !ok {
			t.Fatalf("viewer %d: nothing to pull", i)
		}
		d := decode(t, m)
		if d.Method != "telemetry/dropped" || d.Params.FromSeq != 1 || d.Params.Count <= 0 {
			t.Fatalf("viewer %d: first message %v, want telemetry/dropped from seq 1", i, summary([]msg{d}))
		}
		firsts[i] = d
		kept, behind := s.Coalesced()
		if behind || kept <= 0 || kept > keep {
			t.Fatalf("viewer %d: after catching up, behind %v keeping %d series; want 1–%d", i, behind, kept, keep)
		}
		if q := s.Stats().Queued; q > cfg.QueueBytes/2 {
			t.Fatalf("viewer %d: %d bytes queued, more than half the queue (%d)", i, q, cfg.QueueBytes/2)
		}
	}
	for i, b := range budgets {
		if b.Used() > b.Max() {
			t.Fatalf("connection %d: viewers queue %d bytes, budget %d", i, b.Used(), b.Max())
		}
	}

	// The first viewer of each connection takes the rest.
	for i := 0; i < viewers; i += perConn {
		s := subs[i]
		ms := append([]msg{firsts[i]}, pullAll(t, s)...)
		checkCoverage(t, ms, 1, last)
		var delivered, lost int64
		var values []int
		for _, m := range ms {
			switch m.Method {
			case "telemetry/dropped":
				lost += m.Params.Count
			case "telemetry/samples":
				for _, x := range m.Params.Samples {
					delivered++
					values = append(values, int(x.Value))
					if x.Name != "m"+strconv.Itoa(int(x.Value)) {
						t.Fatalf("viewer %d: sample %v of series %s", i, x.Value, x.Name)
					}
				}
			}
		}
		if delivered+lost != series || s.Loss().Samples != lost {
			t.Fatalf("viewer %d: delivered %d + lost %d != %d published (Loss().Samples %d)", i, delivered, lost, series, s.Loss().Samples)
		}
		// Each series once, the newest: those published last.
		want := make([]int, len(values))
		for j := range want {
			want[j] = series - len(values) + j
		}
		if !slices.Equal(values, want) {
			t.Fatalf("viewer %d: delivered %d samples, not the newest %d series in order", i, len(values), len(values))
		}
		if kept, _ := s.Coalesced(); kept != 0 {
			t.Fatalf("viewer %d: keeps %d series after pulling everything", i, kept)
		}
	}
	if st := c.Stats(); st.Dropped <= 0 {
		t.Errorf("Stats().Dropped = %d", st.Dropped)
	}
}

// TestPublishAllocsIndependentOfViewers: with 1024 coalescing viewers
// behind, Publish allocates what it allocates with none (plus the list of
// viewers to wake, which stays empty): coalescing does nothing in Publish.
func TestPublishAllocsIndependentOfViewers(t *testing.T) {
	buf := make([]telemetry.Sample, 200)
	for i := range buf {
		buf[i] = telemetry.Sample{T: 1000, Name: "m", Value: float64(i), Labels: []telemetry.Label{{Name: "id", Value: strconv.Itoa(i)}}}
	}
	allocs := func(viewers int) float64 {
		c := newChannel(t, telemetry.Config{Source: "push", History: -1, Policy: telemetry.CoalesceLatest, QueueBatches: 4})
		for range viewers {
			s := attach(t, c, nil)
			s.Pull(true, 64<<10)
		}
		for range 10 { // the series admitted, the queues full, the viewers behind
			if err := c.Publish(buf); err != nil {
				t.Fatal(err)
			}
		}
		return testing.AllocsPerRun(20, func() {
			if err := c.Publish(buf); err != nil {
				t.Fatal(err)
			}
		})
	}
	none, many := allocs(0), allocs(1024)
	t.Logf("allocations per Publish: %v without viewers, %v with 1024", none, many)
	if many > none+1 {
		t.Errorf("Publish of %d samples: %v allocations with 1024 coalescing viewers behind, %v with none", len(buf), many, none)
	}
}

// TestCoalesceKeepsNewestSeries: a catch-up keeps at most CoalesceSeries
// series, the most recently updated, in the order they first appeared;
// the others are counted in the telemetry/dropped before it.
func TestCoalesceKeepsNewestSeries(t *testing.T) {
	c := newChannel(t, telemetry.Config{Policy: telemetry.CoalesceLatest, QueueBatches: 4, CoalesceSeries: 3})
	s := attach(t, c, nil)
	pullAll(t, s)
	for i, name := range []string{"a", "b", "c", "d", "e", "a"} {
		if err := c.Publish(one(name, float64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	if kept, behind := s.Coalesced(); !behind || kept != 0 {
		t.Fatalf("before pulling: behind %v, %d series kept; want behind, none", behind, kept)
	}
	m, _ := s.Pull(true, 64<<10)
	if got := summary([]msg{decode(t, m)}); !slices.Equal(got, []string{"d1-5:3"}) {
		t.Fatalf("first message %v, want d1-5:3", got)
	}
	if kept, behind := s.Coalesced(); behind || kept != 3 {
		t.Fatalf("after the range: behind %v, %d series kept; want 3", behind, kept)
	}
	if got, want := summary(pullAll(t, s)), []string{"s6:a=6,d=4,e=5"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if l := s.Loss(); l.Samples != 3 || l.Seqs != 5 || l.Ranges != 1 {
		t.Errorf("Loss = %+v, want 3 samples in 5 seqs, one range", l)
	}
}

// TestCoalesceBehindAgain: the coalesced batches of a catch-up stay queued
// when the queue fills again (their series may have no newer sample); the
// live batches after them go into the next span.
func TestCoalesceBehindAgain(t *testing.T) {
	c := newChannel(t, telemetry.Config{Policy: telemetry.CoalesceLatest, QueueBatches: 6, MaxBatchSamples: 1})
	s := attach(t, c, nil)
	pullAll(t, s)
	publish := func(name string, v float64) {
		t.Helper()
		if err := c.Publish(one(name, v)); err != nil {
			t.Fatal(err)
		}
	}
	publish("x", 1)
	publish("y", 2)
	for v := 3; v <= 7; v++ {
		publish("z", float64(v)) // the seventh batch does not fit
	}
	var got []string
	for range 2 {
		m, _ := s.Pull(true, 64<<10)
		got = append(got, summary([]msg{decode(t, m)})...)
	}
	for v := 8; v <= 12; v++ {
		publish("w", float64(v)) // the fifth does not fit
	}
	if kept, behind := s.Coalesced(); !behind || kept != 2 {
		t.Fatalf("behind %v, %d series kept; want behind, with y and z still queued", behind, kept)
	}
	got = append(got, summary(pullAll(t, s))...)
	want := []string{"d1-4:4", "s5:x=1", "s6:y=2", "s7:z=7", "d8-11:4", "s12:w=12"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
	if l := s.Loss(); l.Samples != 8 {
		t.Errorf("Loss().Samples = %d, want 8", l.Samples)
	}
}

// TestSeriesLimit: under every policy, a sample of a new series beyond
// MaxSeries is not published, and counted and logged (once a minute); the
// other samples of the call are, and the series admitted go on.
func TestSeriesLimit(t *testing.T) {
	for _, p := range []telemetry.Policy{telemetry.DropOldest, telemetry.DropNewest, telemetry.CoalesceLatest} {
		t.Run(string(p), func(t *testing.T) {
			var logs bytes.Buffer
			c := newChannel(t, telemetry.Config{Policy: p, MaxSeries: 3, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			s := attach(t, c, nil)
			pullAll(t, s)
			b := append(one("a", 1), append(one("b", 2), append(one("c", 3), append(one("d", 4), append(one("a", 5), one("e", 6)...)...)...)...)...)
			if err := c.Publish(b); err != nil {
				t.Fatal(err)
			}
			if err := c.Publish(one("d", 7)); err != nil {
				t.Fatal(err)
			}
			if err := c.Publish(one("b", 8)); err != nil {
				t.Fatal(err)
			}
			if st := c.Stats(); st.Samples != 5 || st.SeriesRefused != 3 || st.Series != 3 || st.Batches != 2 {
				t.Errorf("Stats = %+v, want 5 samples in 2 batches, 3 series, 3 refused", st)
			}
			if got, want := summary(pullAll(t, s)), []string{"s1:a=1,b=2,c=3,a=5", "s2:b=8"}; !slices.Equal(got, want) {
				t.Errorf("viewer got %v, want %v", got, want)
			}
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], "series limit") || !strings.Contains(lines[0], "refused=2") || !strings.Contains(lines[0], "maxSeries=3") {
				t.Errorf("log: %q, want one line of 2 refused", lines)
			}
		})
	}
}

// TestSeriesIdle: a series without a sample for SeriesIdle no longer
// counts toward MaxSeries; refusals are logged at most once a minute, with
// the count since the last line.
func TestSeriesIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		c := newChannel(t, telemetry.Config{MaxSeries: 2, SeriesIdle: time.Minute, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		publish := func(name string) {
			t.Helper()
			if err := c.Publish(one(name, 1)); err != nil {
				t.Fatal(err)
			}
		}
		publish("a")
		publish("b")
		publish("c") // refused, logged
		time.Sleep(30 * time.Second)
		publish("a")
		publish("c") // refused, not logged yet
		time.Sleep(45 * time.Second)
		publish("c") // b is forgotten (75 s), a is not (45 s)
		if st := c.Stats(); st.Series != 2 || st.SeriesRefused != 2 || st.Samples != 4 {
			t.Fatalf("Stats = %+v, want 2 series, 2 refused, 4 samples", st)
		}
		publish("d") // refused; logged, a minute after the first line
		publish("a")
		if st := c.Stats(); st.SeriesRefused != 3 || st.Samples != 5 {
			t.Fatalf("Stats = %+v, want 3 refused, 5 samples", st)
		}
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		if len(lines) != 2 || !strings.Contains(lines[0], "refused=1") || !strings.Contains(lines[1], "refused=2") {
			t.Errorf("log: %q, want two lines, of 1 and 2 refused", lines)
		}
	})
}

// TestCoalesceSamplesKeepFewTexts: a series' newest sample is a part of
// its batch's text, which it keeps; batches of one rare series and many
// samples of a hot one would keep a 4 KiB text per rare series. The index
// copies the oldest out beyond its bound, and a viewer behind still gets
// the right samples.
func TestCoalesceSamplesKeepFewTexts(t *testing.T) {
	const batches = 3000
	c := newChannel(t, telemetry.Config{History: -1, Policy: telemetry.CoalesceLatest, QueueBatches: 1024, CoalesceSeries: batches + 1})
	s := attach(t, c, nil)
	pullAll(t, s)
	b := make([]telemetry.Sample, 40)
	for i := range batches {
		b[0] = telemetry.Sample{T: 1000, Name: "rare", Value: float64(i), Labels: []telemetry.Label{{Name: "i", Value: strconv.Itoa(i)}}}
		for j := 1; j < len(b); j++ {
			b[j] = telemetry.Sample{T: 1000, Name: "hot", Value: float64(i*100 + j)}
		}
		if err := c.Publish(b); err != nil {
			t.Fatal(err)
		}
		if st := c.Stats(); st.Batches != int64(i+1) {
			t.Fatalf("%d batches for %d publishes: the test wants one each", st.Batches, i+1)
		}
		if pinned, bound := c.PinnedBytes(); pinned > bound {
			t.Fatalf("after %d batches the index keeps %d bytes of texts, bound %d", i+1, pinned, bound)
		}
	}
	if pinned, _ := c.PinnedBytes(); pinned == 0 {
		t.Fatal("the index keeps no text: the test is not testing")
	}
	// The viewer is behind since seq 1: it gets every rare series and the
	// hot one, the newest of each, whether copied or not.
	var got int
	for _, m := range pullAll(t, s) {
		for _, x := range m.Params.Samples {
			switch {
			case x.Name == "hot" && x.Value == float64((batches-1)*100+len(b)-1):
			case x.Name == "rare" && x.Labels["i"] == strconv.Itoa(int(x.Value)):
			default:
				t.Fatalf("sample %+v", x)
			}
			got++
		}
	}
	if got != batches+1 {
		t.Errorf("got %d samples, want %d", got, batches+1)
	}
}
