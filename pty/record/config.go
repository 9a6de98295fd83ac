package record

import (
	"errors"
	"fmt"
	"time"
)

// Mode says what a terminal records.
type Mode int

// Recording modes.
const (
	// Off records nothing.
	Off Mode = iota
	// Output records the terminal's output and its size changes.
	Output
	// OutputInput records the input as well ("i" events): keystrokes,
	// passwords typed at a prompt included. Only when asked for.
	OutputInput
)

// ParseMode parses "off", "output" or "output+input".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "off":
		return Off, nil
	case "output":
		return Output, nil
	case "output+input":
		return OutputInput, nil
	}
	return Off, fmt.Errorf("record: mode %q, want off, output or output+input", s)
}

// String returns the mode as ParseMode reads it.
func (m Mode) String() string {
	switch m {
	case Off:
		return "off"
	case Output:
		return "output"
	case OutputInput:
		return "output+input"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Defaults of Limits.
const (
	DefaultMaxBytes         = 64 << 20
	DefaultMaxTotalBytes    = 1 << 30
	DefaultKeyframeBytes    = 1 << 20
	DefaultKeyframeInterval = 60 * time.Second
	DefaultQueueBytes       = 4 << 20
)

// MaxEventLine is the longest event line a Recorder writes, newline
// included: output is cut into several "o" events to stay under it.
const MaxEventLine = 64 << 10

// Limits bound what recordings may hold on disk and in memory. The zero
// value of a field means its default.
type Limits struct {
	// MaxBytes is the size of one recording's files (.cast and
	// .index.jsonl together) at which it is closed with a marker and
	// continues in a new file that starts with a keyframe
	// (recordingMaxBytes). Default 64 MiB; at least 64 KiB.
	MaxBytes int64
	// MaxTotalBytes bounds the directory (recordingsMaxTotalBytes): the
	// oldest recordings are evicted first. Default 1 GiB; at least MaxBytes.
	MaxTotalBytes int64
	// KeyframeBytes and KeyframeInterval: a keyframe is written once this
	// much output, or this much time with some output, followed the last
	// one (recordingKeyframeBytes, recordingKeyframeInterval). Defaults
	// 1 MiB and 60 s.
	KeyframeBytes    int64
	KeyframeInterval time.Duration
	// QueueBytes bounds what a recording holds in memory for its writer;
	// output beyond it is dropped and accounted. Default 4 MiB; at least
	// 2×MaxEventLine.
	QueueBytes int64
}

// WithDefaults returns l with zero fields set to their defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxBytes == 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxTotalBytes == 0 {
		l.MaxTotalBytes = max(DefaultMaxTotalBytes, l.MaxBytes)
	}
	if l.KeyframeBytes == 0 {
		l.KeyframeBytes = DefaultKeyframeBytes
	}
	if l.KeyframeInterval == 0 {
		l.KeyframeInterval = DefaultKeyframeInterval
	}
	if l.QueueBytes == 0 {
		l.QueueBytes = DefaultQueueBytes
	}
	return l
}

// Validate reports the first invalid field of l (after defaults).
func (l Limits) Validate() error {
	l = l.WithDefaults()
	switch {
	case l.MaxBytes < 64<<10:
		return fmt.Errorf("record: Limits.MaxBytes = %d, want at least 65536", l.MaxBytes)
	case l.MaxTotalBytes < l.MaxBytes:
		return fmt.Errorf("record: Limits.MaxTotalBytes = %d, want at least MaxBytes (%d)", l.MaxTotalBytes, l.MaxBytes)
	case l.KeyframeBytes < 4<<10:
		return fmt.Errorf("record: Limits.KeyframeBytes = %d, want at least 4096", l.KeyframeBytes)
	case l.KeyframeInterval < time.Second:
		return fmt.Errorf("record: Limits.KeyframeInterval = %v, want at least 1s", l.KeyframeInterval)
	case l.QueueBytes < 2*MaxEventLine:
		return fmt.Errorf("record: Limits.QueueBytes = %d, want at least %d", l.QueueBytes, 2*MaxEventLine)
	}
	return nil
}

// Sentinel errors.
var (
	// ErrNotFound is returned for an unknown recording id (or one that is
	// not a recording id at all).
	ErrNotFound = errors.New("record: no such recording")
	// ErrClosed is returned by a closed Store.
	ErrClosed = errors.New("record: store closed")
	// ErrFormat is wrapped by the parsers' errors.
	ErrFormat = errors.New("record: bad format")
)
