// Package client is a Go client of AHP/1 (PROTOCOL.md): it dials the
// daemon's WebSocket, initializes, subscribes with flow control, reassembles
// frames, returns credit when the caller releases messages, and sends
// client→host logical messages under the host's limits. A TCPStream
// (tcp.go) is a TCP channel's byte stream, each way, kept whole across
// reconnects; a Redialer shares one connection among streams. ahpctl and
// the daemon's integration tests use it.
//
// Concurrency: a Conn is safe for concurrent use. One reader goroutine per
// Conn delivers messages; Close stops it and waits for it. A TCPStream's
// goroutines (its run loop, a writer per connection) end with Close.
package client

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/internal/cork"
	"github.com/ahp-dev/ahpd/internal/wire"
)

// Error is a JSON-RPC error returned by the host.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("%s (code %d)", e.Message, e.Code) }

// HandshakeError reports that the host (or a proxy in front of it)
// answered the WebSocket upgrade with an HTTP status other than 101: the
// daemon's 403 (Origin not allowed) and 421 (Host not allowed), a proxy's
// 401, 404 or 502.
type HandshakeError struct {
	StatusCode int    // the HTTP status
	Body       string // the first line of the response body, at most 512 bytes
	Err        error  // the WebSocket library's error
}

func (e *HandshakeError) Error() string {
	s := fmt.Sprintf("HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Body != "" {
		s += ": " + e.Body
	}
	return s
}

func (e *HandshakeError) Unwrap() error { return e.Err }

// handshakeError is the HandshakeError of a refused upgrade; the library
// has kept the body's first KiB.
func handshakeError(resp *http.Response, err error) error {
	e := &HandshakeError{StatusCode: resp.StatusCode, Err: err}
	if resp.Body != nil {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		if len(line) > 512 {
			line = strings.ToValidUTF8(line[:512], "")
		}
		if utf8.ValidString(line) && !strings.ContainsFunc(line, unicode.IsControl) {
			e.Body = strings.TrimSpace(line) // text for a person, not a page
		}
	}
	return e
}

// Options configure Dial.
type Options struct {
	// Token is sent in initialize; empty sends none.
	Token string
	// Header is added to the upgrade request (e.g. Origin, Authorization).
	Header http.Header
	// ClientName defaults to "ahpctl".
	ClientName string
	// ClientVersion is sent in initialize with ClientName (ahpctl passes
	// its build version, ctl.Version); default "dev".
	ClientVersion string
	// ReadLimit bounds one inbound WebSocket message; default 32 MiB.
	ReadLimit int64
	// Deflate offers permessage-deflate.
	Deflate bool
	// HTTPClient carries the upgrade request and so the connection
	// (tests wrap its net.Conn to inject faults); nil: a client like
	// http.DefaultClient whose socket is corked around each message sent
	// (corkingClient).
	HTTPClient *http.Client
	// TLS configures the connection to a wss:// URL (the roots to trust);
	// nil: the system's roots. Unused with HTTPClient, which has its own.
	TLS *tls.Config
	// OnSend, if set, is called just before each text message is
	// written, with the message (valid during the call only; writes wait
	// for it). Tests use it to act at a protocol point: drop the
	// connection under a credit so that it is lost.
	OnSend func(msg []byte)
}

// InitializeResult is the host's answer to initialize.
type InitializeResult = wire.InitializeResult

// Notification is a top-level notification from the host that is not a
// frame or credit (e.g. channel/reset).
type Notification struct {
	Method string
	Params json.RawMessage
}

// Conn is one AHP/1 connection.
type Conn struct {
	ws     *websocket.Conn
	cork   *cork.Conn // the socket under ws, when Dial made it; nil otherwise
	onSend func([]byte)
	done   chan struct{}
	wg     sync.WaitGroup

	writeMu sync.Mutex // serializes writes

	rbuf []byte // the read buffer kept between messages (readLoop's own)

	mu      sync.Mutex // guards the fields below
	nextID  int
	pending map[string]chan response
	psubs   map[string]subscription // subscribe requests awaiting their response
	subs    map[string]subscription
	notes   []Notification
	noteSig chan struct{}
	err     error

	pinger pinger // round-trip samples for adaptive windows (autowindow.go)

	// Set by Dial; read-only after.
	init InitializeResult
	rtt  time.Duration // the round trip measured at Dial (RTT)
}

