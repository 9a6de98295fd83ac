package ctl

import (
	"bytes"
	"math"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/ahp-dev/ahpd/internal/samples"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// TestPushEncoding: appendSample writes what proto.Marshal writes for the
// same samples (deterministic: map entries sorted by key, as the labels
// are), and the daemon's side, proto.Unmarshal, reads them back.
func TestPushEncoding(t *testing.T) {
	lines := []string{
		"cpu 0.5", "zero 0", "neg -0", "big 1e308 a=1", `{"t":1712000000000.25,"name":"x","value":-2,"labels":{"b":"2","a":"1"}}`,
		`temp 21 room="living room" note="say \"hi\"" empty=""`, "u 1 v=é😀\u2028",
		"many 1 a=1 b=2 c=3 d=4 e=5 f=6 g=7 h=8 i=9 j=10 k=11 l=12 m=13 n=14 o=15 p=16",
	}
	var got []byte
	want := &ahpv1.PublishTelemetryRequest{}
	for i, line := range lines {
		s, ok, err := samples.ParseLine([]byte(line), float64(i)*1000.5)
		if err != nil || !ok {
			t.Fatalf("ParseLine(%q): %v", line, err)
		}
		got = appendSample(got, &s)
		ps := &ahpv1.Sample{T: s.T, Name: s.Name, Value: s.Value}
		for _, l := range s.Labels {
			if ps.Labels == nil {
				ps.Labels = map[string]string{}
			}
			ps.Labels[l.Name] = l.Value
		}
		want.Samples = append(want.Samples, ps)
	}
	wantBytes, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, wantBytes) {
		t.Fatalf("appendSample wrote\n%x\nproto.Marshal\n%x", got, wantBytes)
	}
	var back ahpv1.PublishTelemetryRequest
	if err := (pushCodec{}).Unmarshal(got, &back); err != nil || !proto.Equal(&back, want) {
		t.Fatalf("read back: %v, %v", &back, err)
	}
	if math.Signbit(back.Samples[2].Value) != true {
		t.Fatalf("-0 lost its sign: %v", back.Samples[2].Value)
	}
	if b, err := (pushCodec{}).Marshal(&encodedRequest{got}); err != nil || !bytes.Equal(b, got) {
		t.Fatalf("pushCodec.Marshal(encoded) = %x, %v", b, err)
	}
	first := &ahpv1.PublishTelemetryRequest{Channel: "ahp-telemetry:/x"}
	if b, err := (pushCodec{}).Marshal(first); err != nil || !bytes.Equal(b, must(proto.Marshal(first))) {
		t.Fatalf("pushCodec.Marshal(proto) = %x, %v", b, err)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
