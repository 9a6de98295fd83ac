package flow

import (
	"fmt"
	"math"
	"slices"
)

// SenderConfig bounds one connection's outbound path (PROTOCOL.md §6).
// Zero fields take the defaults.
type SenderConfig struct {
	// Quantum is the deficit-round-robin quantum in wire bytes (UTF-8
	// bytes of frames handed to the transport): about one frame. A ready
	// subscription waits for at most about Quantum + one frame of each
	// busier neighbour per round. Default 16 KiB.
	Quantum int64
	// TransportFrames and TransportBytes bound what has been handed to
	// the transport and not yet written: at most TransportFrames
	// (default 2) items and TransportBytes (default 64 KiB) bytes are in
	// flight, except that one item of any size is allowed when nothing
	// is. A frame is cut to fit the bytes left (see Sender.Next).
	TransportFrames int
	TransportBytes  int64
	// ControlMessages and ControlBytes bound the control lane
	// (responses, resets, coalesced credit excluded). Past either,
	// Control fails with ErrControlOverflow and the connection is cut
	// off. Defaults 1024 and 4 MiB.
	ControlMessages int
	ControlBytes    int64
	// MaxLifecycle bounds the lifecycle messages of one subscription.
	// Default and maximum MaxLifecycleMessages (a receiver accepts no
	// more beyond its window).
	MaxLifecycle int
	// ActiveBytes bounds, in UTF-16 bytes, the data messages started on
	// this connection and not yet fully handed out, summed over its
	// subscriptions: each is a text its Source holds in memory. A
	// subscription may start a data message only while the sum is below
	// the bound, and asks its Source for no more than what is left (but
	// at least MinPullSize), so many subscriptions cannot each hold a
	// message of their own at once. The sum stays below ActiveBytes plus
	// one receiver's maximumMessageBytes (a Source may return a message
	// it cannot split, up to that size). A Source that is refused is
	// pulled with dataAllowed false and applies its loss policy; it is
	// woken when the sum falls. Zero means no bound.
	ActiveBytes int64
	// Shared, when set, is a budget shared with other Senders (the
	// daemon's total): a data message also needs room in it, and its
	// size is taken from it while the message is active.
	Shared *Budget
	// SharedFloor is what this Sender may have active when Shared has no
	// room left (it is still counted there): a connection whose
	// neighbours spent the shared budget still sends small messages, an
	// echo or a status line, at once. While Shared has room, messages
	// take it from there and the floor is no cap. Shared may be exceeded
	// by this much per Sender. Zero: none.
	SharedFloor int64
}

func (c SenderConfig) withDefaults() SenderConfig {
	if c.Quantum == 0 {
		c.Quantum = 16 << 10
	}
	if c.TransportFrames == 0 {
		c.TransportFrames = 2
	}
	if c.TransportBytes == 0 {
		c.TransportBytes = 64 << 10
	}
	if c.ControlMessages == 0 {
		c.ControlMessages = 1024
	}
	if c.ControlBytes == 0 {
		c.ControlBytes = 4 << 20
	}
	if c.MaxLifecycle == 0 {
		c.MaxLifecycle = MaxLifecycleMessages
	}
	return c
}

// Validate rejects negative values, naming the field.
func (c SenderConfig) Validate() error {
	switch {
	case c.Quantum < 0:
		return &LimitError{"Quantum", "must not be negative"}
	case c.TransportFrames < 0:
		return &LimitError{"TransportFrames", "must not be negative"}
	case c.TransportBytes < 0:
		return &LimitError{"TransportBytes", "must not be negative"}
	case c.ControlMessages < 0:
		return &LimitError{"ControlMessages", "must not be negative"}
	case c.ControlBytes < 0:
		return &LimitError{"ControlBytes", "must not be negative"}
	case c.ActiveBytes < 0:
		return &LimitError{"ActiveBytes", "must not be negative"}
	case c.SharedFloor < 0:
		return &LimitError{"SharedFloor", "must not be negative"}
	case c.MaxLifecycle < 0 || c.MaxLifecycle > MaxLifecycleMessages:
		return &LimitError{"MaxLifecycle", fmt.Sprintf("must be between 0 and %d", MaxLifecycleMessages)}
	}
	return nil
}

