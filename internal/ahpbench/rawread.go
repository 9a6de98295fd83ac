package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ahp-dev/ahpd/internal/termbench"
)

// The raw PTY read, the baseline of the throughput tables, runs in a
// process of its own (a copy of ahpbench, `-rawread FILE`), so that its
// CPU can be set beside the daemon's as one process's against another's:
// the child starts `cat FILE` on a PTY, reads it to the end
// (termbench.RawPTYRead, 64 KiB reads), and reports the bytes, the time
// and its own CPU time over the read (getrusage RUSAGE_SELF: user +
// system of all its threads, `cat` not included), the same figure
// /proc/PID/stat gives for the daemon. Measured in the bench process
// instead, the reader's CPU could not be told from the viewers' decoding
// and the Go runtime's work for them.

// serveRawRead is the child: it reads file raw and prints
// "BYTES NANOSECONDS CPU-NANOSECONDS".
func serveRawRead(file string) error {
	cpu0 := selfCPU()
	n, d, err := termbench.RawPTYRead(file)
	cpu := selfCPU() - cpu0
	if err != nil {
		return err
	}
	fmt.Println(n, int64(d), int64(cpu))
	return nil
}

// selfCPU is this process's user+system CPU time (all its threads).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
}

// rawReading is one raw read of the test file: its time, and the
// reader's CPU time.
type rawReading struct {
	elapsed, cpu time.Duration
}

// msPerMB is the reader's CPU per MB of the file.
func (r rawReading) msPerMB() float64 { return float64(r.cpu) / 1e6 / mb }

// rawRead times a raw read of all of file from a PTY in a process of its
// own, and takes that process's CPU time for it.
func rawRead(file string) (rawReading, error) {
	self, err := os.Executable()
	if err != nil {
		return rawReading{}, err
	}
	cmd := exec.Command(self, "-rawread", file)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} // if ahpbench is killed
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		return rawReading{}, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(5 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		return rawReading{}, fmt.Errorf("raw PTY read: no end after 5 minutes")
	}
	if err != nil {
		return rawReading{}, fmt.Errorf("raw PTY read: %w", err)
	}
	var n, ns, cpu int64
	if _, err := fmt.Sscan(out.String(), &n, &ns, &cpu); err != nil {
		return rawReading{}, fmt.Errorf("raw PTY read said %q: %w", out.String(), err)
	}
	if n < fileSize {
		return rawReading{}, fmt.Errorf("raw read: %d of %d bytes", n, fileSize)
	}
	return rawReading{elapsed: time.Duration(ns), cpu: time.Duration(cpu)}, nil
}

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
