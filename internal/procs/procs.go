// Package procs scales the Go scheduler's Ps for ahpd: one, and two while
// a telemetry producer pushes fast (Start). It is safe for concurrent use:
// the busy hook is called by the producers' streams, and the scaler's
// timer runs on a goroutine of its own that stop waits for.
package procs

import (
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ahp-dev/ahpd/internal/afterfunc"
	"github.com/ahp-dev/ahpd/internal/procs/initial"
)

// procScaler runs the daemon on one P, and on two while a telemetry
// producer pushes messages of 100 samples or more (service.Options.Busy).
// On one P a hand-off between the daemon's goroutines is a goroutine
// switch; on two it is often a thread wake-up. Two Ps keep a fast
// producer's stream moving while a hundred viewers' connections take the
// other (bench/telemetrybench: 27–31k against 19k samples/s ingested).
// Terminals no longer raise them: since the emulator prints plain text as
// bytes, a flooding terminal is read about as fast on one P (0.70–0.75 of
// the raw PTY read against 0.78–0.88 on two, 8 MiB window) for a quarter
// less CPU per MB (docs/benchmarks.md, "What did not work, and why").
//
// ahpd scales only when GOMAXPROCS is not set in its environment (see
// procPlan).
type procScaler struct {
	quiet, busy int
	hold        time.Duration   // on busy until not busy for this long
	set         func(n int) int // runtime.GOMAXPROCS
	log         *slog.Logger

	timer *afterfunc.Timer // runs check

	mu      sync.Mutex
	raised  bool      // running on busy Ps
	last    time.Time // the latest noteBusy call
	stopped bool
}

// newProcScaler sets quiet Ps at once and returns the scaler.
func newProcScaler(quiet, busy int, hold time.Duration, set func(int) int, log *slog.Logger) *procScaler {
	set(quiet)
	s := &procScaler{quiet: quiet, busy: busy, hold: hold, set: set, log: log}
	s.timer = afterfunc.New(s.check)
	return s
}

// noteBusy notes that a producer pushes fast now; it raises the Ps to busy
// if they are not already. (runtime.GOMAXPROCS stops the world, waiting
// for a garbage collection under way: the caller may wait that long, once
// per busy spell.)
func (s *procScaler) noteBusy() {
	if s.busy <= s.quiet {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.last = time.Now()
	if s.raised {
		return
	}
	s.raised = true
	s.set(s.busy)
	s.log.Debug("a producer pushes fast: GOMAXPROCS raised", "gomaxprocs", s.busy)
	s.timer.Reset(s.hold)
}

// check lowers the Ps to quiet once noteBusy has not been called for hold.
func (s *procScaler) check() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || !s.raised {
		return
	}
	if since := time.Since(s.last); since < s.hold {
		s.timer.Reset(s.hold - since)
		return
	}
	s.raised = false
	s.set(s.quiet)
	s.log.Debug("no producer pushes fast: GOMAXPROCS lowered", "gomaxprocs", s.quiet)
}

// stop ends the scaling and waits for a check under way; the Ps stay as
// they are.
func (s *procScaler) stop() {
	s.mu.Lock()
	s.stopped = true // nothing arms the timer any more
	s.mu.Unlock()
	s.timer.Stop()
}

// Start applies procPlan to this process and logs it (at debug level).
// busy is the hook for fast producers (nil when GOMAXPROCS fixes the Ps);
// stop ends the scaling.
func Start(log *slog.Logger) (busy func(), stop func()) {
	n, scale := procPlan(os.Getenv("GOMAXPROCS"), initial.Default, systemCgroupCPUs)
	switch {
	case !scale:
		log.Debug("Go scheduler: GOMAXPROCS from the environment", "gomaxprocs", n)
		return nil, func() {}
	case n > 1:
		log.Debug("Go scheduler: GOMAXPROCS 1, raised to "+strconv.Itoa(n)+" while a telemetry producer pushes fast", "gomaxprocs", 1)
	default:
		log.Debug("Go scheduler: GOMAXPROCS 1 (less than two CPUs available)", "gomaxprocs", 1)
	}
	ps := newProcScaler(1, n, 500*time.Millisecond, runtime.GOMAXPROCS, log)
	return ps.noteBusy, ps.stop
}

