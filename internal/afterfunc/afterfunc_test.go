package afterfunc

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestCalls: a Timer calls f once per Reset that fires, a Reset of a
// pending call replaces it, and Stop cancels a pending call and reports it.
func TestCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		tm := New(func() { n.Add(1) })
		if tm.Stop() {
			t.Fatal("Stop of a timer never armed reported a cancelled call")
		}
		tm.Reset(time.Second)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := n.Load(); got != 1 {
			t.Fatalf("%d calls after one Reset fired, want 1", got)
		}
		tm.Reset(time.Second) // a fired timer re-armed
		tm.Reset(time.Second) // a pending one re-armed: still one call
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := n.Load(); got != 2 {
			t.Fatalf("%d calls, want 2: a Reset of a pending call replaces it", got)
		}
		tm.Reset(time.Second)
		if !tm.Stop() {
			t.Fatal("Stop of a pending call did not report it cancelled")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := n.Load(); got != 2 {
			t.Fatalf("%d calls, want 2: a stopped call ran", got)
		}
		tm.Reset(time.Second) // a stopped timer re-armed
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := n.Load(); got != 3 {
			t.Fatalf("%d calls, want 3", got)
		}
	})
}

// TestStopWaitsForRunningCall: Stop returns only after a call of f that
// had started before it returns.
func TestStopWaitsForRunningCall(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	tm := New(func() {
		close(entered)
		<-release
	})
	tm.Reset(time.Millisecond)
	<-entered
	stopped := make(chan bool)
	go func() { stopped <- tm.Stop() }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while the call was running")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case cancelled := <-stopped:
		if cancelled {
			t.Fatal("Stop reported a call cancelled that had run")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return after the call did")
	}
}

// TestResetFromCallback: f may re-arm its own timer, and Stop after that
// cancels the new call.
func TestResetFromCallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		var tm *Timer
		tm = New(func() {
			if n.Add(1) < 3 {
				tm.Reset(time.Second)
			}
		})
		tm.Reset(time.Second)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := n.Load(); got != 3 {
			t.Fatalf("%d calls, want 3", got)
		}
		n.Store(0)
		tm.Reset(time.Second)
		time.Sleep(1500 * time.Millisecond) // the first call re-armed it
		synctest.Wait()
		if !tm.Stop() {
			t.Fatal("Stop did not cancel the call f armed")
		}
	})
}
