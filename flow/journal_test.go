package flow_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"unsafe"

	"github.com/ahp-dev/ahpd/flow"
)

// journalled opens a TCP-like stream over j and returns it with its source.
func journalled(t *testing.T, s *flow.Sender, j *flow.Journal, resume *flow.ResumePoint, sub string, send flow.ReceiveLimits) (*flow.Stream, *fakeSource) {
	t.Helper()
	src := &fakeSource{}
	st, err := s.Open(flow.StreamConfig{
		Channel: "ahp-tcp:/x", SubscriptionID: sub, Source: src,
		Send: send, Receive: limits(64*KiB, 16*KiB, 64*KiB),
		Journal: j, Resume: resume,
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Journal() != j {
		t.Fatal("Stream.Journal() is not the configured journal")
	}
	return st, src
}

// drain hands out everything and returns the completed messages (id → data)
// in order, reassembled.
func drain(t *testing.T, s *flow.Sender) []sentMsg {
	t.Helper()
	var out []sentMsg
	var cur []byte
	for {
		it, ok := next(t, s)
		if !ok {
			return out
		}
		if it.kind != "frame" {
			continue
		}
		cur = append(cur, it.data...)
		if it.final {
			out = append(out, sentMsg{it.id, string(cur)})
			cur = nil
		}
	}
}

// replay resumes j on a new Sender for a peer that accepted accepted
// (and released nothing) and returns the stream with what it sends.
func replay(t *testing.T, j *flow.Journal, accepted flow.Position, send flow.ReceiveLimits) (*flow.Stream, []sentMsg) {
	t.Helper()
	rp, err := j.Resume(accepted, flow.Position{})
	if err != nil {
		t.Fatal(err)
	}
	s := newSender(t, flow.SenderConfig{})
	st, _ := journalled(t, s, j, &rp, "new", send)
	s.Wake(st)
	return st, drain(t, s)
}

type sentMsg struct {
	id   int64
	text string
}

func tcpData(n int, size int64) string { return sized(fmt.Sprintf("d%d", n), size) }

func TestJournalRetainsUntilCredit(t *testing.T) {
	j := flow.NewJournal()
	s := newSender(t, flow.SenderConfig{})
	st, src := journalled(t, s, j, nil, "s1", limits(4096, 1024, 2048))
	for i := range 5 {
		src.push(dataMsg(tcpData(i, 1000)))
	}
	s.Wake(st)
	got := drain(t, s)
	// 1000, 2000, 3000, 4000 < 4096 … the fifth starts at 4000 < 4096.
	if len(got) != 5 || j.Len() != 5 || j.Last() != (flow.Position{MessageID: 5, Position: 5000}) {
		t.Fatalf("sent %d, journal holds %d, last %+v; want 5, 5, {5 5000}", len(got), j.Len(), j.Last())
	}
	if j.RetainedBytes() != 5000 {
		t.Fatalf("RetainedBytes() = %d, want 5000", j.RetainedBytes())
	}
	if err := s.Credit(st, 2000); err != nil {
		t.Fatal(err)
	}
	if j.Len() != 3 || j.Released() != (flow.Position{MessageID: 2, Position: 2000}) || j.RetainedBytes() != 3000 {
		t.Fatalf("after Credit(2000): Len %d Released %+v Retained %d", j.Len(), j.Released(), j.RetainedBytes())
	}
	// Credit the journal never saw as a boundary is rejected and changes
	// nothing.
	if err := s.Credit(st, 2500); !errors.Is(err, flow.ErrCreditOffBoundary) {
		t.Fatalf("Credit(2500) = %v, want ErrCreditOffBoundary", err)
	}
	if j.Len() != 3 {
		t.Fatalf("journal changed after a refused credit")
	}
}

// TestJournalBound: a peer that never releases: the journal stays below
// window + maxMessage with data only, and below window + maxMessage +
// MaxLifecycleMessages × MaxLifecycleBytes with lifecycle messages.
func TestJournalBound(t *testing.T) {
	for _, l := range []flow.ReceiveLimits{limits(1024, 1024, 1024), limits(4096, 1024, 8192), limits(64*KiB, 16*KiB, 64*KiB)} {
		j := flow.NewJournal()
		s := newSender(t, flow.SenderConfig{})
		n := 0
		gen := func(int) flow.Message {
			n++
			sizes := []int64{l.MaximumMessageBytes, 64, l.MaximumMessageBytes - 2, 200}
			return dataMsg(tcpData(n, sizes[n%len(sizes)]))
		}
		st, src := journalled(t, s, j, nil, "s", l)
		src.gen = gen
		s.Wake(st)
		drain(t, s)
		if r := j.RetainedBytes(); r >= l.WindowBytes+l.MaximumMessageBytes {
			t.Errorf("%+v: RetainedBytes() = %d ≥ window + maxMessage", l, r)
		}
		src.gen = nil
		for i := range flow.MaxLifecycleMessages {
			src.push(lifecycleMsg(tcpData(1000+i, flow.MaxLifecycleBytes)))
		}
		s.Wake(st)
		drain(t, s)
		if r, bound := j.RetainedBytes(), l.WindowBytes+l.MaximumMessageBytes+flow.MaxLifecycleMessages*flow.MaxLifecycleBytes; r >= bound {
			t.Errorf("%+v: RetainedBytes() = %d with lifecycle messages ≥ %d", l, r, bound)
		}
		if c := flow.JournalCap(j); c > 2*(j.Len()+8) {
			t.Errorf("%+v: journal ring capacity %d for %d entries", l, c, j.Len())
		}
	}
}

// setupResume sends 6 messages of 500 bytes (ends 500 … 3000) on a
// journalled stream and credits 1000; it returns the journal.
func setupResume(t *testing.T) (*flow.Journal, []sentMsg) {
	t.Helper()
	j := flow.NewJournal()
	s := newSender(t, flow.SenderConfig{})
	st, src := journalled(t, s, j, nil, "old", limits(8192, 1024, 2048))
	for i := range 6 {
		src.push(dataMsg(tcpData(i, 500)))
	}
	s.Wake(st)
	sent := drain(t, s)
	if err := s.Credit(st, 1000); err != nil {
		t.Fatal(err)
	}
	s.Close(st)
	return j, sent
}

func TestJournalResume(t *testing.T) {
	j, sent := setupResume(t)
	// The client got messages 1–4 (accepted {4, 2000}) and released 3.
	accepted := flow.Position{MessageID: 4, Position: 2000}
	released := flow.Position{MessageID: 3, Position: 1500}
	rp, err := j.Resume(accepted, released)
	if err != nil {
		t.Fatal(err)
	}
	if rp.Accepted != accepted || rp.Released != released || j.Released() != released || j.Len() != 3 {
		t.Fatalf("Resume = %+v; journal released %+v len %d", rp, j.Released(), j.Len())
	}
	s := newSender(t, flow.SenderConfig{})
	st, src := journalled(t, s, j, &rp, "new", limits(8192, 1024, 2048))
	if st.NextMessageID() != 7 || st.Window().Sent() != 2000 || st.Window().Consumed() != 1500 {
		t.Fatalf("resumed stream: next id %d, sent %d, consumed %d; want 7, 2000, 1500",
			st.NextMessageID(), st.Window().Sent(), st.Window().Consumed())
	}
	src.push(dataMsg(tcpData(6, 300)), dataMsg(tcpData(7, 300)))
	s.Wake(st)
	got := drain(t, s)
	want := append([]sentMsg{}, sent[4:]...) // messages 5 and 6 replayed
	want = append(want, sentMsg{7, tcpData(6, 300)}, sentMsg{8, tcpData(7, 300)})
	if len(got) != len(want) {
		t.Fatalf("resumed stream sent %d messages, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("message %d: id %d %.30q, want id %d %.30q", i, got[i].id, got[i].text, want[i].id, want[i].text)
		}
	}
	// Credit continues in the journal's position space.
	if err := s.Credit(st, 2500); err != nil {
		t.Fatalf("Credit(2500) = %v", err)
	}
	if j.Released() != (flow.Position{MessageID: 5, Position: 2500}) {
		t.Fatalf("journal released %+v, want {5 2500}", j.Released())
	}
	if err := s.Credit(st, 3300); err != nil {
		t.Fatalf("Credit(3300) = %v", err)
	}
	if err := s.Credit(st, 3500); !errors.Is(err, flow.ErrCreditOffBoundary) {
		t.Fatalf("Credit(3500) = %v, want ErrCreditOffBoundary", err)
	}
	if err := s.Credit(st, 3601); !errors.Is(err, flow.ErrCreditBeyondSent) {
		t.Fatalf("Credit(3601) = %v, want ErrCreditBeyondSent", err)
	}
	if err := s.Credit(st, 3600); err != nil || j.Len() != 0 {
		t.Fatalf("Credit(3600) = %v, journal len %d", err, j.Len())
	}
}

func TestJournalResumeInvalid(t *testing.T) {
	p := func(id, pos int64) flow.Position { return flow.Position{MessageID: id, Position: pos} }
	tests := []struct {
		name               string
		accepted, released flow.Position
	}{
		{"accepted beyond last", p(7, 3500), p(2, 1000)},
		{"accepted id beyond last", p(7, 3000), p(2, 1000)},
		{"accepted position beyond last", p(6, 3500), p(2, 1000)},
		{"released beyond accepted", p(3, 1500), p(4, 2000)},
		{"released position beyond accepted", p(4, 2000), p(4, 2500)},
		{"released older than credited", p(4, 2000), p(1, 500)},
		{"released zero after credit", p(4, 2000), p(0, 0)},
		{"accepted off boundary", p(4, 1900), p(2, 1000)},
		{"released off boundary", p(4, 2000), p(3, 1400)},
		{"accepted id mismatch", p(3, 2000), p(2, 1000)},
		{"released id mismatch", p(4, 2000), p(2, 1500)},
		{"released credited id mismatch", p(4, 2000), p(1, 1000)},
		{"negative", p(-1, -500), p(-1, -500)},
	}
	for _, tt := range tests {
		j, _ := setupResume(t)
		last, rel, n, ret := j.Last(), j.Released(), j.Len(), j.RetainedBytes()
		if _, err := j.Resume(tt.accepted, tt.released); !errors.Is(err, flow.ErrResume) {
			t.Errorf("%s: Resume(%+v, %+v) = %v, want ErrResume", tt.name, tt.accepted, tt.released, err)
		}
		if j.Last() != last || j.Released() != rel || j.Len() != n || j.RetainedBytes() != ret {
			t.Errorf("%s: journal changed by a failed Resume", tt.name)
		}
	}
	// Valid edge cases.
	for _, tt := range []struct{ accepted, released flow.Position }{
		{p(2, 1000), p(2, 1000)},
		{p(6, 3000), p(6, 3000)},
		{p(6, 3000), p(2, 1000)},
	} {
		j, _ := setupResume(t)
		if _, err := j.Resume(tt.accepted, tt.released); err != nil {
			t.Errorf("Resume(%+v, %+v) = %v, want nil", tt.accepted, tt.released, err)
		}
	}
	// A fresh journal resumes from {0, 0}.
	if _, err := flow.NewJournal().Resume(flow.Position{}, flow.Position{}); err != nil {
		t.Errorf("fresh journal: Resume({0 0}, {0 0}) = %v", err)
	}
	// A ResumePoint that does not match the journal is refused by Open.
	j, _ := setupResume(t)
	s := newSender(t, flow.SenderConfig{})
	_, err := s.Open(flow.StreamConfig{Channel: "c", SubscriptionID: "s", Source: &fakeSource{},
		Send: limits(8192, 1024, 2048), Receive: limits(8192, 1024, 2048), Journal: j,
		Resume: &flow.ResumePoint{Accepted: p(4, 2000), Released: p(3, 1500)}})
	if !errors.Is(err, flow.ErrResume) {
		t.Errorf("Open with a stale ResumePoint = %v, want ErrResume", err)
	}
}

// TestJournalResumeMidMessage: the connection drops while a message is
// partly sent; the resumed stream replays it whole with the same id.
func TestJournalResumeMidMessage(t *testing.T) {
	j := flow.NewJournal()
	s := newSender(t, flow.SenderConfig{})
	st, src := journalled(t, s, j, nil, "old", limits(8192, 1024, 8192))
	big := tcpData(1, 5000)
	src.push(dataMsg(tcpData(0, 500)), dataMsg(big))
	s.Wake(st)
	for range 3 { // message 1, then two frames of message 2
		next(t, s)
	}
	if !st.Window().Active() {
		t.Fatal("message 2 should be in progress")
	}
	s.Close(st)
	st2, got := replay(t, j, flow.Position{MessageID: 1, Position: 500}, limits(8192, 1024, 8192))
	if len(got) != 1 || got[0] != (sentMsg{2, big}) {
		t.Fatalf("replayed %v, want message 2 whole", got)
	}
	if st2.NextMessageID() != 3 || st2.Window().Sent() != 5500 {
		t.Fatalf("next id %d, sent %d; want 3, 5500", st2.NextMessageID(), st2.Window().Sent())
	}
}

// TestJournalKeepsTexts: a journalled stream's Source may reuse a text's
// memory like any other (Source); what the journal replays after a
// resume is still the text that was sent.
func TestJournalKeepsTexts(t *testing.T) {
	var texts []string
	for i := range 4 {
		texts = append(texts, tcpData(i, 500))
	}
	j := flow.NewJournal()
	s := newSender(t, flow.SenderConfig{})
	st, err := s.Open(flow.StreamConfig{
		Channel: "ahp-tcp:/x", SubscriptionID: "old", Source: &reusingSource{texts: slices.Clone(texts)},
		Send: limits(8192, 1024, 2048), Receive: limits(64*KiB, 16*KiB, 64*KiB), Journal: j,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Wake(st)
	if sent := drain(t, s); len(sent) != len(texts) {
		t.Fatalf("sent %d messages, want %d", len(sent), len(texts))
	}
	s.Close(st)
	// The peer received nothing: everything is replayed.
	_, got := replay(t, j, flow.Position{}, limits(8192, 1024, 2048))
	if len(got) != len(texts) {
		t.Fatalf("replayed %d messages, want %d", len(got), len(texts))
	}
	for i, m := range got {
		if m.text != texts[i] {
			t.Errorf("replayed message %d = %.40q, want %.40q", i, m.text, texts[i])
		}
	}
}

// TestJournalReusesReleasedMemory: texts released by credit are memory
// for the next ones, within a bound; what is still retained is intact at
// every step (a released text's memory never overwrites a retained one),
// and a replay after many rounds sends exactly the retained messages.
func TestJournalReusesReleasedMemory(t *testing.T) {
	j := flow.NewJournal()
	s := newSender(t, flow.SenderConfig{})
	st, src := journalled(t, s, j, nil, "s1", limits(64*KiB, 16*KiB, 64*KiB))
	var sent []sentMsg
	var consumed int64
	for round := range 200 {
		for i := range 3 {
			src.push(dataMsg(tcpData(round*3+i, int64(4000+(round*7+i)%3*3000))))
		}
		s.Wake(st)
		sent = append(sent, drain(t, s)...)
		// Release all but the newest message or two.
		keep := 1 + round%2
		var end int64
		for _, m := range sent[:len(sent)-keep] {
			end += flow.UTF16Len(m.text)
		}
		if end > consumed {
			if err := s.Credit(st, end); err != nil {
				t.Fatal(err)
			}
			consumed = end
		}
		if free, bound := flow.JournalFree(j); free > bound {
			t.Fatalf("round %d: the journal keeps %d bytes of released texts, bound %d", round, free, bound)
		}
	}
	if free, _ := flow.JournalFree(j); free == 0 {
		t.Fatal("the journal kept no released memory: nothing was reused")
	}
	s.Close(st)
	defer func() {
		// A window's worth released at once: the bound holds.
		st, src := journalled(t, s, flow.NewJournal(), nil, "s2", limits(2048*KiB, 16*KiB, 64*KiB))
		for i := range 200 {
			src.push(dataMsg(tcpData(i, 10000)))
		}
		s.Wake(st)
		if got := drain(t, s); len(got) != 200 {
			t.Fatalf("sent %d messages, want 200", len(got))
		}
		if err := s.Credit(st, 200*10000); err != nil {
			t.Fatal(err)
		}
		free, bound := flow.JournalFree(st.Journal())
		n, most := flow.JournalFreeCount(st.Journal())
		if free > bound || n > most || free < bound/2 && n < most {
			t.Fatalf("after releasing 2 MB at once the journal keeps %d bytes in %d buffers, want ≤ %d bytes and %d buffers (and some)", free, n, bound, most)
		}
	}()
	retained := sent[len(sent)-j.Len():]
	// The peer released (and so accepted) up to the credit: the retained
	// messages are replayed.
	got := replayReleased(t, j, flow.Position{MessageID: retained[0].id - 1, Position: consumed})
	if len(got) != len(retained) {
		t.Fatalf("replayed %d messages, want %d", len(got), len(retained))
	}
	for i, m := range got {
		if m != retained[i] {
			t.Fatalf("replayed message %d = {%d %.40q}, want {%d %.40q}", i, m.id, m.text, retained[i].id, retained[i].text)
		}
	}
}

// TestJournalKeepsOwnedTexts: a text built in Journal.Buffer and sent
// Owned is kept as it is (the same memory, no copy), released memory comes
// back from Buffer, and what is retained replays intact.
func TestJournalKeepsOwnedTexts(t *testing.T) {
	j := flow.NewJournal()
	s := newSender(t, flow.SenderConfig{})
	st, src := journalled(t, s, j, nil, "s1", limits(64*KiB, 16*KiB, 64*KiB))
	var ptrs []*byte
	var texts []string
	var consumed int64
	for i := range 40 {
		want := tcpData(i, 6000)
		b := append(j.Buffer(len(want)), want...)
		text := unsafe.String(unsafe.SliceData(b), len(b))
		ptrs, texts = append(ptrs, unsafe.StringData(text)), append(texts, want)
		src.push(flow.Message{Text: text, Class: flow.Data, Owned: true})
		s.Wake(st)
		drain(t, s)
		if got := unsafe.StringData(flow.JournalText(j, j.Len()-1)); got != ptrs[i] {
			t.Fatalf("message %d: the journal copied an Owned text", i)
		}
		if i%3 == 2 { // release all but the newest
			consumed = j.Last().Position - 6000
			if err := s.Credit(st, consumed); err != nil {
				t.Fatal(err)
			}
		}
	}
	reused := 0
	for i := 1; i < len(ptrs); i++ {
		if slices.Contains(ptrs[:i], ptrs[i]) {
			reused++
		}
	}
	if reused == 0 {
		t.Fatal("Buffer never gave back the memory of a released message")
	}
	s.Close(st)
	got := replayReleased(t, j, j.Released())
	retained := texts[len(texts)-len(got):]
	if len(got) == 0 || len(got) != j.Len() {
		t.Fatalf("replayed %d messages, the journal holds %d", len(got), j.Len())
	}
	for i, m := range got {
		if m.text != retained[i] {
			t.Fatalf("replayed message %d = %.30q, want %.30q", i, m.text, retained[i])
		}
	}
}

// replayReleased resumes j on a new Sender for a peer that released (and
// so accepted) up to at, and returns what it replays.
func replayReleased(t *testing.T, j *flow.Journal, at flow.Position) []sentMsg {
	t.Helper()
	rp, err := j.Resume(at, at)
	if err != nil {
		t.Fatal(err)
	}
	s := newSender(t, flow.SenderConfig{})
	st, _ := journalled(t, s, j, &rp, "new", limits(64*KiB, 16*KiB, 64*KiB))
	s.Wake(st)
	return drain(t, s)
}
