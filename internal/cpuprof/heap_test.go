package cpuprof

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestStartHeapWithoutVariable(t *testing.T) {
	t.Setenv("CPUPROF_TEST_HEAP", "")
	StartHeap("CPUPROF_TEST_HEAP")() // a no-op; SIGUSR1 is left alone
}

// TestStartHeap: SIGUSR1 writes a whole profile (a gzip stream) to the
// named file, and stop returns after the goroutine that writes them.
func TestStartHeap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heap.pprof")
	t.Setenv("CPUPROF_TEST_HEAP", path)
	rate := runtime.MemProfileRate
	defer func() { runtime.MemProfileRate = rate }()
	stop := StartHeap("CPUPROF_TEST_HEAP")
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	// The profile is written by the goroutine that received the signal:
	// wait (bounded) until it is there.
	var b []byte
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if b, err = os.ReadFile(path); err == nil {
			break
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("no heap profile at %s 10 s after SIGUSR1: %v", path, err)
		}
	}
	stop()
	z, err := gzip.NewReader(bytes.NewReader(b))
	if err == nil {
		_, err = io.Copy(io.Discard, z)
	}
	if err != nil {
		t.Fatalf("the heap profile is not a whole gzip stream: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".heap.pprof.*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	// os/signal's own loop, started by the first signal.Notify, stays.
	goleak.VerifyNone(t, goleak.IgnoreAnyFunction("os/signal.loop"))
}