// StreamConfig describes one subscription as the Sender sees it.
type StreamConfig struct {
	Channel        string
	SubscriptionID string
	// Source produces the host→client logical messages.
	Source Source
	// Send are the client's receive limits (host→client direction).
	Send ReceiveLimits
	// Receive are the host's receive limits (client→host direction); a
	// Receiver is made from them unless Receiver is set. A Receiver set
	// here is one kept across connections (a lease, PROTOCOL.md §8 resume):
	// Open resumes it (Receiver.Resume), so it starts on a message
	// boundary with no partial message of the previous connection.
	Receive  ReceiveLimits
	Receiver *Receiver
	// Journal, when set, retains sent messages for resume (TCP).
	Journal *Journal
	// Resume, when set with Journal, continues the journal's position
	// space: counters start at the peer's positions and every message
	// after Resume.Accepted is replayed first, with its original id.
	Resume *ResumePoint
}

// Stream is one subscription inside a Sender: its send window, its
// fragmenter, its Receiver and its place in the scheduler. Its methods are
// for the Sender's owner only.
type Stream struct {
	channel, id string
	src         Source
	win         *SendWindow
	recv        *Receiver
	frag        Fragmenter
	nextID      int64
	journal     *Journal
	replay      ring[journalEntry]
	closed      bool
	minFrame    int64 // UTF-16 bytes of the smallest frame that carries a character
	activeSize  int64 // size of the active data message counted in the Sender's budget, or 0
	starved     bool  // in the Sender's starved list: refused for the budget
	pulled      bool  // the active message came from the Source (not a replay)

	// scheduler state
	prev, next   *Stream
	inRing       bool
	deficit      int64
	creditQueued bool
	windowQueued bool
}

// Channel returns the channel URI.
func (st *Stream) Channel() string { return st.channel }

// SubscriptionID returns the subscription id.
func (st *Stream) SubscriptionID() string { return st.id }

// Window returns the host→client send window.
func (st *Stream) Window() *SendWindow { return st.win }

// Receiver returns the client→host receiver.
func (st *Stream) Receiver() *Receiver { return st.recv }

// Journal returns the resume journal, or nil.
func (st *Stream) Journal() *Journal { return st.journal }

// NextMessageID returns the id the next new message will get.
func (st *Stream) NextMessageID() int64 { return st.nextID }

// StreamError is a subscription-level failure found while producing
// frames; the owner resets that subscription (code ResetCode(Err)).
type StreamError struct {
	Stream *Stream
	Err    error
}

func (e *StreamError) Error() string {
	return "subscription " + e.Stream.id + ": " + e.Err.Error()
}
func (e *StreamError) Unwrap() error { return e.Err }

// Sender multiplexes the outbound side of one connection: a control lane
// that goes first, and a deficit-round-robin scheduler over the
// subscriptions that are ready, feeding a transport that holds a bounded
// amount (PROTOCOL.md §6). Frames are produced lazily, one at a time, when
// the transport has room: nothing is queued below the Sources but the
// bounded control lane.
//
// A Sender is not safe for concurrent use; one goroutine owns it and
// everything it returns.
type Sender struct {
	cfg SenderConfig

	control      ring[[]byte]
	controlBytes int64
	credits      ring[*Stream]
	windows      ring[*Stream] // streams whose Receiver's window is to be announced

	head *Stream // ready ring (circular doubly linked); nil when empty
	n    int     // streams open

	inflightFrames int
	inflightBytes  int64

	active        int64     // sum of the streams' activeSize (SenderConfig.ActiveBytes)
	starved       []*Stream // streams refused for the budget, woken when it frees
	sharedStarved bool      // a refusal since the last WakeStarved was the shared Budget's
}

// NewSender returns a Sender; cfg is validated and defaulted.
func NewSender(cfg SenderConfig) (*Sender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Sender{cfg: cfg.withDefaults()}, nil
}

