package flow

import "fmt"

// Position names a point in one direction of a subscription: the id of a
// logical message and the cumulative UTF-16 bytes at its end
// (PROTOCOL.md §8 resume). {0, 0} is the start.
type Position struct {
	MessageID int64 `json:"messageId"`
	Position  int64 `json:"position"`
}

// Receiver is the receiving side of one subscription direction: it
// reassembles frames into logical messages, enforces the limits it granted
// (frame size, message size, and the window — its only memory bound), and
// decides when to send channel/credit (PROTOCOL.md §4–§5).
//
// Window: a message may start only while received − announced <
// WindowBytes, except lifecycle messages (§4), which start without credit:
// at most MaxLifecycleMessages messages may start beyond the window, each
// at most MaxLifecycleBytes. So received − announced < WindowBytes +
// MaximumMessageBytes + MaxLifecycleMessages × MaxLifecycleBytes.
//
// Memory: the reassembly buffer holds at most one message plus the frame
// that overflows it: MaximumMessageBytes + MaximumFrameBytes UTF-16 bytes,
// at most 1.5× that in UTF-8.
//
// A Receiver is not safe for concurrent use.
type Receiver struct {
	limits ReceiveLimits

	buf       []byte
	active    bool
	curID     int64
	curBytes  int64
	curBeyond bool // the active message started beyond the window
	beyond    int  // messages started beyond the window (lifecycle)

	received  int64    // payload bytes received, partial message included
	accepted  Position // last complete message
	released  Position // last message released by the consumer
	announced int64    // last consumedBytes sent to the peer
	// maxWindow is the largest window announced on the subscription
	// (limits.WindowBytes at first, then SetWindowBytes): the sender may
	// not have seen a smaller one yet, so the check uses this one.
	maxWindow int64
}

// NewReceiver returns a Receiver granting limits, at position 0.
func NewReceiver(limits ReceiveLimits) *Receiver {
	return &Receiver{limits: limits, maxWindow: limits.WindowBytes}
}

// SetWindowBytes changes the window this receiver grants (it announces
// it to the sender with channel/window, PROTOCOL.md §6): credit is
// announced per quarter of the new window from now on. The sender cannot
// know of a smaller window before it arrives, so Frame keeps accepting
// messages up to the largest window ever set (MaxWindowBytes), and the
// receiver's memory bound is that one. n below MaximumFrameBytes is
// raised to it.
func (r *Receiver) SetWindowBytes(n int64) {
	n = max(n, r.limits.MaximumFrameBytes)
	r.limits.WindowBytes = n
	r.maxWindow = max(r.maxWindow, n)
}

// MaxWindowBytes returns the largest window announced on the
// subscription: what Frame enforces.
func (r *Receiver) MaxWindowBytes() int64 { return r.maxWindow }

// Limits returns the limits the receiver granted.
func (r *Receiver) Limits() ReceiveLimits { return r.limits }

// Accepted returns the last complete message received.
func (r *Receiver) Accepted() Position { return r.accepted }

// Released returns the last message the consumer released.
func (r *Receiver) Released() Position { return r.released }

// Announced returns the last consumedBytes handed out by Credit.
func (r *Receiver) Announced() int64 { return r.announced }

// Held returns the bytes received and not yet credited to the peer:
// buffered, or released and not yet announced. They take up the window
// without being in flight (WindowTuner.NoteHeld).
func (r *Receiver) Held() int64 { return r.received - r.announced }

// Frame accepts one decoded frame whose whole text is frameBytes UTF-16
// bytes. When the frame completes a message, Frame returns its text and
// end position; the text aliases the receiver's buffer and is valid until
// the next call. Errors are subscription-level (see ResetCode); after one
// the subscription is reset and the Receiver must not be used again.
func (r *Receiver) Frame(frameBytes int64, f *Frame) (msg []byte, end Position, err error) {
	if frameBytes > r.limits.MaximumFrameBytes {
		return nil, Position{}, fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, frameBytes, r.limits.MaximumFrameBytes)
	}
	if !r.active {
		if f.MessageID != r.accepted.MessageID+1 {
			return nil, Position{}, fmt.Errorf("%w: got %d, want %d", ErrMessageID, f.MessageID, r.accepted.MessageID+1)
		}
		// The sender may start a data message only while sent −
		// consumed < window, and it knows at most the credit we
		// announced. Beyond that only lifecycle messages may start.
		beyond := r.received-r.announced >= r.maxWindow
		if beyond && r.beyond >= MaxLifecycleMessages {
			return nil, Position{}, fmt.Errorf("%w: outstanding %d, window %d", ErrWindowExceeded, r.received-r.announced, r.maxWindow)
		}
		if beyond {
			r.beyond++
		}
		r.active, r.curID, r.curBytes, r.curBeyond, r.buf = true, f.MessageID, 0, beyond, r.buf[:0]
	} else if f.MessageID != r.curID {
		return nil, Position{}, fmt.Errorf("%w: got %d while message %d is incomplete", ErrMessageID, f.MessageID, r.curID)
	}
	before := len(r.buf)
	buf, n, err := f.AppendData(r.buf)
	if err != nil {
		return nil, Position{}, err
	}
	r.buf = buf
	r.curBytes += n
	r.received += n
	if r.curBytes > r.limits.MaximumMessageBytes {
		r.buf = r.buf[:before]
		return nil, Position{}, fmt.Errorf("%w: more than %d", ErrMessageTooLarge, r.limits.MaximumMessageBytes)
	}
	if r.curBeyond && r.curBytes > MaxLifecycleBytes {
		r.buf = r.buf[:before]
		return nil, Position{}, fmt.Errorf("%w: a message started beyond the window (outstanding %d, window %d) and is larger than a lifecycle message",
			ErrWindowExceeded, r.received-r.curBytes-r.announced, r.maxWindow)
	}
	if !f.Final {
		return nil, Position{}, nil
	}
	if r.curBytes == 0 {
		return nil, Position{}, ErrEmptyMessage
	}
	r.active = false
	r.accepted = Position{r.curID, r.received}
	return r.buf, r.accepted, nil
}

