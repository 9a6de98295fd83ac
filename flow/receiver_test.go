package flow_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ahp-dev/ahpd/flow"
)

// wireFrame is one encoded frame and its size.
type wireFrame struct {
	text []byte
	size int64
}

// frames fragments msg as message id under maxFrame.
func frames(t testing.TB, id int64, msg string, maxFrame int64) []wireFrame {
	t.Helper()
	var f flow.Fragmenter
	if err := f.Reset("c", "s", id, msg, maxFrame); err != nil {
		t.Fatal(err)
	}
	var out []wireFrame
	for !f.Done() {
		b, _, _ := f.Next(nil)
		out = append(out, wireFrame{b, flow.UTF16Len(string(b))})
	}
	return out
}

// deliver feeds frames to r and returns the completed message (if the last
// frame completes one) or the first error.
func deliver(t testing.TB, r *flow.Receiver, fs []wireFrame) (string, flow.Position, error) {
	t.Helper()
	var msg string
	var end flow.Position
	for i, fr := range fs {
		var f flow.Frame
		if err := flow.DecodeFrame(fr.text, &f); err != nil {
			t.Fatalf("DecodeFrame: %v", err)
		}
		m, e, err := r.Frame(fr.size, &f)
		if err != nil {
			return "", flow.Position{}, err
		}
		if m != nil {
			if i != len(fs)-1 {
				t.Fatalf("message completed at frame %d of %d", i, len(fs))
			}
			msg, end = string(m), e
		}
	}
	return msg, end, nil
}

func TestReceiverReassembles(t *testing.T) {
	r := flow.NewReceiver(limits(64*KiB, 1024, 16*KiB))
	var pos int64
	for id, msg := range []string{
		sized("a", 100),
		strings.Repeat("日本😀\x1b\"", 500),
		sized("c", 16*KiB),
	} {
		got, end, err := deliver(t, r, frames(t, int64(id+1), msg, 1024))
		pos += flow.UTF16Len(msg)
		if err != nil || got != msg || end != (flow.Position{MessageID: int64(id + 1), Position: pos}) {
			t.Fatalf("message %d: got %d bytes, end %+v, err %v; want %d bytes, end {%d %d}", id+1, len(got), end, err, len(msg), id+1, pos)
		}
		if r.Accepted() != end {
			t.Fatalf("Accepted() = %+v, want %+v", r.Accepted(), end)
		}
	}
}

