// Package limits is the one table of ahpd's settable limits (PROTOCOL.md
// §9): their wire names, kinds, defaults and smallest values, in the order
// `ahpctl limits get` prints them, and their place in the control API's
// ahpv1.Limits. The daemon's config.Limits (its struct tags), the config
// file, the gRPC service and ahpctl all follow it, so adding a limit is a
// row here, a field in config.Limits and one in proto/ahp/v1.
//
// Everything here is a value or a pure function, safe for concurrent use.
package limits

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// Kind is how a limit's value is written.
type Kind int

// Kinds of limits.
const (
	Bytes    Kind = iota // a size in bytes (UTF-16 bytes for flow-control limits)
	Duration             // a time.Duration, as nanoseconds
	Count                // a plain count
)

// Spec describes one limit. Values are int64: bytes, nanoseconds or a
// count.
type Spec struct {
	Name    string // wire name, as in `ahpctl limits set NAME=VALUE`; GROUP.MEMBER for flow-control limits
	Kind    Kind
	Default int64
	Min     int64  // the smallest valid value; 0 for flow-control limits (flow.ReceiveLimits.Validate checks those)
	MinText string // Min as the error message says it
}

// Group reports the flow-control group of a GROUP.MEMBER limit.
func (s Spec) Group() (group, member string, ok bool) { return strings.Cut(s.Name, ".") }

// Groups are the names of the three flow-control groups, each a
// flow.ReceiveLimits.
var Groups = []string{"clientReceiveDefaults", "clientReceiveMaximums", "hostReceive"}

// Members are the names of a group's limits (flow.ReceiveLimits' JSON
// names).
var Members = []string{"windowBytes", "maximumFrameBytes", "maximumMessageBytes"}

var table = func() []Spec {
	const KiB, MiB = 1 << 10, 1 << 20
	t := []Spec{
		{"maxBufferedBytes", Bytes, 64 * MiB, 1 * MiB, "1 MiB"},
		{"maxOutputStall", Duration, int64(60 * time.Second), int64(100 * time.Millisecond), "100ms"},
		{"maxSubscriptions", Count, 1024, 1, "1"},
		{"maxIdLength", Count, 1024, 16, "16"},
		{"maxInboundMessageBytes", Bytes, 1 * MiB, 4096, "4096"},
		{"heartbeatInterval", Duration, int64(15 * time.Second), int64(100 * time.Millisecond), "100ms"},
		{"initializeTimeout", Duration, int64(10 * time.Second), int64(100 * time.Millisecond), "100ms"},
	}
	groups := map[string][3]int64{
		"clientReceiveDefaults": {1 * MiB, 64 * KiB, 1 * MiB},
		"clientReceiveMaximums": {64 * MiB, 1 * MiB, 16 * MiB},
		"hostReceive":           {256 * KiB, 64 * KiB, 256 * KiB},
	}
	for _, g := range Groups {
		for i, m := range Members {
			t = append(t, Spec{Name: g + "." + m, Kind: Bytes, Default: groups[g][i]})
		}
	}
	return append(t,
		Spec{"terminalViewerBacklog", Bytes, 1 * MiB, 64 * KiB, "64 KiB"},
		Spec{"maxPendingConnections", Count, 256, 1, "1"},
		Spec{"maxTerminals", Count, 256, 1, "1"},
		Spec{"tcpRetain", Duration, int64(60 * time.Second), int64(time.Second), "1s"},
		Spec{"maxViewersPerTerminal", Count, 1024, 1, "1"},
		Spec{"maxTcpChannels", Count, 256, 1, "1"},
		Spec{"maxTcpChannelsPerToken", Count, 64, 1, "1"},
		Spec{"tcpMaxRetainedBytes", Bytes, 16 * MiB, 64 * KiB, "64 KiB"},
		Spec{"telemetryMaxSeries", Count, 10000, 1, "1"},
		Spec{"recordingMaxBytes", Bytes, 64 * MiB, 64 * KiB, "64 KiB"},
		Spec{"recordingsMaxTotalBytes", Bytes, 1 << 30, 1 * MiB, "1 MiB"},
		Spec{"recordingKeyframeBytes", Bytes, 1 * MiB, 64 * KiB, "64 KiB"},
		Spec{"recordingKeyframeInterval", Duration, int64(60 * time.Second), int64(time.Second), "1s"},
	)
}()

// All lists every limit, in a stable order.
func All() []Spec { return append([]Spec(nil), table...) }

// Find returns the limit called name.
func Find(name string) (Spec, bool) {
	for _, s := range table {
		if s.Name == name {
			return s, true
		}
	}
	return Spec{}, false
}

// ProtoPath is a limit's (or a group's) update_mask path in
// ahpv1.Limits: maxIdLength is max_id_length, hostReceive.windowBytes
// host_receive.window_bytes.
func ProtoPath(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// field returns the descriptor of a proto field by its name.
func field(m protoreflect.Message, name string) protoreflect.FieldDescriptor {
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		panic(fmt.Sprintf("limits: ahpv1 %s has no field %s", m.Descriptor().Name(), name))
	}
	return fd
}

// Get reads limit s from p (0 when unset). A duration that is not valid
// is an error.
func Get(p *ahpv1.Limits, s Spec) (int64, error) {
	m := p.ProtoReflect()
	if g, mem, ok := s.Group(); ok {
		fd := field(m, ProtoPath(g))
		if !m.Has(fd) {
			return 0, nil
		}
		sub := m.Get(fd).Message()
		return sub.Get(field(sub, ProtoPath(mem))).Int(), nil
	}
	fd := field(m, ProtoPath(s.Name))
	if s.Kind != Duration {
		return m.Get(fd).Int(), nil
	}
	if !m.Has(fd) {
		return 0, nil
	}
	d, ok := m.Get(fd).Message().Interface().(*durationpb.Duration)
	if !ok {
		return 0, fmt.Errorf("%s: not a duration", s.Name)
	}
	if err := d.CheckValid(); err != nil {
		return 0, err
	}
	return int64(d.AsDuration()), nil
}

// Set writes limit s into p.
func Set(p *ahpv1.Limits, s Spec, v int64) {
	m := p.ProtoReflect()
	if g, mem, ok := s.Group(); ok {
		sub := m.Mutable(field(m, ProtoPath(g))).Message()
		sub.Set(field(sub, ProtoPath(mem)), protoreflect.ValueOfInt64(v))
		return
	}
	fd := field(m, ProtoPath(s.Name))
	if s.Kind == Duration {
		m.Set(fd, protoreflect.ValueOfMessage(durationpb.New(time.Duration(v)).ProtoReflect()))
		return
	}
	m.Set(fd, protoreflect.ValueOfInt64(v))
}
