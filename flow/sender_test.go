package flow_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/ahp-dev/ahpd/flow"
)

// item is one thing Next handed out, classified.
type item struct {
	kind  string // "frame", "credit", "control"
	sub   string
	id    int64
	final bool
	data  string
	text  []byte
}

func classify(t testing.TB, b []byte) item {
	t.Helper()
	var f flow.Frame
	err := flow.DecodeFrame(b, &f)
	switch {
	case err == nil:
		d, err := f.Data()
		if err != nil {
			t.Fatalf("frame data: %v", err)
		}
		return item{kind: "frame", sub: f.SubscriptionID, id: f.MessageID, final: f.Final, data: d, text: b}
	case errors.Is(err, flow.ErrNotFrame):
		if strings.Contains(string(b), `"channel/credit"`) {
			return item{kind: "credit", text: b}
		}
		return item{kind: "control", text: b}
	}
	t.Fatalf("Next handed out %q: %v", b, err)
	return item{}
}

// next calls s.Next and, when it hands something out, marks it written.
func next(t testing.TB, s *flow.Sender) (item, bool) {
	t.Helper()
	b, err := s.Next(nil)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	if b == nil {
		return item{}, false
	}
	it := classify(t, b)
	s.Written(len(b))
	return it, true
}

// ctl returns a control message (a JSON-RPC response) of exactly n ≥ 40
// bytes.
func ctl(n int) []byte {
	head, tail := `{"jsonrpc":"2.0","id":1,"result":"`, `"}`
	return []byte(head + strings.Repeat("r", n-len(head)-len(tail)) + tail)
}

