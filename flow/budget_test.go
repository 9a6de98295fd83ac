package flow_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/flow"
)

// sizedSource always has data and returns a message of exactly the size
// the Sender asks for, as a terminal with a long backlog does.
type sizedSource struct {
	refused int // pulls with dataAllowed false
	largest int64
}

func (s *sizedSource) Pull(dataAllowed bool, maxMessageBytes int64) (flow.Message, bool) {
	if !dataAllowed {
		s.refused++
		return flow.Message{}, false
	}
	s.largest = max(s.largest, maxMessageBytes)
	head := `{"jsonrpc":"2.0","method":"terminal/output","params":{"data":"`
	tail := `"}}`
	n := int(maxMessageBytes/2) - len(head) - len(tail)
	return flow.Message{Text: head + strings.Repeat("x", n) + tail, Class: flow.Data}, true
}

// TestActiveBytesBound: many subscriptions with large windows that each
// could start a large message at once never hold more than ActiveBytes
// (plus one message) of started messages together, and the refused ones
// are woken when a message finishes, so every subscription makes progress.
func TestActiveBytesBound(t *testing.T) {
	const subs, budget = 64, 256 << 10
	s := newSender(t, flow.SenderConfig{ActiveBytes: budget})
	lim := limits(64<<20, 16<<10, 1<<20) // PullSize 1 MiB each
	srcs := make([]*sizedSource, subs)
	for i := range srcs {
		srcs[i] = &sizedSource{}
		st := open(t, s, "s"+strings.Repeat("i", i), srcs[i], lim)
		s.Wake(st)
	}
	peak := int64(0)
	finals := map[string]int{}
	for range 20000 {
		it, ok := next(t, s)
		if !ok {
			t.Fatalf("Next handed out nothing with %d active and %d subscriptions starved", s.Active(), subs)
		}
		peak = max(peak, s.Active())
		if it.final {
			finals[it.sub]++
		}
	}
	if limit := int64(budget + 1<<20); peak > limit {
		t.Errorf("active bytes peaked at %d, want ≤ ActiveBytes + maximumMessageBytes = %d", peak, limit)
	}
	if peak > budget {
		t.Errorf("active bytes peaked at %d > ActiveBytes %d though every message could be cut to fit", peak, budget)
	}
	for i, src := range srcs {
		if src.largest > budget {
			t.Errorf("subscription %d was asked for %d bytes, more than the whole budget %d", i, src.largest, budget)
		}
	}
	if len(finals) != subs {
		t.Errorf("%d of %d subscriptions finished a message; the starved ones were never woken", len(finals), subs)
	}
	refused := 0
	for _, src := range srcs {
		refused += src.refused
	}
	if refused == 0 {
		t.Error("no Pull was refused for the budget: the test did not exercise it")
	}
}

// TestSharedBudget: two Senders sharing a Budget hold no more than it
// together; a stream starved by the other Sender's messages runs again
// after Budget.Freed fires and WakeStarved is called.
func TestSharedBudget(t *testing.T) {
	const total = 64 << 10
	b := flow.NewBudget(total)
	lim := limits(64<<20, 16<<10, 64<<10) // PullSize 64 KiB: the whole budget
	a := newSender(t, flow.SenderConfig{Shared: b})
	c := newSender(t, flow.SenderConfig{Shared: b})
	a.Wake(open(t, a, "a", &sizedSource{}, lim))
	src := &sizedSource{}
	c.Wake(open(t, c, "c", src, lim))
	if _, ok := next(t, a); !ok {
		t.Fatal("a: nothing handed out")
	}
	if got := b.Used(); got != total {
		t.Fatalf("Used() = %d after a started a message, want %d", got, total)
	}
	if _, ok := next(t, c); ok {
		t.Fatal("c started a message with the shared budget spent")
	}
	if !c.Starved() || src.refused != 1 {
		t.Fatalf("c: Starved() = %v, refused pulls = %d, want true, 1", c.Starved(), src.refused)
	}
	freed := b.Freed()
	for {
		it, ok := next(t, a)
		if !ok {
			t.Fatal("a stopped before its message was done")
		}
		if it.final {
			break
		}
	}
	select {
	case <-freed:
	default:
		t.Fatal("Freed did not fire when a's message finished")
	}
	if got := b.Used(); got != 0 {
		t.Fatalf("Used() = %d after the message finished, want 0", got)
	}
	c.WakeStarved()
	if _, ok := next(t, c); !ok {
		t.Fatal("c did not start after the budget was freed and it was woken")
	}
	if c.Starved() {
		t.Error("c still starved after it started a message")
	}
}

