package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/internal/wire"
)

// Message is one reassembled logical message of a subscription.
type Message struct {
	Method string
	Params json.RawMessage
	Text   []byte
	// End is the message's position, to pass to Release.
	End flow.Position
}

// FlowControl is the negotiated pair of limits.
type FlowControl = wire.FlowControl

// Sub is one subscription. Next/Release consume host→client messages;
// Send sends client→host messages. Safe for concurrent use.
type Sub struct {
	c       *Conn
	ID      string
	Channel string
	Flow    FlowControl
	Initial string

	mu     sync.Mutex // guards everything below
	recv   *flow.Receiver
	queue  []Message
	sig    chan struct{} // a message or an error arrived
	err    error
	win    *flow.SendWindow
	nextID int64
	credit chan struct{} // host credit arrived
	frag   flow.Fragmenter
	sendMu sync.Mutex // one outbound message at a time

	// Adaptive window (AutoWindow): nil tuner when off.
	tuner         *flow.WindowTuner
	unwatch       func()
	windowChanges int
}

// Subscribe subscribes to channel; limits nil takes the host's defaults.
func (c *Conn) Subscribe(ctx context.Context, channel string, limits *flow.ReceiveLimits) (*Sub, error) {
	params := map[string]any{"channel": channel}
	if limits != nil {
		params["flowControl"] = map[string]any{"receive": limits}
	}
	s := &Sub{c: c, Channel: channel, sig: make(chan struct{}, 1), credit: make(chan struct{}, 1), nextID: 1}
	// The reader installs s the moment the response arrives, before it
	// reads the frames that follow it.
	if err := c.call(ctx, "subscribe", params, nil, s); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Sub) init(result json.RawMessage) string {
	var res wire.SubscribeResult
	_ = json.Unmarshal(result, &res)
	s.ID, s.Flow, s.Initial = res.SubscriptionID, res.FlowControl, res.Initial.Kind
	s.recv = flow.NewReceiver(res.FlowControl.ClientReceive)
	s.win = flow.NewSendWindow(res.FlowControl.HostReceive)
	return s.ID
}

func (s *Sub) end(err error) {
	s.mu.Lock()
	s.fail(err)
	unwatch := s.unwatch
	s.unwatch, s.tuner = nil, nil
	s.mu.Unlock()
	if unwatch != nil {
		unwatch()
	}
}

// Err returns why the subscription ended, or nil.
func (s *Sub) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *Sub) fail(err error) {
	if s.err == nil {
		if err == nil {
			err = errors.New("connection closed")
		}
		s.err = err
	}
	select {
	case s.sig <- struct{}{}:
	default:
	}
	select {
	case s.credit <- struct{}{}:
	default:
	}
}

// onFrame runs on the reader goroutine.
func (s *Sub) onFrame(size int64, f *flow.Frame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	text, end, err := s.recv.Frame(size, f)
	if err != nil {
		s.fail(err)
		reset := flow.AppendReset(nil, s.Channel, s.ID, flow.ResetCode(err), err.Error())
		// Not under s.mu (the reader holds it): the Conn's WaitGroup
		// tracks the goroutine so Close waits for it.
		s.c.wg.Go(func() { _ = s.c.SendRaw(context.Background(), reset) })
		return
	}
	if text == nil {
		return
	}
	m := Message{Text: append([]byte(nil), text...), End: end}
	m.Method, m.Params = splitEnvelope(m.Text)
	s.queue = append(s.queue, m)
	select {
	case s.sig <- struct{}{}:
	default:
	}
}

func (s *Sub) onCredit(consumed int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.win.Credit(consumed); err != nil {
		s.fail(err)
		return
	}
	select {
	case s.credit <- struct{}{}:
	default:
	}
}

// Next returns the next logical message, waiting until ctx ends. The
// caller releases it with Release once consumed.
func (s *Sub) Next(ctx context.Context) (Message, error) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			m := s.queue[0]
			s.queue[0] = Message{}
			s.queue = s.queue[1:]
			s.mu.Unlock()
			return m, nil
		}
		err := s.err
		s.mu.Unlock()
		if err != nil {
			return Message{}, err
		}
		select {
		case <-s.sig:
		case <-ctx.Done():
			return Message{}, ctx.Err()
		}
	}
}