type response struct {
	Result json.RawMessage `json:"result"`
	Error  *Error          `json:"error"`
}

// Dial connects to url (ws://host:port/v1/ws) and initializes.
func Dial(ctx context.Context, url string, opts Options) (*Conn, *InitializeResult, error) {
	if opts.ClientName == "" {
		opts.ClientName = "ahpctl"
	}
	if opts.ClientVersion == "" {
		opts.ClientVersion = "dev"
	}
	mode := websocket.CompressionDisabled
	if opts.Deflate {
		mode = websocket.CompressionContextTakeover
	}
	hc, corked := opts.HTTPClient, func() *cork.Conn { return nil }
	if hc == nil {
		hc, corked = corkingClient(opts.TLS)
	}
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{
		Subprotocols:    []string{"ahp.v1"},
		HTTPHeader:      opts.Header,
		CompressionMode: mode,
		HTTPClient:      hc,
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, nil, handshakeError(resp, err)
		}
		return nil, nil, err
	}
	limit := opts.ReadLimit
	if limit == 0 {
		limit = 32 << 20
	}
	ws.SetReadLimit(limit)
	c := &Conn{ws: ws, cork: corked(), onSend: opts.OnSend, done: make(chan struct{}), pending: map[string]chan response{}, psubs: map[string]subscription{}, subs: map[string]subscription{}, noteSig: make(chan struct{}, 1)}
	c.wg.Go(c.readLoop)
	params := map[string]any{
		"protocolVersion": "ahp/1",
		"client":          map[string]string{"name": opts.ClientName, "version": opts.ClientVersion},
		"capabilities":    map[string]any{"flowControl": true, "windowUpdates": true},
	}
	if opts.Token != "" {
		params["token"] = opts.Token
	}
	start := time.Now()
	if err := c.Call(ctx, "initialize", params, &c.init); err != nil {
		c.Close()
		return nil, nil, err
	}
	c.rtt = time.Since(start)
	c.probeRTT(ctx)
	res := c.init
	return c, &res, nil
}

// probeRTT lowers rtt to a WebSocket ping's round trip when that is
// shorter. initialize's round trip includes the daemon's first request on
// the connection (its token check among it): on loopback 1–2 ms against a
// ping's tenth of that, and the TCP receive window is sized from it
// (AutoReceive). Dial waits for the pong no longer than initialize took
// (at least 10 ms); a ping that fails or comes later changes nothing.
//
// The ping has no deadline of its own: coder/websocket closes the whole
// connection when a write's context ends mid-write. It ends with its pong
// or with the connection (Close waits for it).
func (c *Conn) probeRTT(ctx context.Context) {
	got := make(chan time.Duration, 1)
	start := time.Now()
	c.wg.Go(func() {
		if c.ws.Ping(context.Background()) == nil {
			got <- time.Since(start)
		}
	})
	wait := time.NewTimer(max(c.rtt, 10*time.Millisecond))
	defer wait.Stop()
	select {
	case d := <-got:
		c.rtt = min(c.rtt, d)
	case <-wait.C:
	case <-ctx.Done():
	}
}

// RTT returns the connection's round trip as measured when it was
// dialed: the shorter of initialize's (from its request to its result)
// and a WebSocket ping's right after it (probeRTT).
func (c *Conn) RTT() time.Duration { return c.rtt }

// WS returns the underlying WebSocket (for tests that misbehave on purpose).
func (c *Conn) WS() *websocket.Conn { return c.ws }