func TestReceiverViolations(t *testing.T) {
	l := limits(4096, 1024, 2048)
	small := sized("x", 100)
	tests := []struct {
		name    string
		run     func(t *testing.T, r *flow.Receiver) error
		wantErr error
		code    string
	}{
		{"frame too large", func(t *testing.T, r *flow.Receiver) error {
			fs := frames(t, 1, small, 1024)
			fs[0].size = 1025
			_, _, err := deliver(t, r, fs)
			return err
		}, flow.ErrFrameTooLarge, flow.CodeFrameTooLarge},
		{"frame too large by escaping", func(t *testing.T, r *flow.Receiver) error {
			// A sender that trusted len(data) instead of the escaped size.
			text := []byte(frameWithData(strings.Repeat(`\u001b`, 100)))
			var fr flow.Frame
			if err := flow.DecodeFrame(text, &fr); err != nil {
				t.Fatal(err)
			}
			_, _, err := r.Frame(flow.UTF16Len(string(text)), &fr)
			return err
		}, flow.ErrFrameTooLarge, flow.CodeFrameTooLarge},
		{"message too large", func(t *testing.T, r *flow.Receiver) error {
			_, _, err := deliver(t, r, frames(t, 1, sized("x", 2050), 1024))
			return err
		}, flow.ErrMessageTooLarge, flow.CodeMessageTooLarge},
		{"first id not 1", func(t *testing.T, r *flow.Receiver) error {
			_, _, err := deliver(t, r, frames(t, 2, small, 1024))
			return err
		}, flow.ErrMessageID, flow.CodeProtocolError},
		{"id gap", func(t *testing.T, r *flow.Receiver) error {
			if _, _, err := deliver(t, r, frames(t, 1, small, 1024)); err != nil {
				t.Fatal(err)
			}
			_, _, err := deliver(t, r, frames(t, 3, small, 1024))
			return err
		}, flow.ErrMessageID, flow.CodeProtocolError},
		{"id repeated", func(t *testing.T, r *flow.Receiver) error {
			if _, _, err := deliver(t, r, frames(t, 1, small, 1024)); err != nil {
				t.Fatal(err)
			}
			_, _, err := deliver(t, r, frames(t, 1, small, 1024))
			return err
		}, flow.ErrMessageID, flow.CodeProtocolError},
		{"interleaved messages", func(t *testing.T, r *flow.Receiver) error {
			a := frames(t, 1, sized("a", 2000), 1024)
			b := frames(t, 2, small, 1024)
			_, _, err := deliver(t, r, append(a[:1:1], b...))
			return err
		}, flow.ErrMessageID, flow.CodeProtocolError},
		{"empty message", func(t *testing.T, r *flow.Receiver) error {
			_, _, err := deliver(t, r, frames(t, 1, "", 1024))
			return err
		}, flow.ErrEmptyMessage, flow.CodeProtocolError},
		{"lone surrogate", func(t *testing.T, r *flow.Receiver) error {
			text := []byte(frameWithData(`\ud83d`))
			var fr flow.Frame
			if err := flow.DecodeFrame(text, &fr); err != nil {
				t.Fatal(err)
			}
			_, _, err := r.Frame(flow.UTF16Len(string(text)), &fr)
			return err
		}, flow.ErrSurrogate, flow.CodeProtocolError},
		{"window exceeded", func(t *testing.T, r *flow.Receiver) error {
			// 2 × 2048 = 4096 received, nothing credited: the window
			// is shut and a third data message may not start (only a
			// lifecycle-sized one may, see below).
			for id := int64(1); id <= 2; id++ {
				if _, _, err := deliver(t, r, frames(t, id, sized("x", 2048), 1024)); err != nil {
					t.Fatal(err)
				}
			}
			_, _, err := deliver(t, r, frames(t, 3, sized("x", 2048), 1024))
			return err
		}, flow.ErrWindowExceeded, flow.CodeProtocolError},
		{"finishing beyond the window is fine", func(t *testing.T, r *flow.Receiver) error {
			// 4094 received: one more message may start and finish at 6142.
			if _, _, err := deliver(t, r, frames(t, 1, sized("x", 2046), 1024)); err != nil {
				t.Fatal(err)
			}
			if _, _, err := deliver(t, r, frames(t, 2, sized("x", 2048), 1024)); err != nil {
				t.Fatal(err)
			}
			if _, _, err := deliver(t, r, frames(t, 3, sized("x", 2048), 1024)); err != nil {
				t.Fatal(err)
			}
			_, _, err := deliver(t, r, frames(t, 4, sized("x", 2048), 1024))
			return err
		}, flow.ErrWindowExceeded, flow.CodeProtocolError},
		{"lifecycle beyond the window", func(t *testing.T, r *flow.Receiver) error {
			for id := int64(1); id <= 2; id++ {
				if _, _, err := deliver(t, r, frames(t, id, sized("x", 2048), 1024)); err != nil {
					t.Fatal(err)
				}
			}
			// Up to MaxLifecycleMessages small messages start without
			// credit (PROTOCOL.md §4 lifecycle class).
			id := int64(3)
			for ; id < 3+flow.MaxLifecycleMessages; id++ {
				if _, _, err := deliver(t, r, frames(t, id, sized("eof", flow.MaxLifecycleBytes), 1024)); err != nil {
					t.Fatalf("lifecycle message %d: %v", id, err)
				}
			}
			_, _, err := deliver(t, r, frames(t, id, sized("eof", 100), 1024))
			return err
		}, flow.ErrWindowExceeded, flow.CodeProtocolError},
		{"large message beyond the window", func(t *testing.T, r *flow.Receiver) error {
			for id := int64(1); id <= 2; id++ {
				if _, _, err := deliver(t, r, frames(t, id, sized("x", 2048), 1024)); err != nil {
					t.Fatal(err)
				}
			}
			_, _, err := deliver(t, r, frames(t, 3, sized("x", flow.MaxLifecycleBytes+2), 1024))
			return err
		}, flow.ErrWindowExceeded, flow.CodeProtocolError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := flow.NewReceiver(l)
			err := tt.run(t, r)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			if code := flow.ResetCode(err); code != tt.code {
				t.Errorf("ResetCode(%v) = %q, want %q", err, code, tt.code)
			}
		})
	}
}

