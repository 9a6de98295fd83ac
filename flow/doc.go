// Package flow is the transport-independent delivery engine of AHP/1
// (PROTOCOL.md §3–§8): limits and their negotiation, UTF-16 size
// accounting, the JSON string encoding, the channel/frame fragmenter and
// decoder, the receiver (reassembly, window enforcement, credit policy),
// the sender's soft window and credit ledger, the per-connection
// scheduler (control lane first, then deficit round robin over ready
// subscriptions, feeding a bounded transport) and the resume journal.
//
// It does no I/O, starts no goroutines, logs nothing and imports only the
// standard library. Nothing in it is safe for concurrent use: each
// connection has one owner goroutine that owns its Sender, Streams,
// Receivers and Journals, and calls Source.Pull from that goroutine.
//
// # Units
//
// Every size is in UTF-16 bytes, twice the UTF-16 code units of a string
// (UTF16Len), as a JavaScript receiver measures it. A frame's payload is the
// size of its decoded data string; a frame's size for maximumFrameBytes is
// that of its whole serialized text. Positions are cumulative payload bytes
// per subscription direction and stay below 2^53.
//
// # Data path
//
// A channel package implements Source. When the transport has room the
// owner calls Sender.Next: queued credit and control messages go first;
// otherwise the scheduler picks the next ready Stream, which pulls a
// logical message from its Source only if it may start one (the soft
// window of §5: no message active and outstanding < window; lifecycle
// messages need no credit) and hands out one frame of it, produced by the
// Fragmenter in one pass, reserving its bytes (a Source that writes its
// message as the body of a JSON string, Message.Escaped, spares the
// Fragmenter even that pass: its frames are copies). Frames are made one
// at a time, so below the Sources there is never more than the bounded control
// lane and TransportFrames/TransportBytes in the transport.
//
// # Bounds (each proved by a test)
//
//   - SendWindow: a data message starts only while outstanding < window, so
//     outstanding < window + maxMessage with data only; lifecycle messages
//     (at most MaxLifecycleMessages of at most MaxLifecycleBytes each) start
//     without credit and add at most 4 KiB. The credit ledger holds at most
//     (window+maxMessage)/2 + 1 boundaries (TestSendWindowBounds,
//     FuzzCreditLedger).
//   - Receiver: a message may start at received − announced ≥ window only
//     if it is one of at most MaxLifecycleMessages lifecycle-sized ones;
//     the reassembly buffer holds at most maxMessage + one frame
//     (TestReceiverMemoryBound, FuzzReceiver).
//   - Journal: RetainedBytes < window + maxMessage (+ the lifecycle
//     allowance) of the limits in force (TestJournalBound).
//   - Transport: at most TransportFrames items and TransportBytes bytes
//     handed out and not yet Written, except one item of any size when
//     nothing is in flight (TestSenderTransportBound). The control lane is
//     bounded by ControlMessages/ControlBytes; queued credit by one entry
//     per subscription.
//   - Scheduler latency: deficits count wire bytes, and a turn hands out
//     frames only while the deficit is positive, so it takes less than
//     Quantum + F bytes (F = the largest frame). A subscription that
//     becomes ready therefore waits for less than Quantum + F bytes of
//     each subscription ahead of it in the ring; with one busy neighbour,
//     its first frame follows at most Quantum + F − 1 bytes of that
//     neighbour (TestSchedulerLatencyProperty). With N always-ready
//     subscriptions started together, their byte totals stay within
//     Quantum + F − 1 of each other at every step
//     (TestSchedulerFairnessProperty).
//
// # Channels
//
// A channel kind (package pty; tcp and telemetry) implements Channel, and
// each subscription to it a Subscriber (channel.go). A connection serves
// every kind the same way, knowing none of them:
//
//   - subscribe calls Channel.Attach with the negotiated window, the role
//     and the resume request, if any. Attach never blocks. The connection
//     then asks Subscriber.Ready; until it is true (a lease held by
//     another connection, a dial in progress) the subscribe waits, unanswered,
//     while the connection's run loop goes on, and AttachRequest.Wake brings
//     it back. Ready's AttachResult gives the initial kind (snapshot,
//     replay, live), the resume member of the result, and, for a
//     lossless kind, the lease: the Journal and client→host Receiver the
//     channel keeps across connections, and where the Journal resumes.
//     The connection opens its Stream with them (StreamConfig.Journal,
//     Receiver, Resume), owns them from its goroutine while it holds the
//     subscription, and hands them back by Closing the Subscriber. One
//     connection holds a lease at a time; a newer one makes the kind End
//     the older subscription with CodeSuperseded.
//   - The Subscriber is the Stream's Source. Complete client→host logical
//     messages go to Deliver with a release callback: the connection
//     credits the client once the kind has consumed the bytes (written
//     them to the PTY or the socket), so client input is backpressured
//     by the kind.
//   - Other requests that name a subscription ("kind/verb", such as
//     terminal/resize) go to Request; an *Error carries its JSON-RPC code.
//   - End reports a host-side end (the channel closed, superseded, a TCP
//     reset); the connection checks it on every wake-up and sends
//     channel/reset with its code.
//   - subscribe {create:{type, ...}} makes a channel through the daemon's
//     table of creators (daemon.Options.Creators) and then goes on as
//     above; a creator that dials returns at once and its Subscriber is
//     Ready when the dial completes.
//
// So a new kind is a package that implements Channel and Subscriber (and,
// if a subscribe may create it, a service.Creator in the daemon's table of
// creators, built in daemon.New); the connection code does not change.
//
// # Errors
//
// Violations by the peer are values, never panics: subscription-level
// errors map to channel/reset codes with ResetCode; ErrControlOverflow is
// connection-level. Panics are reserved for broken internal invariants.
package flow
