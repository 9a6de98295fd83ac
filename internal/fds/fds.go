// Package fds keeps inherited file descriptors from reaching the shells
// ahpd starts (CloseOnExecInherited). It is called once, at start, before
// any goroutine could fork.
package fds

import (
	"os"
	"strconv"
	"syscall"
)

// maxFDScan bounds the descriptors CloseOnExecInherited walks when it
// cannot list /proc/self/fd.
const maxFDScan = 1 << 16

// CloseOnExecInherited marks every descriptor above 2 close-on-exec, so
// that no shell ahpd starts inherits one: Go opens its own descriptors with
// O_CLOEXEC, but those the daemon inherited (a parent's leak, systemd's
// socket-activation listeners before they are adopted) are not. The
// descriptors stay open: socket activation still adopts its listeners.
// ahpd calls it first thing, before any goroutine could fork.
func CloseOnExecInherited() {
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		for _, e := range ents {
			if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
				syscall.CloseOnExec(fd) // the listing's own descriptor may be gone: harmless
			}
		}
		return
	}
	n := maxFDScan
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil && rl.Cur < uint64(n) {
		n = int(rl.Cur)
	}
	for fd := 3; fd < n; fd++ {
		syscall.CloseOnExec(fd)
	}
}

// Open returns how many descriptors the process has open and its soft
// limit on them (RLIMIT_NOFILE), read from /proc/self/fd: a count, O(open).
func Open() (open int, limit uint64, err error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, err
	}
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, 0, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return 0, 0, err
	}
	return len(names) - 1, rl.Cur, nil // less the directory's own
}