// Open adds a subscription. It is not ready until Wake.
func (s *Sender) Open(cfg StreamConfig) (*Stream, error) {
	if err := cfg.Send.Validate(); err != nil {
		return nil, err
	}
	recv := cfg.Receiver
	if recv == nil {
		if err := cfg.Receive.Validate(); err != nil {
			return nil, err
		}
		recv = NewReceiver(cfg.Receive)
	} else {
		recv.Resume()
	}
	st := &Stream{
		channel: cfg.Channel,
		id:      cfg.SubscriptionID,
		src:     cfg.Source,
		win:     NewSendWindow(cfg.Send),
		recv:    recv,
		nextID:  1,
		journal: cfg.Journal,
	}
	// Check that the envelope leaves room for data at all, and note the
	// smallest frame that always makes progress (largest id).
	if err := st.frag.Reset(st.channel, st.id, MaxSafeInteger, "", cfg.Send.MaximumFrameBytes); err != nil {
		return nil, err
	}
	st.minFrame = st.frag.minFrame()
	if cfg.Journal != nil {
		j := cfg.Journal
		st.nextID = j.last.MessageID + 1
		st.win.sent, st.win.consumed = j.last.Position, j.released.Position
		if cfg.Resume != nil {
			if cfg.Resume.Released != j.released {
				return nil, fmt.Errorf("%w: resume point does not match the journal", ErrResume)
			}
			st.win.sent = cfg.Resume.Accepted.Position
		}
		for i := 0; i < j.entries.Len(); i++ {
			e := j.entries.At(i)
			if e.end <= st.win.sent {
				st.win.bounds.Push(e.end)
			} else {
				st.replay.Push(e)
			}
		}
	}
	s.n++
	return st, nil
}

// Close removes a subscription: nothing more of it is produced, and its
// queued credit is dropped.
func (s *Sender) Close(st *Stream) {
	if st.closed {
		return
	}
	st.closed = true
	s.unlink(st)
	if st.starved {
		st.starved = false
		s.starved = slices.DeleteFunc(s.starved, func(w *Stream) bool { return w == st })
	}
	s.release(st)
	s.n--
}

// SetShared makes b the Sender's shared budget from now on (a connection
// learns its token's budget at initialize). It panics while a data
// message is active or a stream waits for the old budget: their bytes
// were counted there.
func (s *Sender) SetShared(b *Budget) {
	if s.active != 0 || len(s.starved) != 0 {
		panic("flow: Sender.SetShared with messages active or streams starved")
	}
	s.cfg.Shared = b
}

// Shared returns the Sender's shared budget, or nil.
func (s *Sender) Shared() *Budget { return s.cfg.Shared }

// Active returns the UTF-16 bytes of the data messages started and not
// yet fully handed out (see SenderConfig.ActiveBytes).
func (s *Sender) Active() int64 { return s.active }

// reserve returns what a new data message may take now, or 0 when none
// may start (the budget is spent). What it returns is reserved in the
// shared Budget, so that Senders of other goroutines cannot spend it
// meanwhile; take or unreserve settles it.
func (s *Sender) reserve(want int64) int64 {
	left, floor := want, min(want, MinPullSize)
	if s.cfg.ActiveBytes > 0 {
		left = min(left, s.cfg.ActiveBytes-s.active)
	}
	if left < floor {
		return 0
	}
	if s.cfg.Shared == nil {
		return left
	}
	// The shared budget first: the floor is for when it is spent, not a
	// cap on messages while it has room.
	if got := s.cfg.Shared.reserve(left, floor); got > 0 {
		return got
	}
	if room := s.cfg.SharedFloor - s.active; room >= floor {
		left = min(left, room)
		s.cfg.Shared.add(left) // counted, not checked
		return left
	}
	s.sharedStarved = true
	return 0
}

// unreserve returns a reservation that started no data message.
func (s *Sender) unreserve(reserved int64) {
	if s.cfg.Shared != nil && reserved > 0 {
		s.cfg.Shared.add(-reserved)
	}
}

// take counts st's new data message of size in the budget, in place of
// the reservation made for it (a replayed message has none).
func (s *Sender) take(st *Stream, size, reserved int64) {
	if s.cfg.ActiveBytes == 0 && s.cfg.Shared == nil {
		return
	}
	st.activeSize = size
	s.active += size
	if s.cfg.Shared != nil && size != reserved {
		s.cfg.Shared.add(size - reserved)
	}
}