func newSender(t testing.TB, cfg flow.SenderConfig) *flow.Sender {
	t.Helper()
	s, err := flow.NewSender(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func open(t testing.TB, s *flow.Sender, sub string, src flow.Source, send flow.ReceiveLimits) *flow.Stream {
	t.Helper()
	st, err := s.Open(flow.StreamConfig{
		Channel: "ahp-terminal:/t", SubscriptionID: sub, Source: src,
		Send: send, Receive: limits(64*KiB, 16*KiB, 64*KiB),
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestSenderConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		cfg   flow.SenderConfig
		field string
	}{
		{flow.SenderConfig{}, ""},
		{flow.SenderConfig{Quantum: 1, TransportFrames: 1, TransportBytes: 1, ControlMessages: 1, ControlBytes: 1, MaxLifecycle: 1}, ""},
		{flow.SenderConfig{Quantum: -1}, "Quantum"},
		{flow.SenderConfig{TransportFrames: -1}, "TransportFrames"},
		{flow.SenderConfig{TransportBytes: -1}, "TransportBytes"},
		{flow.SenderConfig{ControlMessages: -1}, "ControlMessages"},
		{flow.SenderConfig{ControlBytes: -1}, "ControlBytes"},
		{flow.SenderConfig{MaxLifecycle: -1}, "MaxLifecycle"},
		{flow.SenderConfig{MaxLifecycle: flow.MaxLifecycleMessages + 1}, "MaxLifecycle"},
	} {
		_, err := flow.NewSender(tt.cfg)
		var le *flow.LimitError
		if tt.field == "" && err != nil || tt.field != "" && (!errors.As(err, &le) || le.Field != tt.field) {
			t.Errorf("NewSender(%+v) = %v, want field %q", tt.cfg, err, tt.field)
		}
	}
}

func TestSenderOpenErrors(t *testing.T) {
	s := newSender(t, flow.SenderConfig{})
	src := &fakeSource{}
	if _, err := s.Open(flow.StreamConfig{Channel: "c", SubscriptionID: "s", Source: src, Send: limits(1, 1024, 1024), Receive: limits(4096, 1024, 4096)}); err == nil {
		t.Error("Open with invalid Send limits succeeded")
	}
	if _, err := s.Open(flow.StreamConfig{Channel: "c", SubscriptionID: "s", Source: src, Send: limits(4096, 1024, 4096)}); err == nil {
		t.Error("Open with invalid Receive limits succeeded")
	}
	long := strings.Repeat("c", 600)
	if _, err := s.Open(flow.StreamConfig{Channel: long, SubscriptionID: long, Source: src, Send: limits(4096, 1024, 4096), Receive: limits(4096, 1024, 4096)}); !errors.Is(err, flow.ErrEnvelopeTooLarge) {
		t.Errorf("Open with huge ids = %v, want ErrEnvelopeTooLarge", err)
	}
	if n := s.Streams(); n != 0 {
		t.Errorf("Streams() = %d after failed Opens, want 0", n)
	}
}

// TestSenderGoldenOrder is the golden-order test of golang/net's
// TestRoundRobinScheduler: streams 1–4 with 1–4 one-frame messages, a
// quantum of one frame: control first, then [1,2,3,4,2,3,4,3,4,4].
func TestSenderGoldenOrder(t *testing.T) {
	msg := sized("m", 200)
	var fr flow.Fragmenter
	_ = fr.Reset("ahp-terminal:/t", "1", 1, msg, 1024)
	frame, _, _ := fr.Next(nil)
	s := newSender(t, flow.SenderConfig{Quantum: int64(len(frame)), TransportFrames: 1})
	var streams []*flow.Stream
	for i := 1; i <= 4; i++ {
		src := &fakeSource{}
		for range i {
			src.push(dataMsg(msg))
		}
		streams = append(streams, open(t, s, fmt.Sprint(i), src, limits(64*KiB, 1024, 4096)))
	}
	for _, st := range streams {
		s.Wake(st)
	}
	if err := s.Control([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)); err != nil {
		t.Fatal(err)
	}
	s.QueueCredit(streams[2])
	var got []string
	for {
		it, ok := next(t, s)
		if !ok {
			break
		}
		if it.kind == "frame" {
			got = append(got, it.sub)
		} else {
			got = append(got, it.kind)
		}
	}
	want := []string{"credit", "control", "1", "2", "3", "4", "2", "3", "4", "3", "4", "4"}
	if !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
	if s.Pending() {
		t.Errorf("Pending() = true after draining")
	}
}

// TestSenderControlFirst: credit and control messages go before data, even
// in the middle of a message.
func TestSenderControlFirst(t *testing.T) {
	s := newSender(t, flow.SenderConfig{})
	src := &fakeSource{}
	src.push(dataMsg(strings.Repeat("x", 10000)))
	st := open(t, s, "s1", src, limits(64*KiB, 1024, 64*KiB))
	s.Wake(st)
	if it, _ := next(t, s); it.kind != "frame" || it.final {
		t.Fatalf("first item = %+v, want a non-final frame", it)
	}
	if err := s.Control([]byte(`{"jsonrpc":"2.0","id":2,"result":{}}`)); err != nil {
		t.Fatal(err)
	}
	s.QueueCredit(st)
	if it, _ := next(t, s); it.kind != "credit" {
		t.Fatalf("item after QueueCredit = %+v, want credit", it)
	}
	if it, _ := next(t, s); it.kind != "control" {
		t.Fatalf("item after Control = %+v, want control", it)
	}
	if it, _ := next(t, s); it.kind != "frame" {
		t.Fatalf("then %+v, want the message to continue", it)
	}
}

// TestSenderCreditCoalesced: one pending credit per subscription; the
// newest value is written.
func TestSenderCreditCoalesced(t *testing.T) {
	s := newSender(t, flow.SenderConfig{})
	recv := flow.NewReceiver(limits(4096, 1024, 4096))
	st, err := s.Open(flow.StreamConfig{Channel: "c", SubscriptionID: "s", Source: &fakeSource{}, Send: limits(4096, 1024, 4096), Receiver: recv})
	if err != nil {
		t.Fatal(err)
	}
	if st.Receiver() != recv {
		t.Fatal("Stream.Receiver() is not the configured Receiver")
	}
	var ends []flow.Position
	for id := int64(1); id <= 3; id++ {
		_, end, err := deliver(t, recv, frames(t, id, sized("m", 1200), 1024))
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, end)
	}
	for _, e := range ends {
		if _, send, err := recv.Release(e); err != nil {
			t.Fatal(err)
		} else if send {
			s.QueueCredit(st)
		}
	}
	s.QueueCredit(st)
	if n := flow.CreditQueueLen(s); n != 1 {
		t.Fatalf("credit queue holds %d, want 1", n)
	}
	it, ok := next(t, s)
	if !ok || it.kind != "credit" || !strings.Contains(string(it.text), `"consumedBytes":3600}`) {
		t.Fatalf("credit = %s, want consumedBytes 3600", it.text)
	}
	if _, ok := next(t, s); ok {
		t.Fatalf("a second credit was written")
	}
	// A closed stream's queued credit is dropped.
	s.QueueCredit(st)
	s.Close(st)
	if _, ok := next(t, s); ok {
		t.Fatalf("credit of a closed stream was written")
	}
}

func TestSenderControlOverflow(t *testing.T) {
	s := newSender(t, flow.SenderConfig{ControlMessages: 3, ControlBytes: 1000})
	for i := 0; i < 3; i++ {
		if err := s.Control(ctl(40)); err != nil {
			t.Fatalf("Control %d = %v", i, err)
		}
	}
	if err := s.Control(ctl(40)); !errors.Is(err, flow.ErrControlOverflow) {
		t.Errorf("Control past ControlMessages = %v, want ErrControlOverflow", err)
	}
	if n, b := s.ControlLen(); n != 3 || b != 120 {
		t.Errorf("ControlLen() = %d, %d; want 3, 120", n, b)
	}
	s2 := newSender(t, flow.SenderConfig{ControlMessages: 100, ControlBytes: 100})
	if err := s2.Control(ctl(60)); err != nil {
		t.Fatal(err)
	}
	if err := s2.Control(ctl(40)); err != nil {
		t.Fatalf("Control up to ControlBytes = %v", err)
	}
	if err := s2.Control(ctl(40)); !errors.Is(err, flow.ErrControlOverflow) {
		t.Errorf("Control past ControlBytes = %v, want ErrControlOverflow", err)
	}
	// Draining frees the lane.
	next(t, s2)
	if err := s2.Control(ctl(60)); err != nil {
		t.Errorf("Control after draining = %v", err)
	}
}

// TestSenderTransportBound: Next never has more than TransportFrames items
// and TransportBytes bytes in flight, except one item of any size when
// nothing is in flight.
func TestSenderTransportBound(t *testing.T) {
	for _, cfg := range []flow.SenderConfig{
		{},
		{TransportFrames: 1},
		{TransportFrames: 3, TransportBytes: 5000},
		{TransportFrames: 8, TransportBytes: 20000},
		{TransportFrames: 100, TransportBytes: 1},
	} {
		rng := rand.New(rand.NewPCG(1, 2))
		s := newSender(t, cfg)
		var streams []*flow.Stream
		for i := range 3 {
			gen := func(n int) flow.Message {
				return dataMsg(sized(fmt.Sprint(n), 64+2*int64(rng.IntN(20000))))
			}
			st := open(t, s, fmt.Sprint(i), &fakeSource{gen: gen}, limits(1<<20, 1024+int64(rng.IntN(32000)), 64*KiB))
			streams = append(streams, st)
			s.Wake(st)
		}
		for i := 0; i < 200; i++ {
			_ = s.Control(ctl(40 + rng.IntN(3000)))
		}
		var inflight [][]byte
		tf := cfg.TransportFrames
		if tf == 0 {
			tf = 2
		}
		tb := cfg.TransportBytes
		if tb == 0 {
			tb = 64 * KiB
		}
		for step := 0; step < 5000; step++ {
			if len(inflight) > 0 && rng.IntN(3) == 0 {
				k := rng.IntN(len(inflight) + 1)
				for _, b := range inflight[:k] {
					s.Written(len(b))
				}
				inflight = inflight[k:]
			}
			b, err := s.Next(nil)
			if err != nil {
				t.Fatal(err)
			}
			if b == nil {
				if !s.TransportFull() && len(inflight) == 0 {
					t.Fatalf("%+v: Next = nil with an empty transport", cfg)
				}
				continue
			}
			if it := classify(t, b); it.kind == "frame" && it.final {
				st := streams[it.sub[0]-'0']
				if err := s.Credit(st, st.Window().Sent()); err != nil {
					t.Fatal(err)
				}
			}
			inflight = append(inflight, b)
			var bytes int64
			for _, x := range inflight {
				bytes += int64(len(x))
			}
			n, nb := flow.Inflight(s)
			if n != len(inflight) || nb != bytes {
				t.Fatalf("Inflight = %d, %d; want %d, %d", n, nb, len(inflight), bytes)
			}
			if len(inflight) > 1 && (len(inflight) > tf || bytes > tb) {
				t.Fatalf("%+v: %d items, %d bytes in flight", cfg, len(inflight), bytes)
			}
		}
	}
}

// TestSenderClose: no frame of a closed stream follows Close, even in the
// middle of a message; Close is idempotent; Wake and Credit of a closed
// stream do nothing.
func TestSenderClose(t *testing.T) {
	s := newSender(t, flow.SenderConfig{})
	a := open(t, s, "a", &fakeSource{gen: func(int) flow.Message { return dataMsg(sized("a", 5000)) }}, limits(1<<20, 1024, 64*KiB))
	b := open(t, s, "b", &fakeSource{gen: func(int) flow.Message { return dataMsg(sized("b", 5000)) }}, limits(1<<20, 1024, 64*KiB))
	s.Wake(a)
	s.Wake(b)
	for range 5 {
		next(t, s)
	}
	s.Close(a)
	s.Close(a)
	s.Wake(a)
	if err := s.Credit(a, 1); err != nil {
		t.Errorf("Credit of a closed stream = %v", err)
	}
	if s.Streams() != 1 {
		t.Errorf("Streams() = %d, want 1", s.Streams())
	}
	for range 100 {
		it, ok := next(t, s)
		if !ok {
			break
		}
		if it.sub == "a" {
			t.Fatalf("frame of closed stream a after Close")
		}
	}
	s.Close(b)
	if s.Pending() || flow.RingLen(s) != 0 {
		t.Errorf("Pending() = %v, ring %d after closing everything", s.Pending(), flow.RingLen(s))
	}
}

// TestSenderLifecycle: a lifecycle message starts without credit, but only
// after the subscription's earlier data has been scheduled.
func TestSenderLifecycle(t *testing.T) {
	s := newSender(t, flow.SenderConfig{})
	src := &fakeSource{}
	data := sized("d", 1000)
	src.push(dataMsg(data), dataMsg(data), lifecycleMsg(`{"jsonrpc":"2.0","method":"tcp/eof","params":{"offset":0}}`))
	st := open(t, s, "s", src, limits(1024, 1024, 1024)) // one message per window
	s.Wake(st)
	var got []int64
	for {
		it, ok := next(t, s)
		if !ok {
			break
		}
		if it.final {
			got = append(got, it.id)
		}
	}
	// Message 1 leaves the window open (1000 < 1024), so message 2 starts
	// too and shuts it; the lifecycle message starts without credit.
	if !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("messages sent = %v, want [1 2 3]", got)
	}
	if o := st.Window().Outstanding(); o <= 1024 {
		t.Fatalf("Outstanding() = %d, want the lifecycle message to count beyond the window", o)
	}

	// Now with data still waiting for credit: the lifecycle waits too.
	s = newSender(t, flow.SenderConfig{})
	src = &fakeSource{}
	big := sized("d", 1024)
	src.push(dataMsg(big), dataMsg(big), lifecycleMsg(`{"jsonrpc":"2.0","method":"tcp/closed","params":{}}`))
	st = open(t, s, "s", src, limits(1024, 1024, 1024))
	s.Wake(st)
	got = got[:0]
	for {
		it, ok := next(t, s)
		if !ok {
			break
		}
		if it.final {
			got = append(got, it.id)
		}
	}
	if !slices.Equal(got, []int64{1}) {
		t.Fatalf("messages sent before credit = %v, want [1]", got)
	}
	if err := s.Credit(st, 1024); err != nil {
		t.Fatal(err)
	}
	for {
		it, ok := next(t, s)
		if !ok {
			break
		}
		if it.final {
			got = append(got, it.id)
		}
	}
	if !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("messages sent = %v, want [1 2 3]", got)
	}
}

