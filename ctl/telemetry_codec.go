package ctl

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ahp-dev/ahpd/internal/samples"
)

// telemetry push encodes its PublishTelemetryRequest messages itself:
// building an ahpv1.Sample (and a map of its labels) for every sample and
// marshalling it by reflection cost more than parsing the line. The bytes
// are those proto.Marshal writes (TestPushEncoding), sent through pushCodec,
// which is the proto codec for everything else.

// Field numbers of ahp/v1/telemetry.proto.
const (
	pbRequestChannel = 1 // PublishTelemetryRequest.channel
	pbRequestSamples = 2 // PublishTelemetryRequest.samples
	pbSampleT        = 1
	pbSampleName     = 2
	pbSampleValue    = 3
	pbSampleLabels   = 4 // map<string, string>: entries of key = 1, value = 2
)

// encodedRequest is a PublishTelemetryRequest already in wire form.
type encodedRequest struct{ b []byte }

// appendSample appends s as one element of PublishTelemetryRequest.samples.
// s is valid, its labels sorted and unique (samples.ParseLine).
func appendSample(b []byte, s *samples.Sample) []byte {
	n := 0
	if math.Float64bits(s.T) != 0 {
		n += 1 + 8
	}
	n += 1 + protowire.SizeBytes(len(s.Name))
	if math.Float64bits(s.Value) != 0 {
		n += 1 + 8
	}
	for _, l := range s.Labels {
		n += 1 + protowire.SizeBytes(labelEntrySize(l))
	}
	b = protowire.AppendTag(b, pbRequestSamples, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(n))
	if math.Float64bits(s.T) != 0 {
		b = protowire.AppendTag(b, pbSampleT, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(s.T))
	}
	b = protowire.AppendTag(b, pbSampleName, protowire.BytesType)
	b = protowire.AppendString(b, s.Name)
	if math.Float64bits(s.Value) != 0 {
		b = protowire.AppendTag(b, pbSampleValue, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(s.Value))
	}
	for _, l := range s.Labels {
		b = protowire.AppendTag(b, pbSampleLabels, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(labelEntrySize(l)))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, l.Name)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, l.Value)
	}
	return b
}

func labelEntrySize(l samples.Label) int {
	return 1 + protowire.SizeBytes(len(l.Name)) + 1 + protowire.SizeBytes(len(l.Value))
}

// pushCodec marshals an encodedRequest as is and any other message with
// proto. Its name is proto's, so the daemon decodes with its proto codec.
type pushCodec struct{}

func (pushCodec) Marshal(v any) ([]byte, error) {
	switch m := v.(type) {
	case *encodedRequest:
		return m.b, nil
	case proto.Message:
		return proto.Marshal(m)
	}
	return nil, fmt.Errorf("pushCodec: cannot marshal %T", v)
}

func (pushCodec) Unmarshal(data []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("pushCodec: cannot unmarshal into %T", v)
	}
	return proto.Unmarshal(data, m)
}

func (pushCodec) Name() string { return "proto" }
