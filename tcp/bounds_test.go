package tcp

import (
	"bytes"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/flow"
)

// bigWindow is the largest window a client may ask by default: without
// the bounds below, the journal would retain up to it.
var bigWindow = flow.ReceiveLimits{WindowBytes: 64 << 20, MaximumFrameBytes: 64 << 10, MaximumMessageBytes: 1 << 20}

// messageMemory bounds the memory of one tcp/data message's text (at most
// maxDataMessage UTF-16 bytes of ASCII, its buffer rounded up by an
// eighth) and of the little lifecycle messages.
const messageMemory = maxDataMessage/2*9/8 + 4<<10

// readerBlocked reports whether the reader has no buffer to read into,
// so that it is not reading the target.
func readerBlocked(c *Channel) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.free) == 0
}

// TestBudgetBoundsJournal: a channel whose client asked a 64 MiB window
// and credits nothing holds no more journal memory than its 1 MiB budget
// (plus one message), counted there exactly; it stops reading the target
// at it, and goes on as credit returns memory, delivering the target's
// 16 MiB byte-exact. When the channel ends, every byte goes back.
func TestBudgetBoundsJournal(t *testing.T) {
	data := streamData(16 << 20)
	tg := newTarget(t, data, true)
	budget := flow.NewBudget(1 << 20)
	c := newChannel(t, tg, Config{Budget: budget, MaxRetained: func() int64 { return 1 << 40 }}) // the budget binds, not the cap
	v := attach(t, c, "v", bigWindow, nil)

	check := func() {
		t.Helper()
		if v.st == nil || v.closed {
			return
		}
		j := v.st.Journal()
		if mem := j.Memory(); mem > budget.Max()+messageMemory {
			t.Fatalf("journal memory %d > budget %d + one message", mem, budget.Max())
		}
		if used, mem := budget.Used(), j.Memory(); used != mem {
			t.Fatalf("budget used %d, journal memory %d", used, mem)
		}
	}
	drive(t, "the channel to stop at its budget", func() bool {
		check()
		return v.stalled() || v.eof
	}, v)
	if v.eof {
		t.Fatalf("the channel read the whole stream (%d bytes) with nothing credited: the budget did not stop it", len(v.data))
	}
	if left := budget.Left(); left >= flow.MinPullSize {
		t.Fatalf("stalled with %d bytes left in the budget", left)
	}
	if !readerBlocked(c) {
		t.Fatal("stalled while the reader reads the target")
	}

	drive(t, "the whole stream, credited as it comes", func() bool {
		check()
		v.credit()
		return v.eof
	}, v)
	if !bytes.Equal(v.data, data) {
		t.Fatalf("got %d bytes that differ from the target's %d", len(v.data), len(data))
	}

	// The channel ends while the subscription holds the journal: its
	// memory goes back once the subscription is reset and closed.
	_ = c.Close()
	drive(t, "the subscription to end", func() bool { return v.closed }, v)
	if v.end == nil || v.end.Code != flow.CodeChannelClosed {
		t.Fatalf("ended with %v, want %s", v.end, flow.CodeChannelClosed)
	}
	if used := budget.Used(); used != 0 {
		t.Fatalf("after the channel ended the budget holds %d bytes", used)
	}
}

// TestBudgetWakesOnRoom: two channels share a budget; the first spends
// it with a client that credits nothing, so the second stops too, though
// its own client credits all. The first closing gives the memory back and
// wakes the second (Budget.Freed), which then delivers its stream
// byte-exact.
func TestBudgetWakesOnRoom(t *testing.T) {
	data := streamData(4 << 20)
	budget := flow.NewBudget(512 << 10)
	cfg := Config{Budget: budget, MaxRetained: func() int64 { return 1 << 40 }}
	c1 := newChannel(t, newTarget(t, data, true), cfg)
	v1 := attach(t, c1, "v1", bigWindow, nil)
	drive(t, "the first channel to spend the budget", func() bool { return v1.stalled() || v1.eof }, v1)
	if v1.eof || budget.Left() >= flow.MinPullSize {
		t.Fatalf("the first channel did not stop at the budget (eof %v, left %d)", v1.eof, budget.Left())
	}

	c2 := newChannel(t, newTarget(t, data, true), cfg)
	v2 := attach(t, c2, "v2", bigWindow, nil)
	drive(t, "the second channel to stop for the budget", func() bool {
		v2.credit()
		return v2.stalled() || v2.eof
	}, v2)
	if v2.eof {
		t.Fatal("the second channel read its stream with the budget spent")
	}

	// The first holder leaves and its channel ends: that frees the
	// budget, and the second, which no credit of its own would wake,
	// goes on.
	v1.close()
	_ = c1.Close()
	drive(t, "the second stream", func() bool {
		v2.credit()
		return v2.eof
	}, v2)
	if !bytes.Equal(v2.data, data) {
		t.Fatal("the second stream's bytes differ")
	}
	v2.close()
	_ = c2.Close()
	if used := budget.Used(); used != 0 {
		t.Fatalf("after both channels ended the budget holds %d bytes", used)
	}
}

