package service

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/ahp-dev/ahpd/telemetry"
)

// publishRequest is ahpv1.PublishTelemetryRequest as PublishTelemetry
// reads it: decoded straight from the wire into telemetry samples (the
// control server's codec calls UnmarshalWire), without the reflection,
// the per-sample map and the allocations of proto.Unmarshal, which were
// most of the daemon's cost per sample pushed. It accepts what
// proto.Unmarshal accepts and yields the same samples (FuzzPublishWire
// checks both against each other), with proto3 semantics — the last value
// of a repeated scalar field wins, strings must be valid UTF-8 and unknown
// fields are skipped — except for one thing: a label name given twice in
// one sample (two map entries with one key, which a generated client
// never sends and proto.Unmarshal would merge, the later winning) is
// refused, since one of the values would be lost silently.
//
// A message it cannot decode is the client's error, not the daemon's:
// UnmarshalWire keeps it (Malformed) for PublishTelemetry to answer
// INVALID_ARGUMENT naming where it is, instead of returning it to gRPC's
// codec, which would answer INTERNAL.
type publishRequest struct {
	Channel string
	Samples []telemetry.Sample
	labels  []telemetry.Label // the samples' labels, one allocation
	err     *wireError        // why the message is malformed, or nil
}

// wireError is a malformed PublishTelemetryRequest: the field (in the
// message) and what is wrong with it.
type wireError struct {
	field, reason string
	dup           bool // a label name given twice, which proto.Unmarshal takes
}

func (e *wireError) Error() string { return e.field + ": " + e.reason }

func wireErr(field, what string) *wireError {
	return &wireError{field: field, reason: "malformed PublishTelemetryRequest: " + what}
}

// Malformed returns nil if the message decoded, else an *ArgError naming
// the field of messages[message] that is malformed.
func (r *publishRequest) Malformed(message int64) error {
	if r.err == nil {
		return nil
	}
	field := fmt.Sprintf("messages[%d]", message)
	if r.err.field != "" {
		field += "." + r.err.field
	}
	return &ArgError{Field: field, Reason: r.err.reason}
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
// copied out of b. It returns nil even for a malformed message: see
// Malformed.
func (r *publishRequest) UnmarshalWire(b []byte) error {
	if err := r.decode(b); err != nil {
		*r = publishRequest{err: err}
	}
	return nil
}

// decode decodes b into r, or says why it cannot.
func (r *publishRequest) decode(b []byte) *wireError {
	*r = publishRequest{}
	// Two passes: count the samples first, so that Samples is allocated
	// once; labels grow as needed.
	n := 0
	for rest := b; len(rest) > 0; {
		num, typ, l := consumeTag(rest)
		if l < 0 {
			return wireErr("", "bad tag")
		}
		m := protowire.ConsumeFieldValue(num, typ, rest[l:])
		isSample := num == fieldRequestSamples && typ == protowire.BytesType
		switch {
		case m < 0 && isSample:
			return wireErr(fmt.Sprintf("samples[%d]", n), "truncated")
		case m < 0:
			return wireErr("", "bad field")
		case isSample:
			n++
		}
		rest = rest[l+m:]
	}
	r.Samples = make([]telemetry.Sample, 0, n)
	var dup *wireError // the first label given twice
	for len(b) > 0 {
		num, typ, l := consumeTag(b)
		if l < 0 {
			return wireErr("", "bad tag")
		}
		b = b[l:]
		switch {
		case num == fieldRequestChannel && typ == protowire.BytesType:
			v, m := protowire.ConsumeBytes(b)
			if m < 0 || !utf8.Valid(v) {
				return wireErr("channel", "not a UTF-8 string")
			}
			r.Channel = string(v)
			b = b[m:]
		case num == fieldRequestSamples && typ == protowire.BytesType:
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return wireErr(fmt.Sprintf("samples[%d]", len(r.Samples)), "truncated")
			}
			s, err := r.sample(v)
			if err != nil {
				err.field = fmt.Sprintf("samples[%d]", len(r.Samples)) + err.field
				if !err.dup {
					return err
				}
				// A label given twice: the message is refused for it,
				// unless a later sample is malformed, which proto.Unmarshal
				// would refuse it for (FuzzPublishWire found one).
				if dup == nil {
					dup = err
				}
			}
			r.Samples = append(r.Samples, s)
			b = b[m:]
		default:
			// Unknown, or a known field with another wire type: skipped,
			// as proto.Unmarshal does.
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return wireErr("", "bad field")
			}
			b = b[m:]
		}
	}
	if dup != nil {
		return dup
	}
	return nil
}

// sample decodes one Sample; an error's field is relative to it ("",
// ".name", ".labels").
func (r *publishRequest) sample(b []byte) (telemetry.Sample, *wireError) {
	var s telemetry.Sample
	at := len(r.labels)
	for len(b) > 0 {
		num, typ, l := consumeTag(b)
		if l < 0 {
			return s, wireErr("", "bad tag")
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
				return s, wireErr(".name", "not a UTF-8 string")
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
			return s, wireErr("", "bad field")
		}
		b = b[m:]
	}
	if len(r.labels) > at {
		ls := r.labels[at:len(r.labels):len(r.labels)]
		// Sorted by name, as Normalize wants; a name given twice is
		// refused (see publishRequest).
		slices.SortStableFunc(ls, func(a, b telemetry.Label) int { return strings.Compare(a.Name, b.Name) })
		for i := 1; i < len(ls); i++ {
			if ls[i].Name == ls[i-1].Name {
				return s, &wireError{field: ".labels", reason: "label " + strconv.Quote(ls[i].Name) + " appears twice", dup: true}
			}
		}
		s.Labels = ls
	}
	return s, nil
}

// labelEntry decodes one map<string,string> entry; a missing key or value
// is "".
func labelEntry(b []byte) (key, value string, err *wireError) {
	for len(b) > 0 {
		num, typ, l := consumeTag(b)
		if l < 0 {
			return "", "", wireErr(".labels", "bad tag")
		}
		b = b[l:]
		var m int
		switch {
		case (num == fieldEntryKey || num == fieldEntryValue) && typ == protowire.BytesType:
			var v []byte
			v, m = protowire.ConsumeBytes(b)
			if m < 0 || !utf8.Valid(v) {
				return "", "", wireErr(".labels", "not a UTF-8 string")
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
			return "", "", wireErr(".labels", "bad field")
		}
		b = b[m:]
	}
	return key, value, nil
}
