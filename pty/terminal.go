package pty

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/internal/afterfunc"
	"github.com/ahp-dev/ahpd/internal/rawio"
	"github.com/ahp-dev/ahpd/pty/record"
)

// readSize is the PTY read buffer; one item of the stream log holds at most
// this many bytes of output (plus a held-back query prefix).
const readSize = 64 << 10

// State of a Terminal (flow.Channel's states).
const (
	StateRunning = flow.StateRunning
	StateExited  = flow.StateExited
	StateClosed  = flow.StateClosed
)

// item is one entry of the stream log: output text (immutable, shared by
// all viewers) with the queries removed from it, or a size change.
type item struct {
	seq   uint64
	start int64 // stream position (output bytes before this item)
	at    int64 // monoNow when it was appended (a recording's event time)
	text  string
	ascii bool // text is ASCII: its messages are written escaped twice (Message.Escaped)
	qs    []query

	resize     bool
	rows, cols int

	cursors int32 // live viewers whose cursor is in this item (Terminal.mu; see cursors.go)

	readers atomic.Int32 // lone viewers that started reading the whole text (buildOutput)
	escOnce sync.Once
	esc     string // the text as a message holds it (escaped once, twice if ascii)
	esc16   int64  // UTF-16 size of the text escaped once: what it adds to a message
}

func (it *item) end() int64 { return it.start + int64(len(it.text)) }

// escaped returns the text as the viewers' messages hold it (appendText)
// and the UTF-16 size it adds to a message, computed once and shared by
// every viewer.
func (it *item) escaped() (string, int64) {
	it.escOnce.Do(func() {
		b, n16 := appendText(make([]byte, 0, len(it.text)+len(it.text)/8+8), it.text, it.ascii)
		it.esc = unsafe.String(unsafe.SliceData(b), len(b))
		it.esc16 = n16
	})
	return it.esc, it.esc16
}

// appendText appends s as a terminal/output message holds it: the JSON
// string body of s or, for an ASCII s in a message given escaped
// (Message.Escaped), that body escaped again. It returns the UTF-16 size
// s adds to the message's text.
func appendText(b []byte, s string, ascii bool) ([]byte, int64) {
	if ascii {
		b, n16, _ := flow.AppendEscapedTwice(b, s)
		return b, n16
	}
	return flow.AppendEscapedLen(b, s)
}

// ExitStatus describes how the process ended: Code when it exited, Signal
// (a name such as "SIGKILL", or "SIG<n>" for a signal without a name) when
// a signal killed it.
type ExitStatus struct {
	Code   int
	Signal string
}

// Stats are counters of a Terminal.
type Stats struct {
	State       flow.ChannelState // StateRunning or StateExited
	BytesRead   int64             // raw bytes read from the PTY
	Viewers     int               // attached viewers
	Retained    int64             // output bytes held in the shared stream log
	EmulatorLag int64             // output bytes read but not yet applied to the emulator
	Replies     int64             // query replies written (or queued) to the PTY
	RepliesLost int64             // query replies dropped because ReplyQueue was full
	// Paced is the time the reader paused so that another terminal's
	// typing went first (see Pacer).
	Paced time.Duration
	// The emulator's wake-ups by the reader: at once, for output that
	// paused with little to apply (an echo), and batched, by the lazy
	// timer (a flood, a fast loop of small writes). Each costs the daemon
	// a wake-up; an echoed keystroke should cost one at once and none
	// batched.
	EmulatorWakesNow, EmulatorWakesBatched int64
}