func TestSenderStreamErrors(t *testing.T) {
	tests := []struct {
		name    string
		src     *fakeSource
		send    flow.ReceiveLimits
		wantErr error
	}{
		{"data when not allowed", &fakeSource{cheat: true, queue: []flow.Message{dataMsg(sized("a", 1024)), dataMsg(sized("b", 100))}}, limits(1024, 1024, 1024), flow.ErrSourceContract},
		{"message too large", &fakeSource{queue: []flow.Message{dataMsg(sized("a", 1026))}}, limits(1024, 1024, 1024), flow.ErrMessageTooLarge},
		{"empty message", &fakeSource{queue: []flow.Message{dataMsg("")}}, limits(1024, 1024, 1024), flow.ErrEmptyMessage},
		{"lifecycle too large", &fakeSource{queue: []flow.Message{lifecycleMsg(sized("a", 1026))}}, limits(4096, 1024, 4096), flow.ErrSourceContract},
		{"too many lifecycle", &fakeSource{gen: func(int) flow.Message { return lifecycleMsg(sized("eof", 100)) }}, limits(4096, 1024, 4096), flow.ErrSourceContract},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSender(t, flow.SenderConfig{})
			st := open(t, s, "bad", tt.src, tt.send)
			other := open(t, s, "good", &fakeSource{queue: []flow.Message{dataMsg(sized("g", 100))}}, tt.send)
			s.Wake(st)
			s.Wake(other)
			var serr *flow.StreamError
			var goodDone bool
			for range 100 {
				b, err := s.Next(nil)
				if err != nil {
					if !errors.As(err, &serr) || serr.Stream != st || !errors.Is(err, tt.wantErr) {
						t.Fatalf("Next = %v, want *StreamError for %q wrapping %v", err, "bad", tt.wantErr)
					}
					if !strings.Contains(err.Error(), "bad") {
						t.Errorf("StreamError %q does not name the subscription", err)
					}
					continue
				}
				if b == nil {
					break
				}
				it := classify(t, b)
				s.Written(len(b))
				if it.sub == "bad" && serr != nil {
					t.Fatalf("frame of the failed stream after its StreamError")
				}
				if it.sub == "good" && it.final {
					goodDone = true
				}
			}
			if serr == nil {
				t.Fatalf("no StreamError")
			}
			if !goodDone {
				t.Errorf("the other subscription did not finish")
			}
			if s.Streams() != 1 {
				t.Errorf("Streams() = %d, want 1 (failed stream closed)", s.Streams())
			}
		})
	}
}

