package flow

// Class is the delivery class of a logical message (PROTOCOL.md §4).
type Class uint8

const (
	// Data messages are credit-gated: one may start only while the
	// subscription's outstanding bytes are below its window.
	Data Class = iota
	// Lifecycle messages (terminal/exit, tcp/eof, tcp/closed) may start
	// without window credit, but only after the subscription's earlier
	// messages have been scheduled. Each is at most MaxLifecycleBytes and
	// their bytes still count as sent.
	Lifecycle
)

// MaxLifecycleBytes bounds one lifecycle message, in UTF-16 bytes (§4).
const MaxLifecycleBytes = 1024

// MaxLifecycleMessages bounds the lifecycle messages of one subscription
// direction. §4 allows at most one of each kind (terminal/exit, tcp/eof,
// tcp/closed); a SendWindow refuses more, and a Receiver accepts at most
// this many messages that start beyond its window (each at most
// MaxLifecycleBytes). Lifecycle messages are why outstanding bytes may
// reach window + maxMessage + MaxLifecycleMessages × MaxLifecycleBytes.
const MaxLifecycleMessages = 4

// Message is one logical message: a complete, serialized JSON-RPC 2.0
// notification object such as
// {"jsonrpc":"2.0","method":"terminal/output","params":{"data":"..."}}.
// Its text is independent of the subscription that carries it, so one
// serialized message can be shared by many viewers.
type Message struct {
	Text  string
	Class Class
	// Size is UTF16Len(Text) when the Source knows it (it often does,
	// having just built the text), or 0 for the Sender to compute it.
	Size int64
	// PlainFrom and PlainTo mark a span of Text that the Source built
	// from printable ASCII other than '"' and '\\' (base64, say): bytes a
	// JSON string holds as themselves. The Fragmenter copies that span
	// into frames without looking at it. The Source promises it; a span
	// that breaks the promise makes frames that are not JSON. Equal (the
	// zero value): no span.
	PlainFrom, PlainTo int
	// Escaped, when not empty, is the message as the body of a JSON
	// string, in place of Text: AppendEscaped of the message's text,
	// which must be ASCII without the control characters U+0000–U+001F
	// (a message written without whitespace whose strings hold ASCII
	// only: AppendEscapedTwice writes their parts this way). Its frames
	// are copies of pieces of it, cut between its escapes, where from Text
	// each frame escapes its piece (Fragmenter.ResetEscaped); Text is then
	// not used and may be empty. Size, when set, is still the text's
	// (EscapedTextSize). A stream with a Journal keeps texts, so its
	// Source gives Text (ErrSourceContract otherwise). The Source promises
	// the form; a body that breaks it makes frames that are not JSON.
	Escaped string
	// Owned says Text's memory came from the stream's Journal
	// (Journal.Buffer) and the Source never touches it again: the
	// journal keeps it as it is instead of copying it.
	Owned bool
}

// size returns the UTF-16 size of m's text.
func (m *Message) size() int64 {
	if m.Escaped != "" {
		return EscapedTextSize(m.Escaped)
	}
	return UTF16Len(m.Text)
}

// Source produces the logical messages of one subscription, in order. The
// connection's owner calls Pull only when the subscription may start a new
// message; the Source keeps its own bounded queue and loss policy
// (terminal: snapshot; telemetry: explicit drop; TCP: stop reading).
//
// Pull returns the next message to start. When dataAllowed is false the
// window is exhausted and only a Lifecycle message may be returned (and
// only when no earlier data is still queued in the Source).
// maxMessageBytes is the size the Sender asks for (SendWindow.PullSize):
// the receiver's maximumMessageBytes, or a quarter of a smaller window. A
// Source splits its data to fit it; a message that cannot be split may be
// larger, up to the receiver's maximumMessageBytes, and a larger one is
// refused with ErrMessageTooLarge and never sent. Sizes are UTF-16 bytes
// (UTF16Len). ok is false when there is nothing to send now; the Source
// then calls its wake-up hook when that changes.
//
// Pull is called from the connection's owner goroutine only; a Source fed
// by another goroutine guards its queue itself.
//
// The Sender is done with a message's Text when it pulls the next one: a
// Source may build each Text in memory it reuses from one Pull to the
// next after that (a Journal keeps its own copy for resume, or the text
// itself when it is Owned).
type Source interface {
	Pull(dataAllowed bool, maxMessageBytes int64) (m Message, ok bool)
}

// Finisher is implemented by a Source that wants to know when the Sender
// is done with the text of the message it pulled last: the Sender calls
// Finished right after it produced that message's last frame (frames are
// copies), so the Source may give the text's memory back at once instead
// of holding it until its next Pull, which may never come for a
// subscriber that stopped crediting. more reports whether the
// subscription's window lets another data message start now; the
// Sender's budgets may still hold it back, so more is no promise of a
// Pull soon. Replayed journal messages were not pulled and are not
// reported.
type Finisher interface {
	Finished(more bool)
}