// Terminal is one process on a PTY, served to many viewers. See doc.go.
type Terminal struct {
	cfg    Config
	log    *slog.Logger
	cmd    *exec.Cmd
	master *os.File
	rc     syscall.RawConn // master's descriptor, for rawio
	pid    int

	closing    chan struct{}  // closed when Close (or Freeze) starts
	done       chan struct{}  // closed when the emulator and writer must stop
	readerDone chan struct{}  // closed by the reader after its last item
	waitDone   chan struct{}  // closed by the waiter once it reaped the process
	exitDone   chan struct{}  // closed after the exit status is published
	wg         sync.WaitGroup // the reader, the emulator and the writer
	waiterWG   sync.WaitGroup // the waiter (see Freeze)
	closeOnce  sync.Once

	// frozen is set by Freeze: the reader and the writer stop at their
	// next step, leaving what they have not done in the PTY (output) or
	// the queue (input) for the Terminal that adopts this one's state.
	frozen atomic.Bool
	// reapMu orders reaping against Freeze: the waiter reaps only while
	// the terminal is not frozen (a frozen terminal's process is the
	// adopter's to reap), and Freeze records whether it was reaped.
	reapMu     sync.Mutex
	reaped     bool       // the process was reaped, with reapStatus
	reapStatus ExitStatus //
	reapFrozen bool       // Freeze ran: the waiter must not reap
	// inFilter is the reader's filter to start with (Adopt), and
	// outFilter the one it stopped with when frozen (Freeze).
	inFilter, outFilter *filter

	paced atomic.Int64 // nanoseconds the reader paused for the Pacer
	// quietSince is the monoNow at which the reader found the PTY empty
	// with no output appended since; 0 while output comes, or the reader
	// is held back (by the emulator's backlog, or the Pacer). See
	// Viewer.snapDue.
	quietSince atomic.Int64

	emuWake   chan struct{}    // reader → emulator: new items (cap 1)
	emuTimer  *afterfunc.Timer // reader → emulator: a lazy wake-up (see emuLazy)
	emuArmed  atomic.Bool      // emuTimer is pending
	emuLazies atomic.Int64     // times emuTimer was armed (Stats.EmulatorWakesBatched)
	emuWoken  atomic.Int64     // monoNow of the latest catchUp or emuTimer wake-up
	emuSoons  atomic.Int64     // times catchUp woke the emulator at once (Stats.EmulatorWakesNow)
	emuAsked  int64            // endPos when catchUp last woke the emulator or armed emuTimer; owned by the reader
	emuProg   chan struct{}    // emulator → reader: progress (cap 1)
	inWake    chan struct{}    // Input/emulator → writer: queued data (cap 1)
	// resizeMu orders ioctls and resize items, and guards the size
	// policy's state (size.go): sizers, decider, sizeClock and the
	// viewers' size fields.
	resizeMu  sync.Mutex
	sizers    map[*Viewer]struct{}   // control viewers that told their size or typed
	decider   *Viewer                // whose size the PTY was last given (nil: none)
	sizeClock uint64                 // the last Viewer.activeAt handed out
	latest    atomic.Pointer[Viewer] // the most recently active viewer (Input's fast path)

	// mu guards the stream log, viewers, input queue and state below.
	mu         sync.Mutex
	items      []*item
	firstSeq   uint64 // seq of items[0]
	endSeq     uint64 // seq of the next item
	endPos     int64  // stream position after the last item
	retained   int64
	emuDoneSeq uint64 // items before this seq have been applied
	emuDonePos int64
	viewers    map[*Viewer]struct{}
	// The live viewers' cursors and the viewers waiting for output, kept
	// so that a read or a Close does not walk every viewer (cursors.go).
	endCursors int32      // live cursors past the last item
	behind     cursorHeap // live viewers by limit (lazily)
	ahead      cursorHeap // live viewers past their limit, ahead of the emulator, by position
	waiters    []*Viewer  // viewers waiting for output (Viewer.widx)
	rows, cols int
	exited     bool
	exit       ExitStatus
	exitMsg    string
	bytesRead  int64
	replies    int64
	lostReply  int64
	inQ        []input
	inBytes    int
	replyBytes int
	inBroken   bool
	writing    bool // the writer goroutine is writing an item it popped (guarded by mu)

	dir string // Dir
	// title is the emulator's window title (OSC 0/2) as of its latest
	// batch, for Title without emuMu.
	title atomic.Pointer[string]
	// emuMu guards the emulator and the snapshot cache.
	emuMu      sync.Mutex
	emu        *emulator
	emuApplied uint64 // seq of the next item to apply
	emuPos     int64
	// snaps are the snapshots viewers may be sending, oldest first, at
	// most maxSnapshots (see startSnapshot).
	snaps []*snapshot
	// rec is the recording (nil: none), fed by the emulator goroutine
	// before it applies each item (record.go); recIn is rec while it
	// records input, for Input without emuMu.
	rec         *record.Recorder
	recMode     record.Mode
	lastRec     *record.Recorder // the latest recording, kept once it ended (LastRecording)
	lastRecMode record.Mode
	recIn       atomic.Pointer[record.Recorder]
}

type input struct {
	data  []byte
	done  func()
	reply bool
}

// Start starts cfg.Command on a new PTY.
func Start(cfg Config) (*Terminal, error) {
	login := len(cfg.Command) == 0
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	path := cfg.Command[0]
	if !strings.Contains(path, "/") {
		p, err := exec.LookPath(path)
		if err != nil {
			return nil, fmt.Errorf("pty: start %q: %w", path, err)
		}
		path = p
	}
	cmd := &exec.Cmd{Path: path, Args: append([]string(nil), cfg.Command...), Dir: cfg.Dir}
	dir := cfg.Dir
	if dir == "" {
		dir, _ = os.Getwd()
	}
	if login {
		cmd.Args[0] = "-" + filepath.Base(path)
	}
	env := cfg.Env
	if env == nil {
		env = os.Environ()
	}
	hasTerm := false
	for _, kv := range env {
		if strings.HasPrefix(kv, "TERM=") {
			hasTerm = true
		}
	}
	if !hasTerm {
		env = append(append([]string(nil), env...), "TERM="+cfg.Term)
	}
	cmd.Env = env
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: uint16(cfg.Rows), Cols: uint16(cfg.Cols)})
	if err != nil {
		return nil, fmt.Errorf("pty: start %q: %w", cfg.Command[0], err)
	}
	master, rc, err := pollable(f)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("pty: start %q: %w", cfg.Command[0], err)
	}
	t := newTerminal(cfg)
	t.dir, t.cmd, t.master, t.rc, t.pid = dir, cmd, master, rc, cmd.Process.Pid
	t.run()
	t.recordFromStart()
	t.log.Debug("terminal started", "pid", t.pid, "command", cfg.Command[0], "rows", cfg.Rows, "cols", cfg.Cols)
	return t, nil
}

