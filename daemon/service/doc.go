// Package service is the daemon's state and the logic of its local
// control plane (PROTOCOL.md §10): channels (terminals, and the kinds of
// Options.Creators) with their lifecycle, the limits in force and
// per-channel overrides, tokens and browser links, viewers (through the
// session, as Viewers), statistics and events. grpc.go is the
// gRPC adapter over it (proto/ahp/v1), with one mapping of errors to gRPC
// codes (grpcError); the socket it is served on is package control's.
//
// It is also the session's Host: the connections ask it for limits, for
// channels that subscribe creates, and to close channels.
//
// The control plane's operations take a context first. Most finish at
// once; StartTerminal starts no process for a caller that gave up, and
// those that wait (CloseChannelWith's grace, ListViewers, WatchEvents) end
// with it.
//
// Concurrency: a Service's methods are safe for concurrent use. Close
// refuses new channels, closes every channel and waits for the goroutines
// it started (one per terminal, waiting for its exit).
package service
