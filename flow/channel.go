package flow

import (
	"encoding/json"
	"fmt"
)

// The channel contract: what a channel kind (package pty, and tcp and
// telemetry after it) implements so that a connection can serve it
// without knowing its kind. The doc comment of the package, "Channels",
// says how a connection drives it.

// ChannelState is a channel's state (PROTOCOL.md §2).
type ChannelState string

// The channel states.
const (
	StateRunning ChannelState = "running"
	StateExited  ChannelState = "exited" // the process or the socket ended; viewers may still read what was queued
	StateClosed  ChannelState = "closed" // Close was called
)

// Role is what a subscriber may do (PROTOCOL.md §2): view only reads;
// control sends data and kind requests too.
type Role uint8

// The roles.
const (
	RoleView Role = iota + 1
	RoleControl
)

// Channel is a resource the host owns and serves to subscribers.
// Its methods are safe for concurrent use.
type Channel interface {
	// Kind is the channel type: "terminal", "telemetry" or "tcp".
	Kind() string
	// State is running, exited or closed.
	State() ChannelState
	// Describe returns what channels/list and the control plane show.
	Describe() Description
	// Attach adds a subscriber. It never blocks: work that waits (a
	// lease held by another connection, a dial) completes later and is
	// reported through Subscriber.Ready and AttachRequest.Wake. An error
	// refuses the subscription; an *Error carries its JSON-RPC code.
	Attach(req AttachRequest) (Subscriber, error)
	// Close ends the channel: its subscribers report an End, new
	// Attaches fail. Close is idempotent and may block (a process's
	// hang-up); the session calls it off its run loops. A kind that ends
	// its channel itself closes Done, and the channel leaves the registry.
	Close() error
	// Done is closed once Close has finished releasing the channel.
	Done() <-chan struct{}
}

// Description is a channel's changing description.
type Description struct {
	// Title is what the channel calls itself (a program's window title),
	// or "" for none.
	Title string
	// Detail is a short kind-specific state detail: an exit status
	// ("code 0", "signal SIGHUP") or "" for none.
	Detail string
	// Exit is how the channel's process ended, once it has (nil before,
	// and for kinds without a process).
	Exit *Exit
}

// Exit is how a channel's process ended: its exit code, or the signal
// that killed it (Signal non-empty, Code then meaningless).
type Exit struct {
	Code   int
	Signal string
}

// AttachRequest is what a subscriber is attached with.
type AttachRequest struct {
	// Wake is called, never blocking and never with a lock its caller
	// could need, whenever the subscriber has something new: a message
	// to Pull, a Ready that may have changed, an End.
	Wake func()
	// Window is the client's negotiated receive window (host→client).
	Window int64
	// Role is the subscriber's role.
	Role Role
	// Resume is the client's resume request (PROTOCOL.md §8), or nil.
	// A kind that cannot resume ignores it.
	Resume *ResumeRequest
	// Receive are the host's receive limits for this subscription's
	// client→host messages: a kind that keeps its own Receiver (a lease)
	// makes it with them.
	Receive ReceiveLimits
	// Release credits the client for its client→host messages up to and
	// including p, which the kind has consumed. A kind that lends a
	// Receiver and whose consumption outlives a connection (a TCP write
	// that completes after a resume) calls the current holder's Release
	// with the message's position instead of Deliver's release; p is the
	// lent Receiver's Accepted() when the message was delivered. It may
	// be called from any goroutine, never blocks, and is ignored once the
	// subscriber is Closed.
	Release func(p Position)
	// Queue, when set, is the connection's budget for what kinds queue
	// for their subscribers on the host (a telemetry viewer's batches),
	// shared by its subscriptions: a kind takes the bytes it queues
	// (Budget.Take) and gives them back when they leave the queue, and
	// when Left has no room for more it applies its loss policy instead
	// of queuing (PROTOCOL.md §8, telemetry).
	Queue *Budget
}

// ResumeRequest is the resume member of subscribe (PROTOCOL.md §8).
type ResumeRequest struct {
	Token    string   `json:"token"`
	Accepted Position `json:"accepted"`
	Released Position `json:"released"`
}

// Initial kinds of a subscribe result (PROTOCOL.md §3).
const (
	InitialSnapshot = "snapshot"
	InitialReplay   = "replay"
	InitialLive     = "live"
)

