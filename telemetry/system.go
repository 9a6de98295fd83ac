package telemetry

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"
	"github.com/prometheus/procfs/blockdevice"
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
	fs       procfs.FS
	bfs      blockdevice.FS

	// Collect's, from the previous collection.
	prevAt   time.Time
	prevCPU  map[string]procfs.CPUStat
	prevNet  map[string][2]uint64
	prevDisk map[string][2]uint64
}

// SystemConfig configures a System source.
type SystemConfig struct {
	Interval time.Duration // default DefaultInterval, at least MinInterval
	ProcRoot string        // default /proc
	SysRoot  string        // default /sys
}

// NewSystem checks the config and that /proc can be read.
func NewSystem(cfg SystemConfig) (*System, error) {
	iv, err := CheckInterval(cfg.Interval)
	if err != nil {
		return nil, err
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = procfs.DefaultMountPoint
	}
	if cfg.SysRoot == "" {
		cfg.SysRoot = "/sys"
	}
	fs, err := procfs.NewFS(cfg.ProcRoot)
	if err != nil {
		return nil, fmt.Errorf("system source: %w", err)
	}
	bfs, err := blockdevice.NewFS(cfg.ProcRoot, cfg.SysRoot)
	if err != nil {
		return nil, fmt.Errorf("system source: %w", err)
	}
	return &System{interval: iv, fs: fs, bfs: bfs}, nil
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

	st, err := s.fs.Stat()
	if err != nil {
		return nil, fmt.Errorf("system source: %w", err)
	}
	cpus := map[string]procfs.CPUStat{"total": st.CPUTotal}
	for i, c := range st.CPU {
		cpus[strconv.FormatInt(i, 10)] = c
	}
	if !first {
		for _, name := range sortedKeys(cpus) {
			if r, ok := cpuRatio(s.prevCPU[name], cpus[name]); ok {
				add("system_cpu_usage_ratio", r, Label{Name: "cpu", Value: name})
			}
		}
	}
	s.prevCPU = cpus

	if m, err := s.fs.Meminfo(); err == nil && m.MemTotal != nil {
		total := float64(*m.MemTotal) * 1024
		add("system_memory_total_bytes", total)
		if m.MemAvailable != nil {
			avail := float64(*m.MemAvailable) * 1024
			add("system_memory_available_bytes", avail)
			add("system_memory_used_bytes", total-avail)
		}
	}
	if l, err := s.fs.LoadAvg(); err == nil {
		add("system_load1", l.Load1)
		add("system_load5", l.Load5)
		add("system_load15", l.Load15)
	}
	if nd, err := s.fs.NetDev(); err == nil {
		cur := map[string][2]uint64{}
		for name, l := range nd {
			cur[name] = [2]uint64{l.RxBytes, l.TxBytes}
		}
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
	if ds, err := s.bfs.ProcDiskstats(); err == nil {
		cur := map[string][2]uint64{}
		for _, d := range ds {
			if strings.HasPrefix(d.DeviceName, "loop") || strings.HasPrefix(d.DeviceName, "ram") {
				continue
			}
			cur[d.DeviceName] = [2]uint64{d.ReadSectors * 512, d.WriteSectors * 512}
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
func cpuRatio(a, b procfs.CPUStat) (float64, bool) {
	// Guest time is already counted in user and nice.
	total := func(c procfs.CPUStat) float64 {
		return c.User + c.Nice + c.System + c.Idle + c.Iowait + c.IRQ + c.SoftIRQ + c.Steal
	}
	idle := func(c procfs.CPUStat) float64 { return c.Idle + c.Iowait }
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