// release takes st's active message out of the budget and wakes the
// streams that were refused for it.
func (s *Sender) release(st *Stream) {
	if st.activeSize == 0 {
		return
	}
	s.active -= st.activeSize
	if s.cfg.Shared != nil {
		s.cfg.Shared.add(-st.activeSize)
	}
	st.activeSize = 0
	s.WakeStarved()
}

// Starved reports whether a stream waits for room in the budget.
func (s *Sender) Starved() bool { return len(s.starved) > 0 }

// SharedStarved reports whether a stream was refused for the shared
// Budget since the last WakeStarved: the owner then waits for
// Budget.Freed and calls WakeStarved. (A stream refused for the
// connection's own budget is woken by the Sender itself.)
func (s *Sender) SharedStarved() bool { return s.sharedStarved && len(s.starved) > 0 }

// WakeStarved wakes every stream refused for the budget. The Sender does
// so itself when its own messages finish; its owner calls it when a
// shared Budget frees (Budget.Freed).
func (s *Sender) WakeStarved() {
	s.sharedStarved = false
	if len(s.starved) == 0 {
		return
	}
	woken := s.starved
	s.starved = nil
	for _, w := range woken {
		w.starved = false
		s.Wake(w)
	}
	clear(woken)
	s.starved = woken[:0]
}

// Streams returns the number of open subscriptions.
func (s *Sender) Streams() int { return s.n }

// Wake marks st as possibly having something to send (its Source got new
// messages). O(1).
func (s *Sender) Wake(st *Stream) {
	if st.closed || st.inRing {
		return
	}
	st.inRing = true
	st.deficit = 0
	if s.head == nil {
		st.prev, st.next = st, st
		s.head = st
		return
	}
	tail := s.head.prev
	st.prev, st.next = tail, s.head
	tail.next = st
	s.head.prev = st
}

func (s *Sender) unlink(st *Stream) {
	if !st.inRing {
		return
	}
	st.inRing = false
	if st.next == st {
		s.head = nil
	} else {
		st.prev.next = st.next
		st.next.prev = st.prev
		if s.head == st {
			s.head = st.next
		}
	}
	st.prev, st.next = nil, nil
}

// Credit applies a channel/credit from the client. When the window
// reopens, the stream is woken. An error is subscription-level.
func (s *Sender) Credit(st *Stream, consumed int64) error {
	if st.closed {
		return nil
	}
	advanced, err := st.win.Credit(consumed)
	if err != nil {
		return err
	}
	if advanced {
		if st.journal != nil {
			st.journal.release(consumed)
		}
		s.Wake(st)
	}
	return nil
}

// SetWindow applies the client's channel/window to st (PROTOCOL.md §6,
// "Changing a window"): new data messages start under window n. A Source
// that implements WindowObserver is told. The caller checks n against
// the bounds the host grants.
func (s *Sender) SetWindow(st *Stream, n int64) {
	if st.closed {
		return
	}
	st.win.SetWindowBytes(n)
	if o, ok := st.src.(WindowObserver); ok {
		o.SetWindow(st.win.Limits().WindowBytes)
	}
	s.Wake(st)
}

// WindowObserver is implemented by a Source that wants to know its
// subscriber's window when the subscriber changes it (a terminal viewer's
// allowance before it is resnapshotted follows it).
type WindowObserver interface {
	SetWindow(windowBytes int64)
}

// QueueWindow schedules a channel/window for st's Receiver, announcing
// its current window (Receiver.SetWindowBytes). At most one is pending
// per subscription; it carries the newest value when written, ahead of
// credit.
func (s *Sender) QueueWindow(st *Stream) {
	if st.closed || st.recv == nil || st.windowQueued {
		return
	}
	st.windowQueued = true
	s.windows.Push(st)
}

// QueueCredit schedules a channel/credit for st's Receiver. At most one is
// pending per subscription; it carries the newest value when written.
func (s *Sender) QueueCredit(st *Stream) {
	if st.closed || st.creditQueued {
		return
	}
	st.creditQueued = true
	s.credits.Push(st)
}

