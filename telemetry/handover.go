// A telemetry channel handed from one ahpd to the binary it re-executes
// in place (issue 38): Freeze stops the source (or holds a command's
// child) and returns the history and the next seq; NewRestored carries
// on from them.

package telemetry

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ahp-dev/ahpd/flow"
)

// handoverVersion is the version of the state Freeze writes. Version 2
// added the source's part: a command source's child and pipe.
const handoverVersion = 2

// minHandoverVersion is the oldest state NewRestored reads: version 1,
// without the source's part (a command's child was not kept; the
// restored source starts it).
const minHandoverVersion = 1

// HandoverVersion is the version of the state Freeze writes.
func HandoverVersion() int { return handoverVersion }

// ReadsVersion reports whether NewRestored reads states of version v.
func ReadsVersion(v int) bool { return v >= minHandoverVersion && v <= handoverVersion }

// ErrState is wrapped by NewRestored's and CheckState's errors about the
// state they were given.
var ErrState = errors.New("telemetry: hand-over state")

// maxHeld bounds the bytes of a command's output read and not yet parsed
// that a state carries: a line and the reader's buffer.
const maxHeld = MaxLineBytes + 2 + 64<<10

// Frozen is a channel frozen for a hand-over (Freeze): its state, and the
// descriptor that goes with it — a command source's child runs on, and
// Pipe is the read end of its stdout (nil for other sources, or once the
// child's stdout ended).
type Frozen struct {
	State []byte
	Pipe  *os.File
}

// Freeze stops the source and returns the channel's state: the seq of
// the next batch, the history (each batch's seq, samples, time and text)
// and what the source hands over. A command source is held, not
// stopped: its child runs on, its stdout pipe open (Frozen.Pipe), and
// what was read of the pipe but not yet a published sample goes with
// the state; the other sources stop. The channel is closed afterwards;
// its viewers get nothing more.
//
// State: u version, u next seq, u batches, each u seq, u samples, s
// unix nanoseconds, a flags byte (bit 0: coalesced), u length and text;
// then a byte: 0, or 1 for a command's child followed by u pid, a flags
// byte (bit 0: a pipe goes with it, bit 1: the line being read is too
// long and skipped), u the number of the last line read, u length and
// the bytes read and not parsed, u starts, u lines, u bad lines, u
// samples (CommandStats).
func (c *Channel) Freeze() Frozen {
	cmd, _ := c.src.(*Command)
	if cmd != nil {
		cmd.hold()
	} else {
		c.cancel()
	}
	c.wg.Wait() // no Publish from the source any more
	c.pubMu.Lock()
	c.mu.Lock()
	b := binary.AppendUvarint(nil, handoverVersion)
	b = binary.AppendUvarint(b, c.next)
	b = binary.AppendUvarint(b, uint64(c.hist.Len()))
	for i := range c.hist.Len() {
		h := c.hist.At(i)
		b = binary.AppendUvarint(b, h.seq)
		b = binary.AppendUvarint(b, uint64(h.n))
		b = binary.AppendVarint(b, h.at.UnixNano())
		var flags byte
		if h.coalesced {
			flags |= 1
		}
		b = append(b, flags)
		b = binary.AppendUvarint(b, uint64(len(h.text)))
		b = append(b, h.text...)
	}
	c.mu.Unlock()
	c.pubMu.Unlock()
	var f Frozen
	var ch *child
	if cmd != nil {
		ch = cmd.handOver()
	}
	if ch == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = binary.AppendUvarint(b, uint64(ch.pid))
		var held []byte
		var flags byte
		n := 0
		if ch.out != nil {
			var skipping bool
			held, skipping, n = ch.lr.Held()
			flags |= 1
			if skipping {
				flags |= 2
			}
			f.Pipe = ch.out
		}
		b = append(b, flags)
		b = binary.AppendUvarint(b, uint64(n))
		b = binary.AppendUvarint(b, uint64(len(held)))
		b = append(b, held...)
		st := cmd.Stats()
		for _, v := range []int64{st.Starts, st.Lines, st.BadLines, st.Samples} {
			b = binary.AppendUvarint(b, uint64(v))
		}
	}
	_ = c.Close()
	f.State = b
	return f
}

