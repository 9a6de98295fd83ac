package control

import (
	"fmt"
	"net"
	"os"
	"syscall"
)

// FromListener adopts a control socket that another process bound and
// listens on: systemd's socket activation (ahpd.socket) passes it to the
// daemon. The socket file belongs to that process, so Close closes this
// process's descriptor but neither removes the file nor takes the lock that
// Listen takes (systemd already serializes daemons on the socket). ln must
// be a unix stream listener on a path (not an abstract address, which any
// process in the network namespace could reach); a socket file that other
// users may connect to (mode o+w) is refused with ErrUnsafe, since whoever
// connects is an operator with every right.
func FromListener(ln net.Listener) (*Listener, error) {
	ul, ok := ln.(*net.UnixListener)
	if !ok {
		return nil, fmt.Errorf("control socket: inherited listener on %s is not a unix socket", ln.Addr())
	}
	path := ul.Addr().String()
	if path == "" || path[0] == '@' || path[0] == 0 {
		return nil, fmt.Errorf("%w: inherited control socket %q has no path (abstract or unnamed)", ErrUnsafe, path)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return nil, fmt.Errorf("control socket %s: not a socket", path)
	}
	if fi.Mode().Perm()&0o002 != 0 {
		return nil, fmt.Errorf("%w: inherited control socket %s (mode %v) lets every user connect; set SocketMode=0660 or 0600", ErrUnsafe, path, fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() && st.Uid != 0 {
		return nil, fmt.Errorf("%w: inherited control socket %s is owned by uid %d, not by this user (uid %d) or root", ErrUnsafe, path, st.Uid, os.Geteuid())
	}
	// inode and lock stay nil: Close then neither removes the file nor
	// releases a lock (os.SameFile(fi, nil) is false; (*os.File)(nil).Close
	// only returns ErrInvalid).
	return &Listener{Listener: ul, path: path}, nil
}