// Control queues a control message (response, reset, notification that is
// not framed). It fails with ErrControlOverflow past the lane's bounds.
func (s *Sender) Control(msg []byte) error {
	if s.control.Len() >= s.cfg.ControlMessages || s.controlBytes+int64(len(msg)) > s.cfg.ControlBytes {
		return ErrControlOverflow
	}
	s.control.Push(msg)
	s.controlBytes += int64(len(msg))
	return nil
}

// ControlLen returns the queued control messages and their bytes.
func (s *Sender) ControlLen() (int, int64) { return s.control.Len(), s.controlBytes }

// TransportFull reports whether the transport holds its bound.
func (s *Sender) TransportFull() bool {
	return s.inflightFrames > 0 &&
		(s.inflightFrames >= s.cfg.TransportFrames || s.inflightBytes >= s.cfg.TransportBytes)
}

// InFlight returns the number of items handed out and not yet Written.
func (s *Sender) InFlight() int { return s.inflightFrames }

// Written tells the Sender the transport finished writing an item of n
// bytes that Next handed out.
func (s *Sender) Written(n int) {
	s.inflightFrames--
	s.inflightBytes -= int64(n)
	if s.inflightFrames < 0 || s.inflightBytes < 0 {
		panic("flow: Sender.Written without a matching Next")
	}
}

// Pending reports whether anything could be handed out if the transport
// had room.
func (s *Sender) Pending() bool {
	return s.control.Len() > 0 || s.credits.Len() > 0 || s.windows.Len() > 0 || s.head != nil
}

// Next hands out the next item for the transport, appended to dst: a
// control message (a queued one is returned as is, dst unused), else the
// next frame of the scheduled subscription. It returns nil when the
// transport is full or nothing is ready. A subscription-level failure is
// returned as *StreamError with the stream already closed; the owner
// resets it and calls Next again.
//
// The transport bound: while items are in flight, an item is handed out
// only if it fits in the TransportBytes left. A control message or credit
// that does not fit waits (control keeps its priority); a frame is cut to
// fit, and when even a minimal frame does not fit, Next waits for Written.
// Frames are capped in UTF-16 bytes at 2/3 of the wire bytes left, since
// every character we write takes at most 1.5 UTF-8 bytes per UTF-16 byte.
//
// Pass dst with length 0 (its capacity is reused); the length of the
// returned item is what Written takes.
func (s *Sender) Next(dst []byte) ([]byte, error) {
	if s.TransportFull() {
		return nil, nil
	}
	room := int64(math.MaxInt64)
	if s.inflightFrames > 0 {
		room = s.cfg.TransportBytes - s.inflightBytes
	}
	for s.windows.Len() > 0 {
		st := s.windows.Peek()
		if st.closed {
			s.windows.Pop()
			st.windowQueued = false
			continue
		}
		b := AppendWindow(dst, st.channel, st.id, st.recv.Limits().WindowBytes)
		if int64(len(b)) > room {
			return nil, nil
		}
		s.windows.Pop()
		st.windowQueued = false
		return s.handOut(b), nil
	}
	for s.credits.Len() > 0 {
		st := s.credits.Peek()
		if st.closed {
			s.credits.Pop()
			st.creditQueued = false
			continue
		}
		b := AppendCredit(dst, st.channel, st.id, st.recv.Announced())
		if int64(len(b)) > room {
			return nil, nil
		}
		s.credits.Pop()
		st.creditQueued = false
		return s.handOut(b), nil
	}
	if s.control.Len() > 0 {
		if int64(len(s.control.Peek())) > room {
			return nil, nil
		}
		msg := s.control.Pop()
		s.controlBytes -= int64(len(msg))
		return s.handOut(msg), nil
	}
	maxFrame := int64(math.MaxInt64)
	if room != math.MaxInt64 {
		maxFrame = room * 2 / 3
	}
	for s.head != nil {
		st := s.head
		if st.deficit <= 0 {
			// A new turn: grant a quantum and go to the back, so every
			// ready stream gets one turn per round.
			st.deficit += s.cfg.Quantum
			if st.deficit <= 0 {
				// Still in debt from a frame much larger than the
				// quantum: wait for more rounds.
				s.head = st.next
				continue
			}
		}
		if maxFrame < st.minFrame {
			// Not even a minimal frame fits in the transport's room:
			// wait for Written (something is in flight).
			return nil, nil
		}
		frame, wire, ok, err := s.nextFrame(st, dst, maxFrame)
		if err != nil {
			s.Close(st)
			return nil, &StreamError{st, err}
		}
		if !ok {
			s.unlink(st)
			continue
		}
		st.deficit -= wire
		if st.deficit <= 0 {
			s.head = st.next
		}
		return s.handOut(frame), nil
	}
	return nil, nil
}

