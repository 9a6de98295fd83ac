package service

import (
	"math"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
	"github.com/ahp-dev/ahpd/telemetry"
)

// fromProto is what PublishTelemetry made of a request before
// publishRequest: the generated type's samples, labels sorted by name.
func fromProto(req *ahpv1.PublishTelemetryRequest) []telemetry.Sample {
	out := []telemetry.Sample{}
	for _, p := range req.GetSamples() {
		s := telemetry.Sample{T: p.GetT(), Name: p.GetName(), Value: p.GetValue()}
		for k, v := range p.GetLabels() {
			s.Labels = append(s.Labels, telemetry.Label{Name: k, Value: v})
		}
		slices.SortFunc(s.Labels, func(a, b telemetry.Label) int { return strings.Compare(a.Name, b.Name) })
		out = append(out, s)
	}
	return out
}

func sameSamples(a, b []telemetry.Sample) bool {
	return slices.EqualFunc(a, b, func(x, y telemetry.Sample) bool {
		return math.Float64bits(x.T) == math.Float64bits(y.T) && x.Name == y.Name &&
			math.Float64bits(x.Value) == math.Float64bits(y.Value) && slices.Equal(x.Labels, y.Labels)
	})
}

func checkWire(t *testing.T, b []byte) {
	t.Helper()
	var want ahpv1.PublishTelemetryRequest
	perr := proto.Unmarshal(b, &want)
	var got publishRequest
	err := got.UnmarshalWire(b)
	if (perr == nil) != (err == nil) {
		t.Fatalf("%x: proto.Unmarshal: %v; UnmarshalWire: %v", b, perr, err)
	}
	if perr != nil {
		return
	}
	if got.Channel != want.GetChannel() || !sameSamples(got.Samples, fromProto(&want)) {
		t.Fatalf("%x:\nUnmarshalWire %q %+v\nproto         %q %+v", b, got.Channel, got.Samples, want.GetChannel(), fromProto(&want))
	}
}

func seeds() [][]byte {
	m := func(r *ahpv1.PublishTelemetryRequest) []byte {
		b, err := proto.Marshal(r)
		if err != nil {
			panic(err)
		}
		return b
	}
	var out [][]byte
	out = append(out, m(&ahpv1.PublishTelemetryRequest{Channel: "ahp-telemetry:/x", Samples: []*ahpv1.Sample{
		{T: 1733290000000.5, Name: "node_cpu_seconds_total", Value: 12.25, Labels: map[string]string{"cpu": "0", "mode": "idle"}},
		{Name: "up", Value: 1},
	}}))
	out = append(out, m(&ahpv1.PublishTelemetryRequest{Samples: []*ahpv1.Sample{{Labels: map[string]string{"": ""}}}}))
	// Hand-made: a duplicate map key (the later wins), a repeated scalar
	// (the last wins), an unknown field, a known field with another wire
	// type, invalid UTF-8, a truncated message.
	var s []byte
	s = protowire.AppendTag(s, fieldSampleName, protowire.BytesType)
	s = protowire.AppendString(s, "a")
	s = protowire.AppendTag(s, fieldSampleName, protowire.BytesType)
	s = protowire.AppendString(s, "b")
	for _, v := range []string{"1", "2"} {
		var e []byte
		e = protowire.AppendTag(e, fieldEntryKey, protowire.BytesType)
		e = protowire.AppendString(e, "k")
		e = protowire.AppendTag(e, fieldEntryValue, protowire.BytesType)
		e = protowire.AppendString(e, v)
		s = protowire.AppendTag(s, fieldSampleLabels, protowire.BytesType)
		s = protowire.AppendBytes(s, e)
	}
	s = protowire.AppendTag(s, 9, protowire.VarintType)
	s = protowire.AppendVarint(s, 7)
	s = protowire.AppendTag(s, fieldSampleT, protowire.VarintType)
	s = protowire.AppendVarint(s, 7)
	var r []byte
	r = protowire.AppendTag(r, fieldRequestSamples, protowire.BytesType)
	r = protowire.AppendBytes(r, s)
	out = append(out, r)
	var bad []byte
	bad = protowire.AppendTag(bad, fieldRequestChannel, protowire.BytesType)
	bad = protowire.AppendBytes(bad, []byte{0xff, 'x'})
	out = append(out, bad, r[:len(r)-3], []byte{0})
	return out
}

func TestPublishWireMatchesProto(t *testing.T) {
	for _, b := range seeds() {
		checkWire(t, b)
	}
	var got publishRequest
	if err := got.UnmarshalWire(seeds()[2]); err != nil || len(got.Samples) != 1 || got.Samples[0].Name != "b" ||
		!slices.Equal(got.Samples[0].Labels, []telemetry.Label{{Name: "k", Value: "2"}}) {
		t.Fatalf("duplicates: %+v, %v", got.Samples, err)
	}
}

// FuzzPublishWire: the hand decoder accepts exactly what proto.Unmarshal
// accepts, with the same samples.
func FuzzPublishWire(f *testing.F) {
	for _, b := range seeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkWire(t, b) })
}
