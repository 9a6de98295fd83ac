package telemetry

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// System samples the host from /proc every Interval: CPU use per core and
// in total (a ratio of busy time, 0–1), memory, load averages, and network
// and disk rates (bytes per second, from the kernel's counters; the first
// collection has no rates). Names:
//
//	system_cpu_usage_ratio{cpu="total"|"0"|…}
//	system_memory_total_bytes, system_memory_available_bytes, system_memory_used_bytes
//	system_load1, system_load5, system_load15
//	system_network_receive_bytes_per_second{device}, system_network_transmit_bytes_per_second{device}
//	system_disk_read_bytes_per_second{device}, system_disk_write_bytes_per_second{device}
//
// Loop and RAM disks are left out.
type System struct {
	interval time.Duration
	proc     string // the /proc to read

	// Collect's, from the previous collection.
	prevAt   time.Time
	prevCPU  map[string]cpuTimes
	prevNet  map[string][2]uint64
	prevDisk map[string][2]uint64
}

// SystemConfig configures a System source.
type SystemConfig struct {
	Interval time.Duration // default DefaultInterval, at least MinInterval
	ProcRoot string        // default /proc
}

// NewSystem checks the config and that /proc can be read.
func NewSystem(cfg SystemConfig) (*System, error) {
	iv, err := CheckInterval(cfg.Interval)
	if err != nil {
		return nil, err
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if fi, err := os.Stat(cfg.ProcRoot); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("system source: %s is not a readable directory (%v)", cfg.ProcRoot, err)
	}
	return &System{interval: iv, proc: cfg.ProcRoot}, nil
}

// Run implements Source.
func (s *System) Run(ctx context.Context, p Publisher) error {
	return tick(ctx, s.interval, p, s.Collect)
}

// Collect reads /proc once and returns the samples, stamped now; rates
// are over the time since the previous Collect. A file that cannot be
// read is left out (a container may hide one); only /proc/stat is
// required.
func (s *System) Collect(now time.Time) ([]Sample, error) {
	t := nowMilli(now)
	var out []Sample
	add := func(name string, v float64, labels ...Label) {
		out = append(out, Sample{T: t, Name: name, Value: v, Labels: labels})
	}
	dt := now.Sub(s.prevAt).Seconds()
	first := s.prevAt.IsZero() || dt <= 0

	b, err := readProc(s.proc, "stat")
	if err != nil {
		return nil, fmt.Errorf("system source: %w", err)
	}
	total, perCPU, ok := parseStat(b)
	if !ok {
		return nil, fmt.Errorf("system source: %s/stat has no cpu line", s.proc)
	}
	cpus := map[string]cpuTimes{"total": total}
	for i, c := range perCPU {
		cpus[strconv.Itoa(i)] = c
	}
	if !first {
		for _, name := range sortedKeys(cpus) {
			if r, ok := cpuRatio(s.prevCPU[name], cpus[name]); ok {
				add("system_cpu_usage_ratio", r, Label{Name: "cpu", Value: name})
			}
		}
	}
	s.prevCPU = cpus

	if b, err := readProc(s.proc, "meminfo"); err == nil {
		if total, avail := parseMeminfo(b); total >= 0 {
			add("system_memory_total_bytes", total)
			if avail >= 0 {
				add("system_memory_available_bytes", avail)
				add("system_memory_used_bytes", total-avail)
			}
		}
	}
	if b, err := readProc(s.proc, "loadavg"); err == nil {
		if l, ok := parseLoadavg(b); ok {
			add("system_load1", l[0])
			add("system_load5", l[1])
			add("system_load15", l[2])
		}
	}
	if b, err := readProc(s.proc, "net", "dev"); err == nil {
		cur := parseNetDev(b)
		if !first {
			for _, name := range sortedKeys(cur) {
				if r, ok := rates(s.prevNet, cur, name, dt); ok {
					add("system_network_receive_bytes_per_second", r[0], Label{Name: "device", Value: name})
					add("system_network_transmit_bytes_per_second", r[1], Label{Name: "device", Value: name})
				}
			}
		}
		s.prevNet = cur
	}
	if b, err := readProc(s.proc, "diskstats"); err == nil {
		cur := map[string][2]uint64{}
		for name, d := range parseDiskstats(b) {
			if strings.HasPrefix(name, "loop") || strings.HasPrefix(name, "ram") {
				continue
			}
			cur[name] = [2]uint64{d[0] * 512, d[1] * 512}
		}
		if !first {
			for _, name := range sortedKeys(cur) {
				if r, ok := rates(s.prevDisk, cur, name, dt); ok {
					add("system_disk_read_bytes_per_second", r[0], Label{Name: "device", Value: name})
					add("system_disk_write_bytes_per_second", r[1], Label{Name: "device", Value: name})
				}
			}
		}
		s.prevDisk = cur
	}
	s.prevAt = now
	return out, nil
}

// cpuRatio is the busy share of the CPU time between two readings.
func cpuRatio(a, b cpuTimes) (float64, bool) {
	// Guest time is already counted in user and nice.
	total := func(c cpuTimes) float64 {
		return c.user + c.nice + c.system + c.idle + c.iowait + c.irq + c.softirq + c.steal
	}
	idle := func(c cpuTimes) float64 { return c.idle + c.iowait }
	dt := total(b) - total(a)
	if dt <= 0 {
		return 0, false
	}
	r := (dt - (idle(b) - idle(a))) / dt
	return min(max(r, 0), 1), true
}

// rates returns the per-second increase of a pair of counters; a counter
// that went back (a device re-created) gives none.
func rates(prev, cur map[string][2]uint64, name string, dt float64) ([2]float64, bool) {
	p, ok := prev[name]
	c := cur[name]
	if !ok || c[0] < p[0] || c[1] < p[1] {
		return [2]float64{}, false
	}
	return [2]float64{float64(c[0]-p[0]) / dt, float64(c[1]-p[1]) / dt}, true
}