// TestSenderMaxLifecycle: a subscription sends SenderConfig.MaxLifecycle
// lifecycle messages (MaxLifecycleMessages by default), and the next one
// its Source returns is a contract violation.
func TestSenderMaxLifecycle(t *testing.T) {
	for _, tt := range []struct {
		max, want int
	}{
		{0, flow.MaxLifecycleMessages},
		{1, 1},
		{3, 3},
		{flow.MaxLifecycleMessages, flow.MaxLifecycleMessages},
	} {
		s := newSender(t, flow.SenderConfig{MaxLifecycle: tt.max})
		src := &fakeSource{gen: func(int) flow.Message { return lifecycleMsg(sized("eof", 100)) }}
		st := open(t, s, "s", src, limits(4096, 1024, 4096))
		s.Wake(st)
		sent := 0
		var err error
		for range 100 {
			var b []byte
			if b, err = s.Next(nil); err != nil || b == nil {
				break
			}
			if it := classify(t, b); it.final {
				sent++
			}
			s.Written(len(b))
		}
		if !errors.Is(err, flow.ErrSourceContract) || !strings.Contains(err.Error(), fmt.Sprintf("more than %d lifecycle", tt.want)) {
			t.Errorf("MaxLifecycle %d: Next = %v, want ErrSourceContract: more than %d lifecycle messages", tt.max, err, tt.want)
		}
		if sent != tt.want {
			t.Errorf("MaxLifecycle %d: %d lifecycle messages sent, want %d", tt.max, sent, tt.want)
		}
	}
}