// Close closes the connection and waits for the reader.
func (c *Conn) Close() error {
	err := c.ws.Close(websocket.StatusNormalClosure, "")
	c.wg.Wait()
	return err
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended, once Done is closed. A close
// frame from the host is a websocket.CloseError (see CloseStatus).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// SendRaw writes one text message as is.
//
// The write itself is not bound to ctx: the WebSocket library drops the
// whole connection when a write's context ends mid-write, and one slow call
// must not end every subscription. ctx is checked before writing; a write
// blocked on a stalled socket ends when the connection is closed.
func (c *Conn) SendRaw(ctx context.Context, b []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.onSend != nil {
		c.onSend(b)
	}
	// The message leaves in one write (corkingClient; a nil cork does
	// nothing).
	c.cork.Cork()
	err := c.ws.Write(context.Background(), websocket.MessageText, b)
	if uerr := c.cork.Uncork(); err == nil {
		err = uerr
	}
	return err
}

// abort drops the connection at once, without a close handshake (a
// connection on which a request timed out is not trusted further).
func (c *Conn) abort() { _ = c.ws.CloseNow() }

// Call sends a request and waits for its response; result may be nil.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	return c.call(ctx, method, params, result, nil)
}

// call is Call; a non-nil sub is registered under the request id so the
// reader can install it the moment the response arrives.
func (c *Conn) call(ctx context.Context, method string, params, result any, sub subscription) error {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.nextID++
	id := strconv.Itoa(c.nextID)
	ch := make(chan response, 1)
	c.pending[id] = ch
	if sub != nil {
		c.psubs[id] = sub
	}
	c.mu.Unlock()
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	msg := []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":`)
	msg = flow.AppendJSONString(msg, method)
	msg = append(msg, `,"params":`...)
	msg = append(msg, p...)
	msg = append(msg, '}')
	if err := c.SendRaw(ctx, msg); err != nil {
		return err
	}
	defer func() {
		// A call that gave up must not leave its entries behind.
		c.mu.Lock()
		delete(c.pending, id)
		delete(c.psubs, id)
		c.mu.Unlock()
	}()
	return c.await(ctx, ch, result)
}