// TestMaxRetained: a client with a 64 MiB window that credits nothing
// gets no more than DefaultMaxRetained retained (plus one message): the
// channel stops reading the target there. Credit lets it go on, and the
// stream arrives byte-exact.
func TestMaxRetained(t *testing.T) {
	data := streamData(8 << 20)
	tg := newTarget(t, data, true)
	c := newChannel(t, tg, Config{}) // MaxRetained nil: the default
	v := attach(t, c, "v", bigWindow, nil)

	drive(t, "the channel to stop at the cap", func() bool { return v.stalled() || v.eof }, v)
	j := v.st.Journal()
	if got := j.RetainedBytes(); got > DefaultMaxRetained+maxDataMessage || got < DefaultMaxRetained {
		t.Fatalf("stopped with %d bytes retained (eof %v), want the cap %d (plus at most one message of %d)",
			got, v.eof, DefaultMaxRetained, maxDataMessage)
	}
	if v.received-v.credited != j.RetainedBytes() {
		t.Fatalf("the client has %d bytes outstanding, the journal retains %d", v.received-v.credited, j.RetainedBytes())
	}
	if !readerBlocked(c) {
		t.Fatal("stopped while the reader reads the target")
	}

	drive(t, "the whole stream, credited as it comes", func() bool {
		if got := j.RetainedBytes(); got > DefaultMaxRetained+maxDataMessage {
			t.Fatalf("%d bytes retained", got)
		}
		v.credit()
		return v.eof
	}, v)
	if !bytes.Equal(v.data, data) {
		t.Fatalf("got %d bytes that differ from the target's %d", len(v.data), len(data))
	}
	v.close()
}

// TestMaxRetainedReadEachTime: the cap is read before each message, so a
// lower value applies to a running channel, and a value ≤ 0 is the
// default.
func TestMaxRetainedReadEachTime(t *testing.T) {
	data := streamData(1 << 20)
	tg := newTarget(t, data, true)
	capBytes := int64(256 << 10)
	c := newChannel(t, tg, Config{MaxRetained: func() int64 { return capBytes }})
	v := attach(t, c, "v", bigWindow, nil)
	drive(t, "the channel to stop at the cap", func() bool { return v.stalled() || v.eof }, v)
	if got := v.st.Journal().RetainedBytes(); got > capBytes+maxDataMessage || got < capBytes {
		t.Fatalf("%d bytes retained, want %d (plus at most one message)", got, capBytes)
	}
	capBytes = 0 // the default, 4 MiB: the rest fits
	v.snd.Wake(v.st)
	drive(t, "the rest of the stream without credit", func() bool { return v.eof }, v)
	if !bytes.Equal(v.data, data) {
		t.Fatal("the stream's bytes differ")
	}
	v.close()
}

// TestRetainedJournalGoesBack: a channel whose consumer left without
// crediting keeps its journal, at most the cap, counted in the budget
// while it is retained; when the retention expires and the channel ends,
// the budget gets every byte back.
func TestRetainedJournalGoesBack(t *testing.T) {
	data := streamData(8 << 20)
	tg := newTarget(t, data, true)
	budget := flow.NewBudget(64 << 20)
	var retain atomic.Int64
	retain.Store(int64(time.Hour)) // until the test has looked
	c := newChannel(t, tg, Config{Budget: budget, Retain: func() time.Duration { return time.Duration(retain.Load()) }})
	v := attach(t, c, "v", bigWindow, nil)
	drive(t, "the channel to stop at the cap", func() bool { return v.stalled() || v.eof }, v)
	j := v.st.Journal()
	if got := j.RetainedBytes(); got > DefaultMaxRetained+maxDataMessage {
		t.Fatalf("%d bytes retained, over the cap", got)
	}
	mem := j.Memory()
	v.close() // the connection is gone; the channel waits for a resume
	if used := budget.Used(); used != mem || used == 0 {
		t.Fatalf("retained channel: budget used %d, journal memory %d", used, mem)
	}
	retain.Store(int64(time.Millisecond))
	// The retention is read when a consumer leaves: a resume that leaves
	// arms it again, with 1 ms.
	r := attach(t, c, "r", bigWindow, &flow.ResumeRequest{Token: v.res.Resume.Token, Accepted: v.accepted})
	drive(t, "the resume to start", func() bool { return r.st != nil }, r)
	r.close()
	select {
	case <-c.Done():
	case <-time.After(hangGuard):
		t.Fatalf("the channel outlived a retention of 1 ms by %v", hangGuard)
	}
	if used := budget.Used(); used != 0 {
		t.Fatalf("after the retention expired the budget holds %d bytes", used)
	}
}
