package termbench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestMain makes this test binary the raw reader when RawReadProcess runs
// it again with -rawread FILE, as a benchmark's main does.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "-"+RawReadFlag {
		RawReadMain("termbench.test", os.Args[2])
	}
	os.Exit(m.Run())
}

func TestRawReadProcess(t *testing.T) {
	file := filepath.Join(t.TempDir(), "data.txt")
	const size = 1 << 20
	if err := WriteTextFile(file, size); err != nil {
		t.Fatal(err)
	}
	r, err := RawReadProcess(t.Context(), file)
	if err != nil {
		t.Fatal(err)
	}
	// The PTY turns each "\n" of the file into "\r\n".
	// Reads that returned output: at least one per 64 KiB (the buffer),
	// at most one per byte.
	if r.Bytes < size || r.Elapsed <= 0 || r.CPU < 0 || r.Reads < r.Bytes/(64<<10) || r.Reads > r.Bytes {
		t.Fatalf("RawReadProcess of %d bytes = %+v", size, r)
	}
}

func TestRawReadProcessErrors(t *testing.T) {
	if _, err := RawReadProcess(t.Context(), filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("the raw read of a file that does not exist: no error")
	}
}

// TestRawReadProcessStopped: a read that does not end (cat of a FIFO no
// one writes) ends with its context, and the reader is killed and waited
// for.
func TestRawReadProcessStopped(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO:", err)
	}
	ctx, cancel := context.WithTimeoutCause(t.Context(), 300*time.Millisecond, errors.New("test deadline"))
	defer cancel()
	start := time.Now()
	_, err := RawReadProcess(ctx, fifo)
	if err == nil || !errors.Is(err, context.Cause(ctx)) {
		t.Fatalf("RawReadProcess of a FIFO with no writer = %v, want the context's cause", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("RawReadProcess returned %v after its context ended", d)
	}
}
