package telemetry_test

import (
	"encoding/binary"
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
	state := c.Freeze().State
	if _, err := c.Attach(flowAttach()); err == nil {
		t.Fatal("a frozen channel took a viewer")
	}
	r, err := telemetry.NewRestored(cfg, nil, telemetry.Frozen{State: state})
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
	state := c.Freeze().State
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
	if err := telemetry.CheckState(append([]byte{3}, state[1:]...)); err == nil || !strings.Contains(err.Error(), "version 3") {
		t.Errorf("version 3: %v", err)
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

// TestHandOverReadsVersion1: the state of the binary before (version 1,
// without the source's part) restores the history and seq.
func TestHandOverReadsVersion1(t *testing.T) {
	c := newChannel(t, telemetry.Config{Source: "push"})
	publishN(t, c, 0, 3)
	v2 := c.Freeze().State
	if v2[0] != 2 || v2[len(v2)-1] != 0 {
		t.Fatalf("state %q: want version 2, no source's part", v2)
	}
	v1 := append([]byte{1}, v2[1:len(v2)-1]...)
	r, err := telemetry.NewRestored(telemetry.Config{Source: "push"}, nil, telemetry.Frozen{State: v1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if st := r.Stats(); st.Seq != 4 || st.HistoryLen != 3 {
		t.Fatalf("stats %+v, want seq 4 and 3 batches", st)
	}
	if telemetry.CheckState(v2[:len(v2)-1]) == nil {
		t.Fatal("a version 2 state without its source's part was taken")
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
		state := c.Freeze().State
		f.Add(state)
		// A command's child (pid 1: never a child of the test), with a pipe
		// and the start of a line, or without.
		f.Add(withChild(state, 1, 1, 7, "n "))
		f.Add(withChild(state, 1, 3, 2, ""))
		f.Add(withChild(state, 1, 0, 0, ""))
	}
	f.Fuzz(func(t *testing.T, state []byte) {
		if err := telemetry.CheckState(state); err != nil {
			if !errors.Is(err, telemetry.ErrState) {
				t.Fatalf("error %v is not ErrState", err)
			}
			return
		}
		r, err := telemetry.NewRestored(telemetry.Config{Source: "push"}, nil, telemetry.Frozen{State: state})
		if err != nil {
			// What CheckState cannot see: whether the child a state names
			// is this process's, and which source it is handed to.
			if !errors.Is(err, telemetry.ErrState) || !strings.Contains(err.Error(), "child") {
				t.Fatal(err)
			}
			return
		}
		defer r.Close()
		publishN(t, r, 0, 1)
	})
}

// withChild returns a source-less state (ending in 0) with a command's
// child instead: pid, flags (bit 0 pipe, bit 1 skipping), the line
// number and the bytes held, then its counters.
func withChild(state []byte, pid uint64, flags byte, n uint64, held string) []byte {
	b := append(append([]byte(nil), state[:len(state)-1]...), 1)
	b = binary.AppendUvarint(b, pid)
	b = append(b, flags)
	b = binary.AppendUvarint(b, n)
	b = binary.AppendUvarint(b, uint64(len(held)))
	b = append(b, held...)
	for _, v := range []uint64{1, n, 0, n} {
		b = binary.AppendUvarint(b, v)
	}
	return b
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