// TestSharedBudgetConcurrent: Senders on their own goroutines, woken
// through Budget.Freed as connections are, never take more than the
// shared budget together (a reservation is made before the Source is
// pulled), and none is left starved.
func TestSharedBudgetConcurrent(t *testing.T) {
	const total, senders, streams = 128 << 10, 4, 8
	b := flow.NewBudget(total)
	lim := limits(64<<20, 16<<10, 64<<10)
	errs := make(chan string, senders)
	var wg sync.WaitGroup
	for g := range senders {
		s := newSender(t, flow.SenderConfig{Shared: b})
		for i := range streams {
			s.Wake(open(t, s, fmt.Sprintf("s%d-%d", g, i), &sizedSource{}, lim))
		}
		wg.Go(func() {
			finals := 0
			for finals < 200 {
				buf, err := s.Next(nil)
				if err != nil {
					errs <- err.Error()
					return
				}
				if used := b.Used(); used > total {
					errs <- fmt.Sprintf("shared budget used %d > %d", used, total)
					return
				}
				if buf == nil {
					if !s.SharedStarved() {
						errs <- "Next handed out nothing, and nothing waits for the shared budget"
						return
					}
					select {
					case <-b.Freed():
						s.WakeStarved()
					case <-time.After(10 * time.Second):
						errs <- "starved: Freed never fired"
						return
					}
					continue
				}
				var f flow.Frame
				if flow.DecodeFrame(buf, &f) == nil && f.Final {
					finals++
				}
				s.Written(len(buf))
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if used := b.Used(); used > total {
		t.Errorf("Used() = %d at the end, want ≤ %d", used, total)
	}
}

// TestSharedFloor: with the shared budget spent by another Sender, a
// Sender with a SharedFloor still starts a message up to the floor.
func TestSharedFloor(t *testing.T) {
	b := flow.NewBudget(64 << 10)
	lim := limits(64<<20, 16<<10, 64<<10)
	a := newSender(t, flow.SenderConfig{Shared: b})
	a.Wake(open(t, a, "a", &sizedSource{}, lim))
	if _, ok := next(t, a); !ok || b.Left() != 0 {
		t.Fatalf("a did not spend the budget: Left() = %d", b.Left())
	}
	c := newSender(t, flow.SenderConfig{Shared: b, SharedFloor: 16 << 10})
	src := &sizedSource{}
	c.Wake(open(t, c, "c", src, lim))
	if _, ok := next(t, c); !ok {
		t.Fatal("c with a 16 KiB floor started nothing while the shared budget was spent")
	}
	if src.largest != 16<<10 || c.Active() != 16<<10 {
		t.Fatalf("c asked for %d and holds %d, want the floor, 16 KiB", src.largest, c.Active())
	}
	if got := b.Used(); got != 80<<10 {
		t.Fatalf("Used() = %d, want 80 KiB: the floor is counted in the shared budget", got)
	}
}

// TestSharedFloorIsNoCap: while the shared budget has room, a Sender
// with a SharedFloor asks its Source for whole messages (PullSize), not
// for the floor: the floor capped a flood's messages at 64 KiB, one frame
// and so one write each, with the daemon's budget nearly unused.
func TestSharedFloorIsNoCap(t *testing.T) {
	b := flow.NewBudget(64 << 20)
	lim := limits(8<<20, 64<<10, 1<<20)
	s := newSender(t, flow.SenderConfig{Shared: b, SharedFloor: 64 << 10})
	src := &sizedSource{}
	s.Wake(open(t, s, "s", src, lim))
	if _, ok := next(t, s); !ok {
		t.Fatal("nothing was handed out")
	}
	if src.largest != 1<<20 || s.Active() != 1<<20 || b.Used() != 1<<20 {
		t.Fatalf("asked for %d, holds %d, shared used %d; want 1 MiB (PullSize) each", src.largest, s.Active(), b.Used())
	}
}

// TestBudgetRefusesNegative: Take and Give panic on a negative count
// instead of moving the budget the other way, and leave it as it was.
func TestBudgetRefusesNegative(t *testing.T) {
	b := flow.NewBudget(1 << 20)
	b.Take(100)
	for name, f := range map[string]func(){"Take": func() { b.Take(-5) }, "Give": func() { b.Give(-5) }} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s(-5) did not panic", name)
				}
			}()
			f()
		}()
	}
	if got := b.Left(); got != 1<<20-100 {
		t.Errorf("Left = %d after Take(100) and two refused calls, want %d", got, 1<<20-100)
	}
}