// AttachResult is what a subscriber starts with, once Ready.
type AttachResult struct {
	// Initial is InitialSnapshot, InitialReplay or InitialLive.
	Initial string
	// Resume, when not nil, is the result's resume member: the newest
	// resume token and the host's positions of client→host messages.
	Resume *ResumeResult
	// The lease of a lossless subscriber: state the channel keeps across
	// connections and lends to the one that holds it, until the
	// subscriber is Closed. Nil fields: the connection makes fresh ones.
	// While lent, they belong to the connection's owner goroutine.
	// Sender.Open resumes a lent Receiver (a message it holds incomplete
	// is dropped: the client resends after the host's accepted position),
	// and the connection states the Receiver's limits in the result. If the Journal cannot resume at
	// ResumeFrom (ErrResume), the subscribe gets -32006 and the subscriber
	// is Closed, which ends the lease.
	Journal    *Journal     // retains sent, unreleased host→client messages
	Receiver   *Receiver    // client→host reassembly and positions
	ResumeFrom *ResumePoint // where the Journal continues (with Journal)
}

// ResumeResult is the resume member of a subscribe result.
type ResumeResult struct {
	Token    string   `json:"token"`
	Accepted Position `json:"accepted"`
	Released Position `json:"released"`
}

// Subscriber is one subscription's end of a channel. Pull (its Source)
// and the other methods are called from the connection's owner goroutine
// only; Wake may come from any goroutine.
type Subscriber interface {
	// Source produces the host→client logical messages; it is pulled
	// only after Ready reported true.
	Source
	// Ready reports whether the subscription may start: false while it
	// waits (for a lease, a dial), and Wake follows when that changes.
	// An error refuses the subscription (an *Error for its code); the
	// connection then Closes the subscriber.
	Ready() (AttachResult, bool, error)
	// Deliver hands over one complete client→host logical message, a
	// JSON-RPC notification: its method and params. When Deliver returns
	// nil, release is called exactly once, from any goroutine, when the
	// bytes are consumed (written to the PTY, the socket) — the
	// connection credits the client then (a kind that lends a Receiver
	// may call AttachRequest.Release instead). An error (a *Reset for its
	// code) ends the subscription, and release may never be called.
	// params is a JSON value (its strings' UTF-8 unchecked), nil when
	// absent; it may alias the connection's buffers, so a kind copies
	// what it keeps past the call.
	Deliver(method string, params json.RawMessage, release func()) error
	// Request answers a kind request (terminal/resize); its result is
	// sent as the JSON-RPC result. The kind checks the role it was
	// attached with (-32003 for one it refuses). An *Error carries its
	// code; any other error is -32602 invalid params.
	Request(method string, params json.RawMessage) (any, error)
	// End is why the subscription ended on the host's side (the channel
	// closed, a newer holder superseded it, the socket was reset), or
	// nil while it goes on.
	End() *Reset
	// Stats returns the subscriber's counters.
	Stats() SubscriberStats
	// Close detaches the subscriber and ends a lease; idempotent.
	Close()
}

// Unsubscriber is implemented by a Subscriber whose channel reacts to
// the client's own unsubscribe, as against the connection's loss: the
// connection calls Unsubscribed before Close. A TCP channel ends there
// (its consumer is done with it), where a lost connection keeps it for
// resume.
type Unsubscriber interface {
	Unsubscribed()
}

// SubscriberStats are one subscriber's counters.
type SubscriberStats struct {
	BytesSent    int64 // UTF-16 bytes of all messages Pull returned
	BytesDropped int64 // bytes dropped by the kind's loss policy
	Snapshots    int64 // snapshots started (the initial one included)
	Queued       int64 // bytes queued for the subscriber, not yet pulled
}

// Reset codes of PROTOCOL.md §7 that channels and connections report
// (the flow-control ones are above, with ResetCode).
const (
	CodeChannelClosed = "channel-closed"
	CodeOverflow      = "overflow"
	CodeForbidden     = "forbidden"
	CodeSuperseded    = "superseded"
	CodeTCPReset      = "tcp-reset"
)

// Reset ends one subscription: a channel/reset code and message.
type Reset struct {
	Code    string
	Message string
}

func (r *Reset) Error() string { return r.Code + ": " + r.Message }

// JSON-RPC error codes of PROTOCOL.md §7: those a channel returns (in an
// *Error) and those the connection answers with.
const (
	// JSON-RPC's own.
	ErrCodeParse, ErrCodeInvalidRequest, ErrCodeMethodNotFound = -32700, -32600, -32601
	ErrCodeInvalidParams, ErrCodeInternal                      = -32602, -32603

	// AHP/1's: access and bounds, then channels and subscriptions.
	ErrCodeUnauthorized, ErrCodeForbidden, ErrCodeLimitExceeded = -32001, -32003, -32004
	ErrCodeChannelNotFound, ErrCodeUnknownSubscriber            = -32002, -32005
	ErrCodeResumeFailed, ErrCodeChannelBusy                     = -32006, -32007
	ErrCodeConnectFailed                                        = -32008
)

// Error is a JSON-RPC error a channel answers a subscribe or a request
// with.
type Error struct {
	Code    int
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%d: %s", e.Code, e.Message) }
