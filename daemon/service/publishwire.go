package service

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ahp-dev/ahpd/telemetry"
)

// publishRequest is ahpv1.PublishTelemetryRequest as PublishTelemetry
// reads it: decoded straight from the wire into telemetry samples (the
// control server's codec calls UnmarshalWire), without the reflection,
// the per-sample map and the allocations of proto.Unmarshal, which were
// most of the daemon's cost per sample pushed. It accepts exactly what
// proto.Unmarshal accepts and yields the same samples (FuzzPublishWire
// checks both against each other): proto3 semantics, so the last value of
// a repeated scalar field wins, a map's later entry for a key replaces the
// earlier one, strings must be valid UTF-8 and unknown fields are skipped.
type publishRequest struct {
	Channel string
	Samples []telemetry.Sample
	labels  []telemetry.Label // the samples' labels, one allocation
}

// Field numbers of telemetry.proto.
const (
	fieldRequestChannel = 1
	fieldRequestSamples = 2
	fieldSampleT        = 1
	fieldSampleName     = 2
	fieldSampleValue    = 3
	fieldSampleLabels   = 4
	fieldEntryKey       = 1
	fieldEntryValue     = 2
)

var errWire = errors.New("malformed PublishTelemetryRequest")

func wireErr(what string) error { return fmt.Errorf("%w: %s", errWire, what) }

// consumeTag is protowire.ConsumeTag refusing, as proto.Unmarshal does,
// field numbers above protowire.MaxValidNumber.
func consumeTag(b []byte) (protowire.Number, protowire.Type, int) {
	num, typ, n := protowire.ConsumeTag(b)
	if n >= 0 && num > protowire.MaxValidNumber {
		return 0, 0, -1
	}
	return num, typ, n
}

// UnmarshalWire implements control.WireUnmarshaler. The strings are
// copied out of b.
func (r *publishRequest) UnmarshalWire(b []byte) error {
	*r = publishRequest{}
	// Two passes: count the samples first, so that Samples is allocated
	// once; labels grow as needed.
	n := 0
	for rest := b; len(rest) > 0; {
		num, typ, l := consumeTag(rest)
		if l < 0 {
			return wireErr("bad tag")
		}
		m := protowire.ConsumeFieldValue(num, typ, rest[l:])
		if m < 0 {
			return wireErr("bad field")
		}
		if num == fieldRequestSamples && typ == protowire.BytesType {
			n++
		}
		rest = rest[l+m:]
	}
	r.Samples = make([]telemetry.Sample, 0, n)
	for len(b) > 0 {
		num, typ, l := consumeTag(b)
		if l < 0 {
			return wireErr("bad tag")
		}
		b = b[l:]
		switch {
		case num == fieldRequestChannel && typ == protowire.BytesType:
			v, m := protowire.ConsumeBytes(b)
			if m < 0 || !utf8.Valid(v) {
				return wireErr("channel")
			}
			r.Channel = string(v)
			b = b[m:]
		case num == fieldRequestSamples && typ == protowire.BytesType:
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return wireErr("samples")
			}
			s, err := r.sample(v)
			if err != nil {
				return err
			}
			r.Samples = append(r.Samples, s)
			b = b[m:]
		default:
			// Unknown, or a known field with another wire type: skipped,
			// as proto.Unmarshal does.
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return wireErr("bad field")
			}
			b = b[m:]
		}
	}
	return nil
}

func (r *publishRequest) sample(b []byte) (telemetry.Sample, error) {
	var s telemetry.Sample
	at := len(r.labels)
	for len(b) > 0 {
		num, typ, l := consumeTag(b)
		if l < 0 {
			return s, wireErr("bad tag in a sample")
		}
		b = b[l:]
		var m int
		switch {
		case num == fieldSampleT && typ == protowire.Fixed64Type:
			var v uint64
			v, m = protowire.ConsumeFixed64(b)
			s.T = math.Float64frombits(v)
		case num == fieldSampleValue && typ == protowire.Fixed64Type:
			var v uint64
			v, m = protowire.ConsumeFixed64(b)
			s.Value = math.Float64frombits(v)
		case num == fieldSampleName && typ == protowire.BytesType:
			var v []byte
			v, m = protowire.ConsumeBytes(b)
			if m >= 0 && !utf8.Valid(v) {
				return s, wireErr("sample name")
			}
			if m >= 0 {
				s.Name = string(v)
			}
		case num == fieldSampleLabels && typ == protowire.BytesType:
			var v []byte
			v, m = protowire.ConsumeBytes(b)
			if m >= 0 {
				k, val, err := labelEntry(v)
				if err != nil {
					return s, err
				}
				r.labels = append(r.labels, telemetry.Label{Name: k, Value: val})
			}
		default:
			m = protowire.ConsumeFieldValue(num, typ, b)
		}
		if m < 0 {
			return s, wireErr("bad field in a sample")
		}
		b = b[m:]
	}
	if len(r.labels) > at {
		ls := r.labels[at:len(r.labels):len(r.labels)]
		// Map semantics: sorted by name (as Normalize wants), the last
		// entry of a name wins.
		slices.SortStableFunc(ls, func(a, b telemetry.Label) int { return strings.Compare(a.Name, b.Name) })
		out := ls[:0]
		for i, l := range ls {
			if i+1 < len(ls) && ls[i+1].Name == l.Name {
				continue
			}
			out = append(out, l)
		}
		s.Labels = out
	}
	return s, nil
}

// labelEntry decodes one map<string,string> entry; a missing key or value
// is "".
func labelEntry(b []byte) (key, value string, err error) {
	for len(b) > 0 {
		num, typ, l := consumeTag(b)
		if l < 0 {
			return "", "", wireErr("bad tag in a label")
		}
		b = b[l:]
		var m int
		switch {
		case (num == fieldEntryKey || num == fieldEntryValue) && typ == protowire.BytesType:
			var v []byte
			v, m = protowire.ConsumeBytes(b)
			if m < 0 || !utf8.Valid(v) {
				return "", "", wireErr("label")
			}
			if num == fieldEntryKey {
				key = string(v)
			} else {
				value = string(v)
			}
		default:
			m = protowire.ConsumeFieldValue(num, typ, b)
		}
		if m < 0 {
			return "", "", wireErr("bad field in a label")
		}
		b = b[m:]
	}
	return key, value, nil
}
