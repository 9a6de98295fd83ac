// Package linkemu emulates a network link on loopback for tests and
// benchmarks (issue 40): a TCP proxy on 127.0.0.1 that forwards every
// connection it accepts to a target address through two independent
// one-way links, up (client to target) and down (target to client), each
// with a propagation delay, a bounded jitter, a bandwidth and a bounded
// bottleneck queue. The kernel's netem is not available on our machines;
// this is what tests, make bench-* programs and the browser e2e tests
// put between a client and the daemon.
//
// The model of one direction, per chunk of bytes the proxy reads from the
// sender (at most 256 KiB; at most 1 ms of the rate when Rate is set):
//
//   - The chunk enters the bottleneck queue when it is read. The queue
//     drains at Rate bytes/s, a chunk after the other, like a router's
//     interface serialising packets (a token bucket one chunk deep: a
//     chunk of n bytes leaves n/Rate after the previous one left, or
//     after it arrived if the link was idle). When the queue holds Queue
//     bytes the proxy stops reading from the sender, so backpressure
//     reaches it through TCP as it would at a full router buffer.
//   - A chunk that left the queue is delivered Delay later, plus a
//     jitter drawn uniformly from [-Jitter, +Jitter] (at least zero in
//     all) by a generator seeded with Seed. A chunk is never delivered
//     before the one read before it: TCP is a stream, jitter delays whole
//     chunks and never reorders bytes.
//   - Delays are pipelined: each chunk's delivery time is fixed when it
//     is read, so a 100 ms delay with a high rate carries Rate × 100 ms
//     in flight, not one chunk per 100 ms.
//
// Memory is bounded per connection and direction: the proxy holds at
// most Queue + Rate × (Delay + Jitter) + one chunk bytes (Queue alone
// when Rate is 0, which then also bounds the bytes in flight: with Rate 0
// and a delay, set Queue to the bytes the path must carry per Delay).
// Link.Stats reports the bytes held.
//
// End of stream and failures: a sender's half-close (EOF) is delivered,
// in order, as a CloseWrite to the other side after the bytes before it;
// a read error other than EOF (a reset), or a failed write, closes both
// sides (the other with an RST).
//
// Concurrency: a Link's methods are safe for concurrent use. Start
// starts an accept loop and, per connection, four goroutines (a reader
// and a writer per direction); Close stops them all and returns after
// they have ended. The proxy is test tooling: it logs nothing and is not
// built into the binaries we ship.
package linkemu
