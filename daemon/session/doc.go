// Package session is the viewer side of ahpd (PROTOCOL.md §1–§7): the HTTP
// listener (the Host and Origin checks, /v1/ws, /v1/check, /healthz,
// /metrics and the web page, under publicUrl's path; TLS when configured),
// the WebSocket upgrade, and each connection's JSON-RPC
// dispatch and run loop over flow's Sender and Receivers.
//
// A connection knows no channel kind: it serves every channel through the
// contract of flow.Channel and flow.Subscriber (flow/doc.go, "Channels"),
// and asks its Host (the daemon) for limits, for channels that subscribe
// creates, and to close channels.
//
// Concurrency: each connection has three goroutines — the reader
// (WebSocket → inbox), the writer (out → WebSocket) and the run loop,
// which owns the connection's flow state and calls every Subscriber
// method — plus a pinger; the connection ends them all and waits for them
// before it returns. Other goroutines reach a connection only through
// channels (wake-ups, kicks, queries). Server's exported methods are safe
// for concurrent use; Serve returns after every connection has ended.
package session
