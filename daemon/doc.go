// Package daemon wires ahpd together. It holds no logic of its own:
//
//   - service (daemon/service): the channels and their lifecycle, limits
//     and per-channel overrides, tokens, viewers, events, and the control
//     plane's logic with its gRPC adapter (one error → code mapping);
//   - session (daemon/session): the HTTP listener and the WebSocket
//     connections, kind-blind, with the Service as their Host;
//   - the channel kinds (kinds.go): pty.Terminal today. A kind implements
//     flow.Channel and flow.Subscriber (flow/doc.go, "Channels"); a kind
//     that a subscribe may create adds a service.Creator to the table of
//     creators New builds (Options.Creators adds more). Nothing else
//     changes for a new kind;
//   - the memory returner (memory.go): free memory goes back to the
//     system a second after a channel or a connection ends, and the soft
//     memory limit follows the configured budgets.
//
// The other packages it uses: auth (tokens, tickets, the state
// directory), config (Config, Limits, the config file), registry (the
// channel registry), events (the event bus), metrics (/metrics, over
// the service), control (the control
// socket's transport), systemd (sd_notify, activation, the journal). The
// command line and signals are cmd/ahpd's.
//
// Concurrency: New builds everything; Serve runs until its context ends,
// then closes the connections, then the channels, and returns once every
// goroutine the daemon started has ended. Server's methods (the
// Service's) are safe for concurrent use.
package daemon