// await waits for the response on ch. A response that arrived before the
// connection ended wins over the end: a host that refuses a request
// answers it and then closes (an unauthorized initialize gets -32001, then
// close 1008), and the reader delivers both before Call may look.
func (c *Conn) await(ctx context.Context, ch chan response, result any) error {
	var r response
	select {
	case r = <-ch:
	case <-c.done:
		select {
		case r = <-ch:
		default:
			return c.Err()
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	if r.Error != nil {
		return r.Error
	}
	if result != nil {
		return json.Unmarshal(r.Result, result)
	}
	return nil
}

// maxNotes bounds the notifications kept for Notifications.
const maxNotes = 1024

// Notifications returns and clears the notifications received so far,
// waiting for at least one until ctx ends.
func (c *Conn) Notifications(ctx context.Context) ([]Notification, error) {
	for {
		c.mu.Lock()
		n := c.notes
		c.notes = nil
		c.mu.Unlock()
		if len(n) > 0 {
			return n, nil
		}
		select {
		case <-c.noteSig:
		case <-c.done:
			return nil, c.Err()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (c *Conn) readLoop() {
	var f flow.Frame
	var err error
	defer func() {
		c.mu.Lock()
		c.err = err
		for _, s := range c.subs {
			s.end(err) // lock order c.mu → the subscription's, as in onCredit
		}
		c.mu.Unlock()
		close(c.done)
	}()
	for {
		var typ websocket.MessageType
		var b []byte
		// c.rbuf is reused: nothing below keeps a reference into it.
		typ, b, err = c.readMessage(c.rbuf)
		if err != nil {
			return
		}
		if cap(b) <= maxKeptReadBuf {
			c.rbuf = b
		}
		if typ != websocket.MessageText {
			err = errors.New("host sent a binary message")
			return
		}
		if ferr := flow.DecodeFrame(b, &f); ferr == nil {
			c.onFrame(b, &f)
			continue
		}
		if _, sid, consumed, ok := flow.ParseCredit(b); ok {
			// The host's credit in its own shape, without encoding/json.
			c.mu.Lock()
			if s := c.subs[string(sid)]; s != nil {
				s.onCredit(consumed)
			}
			c.mu.Unlock()
			continue
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			response
		}
		if jerr := json.Unmarshal(b, &m); jerr != nil {
			err = fmt.Errorf("host sent invalid JSON: %w", jerr)
			return
		}
		switch {
		case m.Method == "channel/credit" || m.Method == "channel/window":
			var p struct {
				SubscriptionID string `json:"subscriptionId"`
				ConsumedBytes  int64  `json:"consumedBytes"`
				WindowBytes    int64  `json:"windowBytes"`
			}
			_ = json.Unmarshal(m.Params, &p)
			c.mu.Lock()
			switch s := c.subs[p.SubscriptionID]; {
			case s == nil:
			case m.Method == "channel/credit":
				s.onCredit(p.ConsumedBytes)
			default:
				s.onWindow(p.WindowBytes)
			}
			c.mu.Unlock()
		case m.Method != "":
			if m.Method == "channel/reset" {
				var p struct {
					SubscriptionID string `json:"subscriptionId"`
					Code           string `json:"code"`
					Message        string `json:"message"`
				}
				_ = json.Unmarshal(m.Params, &p)
				c.mu.Lock()
				if s := c.subs[p.SubscriptionID]; s != nil {
					s.end(&ResetError{Code: p.Code, Message: p.Message})
					delete(c.subs, p.SubscriptionID)
				}
				c.mu.Unlock()
			}
			c.mu.Lock()
			if len(c.notes) >= maxNotes {
				c.notes = c.notes[1:] // nobody is reading them: keep the newest
			}
			c.notes = append(c.notes, Notification{m.Method, m.Params})
			c.mu.Unlock()
			select {
			case c.noteSig <- struct{}{}:
			default:
			}
		default:
			c.mu.Lock()
			ch := c.pending[string(m.ID)]
			delete(c.pending, string(m.ID))
			if s := c.psubs[string(m.ID)]; s != nil {
				delete(c.psubs, string(m.ID))
				if m.Error == nil {
					if id := s.init(m.Result); id != "" {
						c.subs[id] = s
					}
				}
			}
			c.mu.Unlock()
			if ch != nil {
				ch <- m.response
			}
		}
	}
}

// maxKeptReadBuf bounds the read buffer kept between messages.
const maxKeptReadBuf = 4 << 20

// readMessage reads the next WebSocket message into buf's memory (grown as
// needed; the connection's read limit bounds it).
func (c *Conn) readMessage(buf []byte) (websocket.MessageType, []byte, error) {
	return wire.ReadMessage(context.Background(), c.ws, buf)
}

func (c *Conn) onFrame(raw []byte, f *flow.Frame) {
	c.mu.Lock()
	s := c.subs[f.SubscriptionID]
	c.mu.Unlock()
	if s == nil {
		return
	}
	size := f.Size(raw)
	s.onFrame(size, f)
}

// subscription is what the reader routes one subscription's traffic to:
// a Sub, or a TCP stream's binding to this connection.
type subscription interface {
	// init takes the subscribe result, on the reader goroutine under
	// c.mu, before any frame that follows it; it returns the
	// subscriptionId to route by ("": do not route).
	init(result json.RawMessage) string
	// onFrame takes one frame of the subscription whose whole text is
	// size UTF-16 bytes (reader goroutine, c.mu not held).
	onFrame(size int64, f *flow.Frame)
	// onCredit takes a channel/credit (reader goroutine, under c.mu).
	onCredit(consumed int64)
	// onWindow takes the host's channel/window for client→host data
	// (reader goroutine, under c.mu).
	onWindow(windowBytes int64)
	// end reports why the subscription ended: a channel/reset, or the
	// connection's end (under c.mu).
	end(err error)
}

// unroute stops routing subscription id's traffic (after unsubscribe).
func (c *Conn) unroute(id string) {
	c.mu.Lock()
	delete(c.subs, id)
	c.mu.Unlock()
}

// ResetError reports a channel/reset of a subscription.
type ResetError struct {
	Code    string
	Message string
}

func (e *ResetError) Error() string { return "channel/reset " + e.Code + ": " + e.Message }
