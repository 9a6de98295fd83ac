// Command ahpctl manages ahpd over its gRPC control socket: terminals,
// tokens, limits, viewers, events, and `attach` to a terminal from this
// one. See ctl/ and PROTOCOL.md §10.
package main

import (
	"os"

	"github.com/ahp-dev/ahpd/ctl"
	"github.com/ahp-dev/ahpd/internal/cpuprof"
)

func main() {
	stop := cpuprof.Start("AHPCTL_CPUPROFILE") // for the benchmarks
	code := ctl.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
