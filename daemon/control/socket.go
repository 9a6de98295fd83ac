package control

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SocketMode is the permission of the control socket: owner and group may
// connect (connecting needs write permission on a unix socket).
const SocketMode os.FileMode = 0o660

// maxSocketPath is the longest path a unix socket address can hold (the
// kernel's sun_path is 108 bytes, NUL included).
const maxSocketPath = 107

// Errors of Listen.
var (
	// ErrInUse means another process serves (or holds the lock of) the path.
	ErrInUse = errors.New("control socket in use")
	// ErrUnsafe means the path or its directory could be tampered with by
	// another user.
	ErrUnsafe = errors.New("control socket path unsafe")
)

// DefaultPath returns the default control socket: $RUNTIME_DIRECTORY/ahpd.sock
// under systemd (RuntimeDirectory=), else $XDG_RUNTIME_DIR/ahpd/control.sock,
// else stateDir/control.sock.
func DefaultPath(stateDir string) string {
	if d := os.Getenv("RUNTIME_DIRECTORY"); d != "" {
		return filepath.Join(filepath.SplitList(d)[0], "ahpd.sock")
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "ahpd", "control.sock")
	}
	return filepath.Join(stateDir, "control.sock")
}

// Listener is the control socket. Close stops listening, removes the socket
// file if it is still the one Listen created, and releases the lock.
type Listener struct {
	net.Listener
	path  string
	inode os.FileInfo
	lock  *os.File

	once     sync.Once
	closeErr error
	kept     bool // Handover ran: Close leaves the socket file
}

// Path returns the socket's absolute path.
func (l *Listener) Path() string { return l.path }

// Close implements net.Listener; it is idempotent.
func (l *Listener) Close() error {
	l.once.Do(func() {
		l.closeErr = l.Listener.Close()
		if fi, err := os.Lstat(l.path); err == nil && !l.kept && os.SameFile(fi, l.inode) {
			_ = os.Remove(l.path)
		}
		// The lock file stays: removing it would let a process that has
		// it open lock a file that no longer has a name.
		_ = l.lock.Close()
	})
	return l.closeErr
}

// Handover returns a descriptor of the listening socket (close-on-exec)
// for the binary an upgrade in place re-executes, which takes it with
// Inherited; Close then leaves the socket file where it is. Connections
// made meanwhile wait in the socket's backlog.
func (l *Listener) Handover() (*os.File, error) {
	fl, ok := l.Listener.(interface{ File() (*os.File, error) })
	if !ok {
		return nil, fmt.Errorf("control socket %s: cannot hand over a %T", l.path, l.Listener)
	}
	f, err := fl.File()
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", l.path, err)
	}
	l.kept = true
	return f, nil
}

// Activated reports whether the socket came from socket activation
// (FromListener): its file is systemd's, not this process's.
func (l *Listener) Activated() bool { return l.lock == nil }

// Inherited takes over the control socket that the previous binary
// handed over (Handover) at an upgrade in place: the checks of
// FromListener, then, unless it came from socket activation (activated:
// the file stays systemd's), the lock and the socket file are this
// process's, as after Listen (Close removes the file).
func Inherited(f *os.File, activated bool) (*Listener, error) {
	ln, err := net.FileListener(f)
	_ = f.Close()
	if err != nil {
		return nil, fmt.Errorf("control socket: inherited descriptor: %w", err)
	}
	l, err := FromListener(ln)
	if err != nil {
		ln.Close()
		return nil, err
	}
	if activated {
		return l, nil
	}
	lock, err := lockPath(l.path + ".lock")
	if err != nil {
		ln.Close()
		return nil, err
	}
	fi, err := os.Lstat(l.path)
	if err != nil {
		lock.Close()
		ln.Close()
		return nil, fmt.Errorf("control socket %s: %w", l.path, err)
	}
	l.lock, l.inode = lock, fi
	return l, nil
}

