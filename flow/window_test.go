package flow_test

import (
	"errors"
	"testing"

	"github.com/ahp-dev/ahpd/flow"
)

const KiB = 1 << 10

// send starts a data message of size bytes and reserves it in frames of at
// most frame bytes.
func send(t *testing.T, w *flow.SendWindow, size, frame int64, class flow.Class) {
	t.Helper()
	if err := w.Start(size, class); err != nil {
		t.Fatalf("Start(%d) = %v at outstanding %d", size, err, w.Outstanding())
	}
	for left := size; left > 0; {
		n := min(left, frame)
		w.Reserve(n)
		left -= n
	}
	w.Finish()
}

// TestSendWindowSeedExample is the worked example of the seeds
// (PROTOCOL.md §5): 256 KiB window, 240 KiB outstanding; a 40 KiB message
// may start and finish beyond the window (280 KiB); then nothing starts
// until credit.
func TestSendWindowSeedExample(t *testing.T) {
	w := flow.NewSendWindow(limits(256*KiB, 16*KiB, 64*KiB))
	for i := 0; i < 15; i++ {
		send(t, w, 16*KiB, 16*KiB, flow.Data)
	}
	if got := w.Outstanding(); got != 240*KiB {
		t.Fatalf("Outstanding() = %d, want %d", got, 240*KiB)
	}
	if !w.MayStart() {
		t.Fatalf("MayStart() at 240 KiB = false, want true")
	}
	send(t, w, 40*KiB, 16*KiB, flow.Data)
	if got := w.Outstanding(); got != 280*KiB {
		t.Fatalf("Outstanding() = %d, want %d", got, 280*KiB)
	}
	if w.MayStart() {
		t.Fatalf("MayStart() at 280 KiB = true, want false")
	}
	if err := w.Start(2, flow.Data); !errors.Is(err, flow.ErrSourceContract) {
		t.Fatalf("Start(data) with the window shut = %v, want ErrSourceContract", err)
	}
	// Credit up to 24 KiB outstanding is still ≥ window? 280−16 = 264 ≥ 256.
	if adv, err := w.Credit(16 * KiB); !adv || err != nil {
		t.Fatalf("Credit(16 KiB) = %v, %v; want true, nil", adv, err)
	}
	if w.MayStart() {
		t.Fatalf("MayStart() at 264 KiB = true, want false")
	}
	if adv, err := w.Credit(32 * KiB); !adv || err != nil {
		t.Fatalf("Credit(32 KiB) = %v, %v", adv, err)
	}
	if !w.MayStart() {
		t.Fatalf("MayStart() at 248 KiB = false, want true")
	}
}

// TestSendWindowMinimal: window = minimum frame; exactly one message, then
// wait (lessons b.5, h2spec 6.9.1).
func TestSendWindowMinimal(t *testing.T) {
	w := flow.NewSendWindow(limits(1024, 1024, 4096))
	if !w.MayStart() {
		t.Fatal("MayStart() = false on a fresh window")
	}
	send(t, w, 2, 2, flow.Data)
	// 2 < 1024: another may start.
	for w.MayStart() {
		send(t, w, 2, 2, flow.Data)
	}
	if got := w.Outstanding(); got != 1024 {
		t.Fatalf("Outstanding() = %d after filling with 2-byte messages, want 1024", got)
	}
	w2 := flow.NewSendWindow(limits(1024, 1024, 4096))
	send(t, w2, 4096, 1000, flow.Data)
	if w2.MayStart() {
		t.Fatalf("MayStart() after one 4096-byte message in a 1024 window = true, want false")
	}
	if adv, err := w2.Credit(4096); !adv || err != nil || !w2.MayStart() {
		t.Fatalf("Credit(4096) = %v, %v; MayStart %v", adv, err, w2.MayStart())
	}
}