// run starts the Terminal's goroutines (Start, Adopt).
func (t *Terminal) run() {
	t.emuTimer = afterfunc.New(func() {
		t.emuWoken.Store(monoNow())
		t.emuArmed.Store(false)
		signal(t.emuWake)
	})
	t.wg.Add(3)
	t.waiterWG.Add(1)
	go t.reader()
	go t.waiter()
	go t.emulate()
	go t.writer()
}

// newTerminal returns a Terminal of cfg (defaulted) without a process:
// Start gives it one; the bookkeeping tests and benchmarks use it bare.
func newTerminal(cfg Config) *Terminal {
	return &Terminal{
		cfg:        cfg,
		log:        cfg.Logger,
		closing:    make(chan struct{}),
		done:       make(chan struct{}),
		readerDone: make(chan struct{}),
		waitDone:   make(chan struct{}),
		exitDone:   make(chan struct{}),
		emuWake:    make(chan struct{}, 1),
		emuProg:    make(chan struct{}, 1),
		inWake:     make(chan struct{}, 1),
		viewers:    make(map[*Viewer]struct{}),
		sizers:     make(map[*Viewer]struct{}),
		rows:       cfg.Rows,
		cols:       cfg.Cols,
		emu:        newEmulator(cfg.Rows, cfg.Cols, cfg.Scrollback),
	}
}

// pollable turns the blocking PTY master from creack/pty into a
// non-blocking file served by the runtime poller, so that Close interrupts
// a pending Read or Write, and returns it with its RawConn. The reader and
// writer rely on it: they call rawio, which must not wait for data or room
// (see its package comment).
func pollable(f *os.File) (*os.File, syscall.RawConn, error) {
	fd, err := syscall.Dup(int(f.Fd()))
	_ = f.Close()
	if err != nil {
		return nil, nil, err
	}
	syscall.CloseOnExec(fd)
	if err := syscall.SetNonblock(fd, true); err != nil {
		_ = syscall.Close(fd)
		return nil, nil, err
	}
	master := os.NewFile(uintptr(fd), "/dev/ptmx")
	rc, err := master.SyscallConn()
	if err != nil {
		_ = master.Close()
		return nil, nil, err
	}
	return master, rc, nil
}

// Close hangs up the process group (SIGHUP, then SIGKILL after
// KillTimeout), reaps the process, and returns once every goroutine the
// Terminal started has ended. Attached viewers can still pull what was
// queued for them, including terminal/exit. Close is idempotent.
func (t *Terminal) Close() error {
	t.closeOnce.Do(func() {
		close(t.closing)
		select {
		case <-t.waitDone:
		default:
			_ = syscall.Kill(-t.pid, syscall.SIGHUP)
			timer := time.NewTimer(t.cfg.KillTimeout)
			select {
			case <-t.waitDone:
			case <-timer.C:
				_ = syscall.Kill(-t.pid, syscall.SIGKILL)
				<-t.waitDone
			}
			timer.Stop()
		}
		// Let the reader reach EIO by itself (output written just before
		// exit is not lost), but not forever: a background process may
		// still hold the PTY open.
		timer := time.NewTimer(500 * time.Millisecond)
		select {
		case <-t.readerDone:
		case <-timer.C:
		}
		timer.Stop()
		_ = t.master.Close()
		<-t.exitDone
		close(t.done)
		t.wg.Wait()
		t.waiterWG.Wait()
		t.emuTimer.Stop() // the reader, which arms it, has ended
		if t.cfg.Pacer != nil {
			t.cfg.Pacer.forget(t)
		}
		t.StopRecording(t.endReason("terminal closed"))
		t.mu.Lock()
		for _, in := range t.inQ {
			if in.done != nil {
				defer in.done()
			}
		}
		t.inQ = nil
		t.mu.Unlock()
		t.log.Debug("terminal closed", "pid", t.pid)
	})
	return nil
}

// State returns StateClosed once Close was called, else StateRunning or
// StateExited.
func (t *Terminal) State() flow.ChannelState {
	select {
	case <-t.closing:
		return StateClosed
	default:
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.exited {
		return StateExited
	}
	return StateRunning
}

// Exited returns a channel that is closed once the exit status is
// published (after all output was queued for viewers).
func (t *Terminal) Exited() <-chan struct{} { return t.exitDone }

// Exit returns the exit status once the process has exited and all its
// output has been read.
func (t *Terminal) Exit() (ExitStatus, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.exit, t.exited
}

// Size returns the current size in rows and columns.
func (t *Terminal) Size() (rows, cols int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rows, t.cols
}

// Pid returns the process id of the command.
func (t *Terminal) Pid() int { return t.pid }

// Stats returns the terminal's counters.
func (t *Terminal) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := Stats{
		State:       StateRunning,
		BytesRead:   t.bytesRead,
		Viewers:     len(t.viewers),
		Retained:    t.retained,
		EmulatorLag: t.endPos - t.emuDonePos,
		Replies:     t.replies,
		RepliesLost: t.lostReply,
		Paced:       time.Duration(t.paced.Load()),

		EmulatorWakesNow:     t.emuSoons.Load(),
		EmulatorWakesBatched: t.emuLazies.Load(),
	}
	if t.exited {
		s.State = StateExited
	}
	return s
}