// Discard ends what f hands over, for a channel that is not restored: a
// command's child is killed with its process group and reaped (if it is
// a child of this process), and the pipe closed.
func (f Frozen) Discard() {
	r, err := decodeState(f.State)
	if err == nil && r.child != nil {
		endChild(r.child.pid, f.Pipe)
	} else if f.Pipe != nil {
		f.Pipe.Close()
	}
}

// handedChild is a command's child in a decoded state.
type handedChild struct {
	pid      int
	pipe     bool
	skipping bool
	n        int
	held     []byte
	stats    CommandStats
}

// restored is a decoded Freeze state.
type restored struct {
	next  uint64
	hist  []*batch
	child *handedChild
}

// CheckState checks a Freeze state as NewRestored would read it.
func CheckState(state []byte) error {
	_, err := decodeState(state)
	return err
}

func decodeState(state []byte) (*restored, error) {
	fail := func(format string, args ...any) (*restored, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrState}, args...)...)
	}
	b := state
	uv := func(what string) (uint64, error) {
		v, n := binary.Uvarint(b)
		if n <= 0 || n != len(binary.AppendUvarint(nil, v)) {
			return 0, fmt.Errorf("%w: %s: truncated or not a shortest uvarint", ErrState, what)
		}
		b = b[n:]
		return v, nil
	}
	v, err := uv("version")
	if err != nil {
		return nil, err
	}
	if v > handoverVersion || v < minHandoverVersion {
		return fail("version %d, this ahpd reads versions %d to %d", v, minHandoverVersion, handoverVersion)
	}
	r := &restored{}
	if r.next, err = uv("next seq"); err != nil {
		return nil, err
	}
	count, err := uv("batches")
	if err != nil {
		return nil, err
	}
	if r.next == 0 || count >= r.next || count > uint64(len(b)) {
		return fail("%d batches before seq %d in %d bytes", count, r.next, len(b))
	}
	prev := uint64(0)
	for i := range count {
		h := &batch{}
		if h.seq, err = uv("seq"); err != nil {
			return nil, err
		}
		if h.seq <= prev || h.seq >= r.next {
			return fail("batch %d: seq %d after %d, next %d", i, h.seq, prev, r.next)
		}
		prev = h.seq
		n, err := uv("samples")
		if err != nil {
			return nil, err
		}
		at, k := binary.Varint(b)
		if k <= 0 {
			return fail("batch %d: time truncated", i)
		}
		b = b[k:]
		if len(b) == 0 || b[0]&^1 != 0 {
			return fail("batch %d: flags", i)
		}
		h.coalesced = b[0]&1 != 0
		b = b[1:]
		size, err := uv("text length")
		if err != nil {
			return nil, err
		}
		if size > uint64(len(b)) {
			return fail("batch %d: text of %d bytes, %d left", i, size, len(b))
		}
		text := string(b[:size])
		b = b[size:]
		// The text is a telemetry/samples message of this seq: viewers get
		// it as it is.
		head := samplesPrefix + strconv.FormatUint(h.seq, 10) + samplesMiddle
		if !strings.HasPrefix(text, head) || !strings.HasSuffix(text, samplesSuffix) || len(text) < len(head)+len(samplesSuffix) {
			return fail("batch %d: not the telemetry/samples message of seq %d", i, h.seq)
		}
		h.n, h.at, h.text = int64(n), time.Unix(0, at), text
		r.hist = append(r.hist, h)
	}
	if v == 1 {
		// No source's part.
	} else if len(b) == 0 || b[0] > 1 {
		return fail("source: want 0 or 1")
	} else if b[0] == 1 {
		b = b[1:]
		ch := &handedChild{}
		pid, err := uv("pid")
		if err != nil {
			return nil, err
		}
		if pid == 0 || pid > 1<<22 { // PID_MAX_LIMIT
			return fail("pid %d", pid)
		}
		ch.pid = int(pid)
		if len(b) == 0 || b[0]&^3 != 0 || b[0] == 2 {
			return fail("command flags")
		}
		ch.pipe, ch.skipping = b[0]&1 != 0, b[0]&2 != 0
		b = b[1:]
		n, err := uv("line number")
		if err != nil {
			return nil, err
		}
		size, err := uv("held length")
		if err != nil {
			return nil, err
		}
		if n > math.MaxInt32 || size > maxHeld || size > uint64(len(b)) || size > 0 && !ch.pipe {
			return fail("command: line %d, %d bytes held (of %d left; at most %d, with a pipe)", n, size, len(b), maxHeld)
		}
		ch.n, ch.held = int(n), append([]byte(nil), b[:size]...)
		b = b[size:]
		for _, v := range []*int64{&ch.stats.Starts, &ch.stats.Lines, &ch.stats.BadLines, &ch.stats.Samples} {
			x, err := uv("command stats")
			if err != nil {
				return nil, err
			}
			if x > math.MaxInt64 {
				return fail("command stats: %d", x)
			}
			*v = int64(x)
		}
		r.child = ch
	} else {
		b = b[1:]
	}
	if len(b) != 0 {
		return fail("%d bytes after the source", len(b))
	}
	for _, h := range r.hist {
		h.size = flow.UTF16Len(h.text)
	}
	return r, nil
}

