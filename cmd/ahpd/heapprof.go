package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
)

// startHeapProfiles writes a heap profile (go tool pprof) to the file
// named by $AHPD_HEAPPROFILE each time the daemon gets SIGUSR1, after a
// garbage collection, so that it shows what the daemon holds at that
// moment (docs/benchmarks-memory.md). Without the variable SIGUSR1 keeps
// its default action. With the variable set, the profile samples every
// 512 bytes allocated (not every 512 KiB), which costs CPU: for
// measurements, not for production.
func startHeapProfiles() (stop func()) {
	path := os.Getenv("AHPD_HEAPPROFILE")
	if path == "" {
		return func() {}
	}
	runtime.MemProfileRate = 512 // every allocation of the run, near enough
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-sig:
			}
			runtime.GC()
			f, err := os.Create(path)
			if err == nil {
				err = pprof.Lookup("heap").WriteTo(f, 0)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "AHPD_HEAPPROFILE:", err)
			}
		}
	}()
	return func() { signal.Stop(sig); close(done) }
}
