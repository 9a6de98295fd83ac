package termbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// The raw PTY read, the baseline of the throughput tables, runs in a
// process of its own: a copy of the benchmark's binary run with
// -rawread FILE, whose main calls RawReadMain. The child starts `cat
// FILE` on a PTY, reads it to the end (RawPTYRead, 64 KiB reads), and
// reports the bytes, the time and its own CPU time over the read
// (getrusage RUSAGE_SELF: user + system of all its threads, `cat` not
// included), the same figure /proc/PID/stat gives for the daemon, so that
// the two can be set side by side as one process's against another's.
// Measured in the benchmark's process instead, the reader's CPU could not
// be told from the viewers' decoding and the Go runtime's work for them.
// bench/ahpbench, bench/attachbench and the browser benchmark
// (daemon/webui/e2e/bench-cat.mjs, which runs `ahpbench -rawread FILE`)
// all use it.

// RawReadFlag is the flag, without its dash, that makes a benchmark's
// binary the raw reader: its main calls RawReadMain with the flag's value.
const RawReadFlag = "rawread"

// RawReading is one raw PTY read of a file, as serveRawRead prints it (one
// JSON line).
type RawReading struct {
	Bytes   int64         `json:"bytes"`          // read from the PTY (each "\n" of the file is "\r\n" there)
	Elapsed time.Duration `json:"nanoseconds"`    // from just before `cat` starts to the end of the read
	CPU     time.Duration `json:"cpuNanoseconds"` // the reader process's user + system over the read, `cat`'s not included
	Reads   int64         `json:"reads"`          // reads that returned output
}

// serveRawRead is the raw reader: it reads file raw from a PTY and writes
// the RawReading to w, one JSON line.
func serveRawRead(w io.Writer, file string) error {
	cpu0 := CPUTime()
	n, reads, d, err := rawPTYRead(file)
	cpu := CPUTime() - cpu0
	if err != nil {
		return err
	}
	return json.NewEncoder(w).Encode(RawReading{Bytes: n, Elapsed: d, CPU: cpu, Reads: reads})
}

// RawReadMain is a benchmark's main run as the raw reader (-rawread
// file): it serves the read on stdout and exits, 1 after printing the
// error if it failed.
func RawReadMain(name, file string) {
	if err := serveRawRead(os.Stdout, file); err != nil {
		fmt.Fprintf(os.Stderr, "%s -%s: %v\n", name, RawReadFlag, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// RawReadProcess runs a raw read of file in a process of its own (this
// binary with -rawread FILE) and returns what it reported. When ctx ends
// first the process is killed; either way it has been waited for when
// RawReadProcess returns.
func RawReadProcess(ctx context.Context, file string) (RawReading, error) {
	self, err := os.Executable()
	if err != nil {
		return RawReading{}, err
	}
	cmd := exec.CommandContext(ctx, self, "-"+RawReadFlag, file)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} // if the benchmark is killed
	cmd.WaitDelay = 5 * time.Second                                    // bounds Wait's copy of the output after a kill
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return RawReading{}, fmt.Errorf("raw PTY read of %s: %w", file, ChildError(ctx, err, errb.Bytes()))
	}
	var r RawReading
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return RawReading{}, fmt.Errorf("raw PTY read of %s: it said %q: %w", file, out.Bytes(), err)
	}
	return r, nil
}

// ChildError explains err, from running a benchmark's child process under
// ctx: the context's cause when ctx ended (the child was killed for it),
// else err with what the child wrote to stderr, if anything.
func ChildError(ctx context.Context, err error, stderr []byte) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if msg := bytes.TrimSpace(stderr); len(msg) > 0 {
		return fmt.Errorf("%w: %s", err, msg)
	}
	return err
}
