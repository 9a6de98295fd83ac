package telemetry_test

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/telemetry"
)

func TestPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy telemetry.Policy
		pub    []string // one single-sample batch each: series name
		want   []string
	}{
		{telemetry.DropOldest, []string{"a", "a", "a", "a", "a", "a", "a", "a", "a", "a"},
			[]string{"ready", "d1-6:6", "s7:a=7", "s8:a=8", "s9:a=9", "s10:a=10"}},
		{telemetry.DropNewest, []string{"a", "a", "a", "a", "a", "a", "a", "a", "a", "a"},
			[]string{"ready", "s1:a=1", "s2:a=2", "s3:a=3", "s4:a=4", "d5-10:6"}},
		// Queue of 4: the fifth batch does not fit, so the viewer is behind
		// from seq 1; when it pulls, seqs 1–6 (a,b,a,b,a,b) become a=5,b=6
		// in seq 6 (series in the order they first appeared), reporting
		// 1–5 dropped with the 4 samples lost.
		{telemetry.CoalesceLatest, []string{"a", "b", "a", "b", "a", "b"},
			[]string{"ready", "d1-5:4", "s6:a=5,b=6"}},
		// Distinct series lose nothing: they share one batch, and the
		// seqs it replaced are reported with a count of 0.
		{telemetry.CoalesceLatest, []string{"a", "b", "c", "d", "e"},
			[]string{"ready", "d1-4:0", "s5:a=1,b=2,c=3,d=4,e=5"}},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			c := newChannel(t, telemetry.Config{Policy: tc.policy, QueueBatches: 4})
			s := attach(t, c, nil)
			if m := pullAll(t, s); !slices.Equal(summary(m), []string{"ready"}) {
				t.Fatalf("before publishing: %v", summary(m))
			}
			// ready already sent: publish, then pull everything.
			for i, name := range tc.pub {
				if err := c.Publish(one(name, float64(i+1))); err != nil {
					t.Fatal(err)
				}
			}
			got := append([]string{"ready"}, summary(pullAll(t, s))...)
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s: got %v\nwant %v", tc.policy, got, tc.want)
			}
		})
	}
}

func TestCoalesceMultiSeries(t *testing.T) {
	// Samples lost and seqs covered add up whatever the shape.
	c := newChannel(t, telemetry.Config{Policy: telemetry.CoalesceLatest, QueueBatches: 8})
	s := attach(t, c, nil)
	pullAll(t, s)
	const n = 200
	for i := range n {
		if err := c.Publish(one([]string{"x", "y", "z"}[i%3], float64(i))); err != nil {
			t.Fatal(err)
		}
	}
	ms := pullAll(t, s)
	checkCoverage(t, ms, 1, n)
	var delivered, lost int64
	last := map[string]float64{}
	for _, m := range ms {
		delivered += int64(len(m.Params.Samples))
		lost += m.Params.Count
		for _, x := range m.Params.Samples {
			if v, ok := last[x.Name]; ok && x.Value <= v {
				t.Errorf("series %s went back: %v after %v", x.Name, x.Value, v)
			}
			last[x.Name] = x.Value
		}
	}
	if delivered+lost != n {
		t.Errorf("delivered %d + lost %d != %d published", delivered, lost, n)
	}
	if got := s.Loss().Samples; got != lost {
		t.Errorf("Loss().Samples = %d, reported %d", got, lost)
	}
	for name, want := range map[string]float64{"x": 198, "y": 199, "z": 197} { // the newest of each series survives
		if last[name] != want {
			t.Errorf("last %s = %v, want %v", name, last[name], want)
		}
	}
}

// checkCoverage checks that seqs first..last are each delivered or inside
// one reported range, in order, exactly once.
func checkCoverage(t testing.TB, ms []msg, first, last uint64) {
	t.Helper()
	next := first
	for _, m := range ms {
		switch m.Method {
		case "telemetry/samples":
			if m.Params.Seq != next {
				t.Fatalf("samples seq %d, want %d", m.Params.Seq, next)
			}
			next++
		case "telemetry/dropped":
			if m.Params.FromSeq != next || m.Params.ToSeq < m.Params.FromSeq {
				t.Fatalf("dropped %d-%d, want from %d", m.Params.FromSeq, m.Params.ToSeq, next)
			}
			next = m.Params.ToSeq + 1
		}
	}
	if next != last+1 {
		t.Fatalf("coverage ends before seq %d, want %d", next, last+1)
	}
}