// Listen creates the control socket at path (mode SocketMode) and listens
// on it:
//   - the parent directory is created with mode 0700 if missing; an existing
//     one must be owned by this user (or root) and not writable by others
//     unless sticky;
//   - PATH.lock is locked exclusively (flock) for the listener's lifetime, so
//     two daemons never race for the same path;
//   - an existing file at path must be a socket owned by this user; if a
//     process answers on it, Listen fails with ErrInUse; otherwise it is stale
//     and removed;
//   - the socket is bound, chmod'ed, and only then listens, so no connection
//     is accepted under a wider mode.
func Listen(path string) (*Listener, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	path = abs
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("control socket %s: path longer than %d bytes", path, maxSocketPath)
	}
	if err := prepareDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	lock, err := lockPath(path + ".lock")
	if err != nil {
		return nil, err
	}
	ln, fi, err := bindSocket(path)
	if err != nil {
		lock.Close()
		return nil, err
	}
	return &Listener{Listener: ln, path: path, inode: fi, lock: lock}, nil
}

func prepareDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("control socket directory: %w", err)
		}
		// MkdirAll honours the umask, which can only narrow 0700; chmod
		// anyway in case the directory appeared concurrently.
		return os.Chmod(dir, 0o700)
	}
	if err != nil {
		return fmt.Errorf("control socket directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("control socket directory %s: not a directory", dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if ok && int(st.Uid) != os.Geteuid() && st.Uid != 0 {
		return fmt.Errorf("%w: directory %s is owned by uid %d, not by this user (uid %d)", ErrUnsafe, dir, st.Uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0 {
		return fmt.Errorf("%w: directory %s (mode %v) is writable by other users", ErrUnsafe, dir, fi.Mode().Perm())
	}
	return nil
}

func lockPath(name string) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("control socket lock: %w", err)
	}
	if fi, err := f.Stat(); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
			f.Close()
			return nil, fmt.Errorf("%w: %s is owned by uid %d, not by this user (uid %d)", ErrUnsafe, name, st.Uid, os.Geteuid())
		}
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: another daemon holds %s", ErrInUse, name)
		}
		return nil, fmt.Errorf("control socket lock %s: %w", name, err)
	}
	return f, nil
}

// removeStale removes a socket at path that nothing answers on.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%w: %s is owned by uid %d, not by this user (uid %d)", ErrUnsafe, path, st.Uid, os.Geteuid())
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("control socket %s: exists and is not a socket; remove it or choose another --control path", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("%w: a process is serving %s (is another ahpd running?)", ErrInUse, path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("control socket %s: probing the existing socket: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("control socket %s: removing stale socket: %w", path, err)
	}
	return nil
}

// bindSocket binds, chmods, then listens (with socket(2)-level calls, since
// net.Listen binds and listens in one step).
func bindSocket(path string) (net.Listener, os.FileInfo, error) {
	if err := removeStale(path); err != nil {
		return nil, nil, err
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("control socket: %w", err)
	}
	unix.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), path)
	defer f.Close() // net.FileListener holds a duplicate
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		return nil, nil, fmt.Errorf("control socket %s: bind: %w", path, err)
	}
	// In a setgid directory the socket takes the directory's group, and
	// its 0660 would let that group's members run commands as this user:
	// it gets the daemon's own group, checked, before it listens.
	err = os.Chown(path, os.Geteuid(), os.Getegid())
	if err == nil {
		err = os.Chmod(path, SocketMode)
	}
	var fi os.FileInfo
	if err == nil {
		fi, err = os.Lstat(path)
	}
	if err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Gid) != os.Getegid() {
			err = fmt.Errorf("%w: the socket has group %d, not the daemon's %d", ErrUnsafe, st.Gid, os.Getegid())
		}
	}
	if err == nil {
		err = unix.Listen(fd, 64)
	}
	var ln net.Listener
	if err == nil {
		ln, err = net.FileListener(f)
	}
	if err != nil {
		_ = os.Remove(path)
		return nil, nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	return ln, fi, nil
}
