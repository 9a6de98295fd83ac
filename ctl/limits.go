package ctl

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"

	"github.com/ahp-dev/ahpd/internal/units"
)

// Kinds of limit values.
const (
	kindSize = iota
	kindDuration
	kindCount
)

// limitKey is one KEY of `limits set`: its wire name (PROTOCOL.md §9), its
// update_mask path, and accessors to ahpv1.Limits (durations in ns).
type limitKey struct {
	name string
	path string
	kind int
	get  func(*ahpv1.Limits) int64
	set  func(*ahpv1.Limits, int64)
}

func durNS(d *durationpb.Duration) int64 { return int64(d.AsDuration()) }

// limitKeys lists the keys in the order `limits get` prints them.
var limitKeys = func() []limitKey {
	keys := []limitKey{
		{"maxBufferedBytes", "max_buffered_bytes", kindSize,
			func(l *ahpv1.Limits) int64 { return l.GetMaxBufferedBytes() },
			func(l *ahpv1.Limits, v int64) { l.MaxBufferedBytes = v }},
		{"maxOutputStall", "max_output_stall", kindDuration,
			func(l *ahpv1.Limits) int64 { return durNS(l.GetMaxOutputStall()) },
			func(l *ahpv1.Limits, v int64) { l.MaxOutputStall = durationpb.New(time.Duration(v)) }},
		{"maxSubscriptions", "max_subscriptions", kindCount,
			func(l *ahpv1.Limits) int64 { return l.GetMaxSubscriptions() },
			func(l *ahpv1.Limits, v int64) { l.MaxSubscriptions = v }},
		{"maxIdLength", "max_id_length", kindCount,
			func(l *ahpv1.Limits) int64 { return l.GetMaxIdLength() },
			func(l *ahpv1.Limits, v int64) { l.MaxIdLength = v }},
		{"maxInboundMessageBytes", "max_inbound_message_bytes", kindSize,
			func(l *ahpv1.Limits) int64 { return l.GetMaxInboundMessageBytes() },
			func(l *ahpv1.Limits, v int64) { l.MaxInboundMessageBytes = v }},
		{"heartbeatInterval", "heartbeat_interval", kindDuration,
			func(l *ahpv1.Limits) int64 { return durNS(l.GetHeartbeatInterval()) },
			func(l *ahpv1.Limits, v int64) { l.HeartbeatInterval = durationpb.New(time.Duration(v)) }},
		{"initializeTimeout", "initialize_timeout", kindDuration,
			func(l *ahpv1.Limits) int64 { return durNS(l.GetInitializeTimeout()) },
			func(l *ahpv1.Limits, v int64) { l.InitializeTimeout = durationpb.New(time.Duration(v)) }},
	}
	groups := []struct {
		name, path string
		get        func(*ahpv1.Limits) **ahpv1.ReceiveLimits
	}{
		{"clientReceiveDefaults", "client_receive_defaults", func(l *ahpv1.Limits) **ahpv1.ReceiveLimits { return &l.ClientReceiveDefaults }},
		{"clientReceiveMaximums", "client_receive_maximums", func(l *ahpv1.Limits) **ahpv1.ReceiveLimits { return &l.ClientReceiveMaximums }},
		{"hostReceive", "host_receive", func(l *ahpv1.Limits) **ahpv1.ReceiveLimits { return &l.HostReceive }},
	}
	for _, g := range groups {
		ensure := func(l *ahpv1.Limits) *ahpv1.ReceiveLimits {
			p := g.get(l)
			if *p == nil {
				*p = &ahpv1.ReceiveLimits{}
			}
			return *p
		}
		keys = append(keys,
			limitKey{g.name + ".windowBytes", g.path + ".window_bytes", kindSize,
				func(l *ahpv1.Limits) int64 { return (*g.get(l)).GetWindowBytes() },
				func(l *ahpv1.Limits, v int64) { ensure(l).WindowBytes = v }},
			limitKey{g.name + ".maximumFrameBytes", g.path + ".maximum_frame_bytes", kindSize,
				func(l *ahpv1.Limits) int64 { return (*g.get(l)).GetMaximumFrameBytes() },
				func(l *ahpv1.Limits, v int64) { ensure(l).MaximumFrameBytes = v }},
			limitKey{g.name + ".maximumMessageBytes", g.path + ".maximum_message_bytes", kindSize,
				func(l *ahpv1.Limits) int64 { return (*g.get(l)).GetMaximumMessageBytes() },
				func(l *ahpv1.Limits, v int64) { ensure(l).MaximumMessageBytes = v }},
		)
	}
	return append(keys, limitKey{"terminalViewerBacklog", "terminal_viewer_backlog", kindSize,
		func(l *ahpv1.Limits) int64 { return l.GetTerminalViewerBacklog() },
		func(l *ahpv1.Limits, v int64) { l.TerminalViewerBacklog = v }},
		limitKey{"maxPendingConnections", "max_pending_connections", kindCount,
			func(l *ahpv1.Limits) int64 { return l.GetMaxPendingConnections() },
			func(l *ahpv1.Limits, v int64) { l.MaxPendingConnections = v }},
		limitKey{"maxTerminals", "max_terminals", kindCount,
			func(l *ahpv1.Limits) int64 { return l.GetMaxTerminals() },
			func(l *ahpv1.Limits, v int64) { l.MaxTerminals = v }})
}()