func TestReceiverRelease(t *testing.T) {
	// Window 4096: the batching threshold is 1024.
	r := flow.NewReceiver(limits(4096, 1024, 4096))
	var ends []flow.Position
	for id := int64(1); id <= 4; id++ {
		_, end, err := deliver(t, r, frames(t, id, sized("m", 400), 1024))
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, end)
	}
	steps := []struct {
		release  flow.Position
		consumed int64
		send     bool
		wantErr  error
	}{
		{ends[0], 0, false, nil}, // 400 pending < 1024, 1200 unreleased
		{ends[0], 0, false, nil}, // same again: harmless
		{ends[1], 0, false, nil}, // 800
		{ends[0], 0, false, flow.ErrReleaseOrder},
		{ends[2], 1200, true, nil}, // 1200 ≥ 1024
		{ends[3], 1600, true, nil}, // 400 < 1024 but everything received is released
		{flow.Position{MessageID: 5, Position: 2000}, 0, false, flow.ErrReleaseOrder},
		{flow.Position{MessageID: 4, Position: 1500}, 0, false, flow.ErrReleaseOrder},
	}
	for i, s := range steps {
		consumed, send, err := r.Release(s.release)
		if s.wantErr != nil {
			if !errors.Is(err, s.wantErr) {
				t.Errorf("step %d: Release(%+v) = %v, want %v", i, s.release, err, s.wantErr)
			}
			continue
		}
		if err != nil || send != s.send || (send && consumed != s.consumed) {
			t.Errorf("step %d: Release(%+v) = %d, %v, %v; want %d, %v", i, s.release, consumed, send, err, s.consumed, s.send)
		}
	}
	if got := r.Announced(); got != 1600 {
		t.Errorf("Announced() = %d, want 1600", got)
	}
	// Flush when released catches up with received, but not while a
	// message is partly received (the sender is finishing it and needs no
	// credit to do so).
	fs := frames(t, 5, sized("p", 2000), 1024)
	if _, _, err := deliver(t, r, fs[:1]); err != nil {
		t.Fatal(err)
	}
	if _, send, err := r.Release(ends[3]); send || err != nil {
		t.Errorf("Release at the accepted position with a partial message: send %v, %v; want false", send, err)
	}
	_, end, err := deliver(t, r, fs[1:])
	if err != nil {
		t.Fatal(err)
	}
	if consumed, send, err := r.Release(end); !send || consumed != end.Position || err != nil {
		t.Errorf("Release(%+v) = %d, %v, %v; want %d, true", end, consumed, send, err, end.Position)
	}
}

// TestReceiverReleaseBatched: a receiver that keeps up announces with
// ReleaseBatched only once a quarter window is unannounced, not after
// each message; the sender it leaves short still has room to start a
// message (sent − consumed < window, §5); and Release then flushes what
// is pending, as for a lifecycle message.
func TestReceiverReleaseBatched(t *testing.T) {
	// Window 4096: the batching threshold is 1024; messages of 400.
	r := flow.NewReceiver(limits(4096, 1024, 4096))
	w := flow.NewSendWindow(limits(4096, 1024, 4096))
	var announced []int64
	for id := int64(1); id <= 6; id++ {
		if !w.MayStart() {
			t.Fatalf("message %d: the sender may not start with %d outstanding", id, w.Outstanding())
		}
		_, end, err := deliver(t, r, frames(t, id, sized("m", 400), 1024))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(end.Position-w.Sent(), flow.Data); err != nil {
			t.Fatal(err)
		}
		w.Reserve(end.Position - w.Sent())
		w.Finish()
		consumed, send, err := r.ReleaseBatched(end) // everything received is released
		if err != nil {
			t.Fatal(err)
		}
		if send {
			announced = append(announced, consumed)
			if _, err := w.Credit(consumed); err != nil {
				t.Fatal(err)
			}
		}
	}
	// 400, 800: nothing; 1200: announced; 1600, 2000: nothing; 2400: announced.
	if want := []int64{1200, 2400}; !slices.Equal(announced, want) {
		t.Fatalf("announced %v after six messages of 400, want %v", announced, want)
	}
	_, end, err := deliver(t, r, frames(t, 7, sized("x", 100), 1024))
	if err != nil {
		t.Fatal(err)
	}
	if _, send, err := r.ReleaseBatched(end); send || err != nil {
		t.Fatalf("ReleaseBatched of 100 more: send %v, %v; want false", send, err)
	}
	if consumed, send, err := r.Release(end); !send || consumed != end.Position || err != nil {
		t.Fatalf("Release after it = %d, %v, %v; want %d, true", consumed, send, err, end.Position)
	}
}

