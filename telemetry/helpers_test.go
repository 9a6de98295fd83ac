package telemetry_test

import (
	"encoding/json"
	"testing"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/telemetry"
)

// msg is one decoded message a viewer received.
type msg struct {
	Method string `json:"method"`
	Params struct {
		Seq     uint64 `json:"seq"`
		Samples []struct {
			T      float64           `json:"t"`
			Name   string            `json:"name"`
			Value  float64           `json:"value"`
			Labels map[string]string `json:"labels"`
		} `json:"samples"`
		FromSeq uint64 `json:"fromSeq"`
		ToSeq   uint64 `json:"toSeq"`
		Count   int64  `json:"count"`
	} `json:"params"`
}

func decode(t testing.TB, m flow.Message) msg {
	t.Helper()
	var d msg
	if err := json.Unmarshal([]byte(m.Text), &d); err != nil {
		t.Fatalf("message %q: %v", m.Text, err)
	}
	if m.Size != flow.UTF16Len(m.Text) {
		t.Fatalf("message %q: Size %d, want %d", m.Text, m.Size, flow.UTF16Len(m.Text))
	}
	return d
}

// pullAll pulls until the viewer has nothing more.
func pullAll(t testing.TB, s flow.Subscriber) []msg {
	t.Helper()
	var out []msg
	for range 100000 {
		m, ok := s.Pull(true, 64<<10)
		if !ok {
			return out
		}
		out = append(out, decode(t, m))
	}
	t.Fatal("pullAll: no end")
	return nil
}

func attach(t testing.TB, c *telemetry.Channel, wake func()) *telemetry.Sub {
	t.Helper()
	s, err := c.Attach(flow.AttachRequest{Wake: wake, Window: 1 << 20, Role: flow.RoleView})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s.(*telemetry.Sub)
}

func newChannel(t testing.TB, cfg telemetry.Config) *telemetry.Channel {
	t.Helper()
	c, err := telemetry.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func one(name string, v float64, labels ...telemetry.Label) []telemetry.Sample {
	return []telemetry.Sample{{T: 1000, Name: name, Value: v, Labels: labels}}
}

// summary renders messages compactly: "ready", "s3:[1 2]", "d1-6:6".
func summary(ms []msg) []string {
	var out []string
	for _, m := range ms {
		switch m.Method {
		case "channel/ready":
			out = append(out, "ready")
		case "telemetry/dropped":
			out = append(out, sprintf("d%d-%d:%d", m.Params.FromSeq, m.Params.ToSeq, m.Params.Count))
		case "telemetry/samples":
			s := sprintf("s%d:", m.Params.Seq)
			for i, x := range m.Params.Samples {
				if i > 0 {
					s += ","
				}
				s += sprintf("%s=%g", x.Name, x.Value)
			}
			out = append(out, s)
		default:
			out = append(out, m.Method)
		}
	}
	return out
}
