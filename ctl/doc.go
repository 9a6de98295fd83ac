// Package ctl is ahpctl, the operator CLI of ahpd (PROTOCOL.md §10). It
// talks to the daemon's gRPC control plane (proto/ahp/v1) over the unix
// socket given by --control or $AHP_CONTROL, and to viewers' AHP/1
// WebSocket endpoint through ctl/client for `attach` and `forward`. It
// never imports the daemon: the import-direction test (internal/deptest)
// enforces that.
//
// The command tree is in commands.go; each listing prints a tabwriter table
// or, with -o json, stable JSON (sizes as integers, durations in Go syntax,
// field names as in PROTOCOL.md). Exit status: 0 success, 1 an error from
// the daemon or the environment (for telemetry push also a malformed
// input line), 2 bad usage. Errors print one line.
package ctl
