package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ahp-dev/ahpd/bench/termbench"
)

// rawRead times a raw read of all of file from a PTY in a process of its
// own (a copy of ahpbench, -rawread FILE: termbench.RawReadProcess), which
// reports its CPU time too; 5 minutes at most.
func rawRead(file string) (termbench.RawReading, error) {
	ctx, cancel := context.WithTimeoutCause(context.Background(), 5*time.Minute, errors.New("no end after 5 minutes"))
	defer cancel()
	r, err := termbench.RawReadProcess(ctx, file)
	if err == nil && r.Bytes < fileSize {
		err = fmt.Errorf("raw read: %d of %d bytes", r.Bytes, fileSize)
	}
	return r, err
}

// rawMsPerMB is the raw reader's CPU per MB of the file.
func rawMsPerMB(r termbench.RawReading) float64 { return perMB(r.CPU) }

// perMB is a CPU time over the test file, in ms per MB.
func perMB(cpu time.Duration) float64 { return float64(cpu) / 1e6 / mb }

// taskCPU is a process's CPU time to the nanosecond: the sum over its
// threads of the time the scheduler ran them (/proc/PID/task/*/schedstat),
// for figures too small for /proc/PID/stat's clock ticks (10 ms), such as
// the CPU of a few hundred keystrokes. A thread that exits takes its time
// with it; Go runtimes and the C relay keep theirs.
func taskCPU(pid int) (time.Duration, error) {
	dirs, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil {
		return 0, err
	}
	if len(dirs) == 0 {
		return 0, fmt.Errorf("process %d: no /proc/%d/task/*/schedstat", pid, pid)
	}
	var sum int64
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread exited
		}
		f, _, _ := strings.Cut(string(b), " ")
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q", p, b)
		}
		sum += v
	}
	return time.Duration(sum), nil
}