// crediting takes one item from s and reports whether there was one; a
// frame goes to visit, and the final frame of a message is credited at
// once (so every stream stays ready).
func crediting(t testing.TB, s *flow.Sender, byID map[string]*flow.Stream, visit func(it item, wire int)) bool {
	t.Helper()
	b, err := s.Next(nil)
	if err != nil {
		t.Fatal(err)
	}
	if b == nil {
		return false
	}
	it := classify(t, b)
	s.Written(len(b))
	if it.kind == "frame" {
		st := byID[it.sub]
		if it.final {
			if err := s.Credit(st, st.Window().Sent()); err != nil {
				t.Fatal(err)
			}
		}
		visit(it, len(b))
	}
	return true
}

// TestSchedulerLatencyProperty is the property test of issue 2: with one
// subscription A always ready and another B becoming ready at random
// moments, B's first frame is handed out after at most Quantum + F − 1
// bytes of A's frames, where F is the largest frame (in wire bytes) A
// hands out.
//
// Why: deficits are in wire bytes; a stream's deficit is at most Quantum
// when a turn starts (it is ≤ 0 when the previous one ended). B is woken
// at the back of the ring, right behind A. If A is mid-turn with deficit
// d ≤ Quantum, it hands out frames only while its deficit is positive, so
// at most d − 1 bytes plus the last frame before its turn ends; if A's
// turn had just ended it starts a new one with deficit ≤ Quantum and the
// same argument applies. Then it is B's turn, and a freshly woken B has
// deficit 0 + Quantum > 0, so its first frame goes next. (The transport
// bound only delays when Next is called, not the order.)
func TestSchedulerLatencyProperty(t *testing.T) {
	for seed := uint64(0); seed < 12; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		quantum := int64(1024 + rng.IntN(32*KiB))
		s := newSender(t, flow.SenderConfig{Quantum: quantum})
		genA := func(n int) flow.Message {
			return dataMsg(sized(fmt.Sprint(n), 64+2*int64(rng.IntN(40000))))
		}
		frameA := 1024 + int64(rng.IntN(32*KiB))
		a := open(t, s, "A", &fakeSource{gen: genA}, limits(1<<20, frameA, 128*KiB))
		srcB := &fakeSource{}
		b := open(t, s, "B", srcB, limits(1<<20, 1024+int64(rng.IntN(16*KiB)), 64*KiB))
		byID := map[string]*flow.Stream{"A": a, "B": b}
		s.Wake(a)
		var maxFrameA, sinceWake int64
		waiting := false
		wakes := 0
		for step := 0; step < 3000; step++ {
			if !waiting && srcB.n == 0 && len(srcB.queue) == 0 && rng.IntN(20) == 0 {
				// B becomes ready: a short interactive message.
				srcB.push(dataMsg(sized("b", 64+2*int64(rng.IntN(3000)))))
				s.Wake(b)
				waiting, sinceWake = true, 0
				wakes++
			}
			crediting(t, s, byID, func(it item, wire int) {
				switch it.sub {
				case "A":
					maxFrameA = max(maxFrameA, int64(wire))
					if waiting {
						sinceWake += int64(wire)
					}
				case "B":
					if waiting {
						if bound := quantum + maxFrameA - 1; sinceWake > bound {
							t.Fatalf("seed %d: B waited for %d bytes of A, bound Quantum %d + frame %d − 1 = %d",
								seed, sinceWake, quantum, maxFrameA, bound)
						}
						waiting = false
					}
				}
			})
		}
		if wakes == 0 {
			t.Fatalf("seed %d: B never woke", seed)
		}
	}
}