func TestSendWindowCredit(t *testing.T) {
	newW := func() *flow.SendWindow {
		w := flow.NewSendWindow(limits(64*KiB, 1024, 8*KiB))
		send(t, w, 100, 1024, flow.Data)  // ends at 100
		send(t, w, 200, 1024, flow.Data)  // 300
		send(t, w, 2000, 1024, flow.Data) // 2300
		if err := w.Start(1000, flow.Data); err != nil {
			t.Fatal(err)
		}
		w.Reserve(500) // active, sent 2800, ends at 3300
		return w
	}
	tests := []struct {
		credits      []int64
		wantErr      error
		wantConsumed int64
		wantAdvanced bool
	}{
		{[]int64{100}, nil, 100, true},
		{[]int64{300}, nil, 300, true},
		{[]int64{2300}, nil, 2300, true},
		{[]int64{300, 300}, nil, 300, false},
		{[]int64{300, 100}, nil, 300, false},
		{[]int64{300, 0}, nil, 300, false},
		{[]int64{300, -5}, nil, 300, false},
		{[]int64{0}, nil, 0, false},
		{[]int64{2800}, flow.ErrCreditOffBoundary, 0, false}, // sent, but inside the active message
		{[]int64{2801}, flow.ErrCreditBeyondSent, 0, false},
		{[]int64{3300}, flow.ErrCreditBeyondSent, 0, false}, // end of the active message, not yet sent
		{[]int64{flow.MaxSafeInteger}, flow.ErrCreditBeyondSent, 0, false},
		{[]int64{99}, flow.ErrCreditOffBoundary, 0, false},
		{[]int64{101}, flow.ErrCreditOffBoundary, 0, false},
		{[]int64{300, 301}, flow.ErrCreditOffBoundary, 300, false},
		{[]int64{100, 2300, 2299}, nil, 2300, false},
	}
	for _, tt := range tests {
		w := newW()
		var adv bool
		var err error
		for _, c := range tt.credits {
			before := snapshot(w)
			adv, err = w.Credit(c)
			if err != nil && snapshot(w) != before {
				t.Errorf("Credit(%d) = %v changed the window: %+v → %+v", c, err, before, snapshot(w))
			}
		}
		if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
			t.Errorf("Credit(%v) = %v, want %v", tt.credits, err, tt.wantErr)
		}
		if err == nil && adv != tt.wantAdvanced {
			t.Errorf("Credit(%v) advanced = %v, want %v", tt.credits, adv, tt.wantAdvanced)
		}
		if got := w.Consumed(); got != tt.wantConsumed {
			t.Errorf("Credit(%v): Consumed() = %d, want %d", tt.credits, got, tt.wantConsumed)
		}
		if errors.Is(err, flow.ErrCreditBeyondSent) || errors.Is(err, flow.ErrCreditOffBoundary) {
			if code := flow.ResetCode(err); code != flow.CodeInvalidCredit {
				t.Errorf("ResetCode(%v) = %q, want %q", err, code, flow.CodeInvalidCredit)
			}
		}
	}
}

type windowState struct {
	sent, consumed int64
	active, may    bool
	ledger         int
}

func snapshot(w *flow.SendWindow) windowState {
	return windowState{w.Sent(), w.Consumed(), w.Active(), w.MayStart(), flow.LedgerLen(w)}
}

func TestSendWindowStart(t *testing.T) {
	l := limits(4096, 1024, 2048)
	tests := []struct {
		size    int64
		class   flow.Class
		wantErr error
	}{
		{2, flow.Data, nil},
		{2048, flow.Data, nil},
		{0, flow.Data, flow.ErrEmptyMessage},
		{-2, flow.Data, flow.ErrEmptyMessage},
		{2050, flow.Data, flow.ErrMessageTooLarge},
		{1024, flow.Lifecycle, nil},
		{1026, flow.Lifecycle, flow.ErrSourceContract},
	}
	for _, tt := range tests {
		w := flow.NewSendWindow(l)
		before := snapshot(w)
		err := w.Start(tt.size, tt.class)
		if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
			t.Errorf("Start(%d, %d) = %v, want %v", tt.size, tt.class, err, tt.wantErr)
		}
		if err != nil && snapshot(w) != before {
			t.Errorf("Start(%d, %d) = %v changed the window", tt.size, tt.class, err)
		}
	}
	// A second Start while active is a contract break.
	w := flow.NewSendWindow(l)
	if err := w.Start(10, flow.Data); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(10, flow.Lifecycle); !errors.Is(err, flow.ErrSourceContract) {
		t.Errorf("Start while active = %v, want ErrSourceContract", err)
	}
	// Lifecycle starts with the window shut.
	w = flow.NewSendWindow(l)
	send(t, w, 2048, 1024, flow.Data)
	send(t, w, 2048, 1024, flow.Data)
	if w.MayStart() {
		t.Fatal("MayStart with 4096 outstanding in a 4096 window")
	}
	send(t, w, 100, 1024, flow.Lifecycle)
	if got := w.Outstanding(); got != 4196 {
		t.Errorf("Outstanding() after lifecycle = %d, want 4196 (lifecycle bytes count)", got)
	}
}