// Queued returns the number of messages received and not yet taken.
func (s *Sub) Queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Release releases every message up to m (in order) and sends credit
// when the receiver's policy says so: for a data message once a quarter
// of the window is released (flow.Receiver.ReleaseBatched), so that a
// viewer that keeps up does not answer every message with a credit; for
// a lifecycle message at once (flow.Receiver.Release), since the host may
// wait for its credit to end the channel.
func (s *Sub) Release(ctx context.Context, m Message) error {
	s.mu.Lock()
	release := s.recv.ReleaseBatched
	if lifecycleMethod(m.Method) {
		release = s.recv.Release
	}
	before := s.recv.Released().Position
	consumed, send, err := release(m.End)
	var window []byte
	if err == nil {
		window = s.tuneLocked(m.End.Position - before)
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if window != nil {
		if err := s.c.SendRaw(ctx, window); err != nil {
			return err
		}
	}
	if !send {
		return nil
	}
	return s.SendCredit(ctx, consumed)
}

// SendCredit sends channel/credit with consumedBytes as is (tests use it
// to misbehave).
func (s *Sub) SendCredit(ctx context.Context, consumed int64) error {
	return s.c.SendRaw(ctx, flow.AppendCredit(nil, s.Channel, s.ID, consumed))
}

// Send sends one client→host logical message (a complete JSON-RPC
// notification) in frames under the host's limits, waiting for window.
func (s *Sub) Send(ctx context.Context, text string) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	size := flow.UTF16Len(text)
	for {
		s.mu.Lock()
		if s.err != nil {
			err := s.err
			s.mu.Unlock()
			return err
		}
		if s.win.MayStart() {
			if err := s.win.Start(size, flow.Data); err != nil {
				s.mu.Unlock()
				return err
			}
			s.mu.Unlock()
			break
		}
		s.mu.Unlock()
		select {
		case <-s.credit:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := s.frag.Reset(s.Channel, s.ID, s.nextID, text, s.Flow.HostReceive.MaximumFrameBytes); err != nil {
		return err
	}
	s.nextID++
	var buf []byte
	for {
		frame, payload, final := s.frag.Next(buf[:0])
		buf = frame
		s.mu.Lock()
		s.win.Reserve(payload)
		if final {
			s.win.Finish()
		}
		s.mu.Unlock()
		if err := s.c.SendRaw(ctx, frame); err != nil {
			return err
		}
		if final {
			return nil
		}
	}
}

// Unsubscribe ends the subscription.
func (s *Sub) Unsubscribe(ctx context.Context) error {
	err := s.c.Call(ctx, "unsubscribe", map[string]string{"subscriptionId": s.ID}, nil)
	s.c.unroute(s.ID)
	s.end(errors.New("unsubscribed"))
	return err
}

// AppendNotification builds a JSON-RPC notification text with params
// marshalled by encoding/json (for small client→host messages).
func AppendNotification(dst []byte, method string, params any) []byte {
	p, _ := json.Marshal(params)
	dst = append(dst, `{"jsonrpc":"2.0","method":`...)
	dst = flow.AppendJSONString(dst, method)
	dst = append(dst, `,"params":`...)
	dst = append(dst, p...)
	return append(dst, '}')
}

// splitEnvelope returns the method and params of a logical message. Host
// messages have the canonical shape {"jsonrpc":"2.0","method":"M","params":P},
// which is sliced without scanning the (possibly large) params; anything
// else goes through encoding/json.
func splitEnvelope(text []byte) (string, json.RawMessage) {
	const head = `{"jsonrpc":"2.0","method":"`
	if bytes.HasPrefix(text, []byte(head)) && bytes.HasSuffix(text, []byte("}")) {
		rest := text[len(head):]
		if i := bytes.IndexByte(rest, '"'); i > 0 && bytes.IndexByte(rest[:i], '\\') < 0 {
			after := rest[i+1:]
			const p = `,"params":`
			if bytes.HasPrefix(after, []byte(p)) {
				return string(rest[:i]), after[len(p) : len(after)-1]
			}
		}
	}
	var env struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(text, &env)
	return env.Method, env.Params
}

// AppendTerminalData appends the decoded data of a terminal/output message
// to dst. The canonical params {"data":"…"} are decoded without
// encoding/json; other shapes fall back to it.
func (m Message) AppendTerminalData(dst []byte) ([]byte, error) {
	const head, tail = `{"data":"`, `"}`
	p := m.Params
	if bytes.HasPrefix(p, []byte(head)) && bytes.HasSuffix(p, []byte(tail)) {
		body := p[len(head) : len(p)-len(tail)]
		if !hasBareQuote(body) {
			out, _, err := flow.AppendUnescaped(dst, body)
			return out, err
		}
	}
	var v struct {
		Data string `json:"data"`
	}
	if err := json.Unmarshal(p, &v); err != nil {
		return dst, err
	}
	return append(dst, v.Data...), nil
}

// hasBareQuote reports whether a JSON string body contains a '"' that is
// not escaped, i.e. the string would end before the body does.
func hasBareQuote(body []byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(body[i:], '"')
		if j < 0 {
			return false
		}
		k := i + j
		n := 0
		for k-n-1 >= 0 && body[k-n-1] == '\\' {
			n++
		}
		if n%2 == 0 {
			return true
		}
		i = k + 1
	}
}

// lifecycleMethod reports whether method names a lifecycle message
// (PROTOCOL.md §4): one that may start without window credit and ends a
// subscription's data.
func lifecycleMethod(method string) bool {
	switch method {
	case "terminal/exit", "tcp/eof", "tcp/closed":
		return true
	}
	return false
}