func TestHistoryReplay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newChannel(t, telemetry.Config{History: 10 * time.Second})
		for i := range 3 {
			if err := c.Publish(one("a", float64(i))); err != nil {
				t.Fatal(err)
			}
			time.Sleep(4 * time.Second)
		}
		// Published at 0, 4 and 8 s; now 12 s: the first is too old.
		s := attach(t, c, nil)
		res, ok, err := s.Ready()
		if !ok || err != nil || res.Initial != flow.InitialReplay {
			t.Fatalf("Ready = %+v %v %v, want replay", res, ok, err)
		}
		if err := c.Publish(one("a", 9)); err != nil {
			t.Fatal(err)
		}
		got := summary(pullAll(t, s))
		want := []string{"s2:a=1", "s3:a=2", "ready", "s4:a=9"}
		if !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
		time.Sleep(time.Minute)
		s2 := attach(t, c, nil)
		if res, _, _ := s2.Ready(); res.Initial != flow.InitialLive {
			t.Errorf("after a minute: Initial %q, want live", res.Initial)
		}
		if got := summary(pullAll(t, s2)); !slices.Equal(got, []string{"ready"}) {
			t.Errorf("late viewer got %v, want only ready", got)
		}
	})
}

func TestHistoryBounds(t *testing.T) {
	c := newChannel(t, telemetry.Config{HistoryBatches: 5, QueueBatches: 3})
	for i := range 20 {
		if err := c.Publish(one("a", float64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if st := c.Stats(); st.HistoryLen != 5 || st.Seq != 21 {
		t.Fatalf("Stats = %+v, want 5 batches of history, seq 21", st)
	}
	// The replay is the newest history that fits the queue (leaving room
	// for one live batch).
	got := summary(pullAll(t, attach(t, c, nil)))
	if want := []string{"s19:a=18", "s20:a=19", "ready"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestReplayThenDropKeepsReadyInPlace(t *testing.T) {
	c := newChannel(t, telemetry.Config{QueueBatches: 4})
	for i := range 3 {
		c.Publish(one("a", float64(i)))
	}
	s := attach(t, c, nil) // replay 1..3
	for i := range 3 {
		c.Publish(one("a", float64(10+i))) // 4..6: 1, 2 dropped
	}
	got := summary(pullAll(t, s))
	want := []string{"d1-2:2", "s3:a=2", "ready", "s4:a=10", "s5:a=11", "s6:a=12"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestBatching(t *testing.T) {
	c := newChannel(t, telemetry.Config{MaxBatchSamples: 100})
	s := attach(t, c, nil)
	pullAll(t, s)
	samples := make([]telemetry.Sample, 1000)
	for i := range samples {
		samples[i] = telemetry.Sample{T: 1, Name: "m", Value: float64(i), Labels: []telemetry.Label{{Name: "k", Value: strings.Repeat("v", 50)}}}
	}
	if err := c.Publish(samples); err != nil {
		t.Fatal(err)
	}
	next := 0.0
	for range 1000 {
		m, ok := s.Pull(true, 64<<10)
		if !ok {
			break
		}
		if m.Size > telemetry.DefaultMaxBatchBytes {
			t.Errorf("batch of %d bytes, more than %d", m.Size, telemetry.DefaultMaxBatchBytes)
		}
		d := decode(t, m)
		if n := len(d.Params.Samples); n == 0 || n > 100 {
			t.Errorf("batch of %d samples", n)
		}
		for _, x := range d.Params.Samples {
			if x.Value != next {
				t.Fatalf("sample %v, want %v", x.Value, next)
			}
			next++
		}
	}
	if next != 1000 {
		t.Errorf("got %v samples, want 1000", next)
	}
}

func TestPublishRefusesInvalid(t *testing.T) {
	c := newChannel(t, telemetry.Config{})
	err := c.Publish([]telemetry.Sample{{Name: "ok", Value: 1}, {Name: "9bad", Value: 1}})
	if err == nil || !strings.Contains(err.Error(), "samples[1]") {
		t.Fatalf("Publish = %v, want an error naming samples[1]", err)
	}
	if st := c.Stats(); st.Batches != 0 {
		t.Errorf("%d batches published, want none", st.Batches)
	}
}

func TestSmallReceiverGetsOversizeBatchAsDropped(t *testing.T) {
	c := newChannel(t, telemetry.Config{})
	s := attach(t, c, nil)
	s.Pull(true, 2048) // ready
	big := telemetry.Sample{T: 1, Name: "m", Value: 1, Labels: []telemetry.Label{{Name: "k", Value: strings.Repeat("v", 200)}}}
	c.Publish([]telemetry.Sample{big, big, big})
	c.Publish(one("small", 1))
	var got []string
	for range 10 {
		m, ok := s.Pull(true, 1024)
		if !ok {
			break
		}
		if m.Size > 1024 {
			t.Fatalf("pulled %d bytes under a 1024-byte maximum", m.Size)
		}
		got = append(got, summary([]msg{decode(t, m)})...)
	}
	if want := []string{"d1-1:3", "s2:small=1"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestCloseEndsViewers(t *testing.T) {
	c, err := telemetry.New(telemetry.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	woken := 0
	s := attach(t, c, func() { woken++ })
	c.Close()
	if r := s.End(); r == nil || r.Code != flow.CodeChannelClosed {
		t.Errorf("End = %v, want channel-closed", r)
	}
	if woken == 0 {
		t.Error("the viewer was not woken by Close")
	}
	if err := c.Publish(one("a", 1)); err != telemetry.ErrClosed {
		t.Errorf("Publish after Close = %v, want ErrClosed", err)
	}
	if _, err := c.Attach(flow.AttachRequest{}); err == nil {
		t.Error("Attach after Close succeeded")
	}
	if c.State() != flow.StateClosed {
		t.Errorf("State = %v", c.State())
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  telemetry.Config
		want string
	}{
		{telemetry.Config{Policy: "keep-all"}, "Policy"},
		{telemetry.Config{QueueBatches: 1}, "QueueBatches"},
		{telemetry.Config{MaxBatchBytes: 100}, "MaxBatchBytes"},
		{telemetry.Config{MaxBatchBytes: 1 << 20}, "MaxBatchBytes"},
		{telemetry.Config{QueueBytes: 4096}, "QueueBytes"},
		{telemetry.Config{MaxSeries: -1}, "MaxSeries"},
		{telemetry.Config{CoalesceSeries: -1}, "CoalesceSeries"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", tc.cfg, err, tc.want)
		}
	}
	if err := (telemetry.Config{}).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// TestQueueBudgetSharedByViewers: viewers on one connection share its
// queue budget (AttachRequest.Queue): however many stall, what they queue
// together stays within it, each policy drops instead, every seq is still
// delivered or reported dropped, and what they sent is given back.
func TestQueueBudgetSharedByViewers(t *testing.T) {
	for _, policy := range []telemetry.Policy{telemetry.DropOldest, telemetry.DropNewest, telemetry.CoalesceLatest} {
		t.Run(string(policy), func(t *testing.T) {
			budget := flow.NewBudget(8 << 10)
			var chans []*telemetry.Channel
			var subs []flow.Subscriber
			for range 6 {
				c := newChannel(t, telemetry.Config{Policy: policy, History: -1})
				s, err := c.Attach(flow.AttachRequest{Window: 1 << 20, Role: flow.RoleView, Queue: budget})
				if err != nil {
					t.Fatal(err)
				}
				chans, subs = append(chans, c), append(subs, s)
			}
			const n = 300
			for i := range n {
				for j, c := range chans {
					// Distinct series, so coalescing cannot make them one.
					if err := c.Publish(one("m", float64(i), telemetry.Label{Name: "k", Value: strconv.Itoa(i)}, telemetry.Label{Name: "v", Value: strconv.Itoa(j)})); err != nil {
						t.Fatal(err)
					}
					if used := budget.Used(); used > budget.Max() {
						t.Fatalf("after batch %d of channel %d the viewers queue %d bytes, budget %d", i, j, used, budget.Max())
					}
				}
			}
			if budget.Used() == 0 {
				t.Fatal("nothing was counted in the budget")
			}
			var lost int64
			for _, s := range subs {
				ms := pullAll(t, s)
				checkCoverage(t, ms, 1, n)
				for _, m := range ms {
					if m.Method == "telemetry/dropped" {
						lost += m.Params.Count
					}
				}
			}
			if lost == 0 {
				t.Fatal("the viewers lost nothing: the budget did not bind")
			}
			if used := budget.Used(); used != 0 {
				t.Fatalf("after the viewers sent all they queued the budget still counts %d bytes", used)
			}
			for _, s := range subs {
				s.Close()
			}
			if used := budget.Used(); used != 0 {
				t.Fatalf("after the viewers closed the budget still counts %d bytes", used)
			}
		})
	}
}

// TestAttachWhilePublishing: viewers attach while a producer publishes;
// under -race this catches Attach touching a viewer's queue after it is
// visible to the producer (it logged the replay length after releasing
// the channel's lock). Each viewer still gets channel/ready and samples:
// the producer has published before the first attach and publishes again
// after the last (on a loaded machine it might otherwise not have run at
// all before it was stopped).
func TestAttachWhilePublishing(t *testing.T) {
	c := newChannel(t, telemetry.Config{})
	var attachedAll atomic.Bool
	first, last := make(chan struct{}), make(chan struct{}) // closed by the producer
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			late := attachedAll.Load() // this publish begins after the last attach
			if err := c.Publish(one("m", float64(i))); err != nil {
				t.Error(err)
				return
			}
			if i == 0 {
				close(first)
			}
			if late {
				close(last)
				return
			}
		}
	})
	// wait waits for the producer to close ch, 10 s at most.
	wait := func(ch chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			attachedAll.Store(true) // the producer stops after its next publish
			wg.Wait()
			t.Fatalf("the producer did not publish %s within 10 s", what)
		}
	}
	wait(first, "its first sample")
	var subs []*telemetry.Sub
	for range 50 {
		subs = append(subs, attach(t, c, nil))
	}
	attachedAll.Store(true)
	wait(last, "a sample after the last attach")
	wg.Wait()
	for i, s := range subs {
		if got := summary(pullAll(t, s)); !slices.Contains(got, "ready") || len(got) < 2 {
			t.Fatalf("viewer %d got %v, want channel/ready and samples", i, got)
		}
	}
}
