// Package wire holds the JSON shapes of AHP/1 results that both the daemon
// and the Go client speak (PROTOCOL.md §2–§3), so the two cannot drift.
package wire

import "github.com/ahp-dev/ahpd/flow"

// InitializeResult is the result of initialize (§2).
type InitializeResult struct {
	ProtocolVersion string `json:"protocolVersion"`
	Server          struct {
		Name    string `json:"name"`
		Version string `json:"version"`
		// Started is when the daemon started (RFC 3339, UTC, to the
		// millisecond): a client that reconnects and finds another value
		// knows the daemon restarted and its channels are new ones.
		Started string `json:"started,omitempty"`
	} `json:"server"`
	Capabilities struct {
		FlowControl struct {
			HostReceiveDefaults flow.ReceiveLimits `json:"hostReceiveDefaults"`
			Maximums            flow.ReceiveLimits `json:"maximums"`
			ClientDefaults      flow.ReceiveLimits `json:"clientReceiveDefaults"`
		} `json:"flowControl"`
		// WindowUpdates: the host takes channel/window and ping, and
		// sends channel/window to a client that says it takes them
		// (PROTOCOL.md §6, "Changing a window").
		WindowUpdates bool `json:"windowUpdates,omitempty"`
	} `json:"capabilities"`
	Limits struct {
		MaxIDLength            int   `json:"maxIdLength"`
		MaxInboundMessageBytes int64 `json:"maxInboundMessageBytes"`
		MaxSubscriptions       int   `json:"maxSubscriptions"`
		HeartbeatIntervalMs    int64 `json:"heartbeatIntervalMs"`
	} `json:"limits"`
	Access struct {
		Role     string   `json:"role"`
		Channels []string `json:"channels,omitempty"`
	} `json:"access"`
	// ReconnectToken is issued to a session opened with a single-use
	// ticket (docs/protocol-decisions.md).
	ReconnectToken string `json:"reconnectToken,omitempty"`
}

// FlowControl is the negotiated pair of limits in a subscribe result (§3).
type FlowControl struct {
	ClientReceive flow.ReceiveLimits `json:"clientReceive"`
	HostReceive   flow.ReceiveLimits `json:"hostReceive"`
}

// SubscribeResult is the result of subscribe (§3).
type SubscribeResult struct {
	SubscriptionID string      `json:"subscriptionId"`
	FlowControl    FlowControl `json:"flowControl"`
	Initial        struct {
		Kind string `json:"kind"`
	} `json:"initial"`
	// Channel names a channel the subscribe created (§8 TCP).
	Channel string `json:"channel,omitempty"`
	// Resume is the newest resume token and the host's positions (§8).
	Resume *flow.ResumeResult `json:"resume,omitempty"`
}