// NewRestored is New carrying on a frozen channel's history and seq
// (Freeze, possibly in the process image before an execve): the source
// starts after them, so the first batch it publishes has the next seq. A
// command's child the state hands over is adopted by src, which must be
// a *Command (of the same command line): it reads on from f.Pipe, which
// NewRestored owns; the child is not started again, and it must be a
// child of this process. History beyond cfg's bounds is dropped, oldest
// first. If NewRestored fails, it has ended that child (killed its
// process group and reaped it) and closed f.Pipe.
func NewRestored(cfg Config, src Source, f Frozen) (*Channel, error) {
	r, err := decodeState(f.State)
	if err == nil {
		err = cfg.Validate()
	}
	if err == nil {
		err = adoptChild(r.child, src, f.Pipe)
	} else if r != nil && r.child != nil {
		endChild(r.child.pid, f.Pipe)
	} else if f.Pipe != nil {
		f.Pipe.Close()
	}
	if err != nil {
		return nil, err
	}
	return newChannel(cfg, src, func(c *Channel) {
		c.next = r.next
		for _, h := range r.hist {
			c.hist.Push(h)
			c.histBytes += h.size
		}
		c.trimHistory(time.Now())
	})
}

// adoptChild has src adopt ch with pipe, or ends ch.
func adoptChild(ch *handedChild, src Source, pipe *os.File) error {
	if ch == nil {
		if pipe != nil {
			pipe.Close()
			return fmt.Errorf("%w: a pipe but no command's child", ErrState)
		}
		return nil
	}
	cmd, ok := src.(*Command)
	switch {
	case !ok:
		endChild(ch.pid, pipe)
		return fmt.Errorf("%w: a command's child (pid %d) for a source %T", ErrState, ch.pid, src)
	case ch.pipe != (pipe != nil):
		endChild(ch.pid, pipe)
		return fmt.Errorf("%w: the command's child (pid %d): pipe %v handed, %v expected", ErrState, ch.pid, pipe != nil, ch.pipe)
	}
	if err := cmd.adopt(ch.pid, pipe, ch.held, ch.skipping, ch.n); err != nil {
		endChild(ch.pid, nil)
		return fmt.Errorf("%w: %w", ErrState, err)
	}
	cmd.starts.Store(ch.stats.Starts)
	cmd.lines.Store(ch.stats.Lines)
	cmd.bad.Store(ch.stats.BadLines)
	cmd.samples.Store(ch.stats.Samples)
	return nil
}
