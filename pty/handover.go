// A terminal handed from one ahpd to the binary it re-executes in place
// (issue 38): Freeze stops a Terminal where it stands and returns its PTY
// master and its state; Adopt builds a running Terminal from them.

package pty

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Frozen is a Terminal stopped for a hand-over: the PTY master (a
// descriptor of its own, close-on-exec set: clear it for the descriptors
// an execve must keep) and the state Adopt needs. The process still runs,
// a child of this process (an execve keeps it one); output it writes
// meanwhile waits in the PTY.
type Frozen struct {
	Master *os.File
	Pid    int
	State  []byte
}

// handoverVersion is the version of the state Freeze writes; Adopt
// refuses any other.
const handoverVersion = 1

// Flag bits of the hand-over state.
const (
	hfReaped = 1 << iota // the process was reaped: the exit status follows
	hfSignal             // it was killed by a signal: a name follows, not a code
	hfBroken             // writing to the PTY had failed
	hfAll    = 1<<iota - 1
)

// Freeze stops the Terminal for a hand-over and returns what Adopt needs
// to carry it on: the reader stops at its next read (what it read is
// applied to the emulator first; what it did not read stays in the PTY),
// the writer at its next write (what it did not write goes with the
// state, written first by the adopter), and the process is neither
// signalled nor reaped. Attached viewers keep what was queued for them
// and get nothing more; Input and Resize return ErrClosed. Afterwards the
// Terminal is closed: Close does nothing.
//
// Freeze waits for the Terminal's goroutines except the one that waits
// for the process to exit: that one returns when the process exits
// without reaping it, or ends with this process's execve.
func (t *Terminal) Freeze() (Frozen, error) {
	frozen := false
	var fr Frozen
	var err error
	t.closeOnce.Do(func() {
		frozen = true
		fr, err = t.freeze()
	})
	if !frozen {
		return Frozen{}, ErrClosed
	}
	return fr, err
}

func (t *Terminal) freeze() (Frozen, error) {
	t.frozen.Store(true)
	close(t.closing) // Input and Resize refuse; the reader's waits end
	// The reader's next read returns (its own deadlines keep this one:
	// setReadDeadline), and it stops.
	_ = t.master.SetReadDeadline(frozenDeadline)
	<-t.readerDone
	// Everything read is applied to the emulator (which may queue replies
	// to queries in it): it signals emuProg after each batch.
	for {
		t.mu.Lock()
		done := t.emuDoneSeq == t.endSeq
		t.mu.Unlock()
		if done {
			break
		}
		signal(t.emuWake)
		<-t.emuProg
	}
	_ = t.master.SetWriteDeadline(frozenDeadline) // a write waiting for room returns
	close(t.done)
	t.wg.Wait()
	t.emuTimer.Stop()
	t.StopRecording("upgrade in place")
	if t.cfg.Pacer != nil {
		t.cfg.Pacer.forget(t)
	}

	t.reapMu.Lock()
	t.reapFrozen = true
	reaped, st := t.reaped, t.reapStatus
	t.reapMu.Unlock()

	var flags uint64
	if reaped {
		flags |= hfReaped
		if st.Signal != "" {
			flags |= hfSignal
		}
	}
	t.mu.Lock()
	bytesRead := t.bytesRead
	if t.inBroken {
		flags |= hfBroken
	}
	var pending []byte
	var dones []func()
	for _, in := range t.inQ {
		pending = append(pending, in.data...)
		if in.done != nil {
			dones = append(dones, in.done)
		}
	}
	t.inQ, t.inBytes, t.replyBytes = nil, 0, 0
	t.mu.Unlock()
	// The input's memory is copied into the state: its owners may reuse it.
	for _, d := range dones {
		d()
	}

	hs := &handoverState{pid: t.pid, flags: flags, exit: st, bytesRead: bytesRead, dir: t.dir, pending: pending, filter: t.outFilter}
	if hs.filter == nil {
		hs.filter = &filter{} // the reader ended at the PTY's end: nothing held
	}
	t.emuMu.Lock()
	hs.emu = t.emu
	b := hs.append(make([]byte, 0, len(pending)+256+hs.emu.stateSize()))
	t.snaps = nil
	t.emuMu.Unlock()
	master, err := dupCloexec(t.rc)
	_ = t.master.Close()
	if err != nil {
		return Frozen{}, fmt.Errorf("pty: freeze: %w", err)
	}
	t.log.Debug("terminal frozen", "pid", t.pid, "state_bytes", len(b), "pending_input", len(pending))
	return Frozen{Master: master, Pid: t.pid, State: b}, nil
}

// dupCloexec returns a new descriptor of rc's file, close-on-exec.
func dupCloexec(rc syscall.RawConn) (*os.File, error) {
	var nfd int
	var err error
	if cerr := rc.Control(func(fd uintptr) { nfd, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(nfd), "/dev/ptmx"), nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// HandoverVersion is the version of the state Freeze writes and Adopt
// reads.
func HandoverVersion() int { return handoverVersion }

// CheckState checks a Freeze state as Adopt would, without a terminal:
// ahpd --upgrade-check runs it on every terminal before the old binary
// gives anything up.
func CheckState(state []byte) error {
	_, err := readHandover(state, true)
	return err
}

// ErrState is wrapped by Adopt's errors about the state it was given.
var ErrState = errors.New("pty: hand-over state")

// Adopt carries on a frozen Terminal (Freeze, possibly in the process
// image before an execve) with cfg (its Command is not run; Rows, Cols
// and Scrollback come from the state) on master and pid. It takes
// master: on error it is closed. The state is checked field by field: an
// error names the first that is wrong, and nothing is started.
func Adopt(cfg Config, master *os.File, pid int, state []byte) (*Terminal, error) {
	if len(cfg.Command) == 0 {
		cfg.Command = []string{"(adopted)"} // not run; Validate wants one
	}
	if err := cfg.Validate(); err != nil {
		_ = master.Close()
		return nil, err
	}
	hs, err := decodeHandover(state)
	if err == nil && hs.pid != pid {
		err = fmt.Errorf("%w: pid %d, the caller names %d", ErrState, hs.pid, pid)
	}
	if err != nil {
		_ = master.Close()
		return nil, err
	}
	m, rc, err := pollable(master)
	if err != nil {
		return nil, fmt.Errorf("pty: adopt: %w", err)
	}
	cfg = cfg.withDefaults()
	cfg.Rows, cfg.Cols, cfg.Scrollback = hs.emu.rows, hs.emu.cols, hs.emu.sb.max
	t := newTerminal(cfg)
	t.dir, t.master, t.rc, t.pid = hs.dir, m, rc, pid
	t.emu, t.inFilter = hs.emu, hs.filter
	if title := hs.emu.title; title != "" {
		t.title.Store(&title)
	}
	t.bytesRead = hs.bytesRead
	t.inBroken = hs.flags&hfBroken != 0
	if hs.flags&hfReaped != 0 {
		t.reaped, t.reapStatus = true, hs.exit
	}
	if len(hs.pending) > 0 {
		t.inQ = []input{{data: hs.pending}}
		t.inBytes = len(hs.pending)
	}
	t.run()
	if len(hs.pending) > 0 {
		signal(t.inWake)
	}
	t.recordFromStart()
	t.log.Debug("terminal adopted", "pid", pid, "rows", cfg.Rows, "cols", cfg.Cols, "pending_input", len(hs.pending))
	return t, nil
}

// handoverState is a decoded Freeze state.
type handoverState struct {
	pid       int
	flags     uint64
	exit      ExitStatus
	bytesRead int64
	dir       string
	pending   []byte
	filter    *filter
	emu       *emulator
}

// append appends the state to b: u version, u pid, u rows, u cols, u
// flags (hf*), the exit (str signal or s code) when reaped, u bytes read,
// str directory, str pending input, the filter's state, the emulator's.
func (hs *handoverState) append(b []byte) []byte {
	b = binary.AppendUvarint(b, handoverVersion)
	b = binary.AppendUvarint(b, uint64(hs.pid))
	b = binary.AppendUvarint(b, uint64(hs.emu.rows))
	b = binary.AppendUvarint(b, uint64(hs.emu.cols))
	b = binary.AppendUvarint(b, hs.flags)
	if hs.flags&hfReaped != 0 {
		if hs.flags&hfSignal != 0 {
			b = appendString(b, hs.exit.Signal)
		} else {
			b = binary.AppendVarint(b, int64(hs.exit.Code))
		}
	}
	b = binary.AppendUvarint(b, uint64(hs.bytesRead))
	b = appendString(b, hs.dir)
	b = appendString(b, string(hs.pending))
	b = hs.filter.appendState(b)
	return hs.emu.appendState(b)
}

// decodeHandover reads and checks a Freeze state.
func decodeHandover(state []byte) (*handoverState, error) { return readHandover(state, false) }

// readHandover is decodeHandover; with check, the state is checked the
// same way, but the emulator's scrollback is not kept (checkEmulatorState):
// the result is only good for its error.
func readHandover(state []byte, check bool) (*handoverState, error) {
	fail := func(format string, args ...any) (*handoverState, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrState}, args...)...)
	}
	r := &stateReader{b: state}
	num := func(what string, max uint64) uint64 {
		v := r.uvarint(what)
		if r.err == nil && v > max {
			r.fail("%s %d, want at most %d", what, v, max)
		}
		return v
	}
	if v := r.uvarint("version"); r.err == nil && v != handoverVersion {
		return fail("version %d, this ahpd reads version %d", v, handoverVersion)
	}
	hs := &handoverState{}
	hs.pid = int(num("pid", 1<<22))
	rows := num("rows", MaxSize)
	cols := num("cols", MaxSize)
	hs.flags = num("flags", hfAll)
	if r.err == nil && hs.flags&hfReaped != 0 {
		if hs.flags&hfSignal != 0 {
			hs.exit.Signal = r.text("signal", 16, false)
		} else if v, n := binary.Varint(r.b); n <= 0 || v < -1 || v > 255 {
			r.fail("exit code: bad varint or not in -1..255")
		} else {
			hs.exit.Code, r.b = int(v), r.b[n:]
		}
	}
	hs.bytesRead = int64(num("bytes read", 1<<62))
	if n := num("directory length", 4096); r.err == nil {
		hs.dir = string(r.bytesN("directory", int(n)))
	}
	if n := num("pending input length", uint64(len(r.b))); r.err == nil {
		hs.pending = append([]byte(nil), r.bytesN("pending input", int(n))...)
	}
	if r.err != nil {
		return fail("%v", r.err)
	}
	switch {
	case hs.pid <= 0:
		return fail("pid %d", hs.pid)
	case rows < 1 || cols < 1:
		return fail("size %dx%d", rows, cols)
	case hs.flags&hfSignal != 0 && hs.flags&hfReaped == 0:
		return fail("a signal without an exit")
	}
	f, rest, err := decodeFilterState(r.b)
	if err != nil {
		return fail("%v", err)
	}
	// The scrollback's size is the terminal's own, within Config's bound.
	decode := decodeEmulatorState
	if check {
		decode = checkEmulatorState
	}
	emu, rest, err := decode(rest, 1_000_000)
	if err != nil {
		return fail("%v", err)
	}
	if len(rest) != 0 {
		return fail("%d bytes after the emulator's state", len(rest))
	}
	if emu.rows != int(rows) || emu.cols != int(cols) {
		return fail("emulator %dx%d, terminal %dx%d", emu.rows, emu.cols, rows, cols)
	}
	hs.filter, hs.emu = f, emu
	return hs, nil
}
