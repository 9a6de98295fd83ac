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
// Fragmenter in one pass, reserving its bytes. Frames are made one at a
// time, so below the Sources there is never more than the bounded control
// lane and TransportFrames/TransportBytes in the transport.
//
// # Errors
//
// Violations by the peer are values, never panics: subscription-level
// errors map to channel/reset codes with ResetCode; ErrControlOverflow is
// connection-level. Panics are reserved for broken internal invariants.
package flow