// procPlan decides how many Ps ahpd runs on while a producer is busy, from
// the GOMAXPROCS environment variable, the runtime's default count (the
// CPUs it may use) and the CPU bandwidth of its cgroups. scale is false
// when GOMAXPROCS is set to a count (the runtime then uses it throughout);
// otherwise the daemon runs on one P, and on busy while a producer is.
// busy is 1 where the process may not use two CPUs' worth of time: the
// runtime rounds a cgroup quota below 2 CPUs up to 2 Ps, and two busy
// threads on a one-CPU quota would be throttled for the rest of each
// period.
func procPlan(env string, defaultProcs int, cgroupCPUs func() (float64, bool)) (busy int, scale bool) {
	if n, err := strconv.Atoi(env); err == nil && n > 0 {
		return n, false
	}
	busy = min(2, defaultProcs)
	if cpus, ok := cgroupCPUs(); ok && cpus < 2 {
		busy = 1
	}
	return max(busy, 1), true
}

// cgroupCPUs returns the smallest CPU bandwidth limit (quota / period, in
// CPUs) of the process's cgroup and its ancestors, from /proc/self/cgroup
// and the cgroup file systems under root (/sys/fs/cgroup): cpu.max for
// cgroup v2, cpu.cfs_quota_us and cpu.cfs_period_us for v1. ok is false
// when no limit is set or none can be read.
func cgroupCPUs(root, selfCgroup string) (cpus float64, ok bool) {
	note := func(quota, period float64) {
		if quota > 0 && period > 0 && (!ok || quota/period < cpus) {
			cpus, ok = quota/period, true
		}
	}
	// walk calls read for dir and each of its ancestors up to the root of
	// the hierarchy mounted at mount.
	walk := func(mount, dir string, read func(dir string)) {
		for p := path.Clean("/" + dir); ; p = path.Dir(p) {
			read(filepath.Join(mount, p))
			if p == "/" {
				return
			}
		}
	}
	for _, line := range strings.Split(selfCgroup, "\n") {
		id, rest, found := strings.Cut(line, ":")
		if !found {
			continue
		}
		controllers, dir, found := strings.Cut(rest, ":")
		if !found {
			continue
		}
		if id == "0" && controllers == "" {
			walk(root, dir, func(d string) { // cgroup v2: "max 100000" or "50000 100000"
				b, err := os.ReadFile(filepath.Join(d, "cpu.max"))
				if f := strings.Fields(string(b)); err == nil && len(f) == 2 && f[0] != "max" {
					q, qerr := strconv.ParseFloat(f[0], 64)
					p, perr := strconv.ParseFloat(f[1], 64)
					if qerr == nil && perr == nil {
						note(q, p)
					}
				}
			})
			continue
		}
		if !strings.Contains(","+controllers+",", ",cpu,") {
			continue
		}
		for _, name := range []string{"cpu", "cpu,cpuacct", "cpuacct,cpu"} {
			mount := filepath.Join(root, name)
			if _, err := os.Stat(mount); err != nil {
				continue
			}
			walk(mount, dir, func(d string) { // cgroup v1: quota -1 is none
				q, qerr := readNumber(filepath.Join(d, "cpu.cfs_quota_us"))
				p, perr := readNumber(filepath.Join(d, "cpu.cfs_period_us"))
				if qerr == nil && perr == nil {
					note(q, p)
				}
			})
			break
		}
	}
	return cpus, ok
}

func readNumber(name string) (float64, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
}

// systemCgroupCPUs is cgroupCPUs for this process.
func systemCgroupCPUs() (float64, bool) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	return cgroupCPUs("/sys/fs/cgroup", string(b))
}
