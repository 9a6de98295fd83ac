package config

import (
	"strings"
	"time"

	"github.com/ahp-dev/ahpd/flow"
)

// LimitField describes one settable limit: its wire name (PROTOCOL.md §9,
// as in `ahpctl limits set KEY=VALUE`) and its kind.
type LimitField struct {
	Name string
	Kind LimitKind
}

// LimitKind is how a limit's value is written.
type LimitKind int

// Kinds of limits.
const (
	LimitBytes    LimitKind = iota // a size in bytes (UTF-16 bytes for flow-control limits)
	LimitDuration                  // a time.Duration, as nanoseconds
	LimitCount                     // a plain count
)

// ReceiveGroups are the names of the three ReceiveLimits groups.
var ReceiveGroups = []string{"clientReceiveDefaults", "clientReceiveMaximums", "hostReceive"}

// LimitFields lists every settable limit, in a stable order. The names of
// ReceiveLimits members are GROUP.windowBytes, GROUP.maximumFrameBytes and
// GROUP.maximumMessageBytes.
func LimitFields() []LimitField {
	f := []LimitField{
		{"maxBufferedBytes", LimitBytes},
		{"maxOutputStall", LimitDuration},
		{"maxSubscriptions", LimitCount},
		{"maxIdLength", LimitCount},
		{"maxInboundMessageBytes", LimitBytes},
		{"heartbeatInterval", LimitDuration},
		{"initializeTimeout", LimitDuration},
	}
	for _, g := range ReceiveGroups {
		f = append(f, LimitField{g + ".windowBytes", LimitBytes}, LimitField{g + ".maximumFrameBytes", LimitBytes}, LimitField{g + ".maximumMessageBytes", LimitBytes})
	}
	return append(f, LimitField{"terminalViewerBacklog", LimitBytes},
		LimitField{"maxPendingConnections", LimitCount}, LimitField{"maxTerminals", LimitCount})
}

// limitRef returns a pointer to the int64-shaped field called name.
func limitRef(l *Limits, name string) (i64 *int64, dur *time.Duration, n *int) {
	switch name {
	case "maxBufferedBytes":
		return &l.MaxBufferedBytes, nil, nil
	case "maxOutputStall":
		return nil, &l.MaxOutputStall, nil
	case "maxSubscriptions":
		return nil, nil, &l.MaxSubscriptions
	case "maxIdLength":
		return nil, nil, &l.MaxIDLength
	case "maxInboundMessageBytes":
		return &l.MaxInboundMessageBytes, nil, nil
	case "heartbeatInterval":
		return nil, &l.HeartbeatInterval, nil
	case "initializeTimeout":
		return nil, &l.InitializeTimeout, nil
	case "terminalViewerBacklog":
		return &l.TerminalViewerBacklog, nil, nil
	case "maxPendingConnections":
		return nil, nil, &l.MaxPendingConnections
	case "maxTerminals":
		return nil, nil, &l.MaxTerminals
	}
	group, member, ok := strings.Cut(name, ".")
	if !ok {
		return nil, nil, nil
	}
	var r *flow.ReceiveLimits
	switch group {
	case "clientReceiveDefaults":
		r = &l.ClientReceiveDefaults
	case "clientReceiveMaximums":
		r = &l.ClientReceiveMaximums
	case "hostReceive":
		r = &l.HostReceive
	default:
		return nil, nil, nil
	}
	switch member {
	case "windowBytes":
		return &r.WindowBytes, nil, nil
	case "maximumFrameBytes":
		return &r.MaximumFrameBytes, nil, nil
	case "maximumMessageBytes":
		return &r.MaximumMessageBytes, nil, nil
	}
	return nil, nil, nil
}

// LimitValue returns the limit called name (durations in nanoseconds).
func (l Limits) LimitValue(name string) (int64, bool) {
	i, d, n := limitRef(&l, name)
	switch {
	case i != nil:
		return *i, true
	case d != nil:
		return int64(*d), true
	case n != nil:
		return int64(*n), true
	}
	return 0, false
}

// SetLimitValue sets the limit called name (durations in nanoseconds).
func (l *Limits) SetLimitValue(name string, v int64) bool {
	i, d, n := limitRef(l, name)
	switch {
	case i != nil:
		*i = v
	case d != nil:
		*d = time.Duration(v)
	case n != nil:
		*n = int(v)
	default:
		return false
	}
	return true
}

// ChangedLimits returns the names of the limits whose values differ
// between a and b, in LimitFields order.
func ChangedLimits(a, b Limits) []string {
	var changed []string
	for _, f := range LimitFields() {
		x, _ := a.LimitValue(f.Name)
		y, _ := b.LimitValue(f.Name)
		if x != y {
			changed = append(changed, f.Name)
		}
	}
	return changed
}
