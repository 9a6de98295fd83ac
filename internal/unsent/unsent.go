// Package unsent bounds the bytes a TCP socket's kernel holds that have
// not been sent yet (issue 40). A sender's own scheduler decides what goes
// next — a keystroke's echo before a neighbour's bulk — only for bytes it
// still holds: whatever it handed to the kernel waits in the socket's send
// queue in the order written. A fixed SO_SNDBUF bounds that queue but also
// the bytes in flight, capping a long path at SO_SNDBUF ÷ round trip (256
// KiB carries 1.3 MB/s at 200 ms). TCP_NOTSENT_LOWAT bounds only the unsent
// part: the kernel keeps autotuning the buffer to the path's
// bandwidth-delay product for bytes in flight, and a write blocks once the
// unsent bytes reach the mark, so at most about that much sits ahead of
// the next frame the scheduler picks (Linux ≥ 3.12; elsewhere Limit does
// nothing).
package unsent

import "net"

// Bytes is the mark the daemon and ahpctl use: 128 KiB, a millisecond of
// a gigabit link and 10 ms of 100 Mbit/s, at loopback speeds less than
// the 256 KiB SO_SNDBUF it replaced held.
const Bytes = 128 << 10

// Limit sets c's TCP_NOTSENT_LOWAT to n bytes when c is a TCP socket on a
// system that has it; it reports whether it did.
func Limit(c net.Conn, n int) bool {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return false
	}
	return limit(tc, n)
}
