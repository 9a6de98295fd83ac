// Package systemd is the systemd side of ahpd, written against the
// documented interfaces with the standard library only (no libsystemd, no
// go-systemd):
//   - sd_notify(3): datagrams to $NOTIFY_SOCKET (a path, or "@name" for an
//     abstract socket): READY=1, RELOADING=1, STOPPING=1, STATUS=, WATCHDOG=1;
//   - the watchdog: $WATCHDOG_USEC (and $WATCHDOG_PID, which must be ours);
//   - socket activation, sd_listen_fds(3): $LISTEN_PID, $LISTEN_FDS and
//     $LISTEN_FDNAMES, descriptors from 3;
//   - journald's stderr stream: $JOURNAL_STREAM names the device and inode
//     of stderr when it is connected to the journal; lines then start with a
//     syslog priority "<N>" and carry no timestamp (journald adds its own).
//
// Each of these variables is removed from the environment once read, so the
// shells that ahpd starts neither inherit the listening sockets' numbers nor
// talk to systemd in the daemon's name.
//
// Concurrency: a *Notifier is safe for concurrent use; the other functions
// read and clear the environment and are meant for the daemon's start.
package systemd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// listenFDsStart is SD_LISTEN_FDS_START: the first passed descriptor.
const listenFDsStart = 3

// Notifier sends sd_notify(3) messages to the service manager. A nil
// *Notifier (not started by systemd) drops them.
type Notifier struct {
	addr *net.UnixAddr
	mu   sync.Mutex // serializes writes so that messages never interleave
}

// NotifierFromEnv takes $NOTIFY_SOCKET out of the environment and returns
// a Notifier for it, or nil if it is unset.
func NotifierFromEnv() (*Notifier, error) {
	path := os.Getenv("NOTIFY_SOCKET")
	os.Unsetenv("NOTIFY_SOCKET")
	switch {
	case path == "":
		return nil, nil
	case path[0] != '/' && path[0] != '@':
		// systemd 253+ may also pass vsock:CID:PORT (for VMs).
		return nil, fmt.Errorf("NOTIFY_SOCKET=%q: only unix socket paths and @abstract names are supported", path)
	}
	// The net package maps a leading '@' to Linux's abstract namespace.
	return &Notifier{addr: &net.UnixAddr{Name: path, Net: "unixgram"}}, nil
}

// Notify sends state, newline-separated VAR=value assignments, in one
// datagram.
func (n *Notifier) Notify(state string) error {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	c, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	return nil
}

// WatchdogFromEnv takes $WATCHDOG_USEC and $WATCHDOG_PID out of the
// environment and returns the watchdog timeout, or 0 if there is none for
// this process.
func WatchdogFromEnv() (time.Duration, error) {
	usec, pid := os.Getenv("WATCHDOG_USEC"), os.Getenv("WATCHDOG_PID")
	os.Unsetenv("WATCHDOG_USEC")
	os.Unsetenv("WATCHDOG_PID")
	if usec == "" {
		return 0, nil
	}
	if pid != "" && pid != strconv.Itoa(os.Getpid()) {
		return 0, nil // meant for another process (a wrapper that exec'd us would keep its pid)
	}
	n, err := strconv.ParseInt(usec, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("WATCHDOG_USEC=%q: want a positive number of microseconds", usec)
	}
	return time.Duration(n) * time.Microsecond, nil
}

// Activated holds the listeners passed by socket activation.
type Activated struct {
	HTTP    net.Listener // nil if none was passed
	Control net.Listener // nil if none was passed
}

// Close closes the listeners (our descriptors; systemd keeps its own).
func (a Activated) Close() {
	if a.HTTP != nil {
		a.HTTP.Close()
	}
	if a.Control != nil {
		a.Control.Close()
	}
}

// ListenersFromEnv implements sd_listen_fds_with_names(3) with
// unset_environment: if $LISTEN_PID is this process, descriptors 3 ..
// 3+$LISTEN_FDS-1 are listening sockets named by $LISTEN_FDNAMES. The one
// named "http" is the HTTP listener and "control" the control socket; an
// unnamed one (systemd names it after its socket unit, since one socket unit
// gives all its sockets one name) is the HTTP listener if it is TCP and the
// control socket if it is a unix socket. Each descriptor is replaced by a
// close-on-exec duplicate, so shells never inherit a listening socket.
func ListenersFromEnv() (Activated, error) {
	pidS, nS, namesS := os.Getenv("LISTEN_PID"), os.Getenv("LISTEN_FDS"), os.Getenv("LISTEN_FDNAMES")
	for _, k := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		os.Unsetenv(k)
	}
	if nS == "" || pidS != strconv.Itoa(os.Getpid()) {
		return Activated{}, nil
	}
	n, err := strconv.Atoi(nS)
	if err != nil || n < 0 || n > 64 {
		return Activated{}, fmt.Errorf("socket activation: LISTEN_FDS=%q: want a count of descriptors", nS)
	}
	var names []string
	if namesS != "" {
		names = strings.Split(namesS, ":")
	}
	var a Activated
	var errs []error
	for i := range n {
		fd := listenFDsStart + i
		name := ""
		if i < len(names) {
			name = names[i]
		}
		ln, err := adoptListener(fd, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		slot, what := &a.HTTP, "http"
		switch {
		case name == "control":
			slot, what = &a.Control, "control"
		case name == "http":
		case ln.Addr().Network() == "unix":
			slot, what = &a.Control, "control"
		}
		if what == "http" && ln.Addr().Network() != "tcp" {
			errs = append(errs, fmt.Errorf("socket activation: fd %d (%q, %s %s): the HTTP listener must be a TCP socket", fd, name, ln.Addr().Network(), ln.Addr()))
			ln.Close()
			continue
		}
		if *slot != nil {
			errs = append(errs, fmt.Errorf("socket activation: fd %d (%q, %s): a second %s listener (the first is %s); ahpd serves one of each", fd, name, ln.Addr(), what, (*slot).Addr()))
			ln.Close()
			continue
		}
		*slot = ln
	}
	if err := errors.Join(errs...); err != nil {
		a.Close()
		return Activated{}, err
	}
	return a, nil
}

