// Package tcp is the TCP channel kind (PROTOCOL.md §8): a socket the host
// dialed to an allow-listed target, served to one consumer at a time,
// lossless, backpressured both ways and resumable across reconnects.
//
// A Channel implements flow.Channel and each subscription a
// flow.Subscriber. Its loss policy is none: it never drops a byte.
//
//   - Targets: an AllowList admits them, by name and, at dial time, by
//     every address the name resolves to. Addresses are compared as
//     IPv4 when they are IPv4-mapped, rules included: a mapped prefix is
//     the IPv4 prefix it maps (::ffff:127.0.0.0/104 is 127.0.0.0/8), and
//     one shorter than /96 is refused. The unspecified addresses 0.0.0.0
//     and ::, which a dial takes to this host, are admitted only by a
//     rule naming that one address (0.0.0.0:P, [::]:P), never by a prefix
//     that contains them (0.0.0.0/0, ::/0, ::ffff:0:0/96).
//   - Target→client: a reader goroutine reads the socket into at most two
//     buffers of readSize bytes and stops reading while both are full; the
//     consumer's connection Pulls them as tcp/data only when a new message
//     may start (its window and the connection's budget), so a consumer
//     that does not credit stops the socket being read, and the target's
//     writes block in its kernel buffers. channel/ready is a data message
//     too (PROTOCOL.md §4): after a resume it waits for the window like
//     tcp/data.
//   - Memory: besides its two read buffers, a channel holds the journal
//     of what was sent and not yet credited, which outlives connections.
//     Two bounds hold it whatever window the client asked. No data
//     message starts while the journal retains Config.MaxRetained
//     (default DefaultMaxRetained, 4 MiB) UTF-16 bytes, the unit of
//     windowBytes: it retains less than that plus one message (64 KiB),
//     about half as much memory, and credit that releases it wakes the
//     subscription. And the journal's memory, retained texts and the
//     released buffers it keeps for reuse, counts in Config.Budget, which
//     outlives connections as the journal does: no data message starts
//     while the budget has less than flow.MinPullSize left, and one is
//     cut to what is left; the channel's budget goroutine wakes the
//     subscription once Budget.Freed reports room. Either way the read
//     buffers stay full and the target is not read (backpressure, §8).
//     When the channel ends (closed, finished, reset, retention expired)
//     the journal is discarded and its memory goes back: at once if no
//     connection holds it, else when that connection's subscriber Closes
//     (its Sender uses the journal until then).
//   - Client→target: tcp/input and tcp/eof go to a writer goroutine, and
//     the client is credited only once the bytes were written to the
//     socket (flow.AttachRequest.Release): the host's receive window bounds
//     what is queued.
//   - Resume: the channel keeps, across connections, the flow.Journal of
//     sent but unreleased host→client messages and the flow.Receiver of
//     client→host ones (the lease), lent to the subscription that holds
//     the channel. A consumer that leaves starts the retention timer
//     (tcpRetain); a resume with the newest token before it fires takes
//     the lease back: the journal reconciles the client's accepted and
//     released positions and replays what follows accepted, and the
//     result tells the client the host's positions so that it resends
//     what follows them. A resume while another connection holds the
//     channel supersedes it: the old subscription starts nothing more
//     and is reset superseded, and the resume is Ready only once that
//     one's subscriber has Closed, after its connection closed its
//     stream, so no two Senders ever use the journal. A resume that cannot be reconciled, and the
//     retention expiring, close the channel: never a silent new socket.
//   - End: tcp/eof each way is a half-close; tcp/closed follows once both
//     halves are closed and everything before it was sent, and the channel
//     ends when the client has released it. A reset or a write error from
//     the target ends the subscription with tcp-reset and the channel with
//     it.
package tcp