func (s *Sender) handOut(b []byte) []byte {
	s.inflightFrames++
	s.inflightBytes += int64(len(b))
	return b
}

// nextFrame produces the stream's next frame, starting a message if none
// is active. wire is the frame's size on the wire (UTF-8 bytes), charged
// to the deficit.
func (s *Sender) nextFrame(st *Stream, dst []byte, maxFrame int64) (frame []byte, wire int64, ok bool, err error) {
	if !st.win.Active() {
		var m Message
		var id int64
		replay := st.replay.Len() > 0
		if replay {
			e := st.replay.Pop()
			m, id = e.msg, e.id
		} else {
			var got bool
			want := st.win.PullSize()
			allowed := st.win.MayStart()
			reserved := int64(0)
			if allowed {
				if reserved = s.reserve(want); reserved == 0 {
					allowed = false
				} else {
					want = reserved
				}
			}
			m, got = st.src.Pull(allowed, want)
			if got && m.Size == 0 {
				m.Size = m.size()
			}
			if got && m.Class == Data {
				s.take(st, m.Size, reserved)
			} else {
				s.unreserve(reserved)
			}
			if !got {
				if !allowed && st.win.MayStart() && !st.starved {
					// Refused for the budget, not the window: nothing
					// else would wake it.
					st.starved = true
					s.starved = append(s.starved, st)
				}
				return nil, 0, false, nil
			}
			id = st.nextID
		}
		size := m.Size // set above, and always for a journalled message
		if m.Escaped != "" && st.journal != nil {
			return nil, 0, false, fmt.Errorf("%w: an escaped message on a stream with a journal", ErrSourceContract)
		}
		if replay {
			err = st.win.startReplay(size)
		} else {
			// The window counts the lifecycle messages it started and
			// holds them to MaxLifecycleMessages; the Sender's bound may
			// be lower.
			if m.Class == Lifecycle && st.win.lifecycles >= s.cfg.MaxLifecycle {
				return nil, 0, false, fmt.Errorf("%w: more than %d lifecycle messages", ErrSourceContract, s.cfg.MaxLifecycle)
			}
			err = st.win.Start(size, m.Class)
		}
		if err != nil {
			return nil, 0, false, err
		}
		if m.Escaped != "" {
			err = st.frag.ResetEscaped(st.channel, st.id, id, m.Escaped, st.win.limits.MaximumFrameBytes)
		} else {
			err = st.frag.Reset(st.channel, st.id, id, m.Text, st.win.limits.MaximumFrameBytes)
			st.frag.Plain(m.PlainFrom, m.PlainTo)
		}
		if err != nil {
			return nil, 0, false, err
		}
		if replay && m.Class == Data {
			s.take(st, size, 0)
		}
		if !replay {
			st.pulled = true
			if st.journal != nil {
				st.journal.append(id, st.win.msgEnd-size, st.win.msgEnd, m)
			}
			st.nextID++
		}
	}
	start := len(dst)
	dst, payload, final := st.frag.next(dst, maxFrame)
	st.win.Reserve(payload)
	if final {
		st.win.Finish()
		s.release(st)
		if st.pulled {
			st.pulled = false
			if f, ok := st.src.(Finisher); ok {
				f.Finished(st.win.MayStart())
			}
		}
	}
	return dst, int64(len(dst) - start), true, nil
}

// startReplay starts a journalled message again: it was admitted under the
// window when first sent, so the start rule does not apply.
func (w *SendWindow) startReplay(size int64) error {
	if w.active {
		return fmt.Errorf("%w: a message is already active", ErrSourceContract)
	}
	w.active = true
	w.msgEnd = w.sent + size
	w.bounds.Push(w.msgEnd)
	return nil
}
