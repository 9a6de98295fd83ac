package procs

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahp-dev/ahpd/internal/procs/initial"
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

// TestProcScalerFollowsBusy: one P at start, two from the first busy
// report, back to one only after hold without a report.
func TestProcScalerFollowsBusy(t *testing.T) {
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
		s.noteBusy()
		want("at the first busy report", 1, 2)
		// Reports every 100 ms: no more calls while they last.
		for range 20 {
			time.Sleep(100 * time.Millisecond)
			s.noteBusy()
		}
		want("during 2 s of reports", 1, 2)
		time.Sleep(499 * time.Millisecond)
		want("499 ms after the last report", 1, 2)
		time.Sleep(2 * time.Millisecond)
		want("501 ms after the last report", 1, 2, 1)
		time.Sleep(5 * time.Second)
		want("while quiet", 1, 2, 1)
		s.noteBusy()
		want("at the next report", 1, 2, 1, 2)
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
		s.noteBusy()
		s.stop()
		s.noteBusy()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got, want := r.calls(), []int{1, 2}; !slices.Equal(got, want) {
			t.Fatalf("GOMAXPROCS calls %v, want %v", got, want)
		}
	})
}

// TestProcScalerOneCPU: where the busy count is no more than the quiet
// one (a one-CPU machine), reports change nothing.
func TestProcScalerOneCPU(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		s := newProcScaler(1, 1, 500*time.Millisecond, r.gomaxprocs, quietLog)
		defer s.stop()
		s.noteBusy()
		time.Sleep(time.Second)
		synctest.Wait()
		if got, want := r.calls(), []int{1}; !slices.Equal(got, want) {
			t.Fatalf("GOMAXPROCS calls %v, want %v", got, want)
		}
	})
}

// TestProcPlan: GOMAXPROCS set to a count fixes the Ps; otherwise ahpd
// scales, to two Ps at most, and to one where the CPUs or the cgroup's
// CPU quota do not allow two.
func TestProcPlan(t *testing.T) {
	none := func() (float64, bool) { return 0, false }
	quota := func(c float64) func() (float64, bool) { return func() (float64, bool) { return c, true } }
	for _, tc := range []struct {
		env       string
		def       int
		cgroup    func() (float64, bool)
		busy      int
		scale     bool
		describes string
	}{
		{"3", 8, none, 3, false, "a count in the environment"},
		{"1", 8, none, 1, false, "one P from the environment"},
		{"", 8, none, 2, true, "eight CPUs"},
		{"", 2, none, 2, true, "two CPUs"},
		{"", 1, none, 1, true, "one CPU"},
		{"", 2, quota(1), 1, true, "a one-CPU quota (the runtime still says 2)"},
		{"", 2, quota(0.5), 1, true, "half a CPU"},
		{"", 4, quota(1.9), 1, true, "1.9 CPUs"},
		{"", 4, quota(2), 2, true, "a two-CPU quota"},
		{"abc", 8, none, 2, true, "GOMAXPROCS the runtime ignores"},
		{"0", 8, none, 2, true, "GOMAXPROCS=0, which the runtime ignores"},
	} {
		busy, scale := procPlan(tc.env, tc.def, tc.cgroup)
		if busy != tc.busy || scale != tc.scale {
			t.Errorf("%s: procPlan(%q, %d) = %d, %v; want %d, %v", tc.describes, tc.env, tc.def, busy, scale, tc.busy, tc.scale)
		}
	}
}

// TestCgroupCPUs reads CPU quotas from fake cgroup trees: the smallest on
// the way to the root counts, "max" and -1 are no limit.
func TestCgroupCPUs(t *testing.T) {
	write := func(t *testing.T, name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("v2", func(t *testing.T) {
		root := t.TempDir()
		write(t, filepath.Join(root, "a/b/cpu.max"), "max 100000\n")
		write(t, filepath.Join(root, "a/cpu.max"), "150000 100000\n")
		write(t, filepath.Join(root, "cpu.max"), "400000 100000\n")
		if cpus, ok := cgroupCPUs(root, "0::/a/b\n"); !ok || cpus != 1.5 {
			t.Errorf("cgroupCPUs = %v, %v; want 1.5, true", cpus, ok)
		}
		if cpus, ok := cgroupCPUs(root, "0::/c\n"); !ok || cpus != 4 {
			t.Errorf("a cgroup without cpu.max under a limited root: %v, %v; want 4, true", cpus, ok)
		}
	})
	t.Run("v2 unlimited", func(t *testing.T) {
		root := t.TempDir()
		write(t, filepath.Join(root, "a/cpu.max"), "max 100000\n")
		if cpus, ok := cgroupCPUs(root, "0::/a\n"); ok {
			t.Errorf("cgroupCPUs = %v, true; want no limit", cpus)
		}
	})
	t.Run("v1", func(t *testing.T) {
		root := t.TempDir()
		write(t, filepath.Join(root, "cpu,cpuacct/x/cpu.cfs_quota_us"), "-1\n")
		write(t, filepath.Join(root, "cpu,cpuacct/x/cpu.cfs_period_us"), "100000\n")
		write(t, filepath.Join(root, "cpu,cpuacct/cpu.cfs_quota_us"), "50000\n")
		write(t, filepath.Join(root, "cpu,cpuacct/cpu.cfs_period_us"), "100000\n")
		self := "9:memory:/x\n4:cpu,cpuacct:/x\n0::/x\n"
		if cpus, ok := cgroupCPUs(root, self); !ok || cpus != 0.5 {
			t.Errorf("cgroupCPUs = %v, %v; want 0.5, true", cpus, ok)
		}
	})
	t.Run("none", func(t *testing.T) {
		if cpus, ok := cgroupCPUs(t.TempDir(), "0::/\n1:cpu:/\n"); ok {
			t.Errorf("no cgroup files: %v, true; want no limit", cpus)
		}
	})
}

// TestInitialOneP: without GOMAXPROCS in the environment the process runs
// on one P from package initialization on (internal/procs/initial), and
// Start still plans from the runtime's own count, taken before that.
func TestInitialOneP(t *testing.T) {
	if os.Getenv("GOMAXPROCS") != "" {
		t.Skip("GOMAXPROCS is set: the runtime uses it throughout")
	}
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("GOMAXPROCS %d after init, want 1", n)
	}
	if initial.Default < 1 || initial.Default > runtime.NumCPU() {
		t.Errorf("initial.Default %d, want the runtime's count (1..%d)", initial.Default, runtime.NumCPU())
	}
	busy, scale := procPlan("", initial.Default, func() (float64, bool) { return 0, false })
	if !scale || busy != min(2, initial.Default) {
		t.Errorf("plan from initial.Default %d: busy %d, scale %v; want %d, true", initial.Default, busy, scale, min(2, initial.Default))
	}
}
