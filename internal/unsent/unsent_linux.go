package unsent

import (
	"net"

	"golang.org/x/sys/unix"
)

func limit(tc *net.TCPConn, n int) bool {
	raw, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, n)
	}); err != nil {
		return false
	}
	return serr == nil
}

// get returns c's TCP_NOTSENT_LOWAT (tests).
func get(tc *net.TCPConn) (int, error) {
	raw, err := tc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var v int
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		v, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT)
	}); err != nil {
		return 0, err
	}
	return v, gerr
}
