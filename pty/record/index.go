package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// Keyframe is the emulator's screen at a point of a recording: written
// into a fresh terminal of Rows×Cols, Screen reproduces the screen,
// cursor, pen and modes there (not the scrollback). Offset is the byte
// offset in the .cast of the first event line written after it: Screen
// followed by the events from Offset on is the recording from there.
type Keyframe struct {
	Time   float64 `json:"time"`
	Offset int64   `json:"offset"`
	Rows   int     `json:"rows"`
	Cols   int     `json:"cols"`
	Screen string  `json:"screen,omitempty"`
	// Bytes is len(Screen) (Index leaves Screen out and says its size).
	Bytes int `json:"bytes,omitempty"`
}

// Audit is one audit event of a recording: who attached, typed, or
// switched recording. Time (seconds since the recording started) is set
// by the Recorder.
type Audit struct {
	Time   float64 `json:"time"`
	Event  string  `json:"event"` // attach, detach, input, record-on, record-off
	Viewer string  `json:"viewer,omitempty"`
	Token  string  `json:"token,omitempty"` // the token's id, never its secret
	Role   string  `json:"role,omitempty"`
	Remote string  `json:"remote,omitempty"`
	Detail string  `json:"detail,omitempty"`
}

// Index is what a recording's .index.jsonl holds, without the keyframes'
// screens.
type Index struct {
	Keyframes []Keyframe `json:"keyframes"`
	Audit     []Audit    `json:"audit"`
	Dropped   int64      `json:"dropped"`
	// DroppedAudit counts the audit events the recording could not
	// write (the total cap could not be met, or its queue was full).
	DroppedAudit int64 `json:"droppedAudit"`
}

// IndexLine is one line of an .index.jsonl: Type "keyframe", "audit" or
// "dropped" with the fields of that type.
type IndexLine struct {
	Type     string
	Time     float64
	Keyframe Keyframe // Type "keyframe"
	Audit    Audit    // Type "audit"
	Dropped  int64    // Type "dropped": bytes dropped
	// DroppedAudit, of Type "dropped": audit events dropped.
	DroppedAudit int64
}

// indexWire is an index line as JSON (the union of the three types).
type indexWire struct {
	Type   string   `json:"type"`
	Time   *float64 `json:"time"`
	Offset int64    `json:"offset"`
	Rows   int      `json:"rows"`
	Cols   int      `json:"cols"`
	Screen string   `json:"screen"`
	Event  string   `json:"event"`
	Viewer string   `json:"viewer"`
	Token  string   `json:"token"`
	Role   string   `json:"role"`
	Remote string   `json:"remote"`
	Detail string   `json:"detail"`
	Bytes  int64    `json:"bytes"`
	Audit  int64    `json:"audit"`
}

// ParseIndexLine parses one line of an .index.jsonl.
func ParseIndexLine(line []byte) (IndexLine, error) {
	var l IndexLine
	var w indexWire
	line = bytes.TrimSuffix(line, []byte("\n"))
	if len(line) == 0 || line[0] != '{' {
		return l, fmt.Errorf("%w: index line is not a JSON object", ErrFormat)
	}
	if err := json.Unmarshal(line, &w); err != nil {
		return l, fmt.Errorf("%w: index line: %v", ErrFormat, err)
	}
	if w.Time == nil || *w.Time < 0 || math.IsInf(*w.Time, 0) {
		return l, fmt.Errorf("%w: index line %q without a valid time", ErrFormat, w.Type)
	}
	l.Type, l.Time = w.Type, *w.Time
	switch w.Type {
	case "keyframe":
		if w.Offset < 0 || w.Rows < 1 || w.Cols < 1 || w.Rows > maxSize || w.Cols > maxSize {
			return l, fmt.Errorf("%w: keyframe offset %d size %dx%d", ErrFormat, w.Offset, w.Rows, w.Cols)
		}
		l.Keyframe = Keyframe{Time: *w.Time, Offset: w.Offset, Rows: w.Rows, Cols: w.Cols, Screen: w.Screen, Bytes: len(w.Screen)}
	case "audit":
		if w.Event == "" {
			return l, fmt.Errorf("%w: audit line without an event", ErrFormat)
		}
		l.Audit = Audit{Time: *w.Time, Event: w.Event, Viewer: w.Viewer, Token: w.Token, Role: w.Role, Remote: w.Remote, Detail: w.Detail}
	case "dropped":
		if w.Bytes < 0 || w.Audit < 0 {
			return l, fmt.Errorf("%w: dropped %d bytes, %d audit events", ErrFormat, w.Bytes, w.Audit)
		}
		l.Dropped, l.DroppedAudit = w.Bytes, w.Audit
	default:
		return l, fmt.Errorf("%w: index line type %q", ErrFormat, w.Type)
	}
	return l, nil
}

// maxSize is the largest size a keyframe may have (pty.MaxSize).
const maxSize = 1000

// ReadIndex reads an .index.jsonl. With screens false, keyframes keep
// only their size (Bytes). A last line without a newline (being
// written) ends the index; a bad line is an error naming its offset.
func ReadIndex(r io.Reader, screens bool) (*Index, error) {
	ix := &Index{Keyframes: []Keyframe{}, Audit: []Audit{}}
	_, err := scanIndex(r, func(off int64, l IndexLine) bool {
		switch l.Type {
		case "keyframe":
			k := l.Keyframe
			if !screens {
				k.Screen = ""
			}
			ix.Keyframes = append(ix.Keyframes, k)
		case "audit":
			ix.Audit = append(ix.Audit, l.Audit)
		case "dropped":
			ix.Dropped += l.Dropped
			ix.DroppedAudit += l.DroppedAudit
		}
		return true
	})
	return ix, err
}

// scanIndex calls f for each line of an index until it returns false. It
// returns the offset after the last whole line it read (a last line
// without a newline, being written, is left for later).
func scanIndex(r io.Reader, f func(off int64, l IndexLine) bool) (int64, error) {
	cr := &Reader{br: bufio.NewReaderSize(r, 64<<10)}
	for {
		off := cr.off
		line, err := cr.next()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return off, nil
		}
		if err != nil {
			return off, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		l, err := ParseIndexLine(line)
		if err != nil {
			return off, fmt.Errorf("index offset %d: %w", off, err)
		}
		if !f(off, l) {
			return cr.off, nil
		}
	}
}
