package flow

import "errors"

// Violations of a subscription's limits or rules. Each maps to a
// channel/reset code (ResetCode); none of them affects another
// subscription or the connection (PROTOCOL.md §7).
var (
	// ErrFrameTooLarge: a received frame exceeds maximumFrameBytes.
	ErrFrameTooLarge = errors.New("frame exceeds maximumFrameBytes")
	// ErrMessageTooLarge: a logical message exceeds maximumMessageBytes.
	ErrMessageTooLarge = errors.New("message exceeds maximumMessageBytes")
	// ErrWindowExceeded: the peer started a message while its outstanding
	// bytes were at or above the window it was granted.
	ErrWindowExceeded = errors.New("message started beyond the granted window")
	// ErrMessageID: a frame's messageId is not the expected one.
	ErrMessageID = errors.New("unexpected messageId")
	// ErrCreditBeyondSent: consumedBytes is larger than what was sent.
	ErrCreditBeyondSent = errors.New("consumedBytes beyond bytes sent")
	// ErrCreditOffBoundary: consumedBytes is not the end of a logical
	// message.
	ErrCreditOffBoundary = errors.New("consumedBytes not on a logical-message boundary")
	// ErrReleaseOrder: a consumer released out of order or beyond what was
	// received.
	ErrReleaseOrder = errors.New("release out of order")
	// ErrEmptyMessage: a logical message has no text.
	ErrEmptyMessage = errors.New("empty logical message")
	// ErrSourceContract: a Source returned data while data was not
	// allowed, an oversized lifecycle message, or too many of them.
	ErrSourceContract = errors.New("source broke the Pull contract")
	// ErrControlOverflow: the control lane is over its bound; the peer is
	// requesting faster than it reads. The connection is cut off.
	ErrControlOverflow = errors.New("control queue over its bound")
	// ErrResume: resume positions cannot be reconciled with the journal.
	ErrResume = errors.New("resume positions cannot be reconciled")
)

// Reset codes of PROTOCOL.md §7.
const (
	CodeInvalidCredit   = "invalid-credit"
	CodeFrameTooLarge   = "frame-too-large"
	CodeMessageTooLarge = "message-too-large"
	CodeProtocolError   = "protocol-error"
)

// ResetCode returns the channel/reset code for a subscription-level error.
func ResetCode(err error) string {
	switch {
	case errors.Is(err, ErrFrameTooLarge):
		return CodeFrameTooLarge
	case errors.Is(err, ErrMessageTooLarge):
		return CodeMessageTooLarge
	case errors.Is(err, ErrCreditBeyondSent), errors.Is(err, ErrCreditOffBoundary):
		return CodeInvalidCredit
	default:
		return CodeProtocolError
	}
}
