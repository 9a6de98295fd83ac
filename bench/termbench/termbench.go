// Package termbench holds what the terminal benchmarks share: the raw PTY
// baselines they compare against (the read also in a process of its own,
// rawread.go), the viewer side of an echo measurement, the process's CPU
// time, and the daemon's /metrics. Used by the go test benchmarks of pty/
// and daemon/ and by bench/ahpbench, bench/attachbench and
// bench/membench.
package termbench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/creack/pty"

	"github.com/ahp-dev/ahpd/ctl/client"
)

// WriteTextFile writes size bytes of 110-character text lines to path.
func WriteTextFile(path string, size int) error {
	line := []byte(strings.Repeat("the quick brown fox jumps over the lazy dog 0123456789 ", 2) + "\n")
	buf := make([]byte, 0, size)
	for len(buf)+len(line) <= size {
		buf = append(buf, line...)
	}
	buf = append(buf, strings.Repeat("x", size-len(buf))...)
	return os.WriteFile(path, buf, 0o600)
}

// RawPTYRead runs `cat path` on a PTY and reads it to the end: the
// throughput baseline. It returns the bytes read and the time taken; a
// cat that fails (no such file) is an error.
func RawPTYRead(path string) (int64, time.Duration, error) {
	n, _, d, err := rawPTYRead(path)
	return n, d, err
}

// rawPTYRead is RawPTYRead that also counts the reads that returned
// output (a reader faster than `cat` finds less in each read).
func rawPTYRead(path string) (n, reads int64, d time.Duration, err error) {
	cmd := exec.Command("cat", path)
	start := time.Now()
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 80})
	if err != nil {
		return 0, 0, 0, err
	}
	buf := make([]byte, 64<<10)
	for {
		k, err := f.Read(buf)
		n += int64(k)
		if k > 0 {
			reads++
		}
		if err != nil {
			break // EIO: cat, the slave's only holder, has exited
		}
	}
	d = time.Since(start)
	f.Close()
	if err := cmd.Wait(); err != nil {
		return n, reads, d, fmt.Errorf("cat %s: %w", path, err)
	}
	return n, reads, d, nil
}

// EchoCommand is the terminal every echo measurement types into: it
// prints EchoReady once stty has made the tty raw (before that the tty
// would echo a keystroke too), then echoes each keystroke once.
// bench/ahpbench/testdata/crelay.c runs the same command.
const (
	EchoCommand = "stty raw -echo; printf R; exec cat"
	EchoReady   = "R"
)

// RawPTYEcho times n keystrokes on a raw PTY running EchoCommand: the
// latency baseline. Keystrokes are gap apart (0: back to back).
func RawPTYEcho(n int, gap time.Duration) ([]time.Duration, error) {
	cmd := exec.Command("/bin/sh", "-c", EchoCommand)
	f, err := pty.Start(cmd)
	if err != nil {
		return nil, err
	}
	defer func() { f.Close(); _ = cmd.Wait() }()
	if err := f.SetDeadline(time.Now().Add(5 * time.Minute)); err != nil {
		return nil, err
	}
	return Echo(f, n, gap)
}

// Echo waits for EchoReady on rw, a byte stream to EchoCommand (a PTY,
// or a relay's socket), then times n keystrokes, gap apart: from writing
// "x" to reading it back.
func Echo(rw io.ReadWriter, n int, gap time.Duration) ([]time.Duration, error) {
	buf := make([]byte, 64)
	if k, err := io.ReadAtLeast(rw, buf, 1); err != nil {
		return nil, err
	} else if string(buf[:k]) != EchoReady {
		return nil, fmt.Errorf("the terminal said %q, not the ready mark %q", buf[:k], EchoReady)
	}
	out := make([]time.Duration, 0, n)
	for range n {
		time.Sleep(gap)
		t := time.Now()
		if _, err := rw.Write([]byte{'x'}); err != nil {
			return nil, err
		}
		k, err := io.ReadAtLeast(rw, buf, 1)
		if err != nil {
			return nil, err
		}
		if string(buf[:k]) != "x" {
			return out, fmt.Errorf("keystroke %d: echoed %q, not %q", len(out), buf[:k], "x")
		}
		out = append(out, time.Since(t))
	}
	return out, nil
}

// Input returns a terminal/input notification carrying s.
func Input(s string) string {
	return string(client.AppendNotification(nil, "terminal/input", map[string]string{"data": s}))
}

// UntilReady consumes a subscription's snapshot, up to channel/ready.
func UntilReady(ctx context.Context, sub *client.Sub) error {
	for {
		m, err := sub.Next(ctx)
		if err != nil {
			return err
		}
		if err := sub.Release(ctx, m); err != nil {
			return err
		}
		if m.Method == "channel/ready" {
			return nil
		}
	}
}

// Drain reads sub, releasing every message at once, until its output
// contains marker. It returns the output bytes (UTF-8) and the snapshots
// (terminal/reset) it saw: a viewer that fell behind gets a snapshot
// instead of part of the stream, and that is not throughput.
func Drain(ctx context.Context, sub *client.Sub, marker string) (bytes int64, snapshots int, err error) {
	var data []byte
	tail := ""
	for !strings.Contains(tail, marker) {
		m, err := sub.Next(ctx)
		if err != nil {
			return bytes, snapshots, err
		}
		switch m.Method {
		case "terminal/reset":
			snapshots++
		case "terminal/output":
			if data, err = m.AppendTerminalData(data[:0]); err != nil {
				return bytes, snapshots, err
			}
			bytes += int64(len(data))
			// The marker may be followed by a little more output ("\r\n")
			// and split across messages: keep a window of the last bytes.
			keep := len(marker) + 64
			tail += string(data[max(0, len(data)-keep):])
			tail = tail[max(0, len(tail)-keep):]
		}
		if err := sub.Release(ctx, m); err != nil {
			return bytes, snapshots, err
		}
	}
	return bytes, snapshots, nil
}

// Keystrokes times n keystrokes on sub, a terminal running EchoCommand:
// from sending "x" to seeing it echoed
// (releasing the echo is not part of it). Keystrokes are gap apart (0:
// back to back).
func Keystrokes(ctx context.Context, sub *client.Sub, n int, gap time.Duration) ([]time.Duration, error) {
	time.Sleep(100 * time.Millisecond) // let anything pending arrive, then drop it
	for sub.Queued() > 0 {
		m, err := sub.Next(ctx)
		if err != nil {
			return nil, err
		}
		_ = sub.Release(ctx, m)
	}
	key := Input("x")
	out := make([]time.Duration, 0, n)
	for range n {
		time.Sleep(gap)
		t := time.Now()
		if err := sub.Send(ctx, key); err != nil {
			return nil, err
		}
		for {
			m, err := sub.Next(ctx)
			if err != nil {
				return nil, err
			}
			echoed := m.Method == "terminal/output" && strings.Contains(string(m.Params), "x")
			if echoed {
				out = append(out, time.Since(t))
			}
			if err := sub.Release(ctx, m); err != nil {
				return nil, err
			}
			if echoed {
				break
			}
		}
	}
	return out, nil
}

// Percentile returns the p-th percentile of d.
func Percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		panic(fmt.Sprintf("termbench: percentile %d of no samples", p))
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

// CPUTime returns the user+system CPU time this process has used.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
}
