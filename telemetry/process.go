package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxCommands bounds the process_command_count series of one collection.
const maxCommands = 32

// Process samples a process tree — a terminal's shell and everything it
// runs — every Interval:
//
//	process_cpu_usage_ratio       CPU time over wall time, summed (1 = one core busy)
//	process_resident_memory_bytes RSS, summed
//	process_threads               threads, summed
//	process_count                 processes in the tree
//	process_command_count{command} processes per command name (at most 32 names)
//	process_foreground{command, pid} 1 for the foreground process group's leader
//	                              on the root's terminal, when it has one
//
// Run ends with an error when the root process is gone.
type Process struct {
	root     int
	interval time.Duration
	proc     string              // the /proc to read
	prev     map[procKey]float64 // CPU seconds by process
	prevAt   time.Time
}

type procKey struct {
	pid   int
	start uint64
}

// NewProcess samples the tree rooted at pid.
func NewProcess(pid int, interval time.Duration, procRoot string) (*Process, error) {
	iv, err := CheckInterval(interval)
	if err != nil {
		return nil, err
	}
	if pid <= 0 {
		return nil, fmt.Errorf("process source: pid %d: must be positive", pid)
	}
	if procRoot == "" {
		procRoot = "/proc"
	}
	if fi, err := os.Stat(procRoot); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("process source: %s is not a readable directory (%v)", procRoot, err)
	}
	return &Process{root: pid, interval: iv, proc: procRoot}, nil
}

// Run implements Source.
func (p *Process) Run(ctx context.Context, pub Publisher) error {
	return tick(ctx, p.interval, pub, p.Collect)
}

// ErrProcessGone ends a Process source whose root has exited.
var ErrProcessGone = errors.New("the process has exited")

// Collect reads the tree once.
func (p *Process) Collect(now time.Time) ([]Sample, error) {
	all, err := pids(p.proc)
	if err != nil {
		return nil, fmt.Errorf("process source: %w", err)
	}
	stats := map[int]procStat{}
	children := map[int][]int{}
	for _, pid := range all {
		b, err := readProc(p.proc, strconv.Itoa(pid), "stat")
		if err != nil {
			continue // it exited meanwhile
		}
		st, ok := parseProcStat(b)
		if !ok || st.pid != pid {
			continue
		}
		stats[st.pid] = st
		children[st.ppid] = append(children[st.ppid], st.pid)
	}
	root, ok := stats[p.root]
	if !ok || root.state == "Z" {
		return nil, fmt.Errorf("process %d: %w", p.root, ErrProcessGone)
	}
	var tree []procStat
	for queue := []int{p.root}; len(queue) > 0 && len(tree) < 100_000; queue = queue[1:] {
		st := stats[queue[0]]
		tree = append(tree, st)
		queue = append(queue, children[st.pid]...)
	}
	t := nowMilli(now)
	var out []Sample
	add := func(name string, v float64, labels ...Label) {
		out = append(out, Sample{T: t, Name: name, Value: v, Labels: labels})
	}
	cpu := map[procKey]float64{}
	var rss, threads, delta float64
	commands := map[string]int{}
	for _, st := range tree {
		k := procKey{st.pid, st.starttime}
		cpu[k] = st.cpuSeconds()
		delta += cpu[k] - p.prev[k] // a new process counts from its start
		rss += st.residentBytes()
		threads += float64(st.threads)
		if _, ok := commands[st.comm]; ok || len(commands) < maxCommands {
			commands[st.comm]++
		}
	}
	if dt := now.Sub(p.prevAt).Seconds(); !p.prevAt.IsZero() && dt > 0 {
		add("process_cpu_usage_ratio", max(delta, 0)/dt)
	}
	p.prev, p.prevAt = cpu, now
	add("process_resident_memory_bytes", rss)
	add("process_threads", threads)
	add("process_count", float64(len(tree)))
	for _, name := range sortedKeys(commands) {
		add("process_command_count", float64(commands[name]), Label{Name: "command", Value: sanitize(name)})
	}
	if root.tpgid > 0 {
		if fg, ok := stats[root.tpgid]; ok {
			add("process_foreground", 1, Label{Name: "command", Value: sanitize(fg.comm)}, Label{Name: "pid", Value: fmt.Sprint(fg.pid)})
		}
	}
	return out, nil
}

// sanitize keeps a command name a valid label value.
func sanitize(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	for len(s) > MaxLabelValueBytes {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return s
}
