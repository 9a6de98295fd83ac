// Package initial puts ahpd on one P while the packages it links
// initialize. The Go runtime starts with as many Ps as CPUs it may use,
// and the packages' init work (gRPC's and protobuf's above all) left
// 150–400 KB more memory resident on two Ps than on one at the median,
// enough to put the idle daemon over its 12 MiB target in some starts
// (docs/benchmarks-memory.md, "What these figures decided"). procs.Start
// decides the Ps afterwards, from Default.
//
// It must stay a leaf (os and runtime only): the runtime initializes the
// packages in import-path order as their imports are ready, and this path
// sorts before gRPC's, protobuf's and most of the standard library's, so
// it runs before their init work. Nothing changes when GOMAXPROCS is set
// in the environment: the runtime and procs use that throughout.
package initial

import (
	"os"
	"runtime"
)

// Default is the runtime's own choice of Ps for this process (the CPUs it
// may use), taken before init sets one.
var Default = runtime.GOMAXPROCS(0)

func init() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}
