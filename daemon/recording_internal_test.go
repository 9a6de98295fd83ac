package daemon

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahp-dev/ahpd/daemon/events"
)

// TestWatchRecordings: one recording.dropped per interval in which drops
// grew, with their sum, none while nothing is dropped; sync once an
// interval.
func TestWatchRecordings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var bus events.Bus
		next, stop := bus.Watch()
		defer stop()
		var dropped atomic.Int64
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		var syncs atomic.Int64
		go func() {
			defer close(done)
			watchRecordings(ctx, time.Second, dropped.Load, func() { syncs.Add(1) }, &bus)
		}()
		synctest.Wait()
		dropped.Add(100)
		dropped.Add(20)
		time.Sleep(time.Second + time.Millisecond)
		synctest.Wait()
		time.Sleep(3 * time.Second) // quiet: nothing more
		dropped.Add(5)
		time.Sleep(time.Second)
		synctest.Wait()
		cancel()
		<-done
		if n := syncs.Load(); n != 5 {
			t.Errorf("sync called %d times in 5 s, want once a second", n)
		}
		evs, lost, ok := next(nil)
		if !ok || lost != 0 || len(evs) != 2 {
			t.Fatalf("events %+v (lost %d), want two recording.dropped", evs, lost)
		}
		for i, want := range []string{"120 bytes", "5 bytes"} {
			if evs[i].Kind != "recording.dropped" || len(evs[i].Detail) < len(want) || evs[i].Detail[:len(want)] != want {
				t.Errorf("event %d = %+v, want recording.dropped of %s", i, evs[i], want)
			}
		}
	})
}
