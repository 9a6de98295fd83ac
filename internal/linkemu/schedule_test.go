package linkemu_test

import (
	"slices"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/internal/linkemu"
)

// TestJitterSchedule checks the delays jitter draws: within
// [Delay-Jitter, Delay+Jitter], never delivering a chunk before the one
// read before it, the same for the same seed and connection, and
// different for another seed.
func TestJitterSchedule(t *testing.T) {
	p := linkemu.Params{Delay: 50 * time.Millisecond, Jitter: 20 * time.Millisecond, Seed: 42}
	t0 := time.Unix(1000, 0)
	reads := make([]time.Time, 200)
	for i := range reads {
		reads[i] = t0.Add(time.Duration(i) * time.Millisecond) // closer than the jitter: reordering would show
	}
	got := linkemu.Schedule(p, 3, 1000, reads)
	for i, d := range got {
		if d < p.Delay-p.Jitter || d > p.Delay+p.Jitter {
			t.Errorf("chunk %d: delay %v, want within %v ± %v", i, d, p.Delay, p.Jitter)
		}
		if i > 0 && reads[i].Add(d).Before(reads[i-1].Add(got[i-1])) {
			t.Errorf("chunk %d is delivered at +%v, before chunk %d at +%v", i, reads[i].Add(d).Sub(t0), i-1, reads[i-1].Add(got[i-1]).Sub(t0))
		}
	}
	if again := linkemu.Schedule(p, 3, 1000, reads); !slices.Equal(got, again) {
		t.Error("the same seed and connection drew other delays")
	}
	q := p
	q.Seed = 43
	if other := linkemu.Schedule(q, 3, 1000, reads); slices.Equal(got, other) {
		t.Error("seeds 42 and 43 drew the same delays")
	}
	if other := linkemu.Schedule(p, 4, 1000, reads); slices.Equal(got, other) {
		t.Error("connections 3 and 4 drew the same delays")
	}
}

// TestRateSchedule checks the serialisation: back-to-back chunks leave
// size/Rate apart, and an idle link sends a chunk after its own
// serialisation time only.
func TestRateSchedule(t *testing.T) {
	p := linkemu.Params{Rate: 1 << 20, Delay: 10 * time.Millisecond}
	t0 := time.Unix(1000, 0)
	const size = 1 << 14 // 15.625 ms at 1 MiB/s
	ser := time.Duration(float64(size) / float64(p.Rate) * float64(time.Second))
	reads := []time.Time{t0, t0, t0, t0.Add(time.Second)}
	got := linkemu.Schedule(p, 0, size, reads)
	want := []time.Duration{ser + p.Delay, 2*ser + p.Delay, 3*ser + p.Delay, ser + p.Delay}
	for i := range want {
		if d := got[i] - want[i]; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("chunk %d: delivered %v after its read, want %v", i, got[i], want[i])
		}
	}
}