// TestChildBudget: a child budget counts in its parent; it has room only
// while both have; Freed waits for the one that is spent; a Sender whose
// Shared is a child is held to the child's size while the parent has
// room, so one token cannot spend the daemon's whole budget.
func TestChildBudget(t *testing.T) {
	root := flow.NewBudget(1 << 20)
	a, b := root.Child(600<<10), root.Child(600<<10)
	a.Take(500 << 10)
	if got := root.Used(); got != 500<<10 {
		t.Fatalf("root used %d after the child took 500 KiB", got)
	}
	if got := b.Left(); got != 524<<10 {
		t.Fatalf("sibling's Left = %d, want the parent's 524 KiB", got)
	}
	if got := a.Left(); got != 100<<10 {
		t.Fatalf("child's Left = %d, want its own 100 KiB", got)
	}
	a.Take(100 << 10)
	select {
	case <-a.Freed():
		t.Fatal("a spent child reports room")
	default:
	}
	freed := a.Freed()
	a.Give(100 << 10)
	select {
	case <-freed:
	default:
		t.Fatal("Freed was not closed when the child got room back")
	}
	b.Take(522 << 10) // the parent is spent now: 1022 KiB of 1024
	pf := b.Freed()
	select {
	case <-pf:
		t.Fatal("a child whose parent is spent reports room")
	default:
	}
	a.Give(500 << 10)
	select {
	case <-pf:
	default:
		t.Fatal("Freed was not closed when the parent got room back")
	}
	b.Give(522 << 10)
	if root.Used() != 0 || a.Used() != 0 || b.Used() != 0 {
		t.Fatalf("left over: root %d, a %d, b %d", root.Used(), a.Used(), b.Used())
	}

	// Senders on one child together stay within it (plus their floors and
	// one message each), however large their own ActiveBytes.
	const perToken = 512 << 10
	token := flow.NewBudget(64 << 20).Child(perToken)
	lim := limits(64<<20, 16<<10, 1<<20)
	var senders []*flow.Sender
	for c := range 4 {
		s := newSender(t, flow.SenderConfig{ActiveBytes: 32 << 20, Shared: token, SharedFloor: 64 << 10})
		for i := range 16 {
			st := open(t, s, fmt.Sprintf("c%d-s%d", c, i), &sizedSource{}, lim)
			s.Wake(st)
		}
		senders = append(senders, s)
	}
	peak := int64(0)
	for range 2000 {
		for _, s := range senders {
			if _, ok := next(t, s); !ok && !s.Starved() {
				t.Fatal("a sender stalled without being starved")
			}
		}
		peak = max(peak, token.Used())
	}
	if limit := int64(perToken + 4*(64<<10) + 4*(1<<20)); peak > limit {
		t.Fatalf("the token's senders peaked at %d, want ≤ %d", peak, limit)
	}
}