func normKey(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }

func findLimitKey(k string) (limitKey, bool) {
	n := normKey(k)
	for _, key := range limitKeys {
		if normKey(key.name) == n {
			return key, true
		}
	}
	return limitKey{}, false
}

// parseLimitAssignments turns KEY=VALUE arguments into a SetLimits request.
// VALUE "default" (or 0) restores the default.
func parseLimitAssignments(args []string) (*ahpv1.SetLimitsRequest, error) {
	req := &ahpv1.SetLimitsRequest{Limits: &ahpv1.Limits{}}
	var paths []string
	seen := map[string]bool{}
	for _, arg := range args {
		k, v, ok := strings.Cut(arg, "=")
		if !ok || k == "" {
			return nil, usagef("limits set: want KEY=VALUE, got %q", arg)
		}
		key, ok := findLimitKey(k)
		if !ok {
			return nil, usagef("limits set: unknown key %q (keys: %s)", k, limitKeyNames())
		}
		if seen[key.name] {
			return nil, usagef("limits set: %s given twice", key.name)
		}
		seen[key.name] = true
		var n int64
		var err error
		switch {
		case v == "default":
		case key.kind == kindDuration:
			var d time.Duration
			d, err = time.ParseDuration(v)
			n = int64(d)
			if err != nil {
				err = fmt.Errorf("want a duration such as 500ms, 2s or 1m30s, got %q", v)
			}
		case key.kind == kindSize:
			n, err = units.ParseSize(v)
		default:
			n, err = strconv.ParseInt(v, 10, 64)
			if err != nil {
				err = fmt.Errorf("want an integer, got %q", v)
			}
		}
		if err != nil {
			return nil, usagef("limits set: %s: %v", key.name, err)
		}
		key.set(req.Limits, n)
		paths = append(paths, key.path)
	}
	req.UpdateMask = &fieldmaskpb.FieldMask{Paths: paths}
	return req, nil
}

func limitKeyNames() string {
	names := make([]string, len(limitKeys))
	for i, k := range limitKeys {
		names[i] = k.name
	}
	return strings.Join(names, ", ")
}

// formatLimit renders a value the way `limits set` accepts it.
func formatLimit(kind int, v int64) string {
	switch kind {
	case kindDuration:
		return time.Duration(v).String()
	case kindSize:
		return formatSize(v)
	}
	return strconv.FormatInt(v, 10)
}

// formatSize writes exact multiples of KiB/MiB/GiB with the suffix.
func formatSize(v int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v != 0 && v%u.mult == 0 {
			return strconv.FormatInt(v/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(v, 10)
}