// TestReceiverReleaseConsistency: a released position whose id and position
// disagree with Accepted/Released is refused.
func TestReceiverReleaseConsistency(t *testing.T) {
	r := flow.NewReceiver(limits(4096, 1024, 4096))
	_, end, err := deliver(t, r, frames(t, 1, sized("m", 400), 1024))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []flow.Position{
		{MessageID: 1, Position: 300},
		{MessageID: 0, Position: 400},
		{MessageID: 0, Position: 200},
	} {
		if _, _, err := r.Release(p); !errors.Is(err, flow.ErrReleaseOrder) {
			t.Errorf("Release(%+v) with accepted %+v = %v, want ErrReleaseOrder", p, end, err)
		}
	}
	if r.Released() != (flow.Position{}) {
		t.Errorf("Released() = %+v after refused releases, want zero", r.Released())
	}
}

func TestReceiverDiscardAndResume(t *testing.T) {
	l := limits(4096, 1024, 4096)
	r := flow.NewReceiver(l)
	var ends []flow.Position
	for id := int64(1); id <= 3; id++ {
		_, end, err := deliver(t, r, frames(t, id, sized("m", 1000), 1024))
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, end)
	}
	if _, _, err := r.Release(ends[0]); err != nil {
		t.Fatal(err)
	}
	// Message 4 arrives partly, then the connection drops.
	fs := frames(t, 4, sized("m", 2000), 1024)
	if _, _, err := deliver(t, r, fs[:1]); err != nil {
		t.Fatal(err)
	}
	r.Resume()
	if r.Accepted() != ends[2] || r.Released() != ends[0] || r.Announced() != ends[0].Position {
		t.Fatalf("after Resume: accepted %+v released %+v announced %d; want %+v %+v %d",
			r.Accepted(), r.Released(), r.Announced(), ends[2], ends[0], ends[0].Position)
	}
	if got := flow.ReceiverReceived(r); got != ends[2].Position {
		t.Fatalf("received after Resume = %d, want %d", got, ends[2].Position)
	}
	// The peer resends message 4 whole.
	msg, end, err := deliver(t, r, fs)
	if err != nil || msg != sized("m", 2000) || end.MessageID != 4 || end.Position != ends[2].Position+2000 {
		t.Fatalf("resent message 4: %d bytes, %+v, %v", len(msg), end, err)
	}
	// DiscardPartial alone: the partial message 5 is dropped, and message
	// 5 is expected again, whole.
	fs5 := frames(t, 5, sized("m", 3000), 1024)
	if _, _, err := deliver(t, r, fs5[:2]); err != nil {
		t.Fatal(err)
	}
	r.DiscardPartial()
	if got := flow.ReceiverReceived(r); got != end.Position {
		t.Fatalf("received after DiscardPartial = %d, want %d", got, end.Position)
	}
	msg, end5, err := deliver(t, r, fs5)
	if err != nil || msg != sized("m", 3000) || end5.Position != end.Position+3000 {
		t.Fatalf("message 5 after DiscardPartial: %d bytes, %+v, %v", len(msg), end5, err)
	}
	r2 := flow.NewReceiver(l)
	if _, _, err := deliver(t, r2, fs5[:1]); !errors.Is(err, flow.ErrMessageID) {
		t.Fatalf("a fresh receiver given message 5 = %v, want ErrMessageID", err)
	}
}

