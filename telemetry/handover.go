// A telemetry channel handed from one ahpd to the binary it re-executes
// in place (issue 38): Freeze stops the source and returns the history
// and the next seq; NewRestored carries on from them.

package telemetry

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ahp-dev/ahpd/flow"
)

// handoverVersion is the version of the state Freeze writes.
const handoverVersion = 1

// HandoverVersion is the version of the state Freeze writes and
// NewRestored reads.
func HandoverVersion() int { return handoverVersion }

// ErrState is wrapped by NewRestored's and CheckState's errors about the
// state they were given.
var ErrState = errors.New("telemetry: hand-over state")

// Freeze stops the source and returns the channel's state: the seq of
// the next batch and the history (each batch's seq, samples, time and
// text). The channel is closed afterwards; its viewers get nothing more.
// State: u version, u next seq, u batches, each u seq, u samples, s
// unix nanoseconds, a flags byte (bit 0: coalesced), u length and text.
func (c *Channel) Freeze() []byte {
	c.cancel()
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
	_ = c.Close()
	return b
}

// restored is a decoded Freeze state.
type restored struct {
	next uint64
	hist []*batch
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
	if v != handoverVersion {
		return fail("version %d, this ahpd reads version %d", v, handoverVersion)
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
	if len(b) != 0 {
		return fail("%d bytes after the history", len(b))
	}
	for _, h := range r.hist {
		h.size = flow.UTF16Len(h.text)
	}
	return r, nil
}

// NewRestored is New carrying on a frozen channel's history and seq
// (Freeze, possibly in the process image before an execve): the source
// starts after them, so the first batch it publishes has the next seq.
// History beyond cfg's bounds is dropped, oldest first.
func NewRestored(cfg Config, src Source, state []byte) (*Channel, error) {
	r, err := decodeState(state)
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
