package telemetry_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/telemetry"
)

func publishN(t *testing.T, c *telemetry.Channel, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if err := c.Publish([]telemetry.Sample{{T: float64(1000 + i), Name: "n", Value: float64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHandOverKeepsHistoryAndSeq: a channel frozen and restored keeps its
// history (a viewer's replay is the same batches, byte for byte) and its
// seq (the next batch continues it: no jump, no reset to 1).
func TestHandOverKeepsHistoryAndSeq(t *testing.T) {
	cfg := telemetry.Config{Source: "push"}
	c := newChannel(t, cfg)
	publishN(t, c, 0, 10)
	before := pullAll(t, attach(t, c, nil))
	state := c.Freeze()
	if _, err := c.Attach(flowAttach()); err == nil {
		t.Fatal("a frozen channel took a viewer")
	}
	r, err := telemetry.NewRestored(cfg, nil, state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	s := attach(t, r, nil)
	after := pullAll(t, s)
	if len(after) != len(before) {
		t.Fatalf("replay of %d messages after, %d before", len(after), len(before))
	}
	for i := range before {
		if before[i].Method != after[i].Method || before[i].Params.Seq != after[i].Params.Seq {
			t.Fatalf("message %d: %s seq %d after, %s seq %d before", i, after[i].Method, after[i].Params.Seq, before[i].Method, before[i].Params.Seq)
		}
	}
	publishN(t, r, 10, 1)
	live := pullAll(t, s)
	if len(live) != 1 || live[0].Params.Seq != 11 || live[0].Params.Samples[0].Value != 10 {
		t.Fatalf("after the hand-over: %+v, want seq 11 with sample 10", live)
	}
	if st := r.Stats(); st.Seq != 12 || st.HistoryLen != 11 {
		t.Fatalf("stats %+v, want seq 12 and 11 batches of history", st)
	}
}

// TestHandOverStateChecked: a telemetry state cut anywhere, with a byte
// too many, of another version, or with a batch text that is not its
// seq's telemetry/samples message is refused with ErrState.
func TestHandOverStateChecked(t *testing.T) {
	c := newChannel(t, telemetry.Config{Source: "push"})
	publishN(t, c, 0, 3)
	state := c.Freeze()
	if err := telemetry.CheckState(state); err != nil {
		t.Fatal(err)
	}
	for n := range len(state) {
		if err := telemetry.CheckState(state[:n]); !errors.Is(err, telemetry.ErrState) {
			t.Fatalf("cut at %d of %d: %v", n, len(state), err)
		}
	}
	if err := telemetry.CheckState(append(append([]byte(nil), state...), 0)); err == nil || !strings.Contains(err.Error(), "1 bytes after") {
		t.Errorf("a byte too many: %v", err)
	}
	if err := telemetry.CheckState(append([]byte{2}, state[1:]...)); err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Errorf("version 2: %v", err)
	}
	seq := []byte(`"seq":1,`)
	i := strings.Index(string(state), string(seq))
	if i < 0 {
		t.Fatal("no seq 1 in the state")
	}
	forged := append([]byte(nil), state...)
	forged[i+len(`"seq":`)] = '7'
	if err := telemetry.CheckState(forged); err == nil || !strings.Contains(err.Error(), "not the telemetry/samples message of seq 1") {
		t.Errorf("a batch text of another seq: %v", err)
	}
}

// FuzzTelemetryState: any bytes are refused with ErrState or restore a
// channel; never a panic.
func FuzzTelemetryState(f *testing.F) {
	for _, n := range []int{0, 1, 5} {
		c, err := telemetry.New(telemetry.Config{Source: "push"}, nil)
		if err != nil {
			f.Fatal(err)
		}
		for i := range n {
			_ = c.Publish([]telemetry.Sample{{T: 1, Name: "m" + strconv.Itoa(i), Value: float64(i)}})
		}
		f.Add(c.Freeze())
	}
	f.Fuzz(func(t *testing.T, state []byte) {
		if err := telemetry.CheckState(state); err != nil {
			if !errors.Is(err, telemetry.ErrState) {
				t.Fatalf("error %v is not ErrState", err)
			}
			return
		}
		r, err := telemetry.NewRestored(telemetry.Config{Source: "push"}, nil, state)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		publishN(t, r, 0, 1)
	})
}

func flowAttach() flow.AttachRequest {
	return flow.AttachRequest{Window: 1 << 20, Role: flow.RoleView}
}

// TestHandOverHistoryBound: a restored history beyond the new channel's
// bounds keeps only the newest batches that fit, and the seq still
// continues.
func TestHandOverHistoryBound(t *testing.T) {
	c := newChannel(t, telemetry.Config{Source: "push"})
	publishN(t, c, 0, 10)
	r, err := telemetry.NewRestored(telemetry.Config{Source: "push", HistoryBatches: 3}, nil, c.Freeze())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if st := r.Stats(); st.HistoryLen != 3 || st.Seq != 11 {
		t.Fatalf("stats %+v, want 3 batches of history and seq 11", st)
	}
	var seqs []uint64
	for _, m := range pullAll(t, attach(t, r, nil)) {
		if m.Method == "telemetry/samples" {
			seqs = append(seqs, m.Params.Seq)
		}
	}
	if len(seqs) != 3 || seqs[0] != 8 || seqs[2] != 10 {
		t.Fatalf("replay of seqs %v, want 8 9 10", seqs)
	}
}