// Resize sets the PTY size (rows and cols in 1..MaxSize). Viewers receive
// terminal/resize in stream order. It is not a viewer's request (see size.go): the size holds until a
// viewer's request, or a change of the viewer whose size decides, sets
// another.
func (t *Terminal) Resize(rows, cols int) error {
	if err := checkSize(rows, cols); err != nil {
		return err
	}
	t.resizeMu.Lock()
	defer t.resizeMu.Unlock()
	return t.resizeLocked(rows, cols)
}

// checkSize returns ErrInvalidSize for a size outside 1..MaxSize.
func checkSize(rows, cols int) error {
	if rows < 1 || rows > MaxSize || cols < 1 || cols > MaxSize {
		return fmt.Errorf("%w: %dx%d, want 1..%d", ErrInvalidSize, rows, cols, MaxSize)
	}
	return nil
}

// resizeLocked is Resize with resizeMu held.
func (t *Terminal) resizeLocked(rows, cols int) error {
	select {
	case <-t.closing:
		return ErrClosed
	default:
	}
	t.mu.Lock()
	same, exited := t.rows == rows && t.cols == cols, t.exited
	t.mu.Unlock()
	if exited {
		return ErrExited
	}
	if same {
		return nil
	}
	if err := setSize(t.master, rows, cols); err != nil {
		return fmt.Errorf("pty: resize: %w", err)
	}
	t.mu.Lock()
	t.rows, t.cols = rows, cols
	wake := t.appendLocked(&item{resize: true, rows: rows, cols: cols}, nil)
	t.mu.Unlock()
	t.wakeAll(wake)
	signal(t.emuWake) // the reader wakes the emulator for output; a resize has none
	return nil
}

func setSize(f *os.File, rows, cols int) error {
	ws := pty.Winsize{Rows: uint16(rows), Cols: uint16(cols)}
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno syscall.Errno
	err = sc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCSWINSZ, uintptr(unsafe.Pointer(&ws)))
	})
	if err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}

// Input writes data to the PTY: at once when nothing is queued before it
// and the PTY takes it without blocking, else through the Terminal's
// writer goroutine. done (if not nil) is called once data has been
// written, or discarded because the PTY failed or the Terminal closed;
// that may be before Input returns. It never blocks.
// data must not be modified until done is called. It returns ErrInputFull
// when the queue would exceed Config.InputQueue bytes.
func (t *Terminal) Input(data []byte, done func()) error {
	if t.recIn.Load() == nil {
		return t.input(data, done)
	}
	// data may be reused once done is called, which may be before input
	// returns.
	rec := bytes.Clone(data)
	err := t.input(data, done)
	if err == nil {
		t.recordInput(rec)
	}
	return err
}

// input is Input without the recording.
func (t *Terminal) input(data []byte, done func()) error {
	select {
	case <-t.closing:
		return ErrClosed
	default:
	}
	t.mu.Lock()
	switch {
	case t.exited:
		t.mu.Unlock()
		return ErrExited
	case t.inBytes+len(data) > t.cfg.InputQueue:
		t.mu.Unlock()
		return ErrInputFull
	}
	if t.cfg.Pacer != nil {
		t.cfg.Pacer.input(t)
	}
	if len(t.inQ) == 0 && !t.writing && !t.inBroken {
		// Nothing queued or being written: try the write right here, once
		// and without blocking (a keystroke then skips a hand-off to the
		// writer goroutine). What the PTY does not take now is queued.
		n, err := t.tryWrite(data)
		switch {
		case err != nil && !errors.Is(err, syscall.EAGAIN):
			t.inBroken = true
			n = len(data)
		case n < 0:
			n = 0
		}
		if n == len(data) {
			t.mu.Unlock()
			if done != nil {
				done()
			}
			return nil
		}
		data = data[n:]
	}
	t.inQ = append(t.inQ, input{data: data, done: done})
	t.inBytes += len(data)
	t.mu.Unlock()
	signal(t.inWake)
	return nil
}

// tryWrite makes one non-blocking write attempt to the PTY; t.mu is held
// (the attempt never blocks, and holding the lock keeps input in order).
func (t *Terminal) tryWrite(p []byte) (int, error) {
	var n int
	var werr error
	if err := t.rc.Write(func(fd uintptr) bool {
		n, werr = rawio.Write(fd, p)
		return true // one attempt: never wait for writability here
	}); err != nil {
		return 0, err
	}
	return n, werr
}

// queueReply queues a query reply; it is dropped when ReplyQueue is full.
func (t *Terminal) queueReply(b []byte) {
	t.mu.Lock()
	if t.replyBytes+len(b) > t.cfg.ReplyQueue {
		t.lostReply++
		t.mu.Unlock()
		return
	}
	t.replies++
	t.inQ = append(t.inQ, input{data: b, reply: true})
	t.replyBytes += len(b)
	t.mu.Unlock()
	signal(t.inWake)
}