// Buffered returns the bytes (UTF-8) held for the incomplete message.
func (r *Receiver) Buffered() int {
	if !r.active {
		return 0
	}
	return len(r.buf)
}

// TakeBuffer returns the reassembly buffer's memory for the caller to
// keep while no message is incomplete (nil otherwise), and forgets it: a
// connection keeps one buffer for all its subscriptions (UseBuffer)
// instead of each pinning the memory of its largest message. Call it once
// the message Frame returned is processed.
func (r *Receiver) TakeBuffer() []byte {
	if r.active {
		return nil
	}
	b := r.buf[:0]
	r.buf = nil
	return b
}

// UseBuffer gives the receiver memory (from TakeBuffer) to reassemble
// its next message in, and reports whether it took it: it does not while
// a message is incomplete or the receiver has memory of its own.
func (r *Receiver) UseBuffer(b []byte) bool {
	if r.active || r.buf != nil {
		return false
	}
	r.buf = b[:0]
	return true
}

// DiscardPartial drops an incomplete message (the connection carrying it
// ended); the next message must again be the one after Accepted.
func (r *Receiver) DiscardPartial() {
	if r.active && r.curBeyond {
		r.beyond-- // it will be resent and counted again
	}
	r.active = false
	r.received = r.accepted.Position
	r.buf = r.buf[:0]
	if cap(r.buf) > int(r.limits.MaximumFrameBytes) {
		r.buf = nil // do not pin a large buffer while idle
	}
}

// Release records that the consumer released every message up to and
// including p (a position returned by Frame), in order. It returns the
// consumedBytes to announce and whether to announce it now: when at least
// a quarter of the window is unannounced, or when everything received has
// been released, so the sender is never left waiting on sub-threshold
// credit.
func (r *Receiver) Release(p Position) (consumed int64, send bool, err error) {
	return r.release(p, true)
}

// ReleaseBatched is Release that announces only once a quarter of the
// window is unannounced, not also whenever everything received has been
// released. Under PROTOCOL.md §5 a sender may start a message whenever
// sent − consumed < WindowBytes, so a receiver that released everything
// leaves it at most a quarter window short and never stuck; what the
// second rule adds, for a receiver that keeps up, is a channel/credit for
// every message, which costs the sender a read and a wake-up each
// (docs/protocol-decisions.md, "Batched credit for data messages"). Use
// Release for a message whose credit the sender waits on for more than
// its window: a lifecycle message (the host ends a TCP channel once
// tcp/closed is credited, §8).
func (r *Receiver) ReleaseBatched(p Position) (consumed int64, send bool, err error) {
	return r.release(p, false)
}

// release is Release, with the rule for a receiver that released
// everything (idle) on or off.
func (r *Receiver) release(p Position, idle bool) (consumed int64, send bool, err error) {
	// p must lie between Released and Accepted, and name the same
	// message as either of them exactly when it is at its position.
	if p.Position < r.released.Position || p.MessageID < r.released.MessageID ||
		p.Position > r.accepted.Position || p.MessageID > r.accepted.MessageID ||
		(p.Position == r.released.Position) != (p.MessageID == r.released.MessageID) ||
		(p.Position == r.accepted.Position) != (p.MessageID == r.accepted.MessageID) {
		return 0, false, fmt.Errorf("%w: release %v after %v, accepted %v", ErrReleaseOrder, p, r.released, r.accepted)
	}
	r.released = p
	pending := r.released.Position - r.announced
	if pending > 0 && (pending >= r.limits.WindowBytes/4 || (idle && r.released.Position == r.received)) {
		r.announced = r.released.Position
		return r.announced, true, nil
	}
	return r.announced, false, nil
}

// Resume restores a Receiver kept across a reconnect to the positions
// agreed in the resume exchange: the peer resends every message after
// Accepted. The announced credit becomes what the peer is told was
// released.
func (r *Receiver) Resume() {
	r.DiscardPartial()
	r.announced = r.released.Position
}

// RestoreReceiver returns a Receiver granting limits whose consumer has
// accepted and released the messages up to accepted and released, with
// no message under way: a TCP channel's client→host positions carried by
// an upgrade in place (docs/upgrade.md). Its announced credit is
// released's (a resume announces it). An error wraps ErrResume.
func RestoreReceiver(limits ReceiveLimits, accepted, released Position) (*Receiver, error) {
	if err := limits.Validate(); err != nil {
		return nil, fmt.Errorf("%w: receiver limits: %v", ErrResume, err)
	}
	if released.MessageID < 0 || released.Position < 0 || released.MessageID > accepted.MessageID ||
		released.Position > accepted.Position || accepted.MessageID > MaxSafeInteger || accepted.Position > MaxSafeInteger ||
		(released.MessageID == accepted.MessageID) != (released.Position == accepted.Position) {
		return nil, fmt.Errorf("%w: receiver: released %v, accepted %v", ErrResume, released, accepted)
	}
	return &Receiver{limits: limits, accepted: accepted, released: released, received: accepted.Position, announced: released.Position, maxWindow: limits.WindowBytes}, nil
}
