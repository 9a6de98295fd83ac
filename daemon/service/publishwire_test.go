package service

import (
	"context"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/ahp-dev/ahpd/daemon/config"
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

// checkWire: the hand decoder accepts what proto.Unmarshal accepts, with
// the same samples, except that it refuses a label name given twice in a
// sample, which proto.Unmarshal merges.
func checkWire(t *testing.T, b []byte) {
	t.Helper()
	var want ahpv1.PublishTelemetryRequest
	perr := proto.Unmarshal(b, &want)
	var got publishRequest
	if err := got.UnmarshalWire(b); err != nil {
		t.Fatalf("%x: UnmarshalWire = %v, want nil (the error is kept for Malformed)", b, err)
	}
	err := got.err
	if err != nil && (got.Channel != "" || got.Samples != nil) {
		t.Fatalf("%x: malformed (%v), yet a channel %q and %d samples", b, err, got.Channel, len(got.Samples))
	}
	if (got.Malformed(0) == nil) != (err == nil) {
		t.Fatalf("%x: Malformed = %v with err %v", b, got.Malformed(0), err)
	}
	if err != nil && err.dup {
		if perr != nil {
			t.Fatalf("%x: refused for a duplicate label (%v), but proto.Unmarshal fails first: %v", b, err, perr)
		}
		return
	}
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
	// Hand-made: a duplicate map key (refused; proto.Unmarshal keeps the
	// later), a repeated scalar (the last wins), an unknown field, a known
	// field with another wire type, invalid UTF-8, a truncated message.
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
	// A label name given twice is refused, naming the sample's labels.
	var got publishRequest
	got.UnmarshalWire(seeds()[2])
	err := got.Malformed(3)
	if ae, ok := err.(*ArgError); !ok || ae.Field != "messages[3].samples[0].labels" || !strings.Contains(ae.Reason, `label "k" appears twice`) {
		t.Fatalf("duplicate label: Malformed = %v, want an ArgError naming messages[3].samples[0].labels", err)
	}
	// Without the duplicate, the same sample decodes: the last name and
	// T wins, the unknown field and the wrong wire type are skipped.
	var s []byte
	s = protowire.AppendTag(s, fieldSampleName, protowire.BytesType)
	s = protowire.AppendString(s, "a")
	s = protowire.AppendTag(s, fieldSampleName, protowire.BytesType)
	s = protowire.AppendString(s, "b")
	for _, kv := range [][2]string{{"k", "1"}, {"j", "2"}} {
		var e []byte
		e = protowire.AppendTag(e, fieldEntryKey, protowire.BytesType)
		e = protowire.AppendString(e, kv[0])
		e = protowire.AppendTag(e, fieldEntryValue, protowire.BytesType)
		e = protowire.AppendString(e, kv[1])
		s = protowire.AppendTag(s, fieldSampleLabels, protowire.BytesType)
		s = protowire.AppendBytes(s, e)
	}
	s = protowire.AppendTag(s, 9, protowire.VarintType)
	s = protowire.AppendVarint(s, 7)
	var r []byte
	r = protowire.AppendTag(r, fieldRequestSamples, protowire.BytesType)
	r = protowire.AppendBytes(r, s)
	checkWire(t, r)
	if got.UnmarshalWire(r); got.err != nil || len(got.Samples) != 1 || got.Samples[0].Name != "b" ||
		!slices.Equal(got.Samples[0].Labels, []telemetry.Label{{Name: "j", Value: "2"}, {Name: "k", Value: "1"}}) {
		t.Fatalf("got %+v, %v", got.Samples, got.err)
	}
}

// FuzzPublishWire: the hand decoder accepts what proto.Unmarshal accepts,
// with the same samples, but for a label name given twice (checkWire).
func FuzzPublishWire(f *testing.F) {
	for _, b := range seeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkWire(t, b) })
}

// rawCodec sends and receives messages as the bytes given: a client that
// can send what a generated one cannot.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// TestPublishTelemetryMalformed: a PublishTelemetry message that does not
// decode is the client's error: INVALID_ARGUMENT naming the message and
// the field, over a real control socket (gRPC's codec answered INTERNAL
// for the error UnmarshalWire returned it).
func TestPublishTelemetryMalformed(t *testing.T) {
	svc := New(Options{Config: config.Config{StateDir: t.TempDir()}.WithDefaults(), Log: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cp, err := svc.StartControl(ctx, ControlOptions{Path: filepath.Join(t.TempDir(), "ctl.sock")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cp.Close(); err != nil {
			t.Errorf("control plane: %v", err)
		}
	}()
	cc, err := grpc.NewClient("unix://"+cp.Path(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()

	sample := func(fields ...[]byte) []byte {
		var s []byte
		for _, f := range fields {
			s = append(s, f...)
		}
		var r []byte
		r = protowire.AppendTag(r, fieldRequestChannel, protowire.BytesType)
		r = protowire.AppendString(r, "ahp-telemetry:/x")
		r = protowire.AppendTag(r, fieldRequestSamples, protowire.BytesType)
		return protowire.AppendBytes(r, s)
	}
	name := protowire.AppendString(protowire.AppendTag(nil, fieldSampleName, protowire.BytesType), "up")
	label := func(k, v string) []byte {
		var e []byte
		e = protowire.AppendTag(e, fieldEntryKey, protowire.BytesType)
		e = protowire.AppendString(e, k)
		e = protowire.AppendTag(e, fieldEntryValue, protowire.BytesType)
		e = protowire.AppendString(e, v)
		return protowire.AppendBytes(protowire.AppendTag(nil, fieldSampleLabels, protowire.BytesType), e)
	}
	badUTF8 := protowire.AppendBytes(protowire.AppendTag(nil, fieldRequestChannel, protowire.BytesType), []byte{0xff})
	whole := sample(name, label("k", "v"))
	for _, tc := range []struct {
		name  string
		msg   []byte
		field string
	}{
		{"bad tag", []byte{0xff, 0xff, 0xff}, "messages[0]"},
		{"channel not UTF-8", badUTF8, "messages[0].channel"},
		{"truncated sample", whole[:len(whole)-2], "messages[0].samples[0]"},
		{"label given twice", sample(name, label("k", "1"), label("k", "2")), "messages[0].samples[0].labels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, ahpv1.TelemetryService_PublishTelemetry_FullMethodName, grpc.ForceCodecV2(rawCodec{}))
			if err != nil {
				t.Fatal(err)
			}
			if err := cs.SendMsg(&tc.msg); err != nil && err != io.EOF {
				t.Fatal(err)
			}
			cs.CloseSend()
			var res []byte
			err = cs.RecvMsg(&res)
			st, _ := status.FromError(err)
			if st.Code() != codes.InvalidArgument {
				t.Fatalf("PublishTelemetry(%x) = %v, want INVALID_ARGUMENT", tc.msg, err)
			}
			var field string
			for _, d := range st.Details() {
				if br, ok := d.(*errdetails.BadRequest); ok && len(br.FieldViolations) > 0 {
					field = br.FieldViolations[0].Field
				}
			}
			if field != tc.field {
				t.Errorf("PublishTelemetry(%x) = %v naming %q, want %q", tc.msg, err, field, tc.field)
			}
		})
	}
}