// emuBatch and emuLazy bound how far and how long the emulator may lag
// behind the reader before it is woken.
const (
	emuBatch = 64 << 10
	emuLazy  = 2 * time.Millisecond
	// emuSlice is how much output the emulator applies between yields:
	// about 0.1–1 ms of work.
	emuSlice = 32 << 10
	// emuSoon is the most lag the reader has the emulator apply at once
	// when the PTY has nothing more (see catchUp).
	emuSoon = 4 << 10
)

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// writer writes queued input and replies to the PTY, in order.
func (t *Terminal) writer() {
	defer t.wg.Done()
	for {
		select {
		case <-t.inWake:
		case <-t.done:
			return
		}
		for {
			t.mu.Lock()
			if len(t.inQ) == 0 || t.frozen.Load() {
				t.mu.Unlock()
				break
			}
			in := t.inQ[0]
			t.inQ[0] = input{}
			t.inQ = t.inQ[1:]
			broken := t.inBroken
			t.writing = true
			t.mu.Unlock()
			var err error
			if !broken {
				var n int
				n, err = rawio.WriteAllN(t.rc, in.data) // waits for room
				if err != nil && t.frozen.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
					// Freeze cut the write short: the rest goes first in
					// the queue it hands over (and counts afresh).
					t.mu.Lock()
					in.data = in.data[n:]
					t.inQ = append([]input{in}, t.inQ...)
					t.writing = false
					t.mu.Unlock()
					return
				}
			}
			t.mu.Lock()
			if in.reply {
				t.replyBytes -= len(in.data)
			} else {
				t.inBytes -= len(in.data)
			}
			if err != nil {
				t.inBroken = true
			}
			t.writing = false
			t.mu.Unlock()
			if in.done != nil {
				in.done()
			}
		}
	}
}

// frozenDeadline is the read deadline Freeze sets: in the past, so that
// the reader's next read returns at once.
var frozenDeadline = time.Unix(1, 0)

// setReadDeadline is the reader's SetReadDeadline. Freeze stores frozen
// before it sets frozenDeadline, and this checks frozen after it set its
// own: whichever comes last, the deadline in force is Freeze's.
func (t *Terminal) setReadDeadline(d time.Time) error {
	err := t.master.SetReadDeadline(d)
	if t.frozen.Load() {
		_ = t.master.SetReadDeadline(frozenDeadline)
	}
	return err
}

// wakeBatch is how much output the reader appends, while the PTY has more
// to read, before it wakes the viewers waiting for it.
const wakeBatch = 32 << 10

// wakeLazy and streamBytes: a wake-up that delivered at least streamBytes
// makes the next one, when the PTY runs empty within wakeLazy of it, wait
// for wakeLazy to pass (or for wakeBatch more bytes). A program that
// writes steadily (a build's log, a paced copy: pieces every few hundred
// µs, handed over by the line discipline 4 KiB at a time) then costs each
// viewer a frame and a socket write per wakeLazy, not per read, and its
// output is at most wakeLazy later; an echo or a prompt after a pause is
// woken at once.
const (
	wakeLazy    = 2 * time.Millisecond
	streamBytes = 4 << 10
)

