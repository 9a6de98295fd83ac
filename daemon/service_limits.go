package daemon

import (
	"errors"
	"fmt"
	"strings"
	"sync"
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

var receiveGroups = []string{"clientReceiveDefaults", "clientReceiveMaximums", "hostReceive"}

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
	for _, g := range receiveGroups {
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

// limitsMu serializes UpdateLimits' read-modify-write of the limits.
var limitsMu sync.Mutex

// UpdateLimits copies the limits named in fields from `from` into the
// limits in force, validates the result and installs it; with no fields it
// installs `from` whole. A name is a LimitFields name or a ReceiveLimits
// group (all three members). Zero values take their defaults. It returns
// the limits now in force and the names of the limits that changed; on an
// invalid name or value it changes nothing and returns an *ArgError naming
// the field.
func (s *Server) UpdateLimits(fields []string, from Limits) (Limits, []string, error) {
	limitsMu.Lock()
	defer limitsMu.Unlock()
	cur := s.Limits()
	next := from
	if len(fields) > 0 {
		next = cur
		for _, name := range fields {
			names := []string{name}
			for _, g := range receiveGroups {
				if name == g {
					names = []string{g + ".windowBytes", g + ".maximumFrameBytes", g + ".maximumMessageBytes"}
				}
			}
			for _, n := range names {
				v, ok := from.LimitValue(n)
				if !ok {
					return cur, nil, argErr(name, "unknown limit")
				}
				next.SetLimitValue(n, v)
			}
		}
	}
	if err := next.WithDefaults().Validate(); err != nil {
		return cur, nil, limitArgError(err)
	}
	if err := s.SetLimits(next); err != nil {
		return cur, nil, limitArgError(err)
	}
	now := s.Limits()
	var changed []string
	for _, f := range LimitFields() {
		a, _ := cur.LimitValue(f.Name)
		b, _ := now.LimitValue(f.Name)
		if a != b {
			changed = append(changed, f.Name)
		}
	}
	return now, changed, nil
}

// limitArgError turns an error of Limits.Validate ("limits: FIELD: reason")
// into an *ArgError naming the field. (If Validate returned an *ArgError
// itself, this parsing could go.)
func limitArgError(err error) error {
	var ae *ArgError
	if errors.As(err, &ae) {
		return ae
	}
	msg := strings.TrimPrefix(err.Error(), "limits: ")
	if field, reason, ok := strings.Cut(msg, ": "); ok && !strings.ContainsRune(field, ' ') {
		return &ArgError{Field: field, Reason: reason}
	}
	return fmt.Errorf("limits: %w", err)
}
