package flow

import "fmt"

// SendWindow is a sender's soft window and credit ledger for one
// subscription and direction (PROTOCOL.md §5).
//
// A new data message may start only when no message is active and
// outstanding = sent − consumed < WindowBytes; a started message may finish
// beyond the window; bytes are reserved as frames are scheduled. Because a
// message is at most MaximumMessageBytes, outstanding < WindowBytes +
// MaximumMessageBytes holds while only data messages are sent. Lifecycle
// messages start without credit (§4): at most MaxLifecycleMessages of
// them, each at most MaxLifecycleBytes, so in general outstanding <
// WindowBytes + MaximumMessageBytes + MaxLifecycleMessages ×
// MaxLifecycleBytes.
//
// The ledger keeps the end position of every started message that has not
// been credited yet, so a consumedBytes value can be checked against
// message boundaries. Its bound: the uncredited data messages start at
// distinct positions in [consumed, consumed+WindowBytes) at least 2 bytes
// apart (a message is at least one character), so there are at most
// (WindowBytes−1)/2 + 1 of them, plus at most MaxLifecycleMessages
// lifecycle messages; since MaximumMessageBytes ≥ 1024 that is at most
// (WindowBytes+MaximumMessageBytes)/2 + 1 entries.
//
// A SendWindow is not safe for concurrent use.
type SendWindow struct {
	limits   ReceiveLimits
	sent     int64
	consumed int64
	active   bool
	msgEnd   int64
	bounds   ring[int64]
	// lifecycles counts lifecycle messages started (≤ MaxLifecycleMessages).
	lifecycles int
}

// NewSendWindow returns a window at position 0 under the given limits.
func NewSendWindow(limits ReceiveLimits) *SendWindow {
	return &SendWindow{limits: limits}
}

// Limits returns the receiver's limits the window enforces.
func (w *SendWindow) Limits() ReceiveLimits { return w.limits }

// Sent returns the cumulative bytes reserved for frames.
func (w *SendWindow) Sent() int64 { return w.sent }

// Consumed returns the newest valid consumedBytes received.
func (w *SendWindow) Consumed() int64 { return w.consumed }

// Outstanding returns sent − consumed.
func (w *SendWindow) Outstanding() int64 { return w.sent - w.consumed }

// Active reports whether a message has started and not finished.
func (w *SendWindow) Active() bool { return w.active }

// SetWindowBytes applies the receiver's channel/window (PROTOCOL.md §6,
// "Changing a window"): new data messages start only while outstanding
// < n. A message under way finishes; nothing sent is taken back, and the
// credit ledger is not touched. The caller checks n against the
// receiver's bounds (at least maximumFrameBytes, at most the host's
// maximum); a window below one frame would let no character through, so
// n is raised to MaximumFrameBytes.
func (w *SendWindow) SetWindowBytes(n int64) {
	w.limits.WindowBytes = max(n, w.limits.MaximumFrameBytes)
}

// MayStart reports whether a new data message may start now.
func (w *SendWindow) MayStart() bool {
	return !w.active && w.sent-w.consumed < w.limits.WindowBytes
}

// PullSize is the message size a Sender asks its Source for: the
// receiver's maximumMessageBytes, but no more than a quarter of the window
// (and not below MinPullSize). A message may start while the window is
// open and finish beyond it (§5), so a message as large as the window
// would be sent alone, and the stream would then idle for a whole credit
// round trip before the next one; with quarter-window messages the
// receiver releases and credits each one while the next are under way.
func (w *SendWindow) PullSize() int64 {
	return min(w.limits.MaximumMessageBytes, max(w.limits.WindowBytes/4, MinPullSize))
}

// MinPullSize is the smallest message size PullSize asks for (when the
// receiver's maximumMessageBytes allows it): smaller messages would cost
// more in envelopes and credit than a small window saves.
const MinPullSize = 4 << 10

// Start begins a message of size UTF-16 bytes. A data message needs
// MayStart; a lifecycle message needs only that no message is active.
func (w *SendWindow) Start(size int64, class Class) error {
	switch {
	case w.active:
		return fmt.Errorf("%w: a message is already active", ErrSourceContract)
	case size <= 0:
		return ErrEmptyMessage
	case size > w.limits.MaximumMessageBytes:
		return fmt.Errorf("%w: %d > %d", ErrMessageTooLarge, size, w.limits.MaximumMessageBytes)
	case class == Lifecycle && size > MaxLifecycleBytes:
		return fmt.Errorf("%w: lifecycle message of %d bytes", ErrSourceContract, size)
	case class == Lifecycle && w.lifecycles >= MaxLifecycleMessages:
		return fmt.Errorf("%w: more than %d lifecycle messages", ErrSourceContract, MaxLifecycleMessages)
	case class == Data && w.sent-w.consumed >= w.limits.WindowBytes:
		return fmt.Errorf("%w: data message started with the window shut", ErrSourceContract)
	case w.sent+size > MaxSafeInteger:
		return fmt.Errorf("%w: position would pass 2^53-1", ErrSourceContract)
	}
	if class == Lifecycle {
		w.lifecycles++
	}
	w.active = true
	w.msgEnd = w.sent + size
	w.bounds.Push(w.msgEnd)
	return nil
}

// Reserve accounts n payload bytes of the active message as sent. It
// panics if that would pass the message's end: that is a broken internal
// invariant, not peer input.
func (w *SendWindow) Reserve(n int64) {
	if !w.active || w.sent+n > w.msgEnd {
		panic("flow: SendWindow.Reserve beyond the active message")
	}
	w.sent += n
}

// Finish ends the active message; all its bytes must have been reserved.
func (w *SendWindow) Finish() {
	if !w.active || w.sent != w.msgEnd {
		panic("flow: SendWindow.Finish before the message was fully reserved")
	}
	w.active = false
}

// Credit applies a cumulative consumedBytes value. Older or equal values
// are ignored (advanced is false). A value beyond the bytes sent, or not at
// the end of a logical message, is an error (reset invalid-credit) and
// leaves the window unchanged.
func (w *SendWindow) Credit(consumed int64) (advanced bool, err error) {
	if consumed <= w.consumed {
		return false, nil
	}
	if consumed > w.sent {
		return false, fmt.Errorf("%w: %d > %d", ErrCreditBeyondSent, consumed, w.sent)
	}
	// Boundaries are increasing: find consumed among them.
	i := 0
	for i < w.bounds.Len() && w.bounds.At(i) < consumed {
		i++
	}
	if i == w.bounds.Len() || w.bounds.At(i) != consumed {
		return false, fmt.Errorf("%w: %d", ErrCreditOffBoundary, consumed)
	}
	for ; i >= 0; i-- {
		w.bounds.Pop()
	}
	w.consumed = consumed
	return true, nil
}

// ledgerLen is the number of uncredited boundaries (for bound tests).
func (w *SendWindow) ledgerLen() int { return w.bounds.Len() }