// reader reads the PTY until EIO (or Close), filters, and appends items.
//
// The line discipline hands output over at most 4 KiB per read. During a
// flood the reader reads on until the PTY is empty or readSize is in hand
// (one read at a time while the Pacer paces it) and appends the lot as
// one item: the log, the emulator and the viewers then handle one item,
// and the runtime one allocation, where they would have handled up to
// sixteen, for the same system calls.
//
// Viewers waiting for output are woken when the PTY has nothing more to
// read right now (so an echo is delivered at once) or after wakeBatch
// bytes: during a flood, a wake-up per read would cost a thread wake-up
// each and slow the reader. Output that streams is woken at most once per
// wakeLazy (see there): the reader then waits for the PTY with a read
// deadline, and wakes the viewers when it passes.
func (t *Terminal) reader() {
	defer t.wg.Done()
	defer close(t.readerDone)
	var f filter
	if t.inFilter != nil {
		f, t.inFilter = *t.inFilter, nil
	}
	buf := make([]byte, readSize)
	var pending []func() // wake hooks held back
	unwoken := 0         // bytes appended since the last wake-up
	var pace pacing
	var (
		lastWake  int64 // monoNow of the last wake-up that delivered output
		lastWoken int   // the bytes it delivered
		deferred  bool  // a wake-up waits for the read deadline
	)
	flush := func() {
		t.wakeAll(pending)
		clear(pending)
		pending = pending[:0]
		if unwoken > 0 {
			lastWake, lastWoken = monoNow(), unwoken
		}
		unwoken = 0
	}
	// lazy reports whether the wake-up for the output read so far waits
	// (wakeLazy), and if so arms the read deadline that ends the wait.
	lazy := func() bool {
		if deferred {
			return true
		}
		if unwoken == 0 || lastWoken < streamBytes {
			return false
		}
		wait := int64(wakeLazy) - (monoNow() - lastWake)
		deferred = wait > 0 && t.setReadDeadline(time.Now().Add(time.Duration(wait))) == nil
		return deferred
	}
	// add filters and appends buf[:n], read since the last call.
	add := func(n int) {
		text, ascii, qs := f.feed(buf[:n], false)
		pending = t.appendOutput(n, text, ascii, qs, pending)
		if unwoken += n; unwoken >= wakeBatch {
			flush()
		}
		if d := pace.after(t, n); d > 0 {
			flush()
			t.catchUp(false)
			t.pauseFor(d)
		}
	}
	for {
		n := 0 // bytes in buf
		eof := false
		var rerr error
		err := t.rc.Read(func(fd uintptr) bool {
			for {
				k, e := rawio.Read(fd, buf[n:])
				if e == syscall.EAGAIN {
					// The PTY is empty. What was read goes out now, and
					// then the reader waits, within this Read: a Read
					// started anew would read once more to find out.
					if n > 0 {
						add(n)
						n = 0
					}
					t.quietSince.CompareAndSwap(0, monoNow())
					t.catchUp(!pace.flooding) // before flush: viewers run first
					if !lazy() {
						flush() // nothing more for now: deliver what we have
					}
					pace.drained()
					return false
				}
				n += k
				if e != nil || k == 0 {
					rerr, eof = e, e == nil
					return true
				}
				// A paced flood reads once per pause (Pacer.Delay), as
				// before batching.
				if n == len(buf) || pace.paced {
					return true
				}
			}
		})
		if n > 0 {
			add(n)
		}
		if t.frozen.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
			// Freeze: what the filter holds (a query's start, a UTF-8
			// sequence's first bytes) goes with the state; the rest of
			// the output waits in the PTY.
			t.outFilter = &f
			flush()
			return
		}
		if deferred && errors.Is(err, os.ErrDeadlineExceeded) {
			// The PTY stayed empty until the deadline. A wakeBatch wake-up
			// meanwhile starts wakeLazy anew (lazy arms the deadline
			// again); else wake the viewers now.
			deferred, err = false, nil
			if !lazy() {
				err = t.setReadDeadline(time.Time{})
				flush()
			}
			if err == nil {
				continue
			}
		}
		if err == nil {
			err = rerr
		}
		if err == nil && eof {
			err = io.EOF
		}
		if err != nil {
			if !errors.Is(err, syscall.EIO) && !errors.Is(err, os.ErrClosed) && !errors.Is(err, io.EOF) {
				t.log.Warn("terminal read failed", "pid", t.pid, "err", err)
			}
			break
		}
	}
	text, ascii, qs := f.feed(nil, true)
	pending = t.appendOutput(0, text, ascii, qs, pending)
	// No more output: the terminal is quiet, as when a read finds the PTY
	// empty, also for a program that closed the PTY and goes on running
	// (a viewer behind gets its snapshot snapQuiet from now, not
	// snapStale after it fell behind).
	t.quietSince.CompareAndSwap(0, monoNow())
	flush()
}

// catchUp has the emulator catch up with output it lags behind, when the
// reader stops reading (the PTY is empty, or the Pacer pauses it). Output
// that pauses with little to apply (an echo, a prompt: soon, and at most
// emuSoon) is interactive: the emulator is woken at once, and for a typist
// that is the only wake-up a keystroke costs. But at most once per
// emuLazy: a program writing many small pieces faster than that (a shell
// loop of echos) is batched like a flood, which catches up within emuLazy.
// Called before the viewers are woken, the emulator runs after them on one
// P. The timer is armed here rather than for every read: a timer stopped
// again at once still wakes the runtime's poller when it would have fired.
// Output the emulator was already woken (or its timer armed) for asks for
// nothing more: a read that finds the PTY empty again before the emulator
// has run (a busy machine) would otherwise arm the timer for an echo.
func (t *Terminal) catchUp(soon bool) {
	t.mu.Lock()
	end := t.endPos
	lag := end - t.emuDonePos
	t.mu.Unlock()
	if lag == 0 || end <= t.emuAsked {
		return
	}
	t.emuAsked = end
	if soon && lag <= emuSoon {
		if now := monoNow(); now-t.emuWoken.Load() >= int64(emuLazy) {
			t.emuWoken.Store(now)
			t.emuSoons.Add(1)
			signal(t.emuWake)
			return
		}
	}
	if t.emuArmed.CompareAndSwap(false, true) {
		t.emuLazies.Add(1)
		t.emuTimer.Reset(emuLazy)
	}
}

// pacing is the reader's flood detection (more than floodBytes read within
// floodSpan, until a read finds the PTY empty), which has the emulator
// batch its work (catchUp), and its part of Pacer: the pauses, logged when
// they start and stop.
type pacing struct {
	spanStart time.Time
	spanBytes int
	flooding  bool
	paced     bool
}

// drained notes a read that found the PTY empty: the flood, if any, is over.
func (p *pacing) drained() { p.flooding = false }

