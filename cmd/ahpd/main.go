// Command ahpd serves terminals, telemetry and TCP sockets to WebSocket
// viewers over AHP/1. See README.md and PROTOCOL.md. This package holds
// the command line, the signals (SIGTERM, SIGINT, SIGHUP reload) and the
// systemd loop (run.go); package daemon wires the rest.
package main

import (
	"os"

	"github.com/ahp-dev/ahpd/internal/cpuprof"
	"github.com/ahp-dev/ahpd/internal/fds"
)

func main() {
	fds.CloseOnExecInherited()                        // no inherited descriptor reaches a shell
	stop := cpuprof.Start("AHPD_CPUPROFILE")          // for the benchmarks (docs/benchmarks.md)
	stopHeap := cpuprof.StartHeap("AHPD_HEAPPROFILE") // SIGUSR1 (docs/benchmarks-memory.md)
	code := Main(os.Args[1:], os.Stderr)
	stopHeap()
	stop()
	os.Exit(code)
}