// TestSchedulerFairnessProperty: with N always-ready subscriptions started
// together, the wire bytes handed out per subscription stay within
// Quantum + F − 1 of each other after every frame (F the largest frame).
//
// Why: every turn adds exactly Quantum to a stream's deficit, and a frame
// is handed out only while the deficit is positive, so after k complete
// turns a stream has sent kQ − deficit bytes with deficit in [1−F, 0]: its
// total is in [kQ, kQ+F−1]. Round robin keeps the completed turns of any
// two streams within one of each other; the stream in its turn has sent
// between kQ and (k+1)Q − 1. So all totals lie in [kQ, (k+1)Q + F − 1].
func TestSchedulerFairnessProperty(t *testing.T) {
	for seed := uint64(0); seed < 8; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		quantum := int64(512 + rng.IntN(32*KiB))
		s := newSender(t, flow.SenderConfig{Quantum: quantum, TransportFrames: 1 + rng.IntN(4)})
		n := 2 + rng.IntN(8)
		byID := map[string]*flow.Stream{}
		sent := map[string]int64{}
		var order []*flow.Stream
		for i := range n {
			id := fmt.Sprint(i)
			frame := 1024 + int64(rng.IntN(32*KiB))
			maxMsg := frame + int64(rng.IntN(64*KiB))
			gen := func(k int) flow.Message {
				// Mixed content so frames differ in wire size.
				unit := []string{"x", "日", "😀", "\x1b", "\""}[(i+k)%5]
				return dataMsg(strings.Repeat(unit, 1+rng.IntN(int(maxMsg/8))))
			}
			st := open(t, s, id, &fakeSource{gen: gen}, limits(1<<20, frame, maxMsg))
			byID[id] = st
			sent[id] = 0
			order = append(order, st)
		}
		for _, st := range order {
			s.Wake(st)
		}
		var maxFrame int64
		for step := 0; step < 2500; step++ {
			crediting(t, s, byID, func(it item, wire int) {
				sent[it.sub] += int64(wire)
				maxFrame = max(maxFrame, int64(wire))
			})
			lo, hi := int64(1<<62), int64(0)
			for _, v := range sent {
				lo, hi = min(lo, v), max(hi, v)
			}
			if bound := quantum + maxFrame - 1; hi-lo > bound {
				t.Fatalf("seed %d step %d: per-stream bytes spread %d > Quantum %d + frame %d − 1 (%v)",
					seed, step, hi-lo, quantum, maxFrame, sent)
			}
		}
	}
}

// TestSenderManyStreams: adding, waking and closing many streams, and draining
// them, costs time linear in the work (no quadratic scans).
func TestSenderManyStreams(t *testing.T) {
	s := newSender(t, flow.SenderConfig{})
	const n = 20000
	streams := make([]*flow.Stream, n)
	for i := range n {
		src := &fakeSource{queue: []flow.Message{dataMsg(sized("m", 100))}}
		streams[i] = open(t, s, fmt.Sprint(i), src, limits(4096, 1024, 4096))
		s.Wake(streams[i])
	}
	for i := 0; i < n; i += 2 {
		s.Close(streams[i])
	}
	if got := flow.RingLen(s); got != n/2 {
		t.Fatalf("ring holds %d, want %d", got, n/2)
	}
	frames := 0
	for {
		it, ok := next(t, s)
		if !ok {
			break
		}
		frames++
		if id := it.sub; (id[len(id)-1]-'0')%2 == 0 {
			t.Fatalf("frame of closed stream %s", id)
		}
	}
	if frames != n/2 || s.Pending() {
		t.Fatalf("drained %d frames, Pending %v; want %d, false", frames, s.Pending(), n/2)
	}
}

// reusingSource builds every text in one buffer that it overwrites on the
// next Pull — the strictest use of the Source contract — and reports each
// text's Size.
type reusingSource struct {
	texts   []string
	buf     []byte
	escaped bool // give each as Message.Escaped, its size left to the Sender
}

