package daemon

import (
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// recorder is a fake runtime.GOMAXPROCS that records what was set.
type recorder struct {
	mu  sync.Mutex
	set []int
}

func (r *recorder) gomaxprocs(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.set = append(r.set, n)
	return 0
}

func (r *recorder) calls() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.set)
}

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestProcScalerFollowsFloods: one P at start, two from the first flood
// report, back to one only after hold without a report.
func TestProcScalerFollowsFloods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		s := newProcScaler(1, 2, 500*time.Millisecond, r.gomaxprocs, quietLog)
		defer s.stop()
		want := func(when string, w ...int) {
			t.Helper()
			synctest.Wait()
			if got := r.calls(); !slices.Equal(got, w) {
				t.Fatalf("%s: GOMAXPROCS calls %v, want %v", when, got, w)
			}
		}
		want("at start", 1)
		s.flooding()
		want("at the first flood report", 1, 2)
		// A flood reports every 100 ms: no more calls while it lasts.
		for range 20 {
			time.Sleep(100 * time.Millisecond)
			s.flooding()
		}
		want("during a 2 s flood", 1, 2)
		time.Sleep(499 * time.Millisecond)
		want("499 ms after the last report", 1, 2)
		time.Sleep(2 * time.Millisecond)
		want("501 ms after the last report", 1, 2, 1)
		time.Sleep(5 * time.Second)
		want("while quiet", 1, 2, 1)
		s.flooding()
		want("at the next flood", 1, 2, 1, 2)
		time.Sleep(time.Second)
		want("after it", 1, 2, 1, 2, 1)
	})
}

// TestProcScalerStop: after stop, nothing changes the Ps, and the timer
// that would lower them is stopped.
func TestProcScalerStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		s := newProcScaler(1, 2, 500*time.Millisecond, r.gomaxprocs, quietLog)
		s.flooding()
		s.stop()
		s.flooding()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got, want := r.calls(), []int{1, 2}; !slices.Equal(got, want) {
			t.Fatalf("GOMAXPROCS calls %v, want %v", got, want)
		}
	})
}

// TestProcScalerOneCPU: where the busy count is no more than the quiet
// one (a one-CPU machine), floods change nothing.
func TestProcScalerOneCPU(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		s := newProcScaler(1, 1, 500*time.Millisecond, r.gomaxprocs, quietLog)
		defer s.stop()
		s.flooding()
		time.Sleep(time.Second)
		synctest.Wait()
		if got, want := r.calls(), []int{1}; !slices.Equal(got, want) {
			t.Fatalf("GOMAXPROCS calls %v, want %v", got, want)
		}
	})
}