func TestSendWindowPanics(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", name)
			}
		}()
		f()
	}
	w := flow.NewSendWindow(limits(4096, 1024, 2048))
	mustPanic("Reserve without Start", func() { w.Reserve(1) })
	mustPanic("Finish without Start", func() { w.Finish() })
	if err := w.Start(10, flow.Data); err != nil {
		t.Fatal(err)
	}
	mustPanic("Reserve past the end", func() { w.Reserve(11) })
	mustPanic("Finish early", func() { w.Finish() })
}

// TestSendWindowBounds drives a window with messages of 2 bytes and
// maximal messages, crediting nothing or in bursts, and checks the
// invariants after every event: outstanding < window + maxMessage (data
// only) and the ledger holds at most (window+maxMessage)/2 + 1 entries.
func TestSendWindowBounds(t *testing.T) {
	for _, l := range []flow.ReceiveLimits{
		limits(1024, 1024, 1024),
		limits(1025, 1024, 1024),
		limits(4096, 1024, 8192),
		limits(64*KiB, 16*KiB, 1<<20),
	} {
		w := flow.NewSendWindow(l)
		ledgerMax := int((l.WindowBytes+l.MaximumMessageBytes)/2 + 1)
		sizes := []int64{2, l.MaximumMessageBytes, 2, 2, l.MaximumMessageBytes - 2, 4}
		var ends []int64
		for step := 0; step < 20000; step++ {
			if w.MayStart() {
				size := sizes[step%len(sizes)]
				send(t, w, size, l.MaximumFrameBytes, flow.Data)
				ends = append(ends, w.Sent())
			} else {
				// Credit a few messages.
				k := 1 + step%3
				if k > len(ends) {
					k = len(ends)
				}
				if _, err := w.Credit(ends[k-1]); err != nil {
					t.Fatal(err)
				}
				ends = ends[k:]
			}
			if o := w.Outstanding(); o >= l.WindowBytes+l.MaximumMessageBytes {
				t.Fatalf("%+v: outstanding %d ≥ window + maxMessage", l, o)
			}
			if n := flow.LedgerLen(w); n > ledgerMax {
				t.Fatalf("%+v: ledger holds %d entries, bound %d", l, n, ledgerMax)
			}
		}
		// Worst case for the ledger: only 2-byte messages, no credit.
		w = flow.NewSendWindow(l)
		for w.MayStart() {
			send(t, w, 2, 2, flow.Data)
		}
		// A lifecycle burst on top.
		for i := 0; i < flow.MaxLifecycleMessages; i++ {
			send(t, w, 2, 2, flow.Lifecycle)
		}
		if n := flow.LedgerLen(w); n > ledgerMax {
			t.Fatalf("%+v: ledger holds %d entries, bound %d", l, n, ledgerMax)
		}
		if err := w.Start(2, flow.Lifecycle); !errors.Is(err, flow.ErrSourceContract) {
			t.Fatalf("Start of lifecycle message %d = %v, want ErrSourceContract", flow.MaxLifecycleMessages+1, err)
		}
		if c := flow.LedgerCap(w); c > 2*ledgerMax+8 {
			t.Fatalf("%+v: ledger capacity %d for bound %d", l, c, ledgerMax)
		}
	}
}