func (s *reusingSource) Pull(dataAllowed bool, _ int64) (flow.Message, bool) {
	for i := range s.buf {
		s.buf[i] = '#' // the previous text is gone from here on
	}
	if !dataAllowed || len(s.texts) == 0 {
		return flow.Message{}, false
	}
	if s.escaped {
		s.buf = flow.AppendEscaped(s.buf[:0], s.texts[0])
		s.texts = s.texts[1:]
		return flow.Message{Escaped: unsafe.String(unsafe.SliceData(s.buf), len(s.buf)), Class: flow.Data}, true
	}
	s.buf = append(s.buf[:0], s.texts[0]...)
	s.texts = s.texts[1:]
	text := unsafe.String(unsafe.SliceData(s.buf), len(s.buf))
	return flow.Message{Text: text, Class: flow.Data, Size: flow.UTF16Len(text)}, true
}

// TestSenderSourceReusesText: the Sender is done with a text when it pulls
// the next message, so a Source may reuse the memory (the terminal viewer
// does); every message, cut into many frames, arrives intact.
func TestSenderSourceReusesText(t *testing.T) {
	var want []string
	for i := range 20 {
		want = append(want, sized(fmt.Sprint(i), int64(1500+i*298)))
	}
	if got := drainMessages(t, &reusingSource{texts: slices.Clone(want)}); !slices.Equal(got, want) {
		t.Fatalf("got %d messages, want %d; first difference in %v", len(got), len(want), firstDiff(got, want))
	}
}

// TestSenderEscapedMessages: messages a Source gives as their escaped
// bodies (Message.Escaped, as the terminal viewer does), cut into many
// frames, arrive as their texts; on a stream with a journal they are a
// breach of the Source contract.
func TestSenderEscapedMessages(t *testing.T) {
	var want []string
	for i := range 20 {
		want = append(want, notification("terminal/output", strings.Repeat(fmt.Sprintf("line %d \"quoted\" C:\\x\x1b[0m\r\n", i), 10+i*4)))
	}
	if got := drainMessages(t, &reusingSource{texts: slices.Clone(want), escaped: true}); !slices.Equal(got, want) {
		t.Fatalf("got %d messages, want %d; first difference in %v", len(got), len(want), firstDiff(got, want))
	}

	s := newSender(t, flow.SenderConfig{})
	st, err := s.Open(flow.StreamConfig{
		Channel: "ahp-tcp:/t", SubscriptionID: "j", Source: &reusingSource{texts: want[:1], escaped: true},
		Send: limits(64*KiB, 16*KiB, 64*KiB), Receive: limits(64*KiB, 16*KiB, 64*KiB),
		Journal: flow.NewJournal(),
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Wake(st)
	if _, err := s.Next(nil); !errors.Is(err, flow.ErrSourceContract) {
		t.Fatalf("an escaped message on a journalled stream: Next = %v, want ErrSourceContract", err)
	}
}

// drainMessages sends what src gives on one stream (window 1 MiB, frames
// of 1024 bytes) and returns the messages the frames carry.
func drainMessages(t *testing.T, src flow.Source) []string {
	t.Helper()
	s := newSender(t, flow.SenderConfig{})
	st := open(t, s, "1", src, limits(1024*KiB, 1024, 8*KiB))
	s.Wake(st)
	var got []string
	var cur strings.Builder
	for {
		it, ok := next(t, s)
		if !ok {
			break
		}
		if it.kind != "frame" {
			continue
		}
		cur.WriteString(it.data)
		if it.final {
			got = append(got, cur.String())
			cur.Reset()
		}
	}
	return got
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("message %d: %.60q vs %.60q", i, a[i], b[i])
		}
	}
	return "length"
}

// fillSource always has data, and fills whatever size the Sender asks for.
type fillSource struct{ asked []int64 }

func (s *fillSource) Pull(dataAllowed bool, maxMessageBytes int64) (flow.Message, bool) {
	if !dataAllowed {
		return flow.Message{}, false
	}
	s.asked = append(s.asked, maxMessageBytes)
	return dataMsg(sized(fmt.Sprint(len(s.asked)), maxMessageBytes)), true
}

// TestSenderPipelinesSmallWindow: with a window smaller than the largest
// message, the Sender asks for quarter-window messages, so several are in
// flight before credit is needed and the first one's credit reopens the
// window: the stream does not idle for a credit round trip per message.
func TestSenderPipelinesSmallWindow(t *testing.T) {
	s := newSender(t, flow.SenderConfig{})
	src := &fillSource{}
	st := open(t, s, "s1", src, limits(256*KiB, 64*KiB, 1024*KiB))
	s.Wake(st)
	messages := 0
	for {
		it, ok := next(t, s)
		if !ok {
			break
		}
		if it.kind == "frame" && it.final {
			messages++
		}
	}
	for _, n := range src.asked {
		if n != 64*KiB {
			t.Fatalf("asked for a %d-byte message; want a quarter of the 256 KiB window", n)
		}
	}
	if messages != 4 {
		t.Fatalf("%d messages sent before the window closed, want 4", messages)
	}
	if err := s.Credit(st, 64*KiB); err != nil {
		t.Fatal(err)
	}
	s.Wake(st)
	if it, ok := next(t, s); !ok || it.kind != "frame" || it.id != 5 {
		t.Fatalf("after the first message's credit: %+v, %v; want message 5 to start", it, ok)
	}
}

