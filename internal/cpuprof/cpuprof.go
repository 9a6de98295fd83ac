// Package cpuprof lets the commands write profiles for the benchmarks:
// a CPU profile or execution trace of the whole run (Start,
// docs/benchmarks.md) and heap profiles on SIGUSR1 (StartHeap,
// docs/benchmarks-memory.md), each when an environment variable names the
// file. Both return a stop function for the end of main; StartHeap's
// goroutine has ended when its stop returns.
package cpuprof

import (
	"fmt"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"strings"
)

// Start begins a CPU profile into the file named by the environment
// variable env, if set, and returns the function that ends it (a no-op
// otherwise). A file name ending in ".trace" gets an execution trace
// (go tool trace) instead, to see where a pipeline waits. A profile that
// cannot be started is reported on stderr and the command runs without
// it.
func Start(env string) (stop func()) {
	path := os.Getenv(env)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	start, end := pprof.StartCPUProfile, pprof.StopCPUProfile
	if strings.HasSuffix(path, ".trace") {
		start, end = trace.Start, trace.Stop
	}
	if err == nil {
		err = start(f)
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: no CPU profile: %v\n", env, err)
		return func() {}
	}
	return func() {
		end()
		f.Close()
	}
}
