package cpuprof

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"syscall"
)

// StartHeap writes a heap profile (go tool pprof) to the file named by the
// environment variable env each time the process gets SIGUSR1, after a
// garbage collection, so that it shows what the process holds at that
// moment (docs/benchmarks-memory.md). The profile is written beside the
// file and renamed onto it, so a reader never sees half of one. Without
// the variable SIGUSR1 keeps its default action and stop is a no-op.
// With it, the profile samples every 512 bytes allocated (not every
// 512 KiB), which costs CPU: for measurements, not for production. stop
// restores SIGUSR1's default action and returns once the goroutine that
// writes the profiles (and a profile it was writing) has ended.
func StartHeap(env string) (stop func()) {
	path := os.Getenv(env)
	if path == "" {
		return func() {}
	}
	runtime.MemProfileRate = 512 // every allocation of the run, near enough
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	done := make(chan struct{}) // closed by stop
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-sig:
			}
			if err := writeHeap(path); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", env, err)
			}
		}
	})
	return func() {
		signal.Stop(sig)
		close(done)
		wg.Wait()
	}
}

// writeHeap writes a heap profile, after a garbage collection, to a
// temporary file beside path and renames it onto path.
func writeHeap(path string) error {
	runtime.GC()
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	err = pprof.Lookup("heap").WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
