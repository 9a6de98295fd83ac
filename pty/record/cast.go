package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/ahp-dev/ahpd/flow"
)

// Header is the first line of an asciicast v2 file.
type Header struct {
	Version   int               `json:"version"`
	Width     int               `json:"width"`
	Height    int               `json:"height"`
	Timestamp int64             `json:"timestamp,omitempty"`
	Title     string            `json:"title,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
}

// Event is one event line of an asciicast v2 file.
type Event struct {
	// Time is in seconds since the header's timestamp.
	Time float64
	// Type is "o" (output), "i" (input), "r" (resize, Data "COLSxROWS"),
	// "m" (marker) or any other the file holds.
	Type string
	Data string
	// Offset is the byte offset of the event's line in the file.
	Offset int64
}

// MaxReadLine is the longest line the readers accept (files from
// elsewhere may have longer event lines than a Recorder writes).
const MaxReadLine = 4 << 20

// ParseHeader parses an asciicast v2 header line.
func ParseHeader(line []byte) (Header, error) {
	var h Header
	line = bytes.TrimSuffix(line, []byte("\n"))
	if len(line) == 0 || line[0] != '{' {
		return h, fmt.Errorf("%w: header is not a JSON object", ErrFormat)
	}
	if err := json.Unmarshal(line, &h); err != nil {
		return h, fmt.Errorf("%w: header: %v", ErrFormat, err)
	}
	switch {
	case h.Version != 2:
		return h, fmt.Errorf("%w: header version %d, want 2", ErrFormat, h.Version)
	case h.Width < 1 || h.Height < 1:
		return h, fmt.Errorf("%w: header size %dx%d, want positive", ErrFormat, h.Width, h.Height)
	}
	return h, nil
}

// ParseEvent parses an event line: [time, "type", "data"].
func ParseEvent(line []byte) (Event, error) {
	var e Event
	line = bytes.TrimSuffix(line, []byte("\n"))
	var a []json.RawMessage
	if len(line) == 0 || line[0] != '[' {
		return e, fmt.Errorf("%w: event is not a JSON array", ErrFormat)
	}
	if err := json.Unmarshal(line, &a); err != nil {
		return e, fmt.Errorf("%w: event: %v", ErrFormat, err)
	}
	if len(a) != 3 {
		return e, fmt.Errorf("%w: event has %d elements, want 3", ErrFormat, len(a))
	}
	if err := json.Unmarshal(a[0], &e.Time); err != nil || e.Time < 0 || math.IsInf(e.Time, 0) {
		return e, fmt.Errorf("%w: event time %.40s", ErrFormat, a[0])
	}
	if err := json.Unmarshal(a[1], &e.Type); err != nil || e.Type == "" {
		return e, fmt.Errorf("%w: event type %.40s", ErrFormat, a[1])
	}
	if err := json.Unmarshal(a[2], &e.Data); err != nil {
		return e, fmt.Errorf("%w: event data: %v", ErrFormat, err)
	}
	return e, nil
}

// Reader reads an asciicast v2 file line by line.
type Reader struct {
	// Complete says the file is finished: a last line without a newline
	// is then an event (as asciinema reads it), not the partial line of
	// a file being written (io.ErrUnexpectedEOF). ahpctl recordings cat
	// sets it for files given by name.
	Complete bool

	br   *bufio.Reader
	off  int64
	line int // lines read
	hdr  Header
}

// NewReader reads the header from r and returns a Reader of the events
// that follow.
func NewReader(r io.Reader) (*Reader, error) {
	cr := &Reader{br: bufio.NewReaderSize(r, 64<<10)}
	line, err := cr.next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: an empty file, no header", ErrFormat)
		}
		return nil, err
	}
	if cr.hdr, err = ParseHeader(line); err != nil {
		return nil, fmt.Errorf("line 1: %w", err)
	}
	return cr, nil
}

// Header returns the file's header.
func (r *Reader) Header() Header { return r.hdr }

// Offset returns the byte offset of the next line.
func (r *Reader) Offset() int64 { return r.off }

// Line returns how many lines the Reader has read, the header's
// included: the number of the line the last event came from.
func (r *Reader) Line() int { return r.line }

// next returns the next whole line (with its newline). A last line
// without a newline is io.ErrUnexpectedEOF (a file being written) unless
// the file is Complete.
func (r *Reader) next() ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.br.ReadSlice('\n')
		if len(buf)+len(chunk) > MaxReadLine {
			return nil, fmt.Errorf("%w: line %d (offset %d) longer than %d bytes", ErrFormat, r.line+1, r.off, MaxReadLine)
		}
		switch {
		case err == nil:
			if buf == nil {
				buf = chunk
			} else {
				buf = append(buf, chunk...)
			}
			r.off += int64(len(buf))
			r.line++
			return buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			buf = append(buf, chunk...)
		case errors.Is(err, io.EOF):
			if len(buf)+len(chunk) == 0 {
				return nil, io.EOF
			}
			if r.Complete {
				buf = append(buf, chunk...)
				r.off += int64(len(buf))
				r.line++
				return buf, nil
			}
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}

// Next returns the next event, io.EOF after the last one, or an error
// naming the line that is wrong. Empty lines are skipped.
func (r *Reader) Next() (Event, error) {
	for {
		off := r.off
		line, err := r.next()
		if err != nil {
			return Event{}, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		e, err := ParseEvent(line)
		if err != nil {
			return Event{}, fmt.Errorf("line %d (offset %d): %w", r.line, off, err)
		}
		e.Offset = off
		return e, nil
	}
}

// Events iterates over the remaining events; it stops after the first
// error (io.EOF is not an error: the iteration just ends).
func (r *Reader) Events() iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for {
			e, err := r.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if !yield(e, err) || err != nil {
				return
			}
		}
	}
}

// appendHeader appends h's line.
func appendHeader(b []byte, h Header) []byte {
	h.Version = 2
	j, _ := json.Marshal(h) // a struct of strings and numbers
	b = append(b, j...)
	return append(b, '\n')
}

// appendTime appends d as seconds with microseconds ("12.034567").
func appendTime(b []byte, d time.Duration) []byte {
	us := max(d.Microseconds(), 0)
	b = strconv.AppendInt(b, us/1e6, 10)
	frac := us % 1e6
	b = append(b, '.')
	for div := int64(1e5); div > 0; div /= 10 {
		b = append(b, byte('0'+frac/div%10))
	}
	return b
}

// appendEvent appends an event line; text must be valid UTF-8.
func appendEvent(b []byte, d time.Duration, typ byte, text string) []byte {
	b = append(b, '[')
	b = appendTime(b, d)
	b = append(b, ',', '"', typ, '"', ',', '"')
	b = flow.AppendEscaped(b, text)
	return append(b, '"', ']', '\n')
}

// pieceBytes is how much text an event line takes at first; a piece
// whose line is longer than MaxEventLine (escapes: up to 6 bytes for
// one) is halved until it fits.
const pieceBytes = 32 << 10

// appendEvents appends text (valid UTF-8) as one or more event lines,
// each at most MaxEventLine bytes.
func appendEvents(b []byte, d time.Duration, typ byte, text string) []byte {
	for len(text) > 0 {
		n := min(len(text), pieceBytes)
		for {
			n = runeCut(text, n)
			mark := len(b)
			b = appendEvent(b, d, typ, text[:n])
			if len(b)-mark <= MaxEventLine || n <= 4 {
				break
			}
			b = b[:mark]
			n /= 2
		}
		text = text[n:]
	}
	return b
}

// runeCut returns the largest i ≤ n that does not cut a UTF-8 sequence
// of s (at least 1 when s is not empty, so that progress is made).
func runeCut(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	for i := n; i > 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			return i
		}
	}
	return max(n, 1)
}

// utf8Carry turns raw bytes into valid UTF-8 text across calls: a
// sequence cut at the end of p is held until the next call completes it;
// invalid bytes become U+FFFD.
type utf8Carry struct {
	held [utf8.UTFMax]byte
	n    int
}

// text returns the valid UTF-8 text of held+p, holding back an
// incomplete trailing sequence (unless flush).
func (c *utf8Carry) text(p []byte, flush bool) string {
	var buf []byte
	if c.n > 0 {
		buf = append(append(make([]byte, 0, c.n+len(p)), c.held[:c.n]...), p...)
		c.n = 0
	} else {
		buf = p
	}
	if !flush {
		// An incomplete sequence at the end waits (at most UTFMax-1 bytes).
		for i := len(buf) - 1; i >= 0 && i >= len(buf)-(utf8.UTFMax-1); i-- {
			if !utf8.RuneStart(buf[i]) {
				continue
			}
			if !utf8.FullRune(buf[i:]) {
				c.n = copy(c.held[:], buf[i:])
				buf = buf[:i]
			}
			break
		}
	}
	if utf8.Valid(buf) {
		return string(buf)
	}
	return validUTF8(buf)
}

// validUTF8 returns p with each invalid byte replaced by U+FFFD (as
// decoding it rune by rune reads it).
func validUTF8(p []byte) string {
	out := make([]byte, 0, len(p)+16)
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && n == 1 {
			out = append(out, "\uFFFD"...)
		} else {
			out = append(out, p[i:i+n]...)
		}
		i += n
	}
	return string(out)
}
