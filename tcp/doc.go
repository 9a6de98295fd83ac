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
//     writes block in its kernel buffers.
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
//     channel supersedes it. A resume that cannot be reconciled, and the
//     retention expiring, close the channel: never a silent new socket.
//   - End: tcp/eof each way is a half-close; tcp/closed follows once both
//     halves are closed and everything before it was sent, and the channel
//     ends when the client has released it. A reset or a write error from
//     the target ends the subscription with tcp-reset and the channel with
//     it.
package tcp
