// Command ahpd serves terminals, telemetry and TCP sockets to WebSocket
// viewers over AHP/1. See README.md and PROTOCOL.md.
package main

import (
	"os"
	"runtime"

	"github.com/ahp-dev/ahpd/daemon"
)

func main() {
	// One P unless GOMAXPROCS says otherwise. The daemon is a pipeline of
	// goroutines handing data to each other (PTY reader, emulator,
	// connection run loop, socket writer); on one P a hand-off is a
	// goroutine switch, on several it is often a thread wake-up. Measured
	// with internal/ahpbench on 2 cores: 11.6–12.7 ms of CPU per MB of
	// terminal output against 18.5–22.2 with two Ps, more throughput, and
	// half the idle echo p99 (docs/benchmarks.md). System calls still run
	// beside it.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	os.Exit(daemon.Main(os.Args[1:], os.Stderr))
}
