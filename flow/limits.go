package flow

import "fmt"

// MinFrameBytes is the smallest maximumFrameBytes a receiver may grant
// (PROTOCOL.md §3).
const MinFrameBytes = 1024

// ReceiveLimits are the limits a receiver grants its sender for one
// subscription and direction (PROTOCOL.md §3). All sizes are UTF-16 bytes.
type ReceiveLimits struct {
	// WindowBytes is the soft window: a new logical message may start only
	// while the sender's outstanding bytes are below it.
	WindowBytes int64 `json:"windowBytes"`
	// MaximumFrameBytes bounds one whole serialized channel/frame text,
	// envelope and escaping included. At least MinFrameBytes.
	MaximumFrameBytes int64 `json:"maximumFrameBytes"`
	// MaximumMessageBytes bounds one reassembled logical message.
	MaximumMessageBytes int64 `json:"maximumMessageBytes"`
}

// LimitError reports an invalid limit; Field is the wire name of the field
// that breaks a rule.
type LimitError struct {
	Field  string
	Reason string
}

func (e *LimitError) Error() string { return e.Field + ": " + e.Reason }

// Validate checks the rules of PROTOCOL.md §3: positive safe integers,
// maximumFrameBytes ≥ 1024, windowBytes ≥ maximumFrameBytes and
// maximumMessageBytes ≥ maximumFrameBytes. The error is a *LimitError
// naming the first field that breaks a rule.
func (l ReceiveLimits) Validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"windowBytes", l.WindowBytes},
		{"maximumFrameBytes", l.MaximumFrameBytes},
		{"maximumMessageBytes", l.MaximumMessageBytes},
	} {
		if f.v <= 0 || f.v > MaxSafeInteger {
			return &LimitError{f.name, fmt.Sprintf("must be a positive safe integer, got %d", f.v)}
		}
	}
	if l.MaximumFrameBytes < MinFrameBytes {
		return &LimitError{"maximumFrameBytes", fmt.Sprintf("must be at least %d, got %d", MinFrameBytes, l.MaximumFrameBytes)}
	}
	if l.WindowBytes < l.MaximumFrameBytes {
		return &LimitError{"windowBytes", fmt.Sprintf("must be at least maximumFrameBytes (%d), got %d", l.MaximumFrameBytes, l.WindowBytes)}
	}
	if l.MaximumMessageBytes < l.MaximumFrameBytes {
		return &LimitError{"maximumMessageBytes", fmt.Sprintf("must be at least maximumFrameBytes (%d), got %d", l.MaximumFrameBytes, l.MaximumMessageBytes)}
	}
	return nil
}

// Negotiate returns the limits that hold when a receiver requests req and
// the host allows at most max: each value is lowered to the maximum, never
// raised (PROTOCOL.md §3). The request is validated first; max must be
// valid itself. Lowering keeps the orderings because max obeys them and
// min() preserves them.
func Negotiate(req, max ReceiveLimits) (ReceiveLimits, error) {
	if err := req.Validate(); err != nil {
		return ReceiveLimits{}, err
	}
	got := ReceiveLimits{
		WindowBytes:         min(req.WindowBytes, max.WindowBytes),
		MaximumFrameBytes:   min(req.MaximumFrameBytes, max.MaximumFrameBytes),
		MaximumMessageBytes: min(req.MaximumMessageBytes, max.MaximumMessageBytes),
	}
	// A requested window below the lowered frame size cannot happen: the
	// request had window ≥ frame and the maximum had window ≥ frame, so
	// min(window) ≥ min(frame). Likewise for messages.
	return got, nil
}
