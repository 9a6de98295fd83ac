package telemetry

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The few /proc files the system and process sources read, parsed here:
// a library for them (prometheus/procfs) compiled 466 KB of regular
// expressions when the daemon started, whether or not a source ever ran
// (docs/benchmarks-memory.md). Each parser takes the file's bytes and
// skips what it does not understand; FuzzProcFiles feeds them anything.

// userHZ is the unit of the kernel's CPU times in /proc (USER_HZ), 100 on
// every Linux architecture that ahpd builds for.
const userHZ = 100

// maxProcFile bounds a /proc file read whole (a diskstats or net/dev with
// thousands of devices stays far below it).
const maxProcFile = 4 << 20

// readProc reads the file at root/name, up to maxProcFile bytes.
func readProc(root string, name ...string) ([]byte, error) {
	f, err := os.Open(filepath.Join(append([]string{root}, name...)...))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxProcFile))
}

// cpuTimes are a CPU's times in ticks, from a cpu line of /proc/stat.
type cpuTimes struct {
	user, nice, system, idle, iowait, irq, softirq, steal float64
}

// parseStat reads the cpu lines of /proc/stat: the total ("cpu") and each
// CPU by its number ("cpu0", …). ok is false without a total.
func parseStat(b []byte) (total cpuTimes, cpus map[int]cpuTimes, ok bool) {
	cpus = map[int]cpuTimes{}
	for line := range lines(b) {
		f := strings.Fields(line)
		if len(f) < 5 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		var v [8]float64
		for i := range min(len(f)-1, len(v)) {
			n, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				break
			}
			v[i] = float64(n)
		}
		t := cpuTimes{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]}
		if f[0] == "cpu" {
			total, ok = t, true
			continue
		}
		if n, err := strconv.Atoi(f[0][3:]); err == nil && n >= 0 && n < 1<<16 {
			cpus[n] = t
		}
	}
	return total, cpus, ok
}

// parseMeminfo returns MemTotal and MemAvailable of /proc/meminfo in
// bytes; a value not there is -1.
func parseMeminfo(b []byte) (total, available float64) {
	total, available = -1, -1
	for line := range lines(b) {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || name != "MemTotal" && name != "MemAvailable" {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		v := float64(n)
		if len(f) > 1 && f[1] == "kB" {
			v *= 1024
		}
		if name == "MemTotal" {
			total = v
		} else {
			available = v
		}
	}
	return total, available
}

// parseLoadavg returns the three load averages of /proc/loadavg.
func parseLoadavg(b []byte) (l [3]float64, ok bool) {
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return l, false
	}
	for i := range l {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil || v < 0 {
			return [3]float64{}, false
		}
		l[i] = v
	}
	return l, true
}

// parseNetDev returns each interface's received and transmitted bytes
// from /proc/net/dev ("name: rx_bytes … (8 receive fields) tx_bytes …").
func parseNetDev(b []byte) map[string][2]uint64 {
	out := map[string][2]uint64{}
	for line := range lines(b) {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 9 {
			continue
		}
		rx, err1 := strconv.ParseUint(f[0], 10, 64)
		tx, err2 := strconv.ParseUint(f[8], 10, 64)
		if name = strings.TrimSpace(name); name != "" && err1 == nil && err2 == nil {
			out[name] = [2]uint64{rx, tx}
		}
	}
	return out
}

// NetDevTotals sums the received and transmitted bytes of every
// interface in /proc/PID/net/dev (parseNetDev): what Prometheus' client
// reports as a process's network bytes (the daemon's /metrics). ok is
// false when no interface line parses.
func NetDevTotals(b []byte) (rx, tx uint64, ok bool) {
	for _, v := range parseNetDev(b) {
		rx, tx, ok = rx+v[0], tx+v[1], true
	}
	return rx, tx, ok
}

// parseDiskstats returns each device's sectors read and written from
// /proc/diskstats ("major minor name reads merged sectors_read ms writes
// merged sectors_written …").
func parseDiskstats(b []byte) map[string][2]uint64 {
	out := map[string][2]uint64{}
	for line := range lines(b) {
		f := strings.Fields(line)
		if len(f) < 10 {
			continue
		}
		rd, err1 := strconv.ParseUint(f[5], 10, 64)
		wr, err2 := strconv.ParseUint(f[9], 10, 64)
		if err1 == nil && err2 == nil {
			out[f[2]] = [2]uint64{rd, wr}
		}
	}
	return out
}

// procStat is what the process source reads of /proc/PID/stat.
type procStat struct {
	pid, ppid, tpgid int
	comm, state      string
	utime, stime     uint64 // ticks
	threads          int64
	starttime        uint64 // ticks after boot
	rss              int64  // pages
}

// parseProcStat reads /proc/PID/stat: "pid (comm) state ppid pgrp session
// tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime cutime
// cstime priority nice num_threads itrealvalue starttime vsize rss …",
// where comm (up to 15 bytes) may hold spaces and parentheses: it ends at
// the line's last ')'.
func parseProcStat(b []byte) (procStat, bool) {
	s := string(b)
	open := strings.IndexByte(s, '(')
	end := strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return procStat{}, false
	}
	var st procStat
	var err error
	if st.pid, err = strconv.Atoi(strings.TrimSpace(s[:open])); err != nil {
		return procStat{}, false
	}
	st.comm = s[open+1 : end]
	f := strings.Fields(s[end+1:])
	if len(f) < 22 {
		return procStat{}, false
	}
	ints := func(i int) int64 {
		n, e := strconv.ParseInt(f[i], 10, 64)
		if e != nil {
			err = e
		}
		return n
	}
	uints := func(i int) uint64 {
		n, e := strconv.ParseUint(f[i], 10, 64)
		if e != nil {
			err = e
		}
		return n
	}
	st.state = f[0]
	st.ppid = int(ints(1))
	st.tpgid = int(ints(5))
	st.utime, st.stime = uints(11), uints(12)
	st.threads = ints(17)
	st.starttime = uints(19)
	st.rss = ints(21)
	if err != nil {
		return procStat{}, false
	}
	return st, true
}

// cpuSeconds is the process's user and system CPU time.
func (st procStat) cpuSeconds() float64 { return float64(st.utime+st.stime) / userHZ }

// residentBytes is the process's resident set.
func (st procStat) residentBytes() float64 {
	return float64(max(st.rss, 0)) * float64(os.Getpagesize())
}

// lines yields b's lines.
func lines(b []byte) func(func(string) bool) {
	return func(yield func(string) bool) {
		for len(b) > 0 {
			line := b
			if i := bytes.IndexByte(b, '\n'); i >= 0 {
				line, b = b[:i], b[i+1:]
			} else {
				b = nil
			}
			if !yield(string(line)) {
				return
			}
		}
	}
}

// pids lists the numeric entries of the /proc at root.
func pids(root string) ([]int, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out, nil
}