// TestReceiverMemoryBound: the reassembly buffer never holds more than
// maximumMessageBytes plus one frame (in UTF-8, 1.5× the UTF-16 size at
// most), whatever the peer sends.
func TestReceiverMemoryBound(t *testing.T) {
	for _, l := range []flow.ReceiveLimits{limits(4096, 1024, 2048), limits(64*KiB, 4096, 16*KiB)} {
		r := flow.NewReceiver(l)
		msg := strings.Repeat("日", int(l.MaximumMessageBytes)) // 3× too large in UTF-16 bytes
		var err error
		for _, fr := range frames(t, 1, msg, l.MaximumFrameBytes) {
			var f flow.Frame
			if e := flow.DecodeFrame(fr.text, &f); e != nil {
				t.Fatal(e)
			}
			if _, _, err = r.Frame(fr.size, &f); err != nil {
				break
			}
		}
		if !errors.Is(err, flow.ErrMessageTooLarge) {
			t.Fatalf("%+v: %v, want ErrMessageTooLarge", l, err)
		}
		if c, bound := flow.ReceiverBufCap(r), receiverBufBound(l); c > bound {
			t.Errorf("%+v: buffer capacity %d > bound %d", l, c, bound)
		}
	}
}

// receiverBufBound is the reassembly buffer's capacity bound: one message
// plus one frame, 1.5 UTF-8 bytes per UTF-16 byte, doubled for append's
// growth.
func receiverBufBound(l flow.ReceiveLimits) int {
	return int(2 * 3 * (l.MaximumMessageBytes + l.MaximumFrameBytes) / 2)
}

func ExampleReceiver() {
	r := flow.NewReceiver(flow.ReceiveLimits{WindowBytes: 4096, MaximumFrameBytes: 1024, MaximumMessageBytes: 4096})
	var frag flow.Fragmenter
	_ = frag.Reset("ahp-terminal:/t", "s1", 1, `{"jsonrpc":"2.0","method":"terminal/output","params":{"data":"hi"}}`, 1024)
	text, _, _ := frag.Next(nil)
	var f flow.Frame
	_ = flow.DecodeFrame(text, &f)
	msg, end, _ := r.Frame(flow.UTF16Len(string(text)), &f)
	consumed, send, _ := r.Release(end)
	fmt.Println(string(msg))
	fmt.Println(consumed, send)
	// Output:
	// {"jsonrpc":"2.0","method":"terminal/output","params":{"data":"hi"}}
	// 134 true
}

// TestReceiverLendsBuffer: two receivers reassembling in turn in one lent
// buffer (the connection's, TakeBuffer/UseBuffer) each get their messages
// whole; a receiver with an incomplete message neither gives its buffer
// up nor takes another.
func TestReceiverLendsBuffer(t *testing.T) {
	l := limits(64*1024, 1024, 16*1024)
	a, b := flow.NewReceiver(l), flow.NewReceiver(l)
	var lent []byte
	for i := range 6 {
		r := a
		if i%2 == 1 {
			r = b
		}
		if lent != nil && r.UseBuffer(lent) {
			lent = nil
		}
		want := sized(fmt.Sprintf("msg%d", i), int64(3000+i*500))
		fs := frames(t, int64(i/2+1), want, 1024)
		got, _, err := deliver(t, r, fs)
		if err != nil || got != want {
			t.Fatalf("message %d: %v, whole %v", i, err, got == want)
		}
		if lent = r.TakeBuffer(); cap(lent) == 0 {
			t.Fatalf("message %d: TakeBuffer gave no memory", i)
		}
		if i > 0 && r.Buffered() != 0 {
			t.Fatalf("message %d: the receiver still holds %d bytes after TakeBuffer", i, r.Buffered())
		}
	}
	// Mid-message: the buffer stays with its message.
	fs := frames(t, 4, sized("partial", 3000), 1024)
	if _, _, err := deliver(t, a, fs[:1]); err != nil {
		t.Fatal(err)
	}
	if b := a.TakeBuffer(); b != nil {
		t.Fatal("TakeBuffer gave up the memory of an incomplete message")
	}
	if a.UseBuffer(make([]byte, 0, 8192)) {
		t.Fatal("UseBuffer took memory while a message is incomplete")
	}
	if got, _, err := deliver(t, a, fs[1:]); err != nil || got != sized("partial", 3000) {
		t.Fatalf("the partial message did not complete whole: %v", err)
	}
}