// TestSenderPullSize: the size asked for is the receiver's maximum message
// when the window is large, and never below MinPullSize unless the
// maximum message is smaller.
func TestSenderPullSize(t *testing.T) {
	for _, tt := range []struct{ window, message, want int64 }{
		{8 << 20, 1 << 20, 1 << 20},
		{1 << 20, 1 << 20, 256 << 10},
		{16 << 10, 64 << 10, flow.MinPullSize},
		{16 << 10, 2 << 10, 2 << 10},
	} {
		s := newSender(t, flow.SenderConfig{})
		src := &fillSource{}
		s.Wake(open(t, s, "s1", src, limits(tt.window, min(tt.message, 16*KiB), tt.message)))
		next(t, s)
		if len(src.asked) == 0 || src.asked[0] != tt.want {
			t.Errorf("window %d, message %d: asked %v, want %d", tt.window, tt.message, src.asked, tt.want)
		}
	}
}

// TestOpenResumesLentReceiver: a Receiver kept across connections (a
// lease) holding part of a message starts, when opened again, at the
// message after its accepted one, with nothing buffered: the client
// resends the whole message (PROTOCOL.md §8).
func TestOpenResumesLentReceiver(t *testing.T) {
	recv := flow.NewReceiver(limits(1<<20, 1024, 1<<20))
	fs := frames(t, 1, sized("m", 3000), 1024)
	if _, _, err := deliver(t, recv, fs[:1]); err != nil {
		t.Fatal(err)
	}
	if recv.Buffered() == 0 {
		t.Fatal("the first frame of three left nothing buffered")
	}
	s := newSender(t, flow.SenderConfig{})
	if _, err := s.Open(flow.StreamConfig{Channel: "c", SubscriptionID: "s2", Source: &fakeSource{}, Send: limits(4096, 1024, 4096), Receiver: recv}); err != nil {
		t.Fatal(err)
	}
	if n := recv.Buffered(); n != 0 {
		t.Fatalf("a lent Receiver opened with %d bytes of the old connection's partial message", n)
	}
	// The whole message again, from its first frame.
	if msg, _, err := deliver(t, recv, fs); err != nil || msg != sized("m", 3000) {
		t.Fatalf("resending the message after Open: %d bytes, %v", len(msg), err)
	}
}

// finishingSource is a fakeSource that records Finished calls and checks
// that each comes after the last frame of the message it pulled last.
type finishingSource struct {
	fakeSource
	finished []bool // the more argument of each call
	open     bool   // a message was pulled and not finished
}

func (s *finishingSource) Pull(dataAllowed bool, max int64) (flow.Message, bool) {
	m, ok := s.fakeSource.Pull(dataAllowed, max)
	if ok {
		s.open = true
	}
	return m, ok
}

func (s *finishingSource) Finished(more bool) {
	if !s.open {
		panic("Finished without a message pulled")
	}
	s.open = false
	s.finished = append(s.finished, more)
}

// TestFinisherTold: a Source that implements Finisher hears, right after
// each message's last frame, that the Sender is done with its text, and
// whether the window lets another message start — a viewer that stopped
// crediting is told so and may give its message memory back, though it
// is never pulled again.
func TestFinisherTold(t *testing.T) {
	s := newSender(t, flow.SenderConfig{})
	src := &finishingSource{}
	// A 3-frame message, then one that fills the window.
	src.push(dataMsg(sized("a", 40*KiB)), dataMsg(sized("b", 40*KiB)), dataMsg(sized("c", 4*KiB)))
	st := open(t, s, "s1", src, limits(64*KiB, 16*KiB, 64*KiB))
	s.Wake(st)
	var finals int
	for {
		it, ok := next(t, s)
		if !ok {
			break
		}
		if it.final {
			finals++
			if len(src.finished) != finals {
				t.Fatalf("after final frame %d: %d Finished calls", finals, len(src.finished))
			}
		} else if src.open == false {
			t.Fatal("Finished before the message's last frame")
		}
	}
	if want := []bool{true, false}; !slices.Equal(src.finished, want) {
		t.Fatalf("Finished(more) calls %v, want %v (the window is full after the second)", src.finished, want)
	}
}
