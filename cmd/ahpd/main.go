// Command ahpd serves terminals, telemetry and TCP sockets to WebSocket
// viewers over AHP/1. See README.md and PROTOCOL.md.
package main

import (
	"os"

	"github.com/ahp-dev/ahpd/daemon"
)

func main() {
	daemon.CloseOnExecInherited() // no inherited descriptor reaches a shell
	os.Exit(daemon.Main(os.Args[1:], os.Stderr))
}