// after accounts for a read of n bytes and returns how long to pause.
func (p *pacing) after(t *Terminal, n int) time.Duration {
	now := time.Now()
	if now.Sub(p.spanStart) > floodSpan {
		p.spanStart, p.spanBytes = now, 0
	}
	if p.spanBytes += n; p.spanBytes > floodBytes {
		p.flooding = true
	}
	var d time.Duration
	if p.flooding && t.cfg.Pacer != nil {
		d = t.cfg.Pacer.pause(t)
	}
	if paced := d > 0; paced != p.paced {
		p.paced = paced
		if paced {
			t.log.Debug("terminal output paced: it floods while another terminal is typed into", "pid", t.pid)
		} else {
			t.log.Debug("terminal output no longer paced", "pid", t.pid)
		}
	}
	t.paced.Add(int64(d))
	return d
}

// pauseFor sleeps for d, or until Close starts.
func (t *Terminal) pauseFor(d time.Duration) {
	timer := time.NewTimer(d)
	select {
	case <-timer.C:
	case <-t.closing:
		timer.Stop()
	}
}

// appendOutput appends output to the log and returns wake, extended with
// the hooks of viewers to wake. It may wait for the emulator to catch up;
// it calls the hooks of wake first then.
func (t *Terminal) appendOutput(n int, text string, ascii bool, qs []query, wake []func()) []func() {
	t.mu.Lock()
	t.bytesRead += int64(n)
	if text != "" || len(qs) > 0 {
		wake = t.appendLocked(&item{text: text, ascii: ascii, qs: qs}, wake)
	}
	lag := t.endPos - t.emuDonePos
	t.mu.Unlock()
	// Waking the emulator for every read (a few KiB during a flood) costs a
	// thread wake-up each time and slows the reader, and with it the PTY.
	// Queries need an answer now and a large lag must not grow; otherwise
	// the emulator catches up when the reader stops reading (catchUp; a
	// viewer's snapshot is consistent whatever the emulator's position: it
	// continues from there).
	if len(qs) > 0 || n == 0 || lag >= emuBatch {
		signal(t.emuWake)
	}
	// The emulator is not a viewer: it may pause the reader, but only when
	// it falls more than EmulatorBacklog behind. That is at least emuBatch
	// (Config validation), so the emulator was signalled above.
	for {
		t.mu.Lock()
		lag := t.endPos - t.emuDonePos
		t.mu.Unlock()
		if lag <= int64(t.cfg.EmulatorBacklog) {
			return wake
		}
		t.wakeAll(wake) // viewers need not wait for the emulator
		clear(wake)
		wake = wake[:0]
		select {
		case <-t.emuProg:
		case <-t.closing:
			return wake
		}
	}
}

// appendLocked appends an item to the stream log and returns wake extended
// with the hooks to call once t.mu is released.
func (t *Terminal) appendLocked(it *item, wake []func()) []func() {
	it.seq = t.endSeq
	it.start = t.endPos
	it.at = monoNow()
	t.endSeq++
	t.endPos += int64(len(it.text))
	if it.text != "" {
		t.quietSince.Store(0)
	}
	t.retained += int64(len(it.text))
	it.cursors, t.endCursors = t.endCursors, 0
	t.items = append(t.items, it)
	wake = t.trimLocked(wake)
	// Only the viewers that wait for output are on the list: one that lost
	// its queue waits for its snapshot's timer (Viewer.snapDue), and one
	// that may not start a message for its Sender's credit (see Pull);
	// waking those for each read of a flood would cost a pull each for
	// nothing.
	return t.wakeWaitersLocked(wake)
}

// trimLocked drops items that the emulator has applied and that no live
// viewer still needs, once the viewers that fell more than their allowance
// behind have lost their queues (overflowsLocked; their hooks are
// appended to wake). The largest allowance of a live viewer therefore
// bounds what the log keeps beyond what the emulator has yet to apply.
func (t *Terminal) trimLocked(wake []func()) []func() {
	wake = t.overflowsLocked(wake)
	k := 0
	for k < len(t.items) {
		it := t.items[k]
		if it.seq >= t.emuDoneSeq || it.cursors > 0 {
			break
		}
		t.retained -= int64(len(it.text))
		t.items[k] = nil
		k++
	}
	if k > 0 {
		t.items = t.items[k:]
		t.firstSeq += uint64(k)
	}
	return wake
}

func (t *Terminal) wakeAll(hooks []func()) {
	for _, w := range hooks {
		w()
	}
}

// waiter reaps the process and publishes the exit once all output is read.
func (t *Terminal) waiter() {
	defer t.waiterWG.Done()
	st, ok := t.reap()
	if !ok {
		return // frozen: the process is the adopter's
	}
	close(t.waitDone)
	<-t.readerDone
	if t.frozen.Load() {
		return // the adopter publishes the exit
	}
	var msg []byte
	msg = append(msg, `{"jsonrpc":"2.0","method":"terminal/exit","params":{`...)
	if st.Signal != "" {
		msg = append(msg, `"signal":`...)
		msg = flow.AppendJSONString(msg, st.Signal)
	} else {
		msg = append(msg, `"code":`...)
		msg = strconv.AppendInt(msg, int64(st.Code), 10)
	}
	msg = append(msg, "}}"...)
	t.mu.Lock()
	t.exited = true
	t.exit = st
	t.exitMsg = string(msg)
	for _, v := range t.waiters {
		v.widx = -1
	}
	clear(t.waiters)
	t.waiters = t.waiters[:0]
	var wake []func()
	for v := range t.viewers {
		v.waiting = false
		wake = append(wake, v.wake)
	}
	t.mu.Unlock()
	close(t.exitDone)
	signal(t.emuWake) // a recording ends once the emulator has applied all (recordExit)
	t.wakeAll(wake)
	if st.Signal != "" {
		t.log.Debug("terminal exited", "pid", t.pid, "signal", st.Signal)
	} else {
		t.log.Debug("terminal exited", "pid", t.pid, "code", st.Code)
	}
}