// adoptListener turns passed descriptor fd into a net.Listener and closes
// fd (net.FileListener holds a close-on-exec duplicate).
func adoptListener(fd int, name string) (net.Listener, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("socket activation: fd %d (%q): %w", fd, name, err)
	}
	f := os.NewFile(uintptr(fd), "LISTEN_FD_"+strconv.Itoa(fd))
	defer f.Close()
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("socket activation: fd %d (%q) is not a socket", fd, name)
	}
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || v == 0 {
		return nil, fmt.Errorf("socket activation: fd %d (%q) is not a listening stream socket (ListenStream= in the socket unit)", fd, name)
	}
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("socket activation: fd %d (%q): %w", fd, name, err)
	}
	return ln, nil
}

// JournalStderr reports whether w is the stream that $JOURNAL_STREAM
// ("DEVICE:INODE") names, i.e. stderr goes to journald. A mere
// $INVOCATION_ID is not enough: the unit may send stderr to a file, and a
// shell started by ahpd inherits both variables with stderr on its PTY.
func JournalStderr(w io.Writer) bool {
	js := os.Getenv("JOURNAL_STREAM")
	f, ok := w.(*os.File)
	if js == "" || !ok {
		return false
	}
	devS, inoS, ok := strings.Cut(js, ":")
	if !ok {
		return false
	}
	dev, err1 := strconv.ParseUint(devS, 10, 64)
	ino, err2 := strconv.ParseUint(inoS, 10, 64)
	var st unix.Stat_t
	if err1 != nil || err2 != nil || unix.Fstat(int(f.Fd()), &st) != nil {
		return false
	}
	return uint64(st.Dev) == dev && uint64(st.Ino) == ino
}

// journalHandler writes records for journald's stderr stream: one line
// each, "<PRIORITY>message key=value ...", without time or level (the
// journal records both: the priority prefix is the level).
type journalHandler struct {
	inner slog.Handler // a TextHandler writing into out.buf
	out   *journalOut
}

// journalOut is shared by a journalHandler and those derived from it.
type journalOut struct {
	mu  sync.Mutex // guards buf and serializes writes to w
	buf bytes.Buffer
	w   io.Writer
}

func NewJournalHandler(w io.Writer, level slog.Leveler) slog.Handler {
	out := &journalOut{w: w}
	return &journalHandler{out: out, inner: slog.NewTextHandler(&out.buf, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey) {
				return slog.Attr{}
			}
			return a
		},
	})}
}

// syslogPriority maps a level to sd-daemon(3)'s prefixes: <3> err,
// <4> warning, <6> info, <7> debug.
func syslogPriority(l slog.Level) int {
	switch {
	case l >= slog.LevelError:
		return 3
	case l >= slog.LevelWarn:
		return 4
	case l >= slog.LevelInfo:
		return 6
	}
	return 7
}

func (h *journalHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *journalHandler) Handle(ctx context.Context, r slog.Record) error {
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	h.out.buf.Reset()
	if err := h.inner.Handle(ctx, r); err != nil {
		return err
	}
	attrs := bytes.TrimSpace(h.out.buf.Bytes())
	msg := r.Message
	// journald splits a stream at newlines; keep a record on one line.
	if msg == "" || strings.ContainsAny(msg, "\n\r") {
		msg = strconv.Quote(msg)
	}
	line := make([]byte, 0, 8+len(msg)+len(attrs))
	line = append(line, '<')
	line = strconv.AppendInt(line, int64(syslogPriority(r.Level)), 10)
	line = append(line, '>')
	line = append(line, msg...)
	if len(attrs) > 0 {
		line = append(line, ' ')
		line = append(line, attrs...)
	}
	line = append(line, '\n')
	_, err := h.out.w.Write(line)
	return err
}

func (h *journalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &journalHandler{inner: h.inner.WithAttrs(as), out: h.out}
}

func (h *journalHandler) WithGroup(name string) slog.Handler {
	return &journalHandler{inner: h.inner.WithGroup(name), out: h.out}
}

// MonotonicUsec is CLOCK_MONOTONIC in microseconds, for RELOADING=1's
// MONOTONIC_USEC (systemd 253+ wants it with Type=notify-reload).
func MonotonicUsec() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano() / 1000
}