// reap waits for the process to exit and reaps it, unless the Terminal
// is frozen meanwhile (then it returns false and leaves the process, a
// zombie or not, to the adopter). It waits without reaping first (waitid
// with WNOWAIT), so that a Freeze between the exit and the reaping finds
// the process still there to hand over.
func (t *Terminal) reap() (ExitStatus, bool) {
	t.reapMu.Lock()
	if t.reaped || t.reapFrozen {
		st, ok := t.reapStatus, !t.reapFrozen
		t.reapMu.Unlock()
		return st, ok
	}
	t.reapMu.Unlock()
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, t.pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR { // a signal: wait on
	}
	t.reapMu.Lock()
	defer t.reapMu.Unlock()
	if t.reapFrozen {
		return ExitStatus{}, false
	}
	var ws syscall.WaitStatus
	var err error
	for {
		if _, err = syscall.Wait4(t.pid, &ws, 0, nil); err != syscall.EINTR {
			break
		}
	}
	st := ExitStatus{Code: -1}
	switch {
	case err != nil:
		t.log.Warn("terminal: reaping the process failed", "pid", t.pid, "err", err)
	case ws.Signaled():
		st = ExitStatus{Signal: signalName(ws.Signal())}
	default:
		st = ExitStatus{Code: ws.ExitStatus()}
	}
	if t.cmd != nil {
		_ = t.cmd.Process.Release() // reaped here, not by cmd.Wait
	}
	t.reaped, t.reapStatus = true, st
	return st, true
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
	syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGCHLD: "SIGCHLD", syscall.SIGCONT: "SIGCONT", syscall.SIGSTOP: "SIGSTOP",
	syscall.SIGTSTP: "SIGTSTP", syscall.SIGTTIN: "SIGTTIN", syscall.SIGTTOU: "SIGTTOU",
	syscall.SIGURG: "SIGURG", syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ",
	syscall.SIGVTALRM: "SIGVTALRM", syscall.SIGPROF: "SIGPROF", syscall.SIGWINCH: "SIGWINCH",
	syscall.SIGIO: "SIGIO", syscall.SIGSYS: "SIGSYS",
}

// signalName returns the conventional name of s ("SIGKILL"), or "SIG<n>".
func signalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return "SIG" + strconv.Itoa(int(s))
}

// emulate applies items to the emulator, answers queries at their point in
// the stream, and lets the reader and the log trim move on.
func (t *Terminal) emulate() {
	defer t.wg.Done()
	var batch []*item
	for {
		t.mu.Lock()
		batch = batch[:0]
		for s := t.emuDoneSeq; s < t.endSeq && len(batch) < 64; s++ {
			batch = append(batch, t.items[s-t.firstSeq])
		}
		t.mu.Unlock()
		if len(batch) == 0 {
			t.recordExit()
			select {
			case <-t.emuWake:
				continue
			case <-t.done:
				return
			}
		}
		var replies [][]byte
		work := 0
		t.emuMu.Lock()
		for _, it := range batch {
			replies = t.applyLocked(it, replies)
			if work += len(it.text); work >= emuSlice {
				// Let others have emuMu (a snapshot) and this thread
				// (the Go scheduler preempts only every 10 ms): a flood
				// must not hold up a neighbour's keystroke.
				t.emuMu.Unlock()
				runtime.Gosched()
				work = 0
				t.emuMu.Lock()
			}
		}
		title := t.emu.title
		t.emuMu.Unlock()
		if cur := t.title.Load(); cur == nil && title != "" || cur != nil && *cur != title {
			t.title.Store(&title)
		}
		for _, r := range replies {
			t.queueReply(r)
		}
		last := batch[len(batch)-1]
		t.mu.Lock()
		t.emuDoneSeq = last.seq + 1
		t.emuDonePos = last.end()
		wake := t.trimLocked(nil)
		t.mu.Unlock()
		t.wakeAll(wake)
		signal(t.emuProg)
	}
}

// applyLocked applies one item to the emulator (t.emuMu held).
func (t *Terminal) applyLocked(it *item, replies [][]byte) [][]byte {
	e := t.emu
	if t.rec != nil {
		t.recordLocked(it)
	}
	if it.resize {
		e.resize(it.rows, it.cols)
	} else {
		prev := 0
		for _, q := range it.qs {
			e.write(it.text[prev:q.off])
			prev = q.off
			if r := e.answer(q.raw); len(r) > 0 {
				replies = append(replies, r)
			}
		}
		e.write(it.text[prev:])
	}
	t.emuApplied = it.seq + 1
	t.emuPos = it.end()
	return replies
}
