package daemon_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ahp-dev/ahpd/daemon"
	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/service"
	"github.com/ahp-dev/ahpd/daemon/session"
	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/tcp"
)

// These tests speak AHP/1 by hand over a real daemon to real loopback
// sockets: the TCP kind's error codes, half-close, reset, retention,
// supersede and resume, without the client library.

// target is a loopback TCP server run by a test.
type target struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

// newTarget listens on 127.0.0.1 and serves each connection with serve.
func newTarget(t *testing.T, serve func(net.Conn)) *target {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tg := &target{ln: ln}
	tg.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tg.mu.Lock()
			tg.conns = append(tg.conns, c)
			tg.mu.Unlock()
			tg.wg.Go(func() { defer c.Close(); serve(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		tg.mu.Lock()
		for _, c := range tg.conns {
			c.Close()
		}
		tg.mu.Unlock()
		tg.wg.Wait()
	})
	return tg
}

func (tg *target) port() int { return tg.ln.Addr().(*net.TCPAddr).Port }

// echo copies what it reads back, then half-closes after the client's EOF.
func echo(c net.Conn) {
	_, _ = io.Copy(c, c)
	_ = c.(*net.TCPConn).CloseWrite()
}

// startTCP starts a daemon whose subscribe {create} makes TCP channels
// to targets rules admits, retained for retain.
func startTCP(t *testing.T, retain time.Duration, rules ...string) *harness {
	t.Helper()
	var rs []tcp.Rule
	for _, r := range rules {
		rule, err := tcp.ParseRule(r)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, rule)
	}
	allow := tcp.NewAllowList(rs)
	return startWith(t, false, nil, func(o *daemon.Options) {
		o.Creators = map[string]service.Creator{"tcp": func(params json.RawMessage, _ session.Owner) (flow.Channel, error) {
			host, port, err := tcp.ParseCreate(params)
			if err != nil {
				return nil, err
			}
			return tcp.Create(tcp.Config{Host: host, Port: port, Allow: allow, Retain: func() time.Duration { return retain }})
		}}
	})
}

// tcpClient is a hand-written AHP/1 client of one TCP subscription.
type tcpClient struct {
	t        *testing.T
	ws       *websocket.Conn
	channel  string
	sub      string
	token    string
	nextID   int64 // next client→host message id
	inOff    int64 // client→host bytes sent
	acc      flow.Position
	partial  map[int64][]byte
	received int64 // UTF-16 bytes of complete host→client messages
	// sent and granted are the client→host side of PROTOCOL.md §5: the
	// UTF-16 bytes of tcp/input and tcp/eof sent, and the host's last
	// consumedBytes for them. message starts one only while sent −
	// granted < hostWindow, as a client must: the host's credit for
	// input may come after the echo of that input.
	sent, granted int64
	queued        []string // host→client messages read while waiting for credit
	largest       int      // the most stream bytes one tcp/data carried (readData)
	// A TCP subscription's channel/ready (PROTOCOL.md §3) is checked and
	// passed over by next: it comes before any new message, after the
	// replay of a resume.
	ready, resuming bool
}

type message struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func (c *tcpClient) send(s string) {
	c.t.Helper()
	if err := c.ws.Write(ctxT(c.t), websocket.MessageText, []byte(s)); err != nil {
		c.t.Fatal(err)
	}
}

// subscribe sends a subscribe (params as JSON) and returns the raw reply.
func (c *tcpClient) subscribe(params string) string {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"subscribe","params":` + params + `}`)
	c.ready, c.resuming = false, strings.Contains(params, `"resume"`)
	res := readJSON(c.t, c.ws)
	var r struct {
		Result *struct {
			Channel        string `json:"channel"`
			SubscriptionID string `json:"subscriptionId"`
			Resume         struct {
				Token string `json:"token"`
			} `json:"resume"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(res), &r); err == nil && r.Result != nil {
		if r.Result.Channel != "" {
			c.channel = r.Result.Channel
		}
		c.sub, c.token = r.Result.SubscriptionID, r.Result.Resume.Token
	}
	return res
}

func (h *harness) tcpClient(token string) *tcpClient {
	return &tcpClient{t: h.t, ws: h.rawInit(token), nextID: 1, partial: map[int64][]byte{}}
}

// message sends one client→host logical message in one frame.
func (c *tcpClient) message(method string, params any) {
	c.t.Helper()
	p, _ := json.Marshal(params)
	text := `{"jsonrpc":"2.0","method":"` + method + `","params":` + string(p) + `}`
	for c.sent-c.granted >= hostWindow {
		if raw := c.read(); raw != "" {
			c.queued = append(c.queued, raw)
		}
	}
	c.sent += flow.UTF16Len(text)
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"channel/frame","params":{"channel":%q,"subscriptionId":%q,"messageId":%d,"data":%s,"final":true}}`,
		c.channel, c.sub, c.nextID, jsonString(text)))
	c.nextID++
}

func (c *tcpClient) input(b []byte) {
	c.message("tcp/input", map[string]any{"offset": c.inOff, "data": base64.StdEncoding.EncodeToString(b)})
	c.inOff += int64(len(b))
}

func (c *tcpClient) eof() { c.message("tcp/eof", map[string]any{"offset": c.inOff}) }

// credit releases every complete message received so far.
func (c *tcpClient) credit() {
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"channel/credit","params":{"channel":%q,"subscriptionId":%q,"consumedBytes":%d}}`, c.channel, c.sub, c.received))
}

// hostWindow is the host's default receive window for a subscription
// (hostReceive.windowBytes, UTF-16 bytes; internal/limits).
const hostWindow = 256 << 10

// read returns the next message from the host, or "" for a channel/credit
// of the subscription, which it applies.
func (c *tcpClient) read() string {
	c.t.Helper()
	raw := readJSON(c.t, c.ws)
	var cr struct {
		Method string `json:"method"`
		Params struct {
			SubscriptionID string `json:"subscriptionId"`
			ConsumedBytes  int64  `json:"consumedBytes"`
		} `json:"params"`
	}
	if json.Unmarshal([]byte(raw), &cr) == nil && cr.Method == "channel/credit" {
		if cr.Params.SubscriptionID == c.sub {
			c.granted = max(c.granted, cr.Params.ConsumedBytes)
		}
		return ""
	}
	return raw
}

// next returns the next complete host→client logical message of the
// subscription, or the channel/reset or error that came instead (as its
// method "channel/reset" with its params).
func (c *tcpClient) next() message {
	c.t.Helper()
	for {
		var raw string
		if len(c.queued) > 0 {
			raw, c.queued = c.queued[0], c.queued[1:]
		} else if raw = c.read(); raw == "" {
			continue
		}
		var env message
		if err := json.Unmarshal([]byte(raw), &env); err != nil {
			c.t.Fatalf("bad JSON %s", raw)
		}
		switch env.Method {
		case "channel/reset":
			return env
		case "channel/frame":
		default:
			c.t.Fatalf("unexpected %s", raw)
		}
		var f struct {
			SubscriptionID string `json:"subscriptionId"`
			MessageID      int64  `json:"messageId"`
			Data           string `json:"data"`
			Final          bool   `json:"final"`
		}
		_ = json.Unmarshal(env.Params, &f)
		if f.SubscriptionID != c.sub {
			c.t.Fatalf("frame of subscription %s, want %s", f.SubscriptionID, c.sub)
		}
		c.partial[f.MessageID] = append(c.partial[f.MessageID], f.Data...)
		c.received += flow.UTF16Len(f.Data)
		if !f.Final {
			continue
		}
		var m message
		if err := json.Unmarshal(c.partial[f.MessageID], &m); err != nil {
			c.t.Fatalf("message %d: %v", f.MessageID, err)
		}
		delete(c.partial, f.MessageID)
		c.acc = flow.Position{MessageID: f.MessageID, Position: c.received}
		if strings.HasPrefix(c.channel, "ahp-tcp:") {
			switch {
			case m.Method == "channel/ready" && c.ready:
				c.t.Fatal("a second channel/ready")
			case m.Method == "channel/ready":
				c.ready = true
				continue
			case !c.ready && !c.resuming:
				c.t.Fatalf("%s before channel/ready", m.Method)
			}
		}
		return m
	}
}

// readData reads tcp/data until n bytes arrived, checking offsets.
func (c *tcpClient) readData(off *int64, n int) []byte {
	c.t.Helper()
	var out []byte
	for len(out) < n {
		m := c.next()
		if m.Method != "tcp/data" {
			c.t.Fatalf("got %s %s after %d of %d bytes, want tcp/data", m.Method, m.Params, len(out), n)
		}
		var d struct {
			Offset int64  `json:"offset"`
			Data   string `json:"data"`
		}
		_ = json.Unmarshal(m.Params, &d)
		b, err := base64.StdEncoding.DecodeString(d.Data)
		if err != nil || d.Offset != *off {
			c.t.Fatalf("tcp/data offset %d (want %d), decode error %v", d.Offset, *off, err)
		}
		*off += int64(len(b))
		out = append(out, b...)
		c.largest = max(c.largest, len(b))
		c.credit()
	}
	return out
}

func (c *tcpClient) expect(method string) message {
	c.t.Helper()
	m := c.next()
	if m.Method != method {
		c.t.Fatalf("got %s %s, want %s", m.Method, m.Params, method)
	}
	return m
}

func createParams(port int) string {
	return `{"create":{"type":"tcp","host":"127.0.0.1","port":` + strconv.Itoa(port) + `}}`
}

// TestTCPEchoHalfCloseAndEnd: bytes both ways through a real echo
// server, EOF each way, tcp/closed, and the channel leaves the registry
// once the client released it.
func TestTCPEchoHalfCloseAndEnd(t *testing.T) {
	tg := newTarget(t, echo)
	h := startTCP(t, time.Minute, "127.0.0.1:"+strconv.Itoa(tg.port()))
	c := h.tcpClient(adminToken)
	if res := c.subscribe(createParams(tg.port())); !strings.Contains(res, `"resume":{"token":"`) || !strings.Contains(res, `"channel":"ahp-tcp:/`) {
		t.Fatalf("create: %s", res)
	}
	var off int64
	want := bytes.Repeat([]byte("hello, tcp "), 1000)
	c.input(want[:5000])
	c.input(want[5000:])
	if got := c.readData(&off, len(want)); !bytes.Equal(got, want) {
		t.Fatalf("echo differs: %d bytes back", len(got))
	}
	c.eof() // the echo server half-closes after our EOF
	if m := c.expect("tcp/eof"); !strings.Contains(string(m.Params), `"offset":`+strconv.Itoa(len(want))) {
		t.Fatalf("tcp/eof %s, want offset %d", m.Params, len(want))
	}
	c.expect("tcp/closed")
	c.credit()
	if m := c.next(); m.Method != "channel/reset" || !strings.Contains(string(m.Params), flow.CodeChannelClosed) {
		t.Fatalf("after tcp/closed: %s %s, want channel/reset channel-closed", m.Method, m.Params)
	}
	waitFor(t, "the channel to leave the registry", func() bool {
		_, ok := h.srv.Registry().Get(c.channel)
		return !ok
	})
}

// TestTCPDataMessageSize: with the host's default limits (a quarter of
// the 1 MiB window would allow messages of 256 KiB), a download comes in
// tcp/data messages of at most 64 KiB (UTF-16), 24 KiB of the stream,
// byte for byte: larger ones moved a download 15 % slower
// (tcp.maxDataMessage).
func TestTCPDataMessageSize(t *testing.T) {
	tg := newTarget(t, echo)
	h := startTCP(t, time.Minute, "127.0.0.1:"+strconv.Itoa(tg.port()))
	c := h.tcpClient(adminToken)
	c.subscribe(createParams(tg.port()))
	want := make([]byte, 1<<20)
	for i := range want {
		want[i] = byte(i * 7)
	}
	var off int64
	const step = 64 << 10 // 175 KiB of tcp/input: within the host's 256 KiB receive window
	for i := 0; i < len(want); i += step {
		for j := i; j < i+step; j += 16 << 10 { // a frame each
			c.input(want[j : j+16<<10])
		}
		if got := c.readData(&off, step); !bytes.Equal(got, want[i:i+step]) {
			t.Fatalf("echo differs after offset %d", i)
		}
	}
	if c.largest > 24<<10 {
		t.Fatalf("a tcp/data message carried %d bytes, want at most 24 KiB", c.largest)
	}
}

// TestTCPRefusals: not allowed (-32003, naming the target), refused
// (-32008), a view token's create (-32003), a second consumer (-32007).
func TestTCPRefusals(t *testing.T) {
	tg := newTarget(t, echo)
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	h := startTCP(t, time.Minute, "127.0.0.1:"+strconv.Itoa(tg.port()), "127.0.0.1:"+strconv.Itoa(closedPort))
	c := h.tcpClient(adminToken)

	other := tg.port() + 1
	if res := c.subscribe(createParams(other)); !strings.Contains(res, `"code":-32003`) || !strings.Contains(res, "127.0.0.1:"+strconv.Itoa(other)) {
		t.Errorf("not allowed: %s, want -32003 naming the target", res)
	}
	if res := c.subscribe(createParams(closedPort)); !strings.Contains(res, `"code":-32008`) || !strings.Contains(res, "connection refused") {
		t.Errorf("refused: %s, want -32008 connection refused", res)
	}
	view, _ := h.srv.Tokens().Mint(auth.Grant{Role: auth.RoleView})
	v := h.tcpClient(view)
	if res := v.subscribe(createParams(tg.port())); !strings.Contains(res, `"code":-32003`) {
		t.Errorf("view create: %s, want -32003", res)
	}

	if res := c.subscribe(createParams(tg.port())); !strings.Contains(res, `"result"`) {
		t.Fatalf("create: %s", res)
	}
	d := h.tcpClient(adminToken)
	if res := d.subscribe(`{"channel":"` + c.channel + `"}`); !strings.Contains(res, `"code":-32007`) {
		t.Errorf("second consumer: %s, want -32007", res)
	}
	// A view token may not consume an existing channel either.
	if res := v.subscribe(`{"channel":"` + c.channel + `"}`); !strings.Contains(res, `"code":-32003`) {
		t.Errorf("view subscribe: %s, want -32003", res)
	}
}

// TestTCPResumeSupersedeAndRetention: a second connection resumes with
// the token: the first is reset superseded, the stream goes on without a
// lost or repeated byte (unreleased data is replayed with its ids);
// after the consumer leaves, a resume within tcpRetain works and one
// after it fails with -32006, the channel gone.
//
// tcpRetain is long enough for a dial, initialize and resume on a loaded
// machine; after it, the test waits for the channel to leave the registry
// rather than sleeping for a time the retention timer may not have met.
func TestTCPResumeSupersedeAndRetention(t *testing.T) {
	const retain = 5 * time.Second
	tg := newTarget(t, echo)
	h := startTCP(t, retain, "127.0.0.1:"+strconv.Itoa(tg.port()))
	a := h.tcpClient(adminToken)
	a.subscribe(createParams(tg.port()))
	var off int64
	a.input([]byte("first"))
	if got := string(a.readData(&off, 5)); got != "first" {
		t.Fatalf("got %q", got)
	}
	// Data that arrives and is not credited is replayed after a resume.
	a.input([]byte("second"))
	m := a.expect("tcp/data")
	_ = m

	b := h.tcpClient(adminToken)
	b.channel = a.channel
	b.nextID, b.inOff = a.nextID, a.inOff
	resume := func(c *tcpClient, from *tcpClient, accepted flow.Position) string {
		return c.subscribe(fmt.Sprintf(`{"channel":%q,"resume":{"token":%q,"accepted":{"messageId":%d,"position":%d},"released":{"messageId":%d,"position":%d}}}`,
			from.channel, from.token, accepted.MessageID, accepted.Position, 2, firstEnd(t, from)))
	}
	// b claims it received only the first data message (message 2, after
	// channel/ready): the second is replayed.
	res := resume(b, a, flow.Position{MessageID: 2, Position: firstEnd(t, a)})
	if !strings.Contains(res, `"kind":"replay"`) || !strings.Contains(res, `"accepted":{"messageId":2`) {
		t.Fatalf("resume: %s, want replay and host accepted = our 2 messages", res)
	}
	if r := a.next(); r.Method != "channel/reset" || !strings.Contains(string(r.Params), flow.CodeSuperseded) {
		t.Fatalf("old holder: %s %s, want reset superseded", r.Method, r.Params)
	}
	b.received = firstEnd(t, a)
	b.acc = flow.Position{MessageID: 2, Position: b.received}
	if got := string(b.readData(&off, 6)); got != "second" {
		t.Fatalf("replayed %q, want second", got)
	}
	b.input([]byte("third"))
	if got := string(b.readData(&off, 5)); got != "third" {
		t.Fatalf("after resume %q", got)
	}

	// The consumer leaves: within tcpRetain it resumes; after it, -32006.
	b.ws.CloseNow()
	c := h.tcpClient(adminToken)
	c.channel, c.nextID, c.inOff, c.received = b.channel, b.nextID, b.inOff, b.received
	res = c.subscribe(fmt.Sprintf(`{"channel":%q,"resume":{"token":%q,"accepted":{"messageId":%d,"position":%d},"released":{"messageId":%d,"position":%d}}}`,
		b.channel, b.token, b.acc.MessageID, b.acc.Position, b.acc.MessageID, b.acc.Position))
	if !strings.Contains(res, `"result"`) {
		t.Fatalf("resume within tcpRetain: %s", res)
	}
	c.ws.CloseNow()
	left := time.Now()
	waitUntil(t, retain+closeWithin, "channel gone after tcpRetain", func() bool {
		_, ok := h.srv.Registry().Get(c.channel)
		return !ok
	})
	gone := time.Since(left)
	if gone < retain {
		t.Fatalf("channel gone %v after its consumer left, before tcpRetain (%v)", gone, retain)
	}
	t.Logf("channel gone %v after its consumer left (tcpRetain %v)", gone, retain)
	d := h.tcpClient(adminToken)
	res = d.subscribe(fmt.Sprintf(`{"channel":%q,"resume":{"token":%q,"accepted":{"messageId":%d,"position":%d},"released":{"messageId":%d,"position":%d}}}`,
		c.channel, c.token, b.acc.MessageID, b.acc.Position, b.acc.MessageID, b.acc.Position))
	if !strings.Contains(res, `"code":-32006`) {
		t.Fatalf("resume after tcpRetain: %s, want -32006", res)
	}
}

// firstEnd is the position at the end of the first host→client message
// of the test above (5 bytes at offset 0).
func firstEnd(t *testing.T, _ *tcpClient) int64 {
	t.Helper()
	return flow.UTF16Len(`{"jsonrpc":"2.0","method":"channel/ready","params":{}}`) +
		flow.UTF16Len(`{"jsonrpc":"2.0","method":"tcp/data","params":{"offset":0,"data":"`+base64.StdEncoding.EncodeToString([]byte("first"))+`"}}`)
}

// TestTCPResetAndBadResume: a target that resets the connection ends the
// subscription with tcp-reset and the channel; a resume whose positions
// cannot be reconciled fails with -32006 and closes the channel.
func TestTCPResetAndBadResume(t *testing.T) {
	resetter := newTarget(t, func(c net.Conn) {
		buf := make([]byte, 1)
		_, _ = c.Read(buf)
		_ = c.(*net.TCPConn).SetLinger(0) // close with RST
	})
	tg := newTarget(t, echo)
	h := startTCP(t, time.Minute, "127.0.0.1:"+strconv.Itoa(resetter.port()), "127.0.0.1:"+strconv.Itoa(tg.port()))
	a := h.tcpClient(adminToken)
	a.subscribe(createParams(resetter.port()))
	a.input([]byte("x"))
	if m := a.next(); m.Method != "channel/reset" || !strings.Contains(string(m.Params), flow.CodeTCPReset) {
		t.Fatalf("got %s %s, want channel/reset tcp-reset", m.Method, m.Params)
	}
	waitFor(t, "the reset channel to leave the registry", func() bool {
		_, ok := h.srv.Registry().Get(a.channel)
		return !ok
	})

	b := h.tcpClient(adminToken)
	b.subscribe(createParams(tg.port()))
	b.ws.CloseNow()
	c := h.tcpClient(adminToken)
	res := c.subscribe(fmt.Sprintf(`{"channel":%q,"resume":{"token":%q,"accepted":{"messageId":7,"position":900},"released":{"messageId":0,"position":0}}}`, b.channel, b.token))
	if !strings.Contains(res, `"code":-32006`) {
		t.Fatalf("unreconcilable resume: %s, want -32006", res)
	}
	waitFor(t, "the unreconcilable channel to close", func() bool {
		_, ok := h.srv.Registry().Get(b.channel)
		return !ok
	})
}

// TestTCPBackpressure: a target writes as fast as it can to a client
// that never credits. The daemon stops reading the socket once the
// client's window is spent, so the target's writes block: what it got
// written stays within the window, the daemon's two read buffers and the
// kernel's socket buffers, and the daemon's heap does not grow with it.
func TestTCPBackpressure(t *testing.T) {
	var written atomic.Int64
	flood := newTarget(t, func(c net.Conn) {
		buf := make([]byte, 64<<10)
		for written.Load() < 200<<20 {
			n, err := c.Write(buf)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	h := startTCP(t, time.Minute, "127.0.0.1:"+strconv.Itoa(flood.port()))
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	c := h.tcpClient(adminToken)
	if res := c.subscribe(createParams(flood.port())); !strings.Contains(res, `"result"`) {
		t.Fatalf("create: %s", res)
	}
	// Read (never credit) until the window is spent: the host sends no
	// more than the window and one message beyond it.
	var got int64
	deadline := time.Now().Add(10 * time.Second)
	var last int64 = -1
	for time.Now().Before(deadline) {
		// Stable when the target has written nothing more for 300 ms.
		time.Sleep(300 * time.Millisecond)
		if w := written.Load(); w == last {
			break
		} else {
			last = w
		}
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, b, err := c.ws.Read(ctx)
		cancel()
		if err != nil {
			break
		}
		got += int64(len(b))
	}
	w := written.Load()
	const window = 1 << 20 // the host's default client window (UTF-16 bytes)
	t.Logf("target wrote %d bytes before blocking; client received %d bytes of frames", w, got)
	if got > 2*window {
		t.Errorf("client received %d bytes without crediting, want ≤ window + one message (%d)", got, 2*window)
	}
	// Window (≈ 3/8 of it in bytes) + 2 × 64 KiB read buffers + kernel
	// buffers of both sockets (loopback autotuning: a few MiB each).
	if w > 32<<20 {
		t.Errorf("the target wrote %d bytes to a client that does not credit: the daemon kept reading", w)
	}
	if w == 200<<20 {
		t.Error("the target's writes never blocked")
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grow := int64(after.HeapInuse) - int64(before.HeapInuse); grow > 16<<20 {
		t.Errorf("daemon heap grew by %d bytes under a non-crediting client", grow)
	}
}

// TestTCPUnsubscribeAborts: the consumer's own unsubscribe ends a TCP
// channel at once (no retention: that is for a lost connection), and a
// target with bytes in flight sees a reset, as from a socket closed with
// unread data.
func TestTCPUnsubscribeAborts(t *testing.T) {
	got := make(chan error, 1)
	tg := newTarget(t, func(c net.Conn) {
		// 1 MiB that the client does not read: in flight when it leaves.
		_, err := c.Write(bytes.Repeat([]byte("x"), 1<<20))
		if err == nil {
			_, err = io.Copy(io.Discard, c)
		}
		got <- err
	})
	h := startTCP(t, time.Minute, "127.0.0.1:"+strconv.Itoa(tg.port()))
	c := h.tcpClient(adminToken)
	c.subscribe(createParams(tg.port()))
	c.input([]byte("some input"))
	c.send(`{"jsonrpc":"2.0","id":"u1","method":"unsubscribe","params":{"subscriptionId":"` + c.sub + `"}}`)
	select {
	case err := <-got:
		if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
			t.Fatalf("the target's socket ended with %v, want a reset", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the target's socket is still open 10 s after the unsubscribe (retained?)")
	}
	waitFor(t, "the channel to leave the registry", func() bool {
		_, ok := h.srv.Registry().Get(c.channel)
		return !ok
	})
}

// TestMaxTCPChannels: TCP channels stop at maxTcpChannels with -32004
// naming the limit, and a channel that ends gives its place back.
func TestMaxTCPChannels(t *testing.T) {
	tg := newTarget(t, echo)
	h := startTCP(t, time.Minute, fmt.Sprintf("127.0.0.1:%d", tg.port()))
	l := h.srv.Limits()
	l.MaxTCPChannels = 2
	if err := h.srv.SetLimits(l); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	var uris []string
	for i := range 2 {
		ch, err := h.srv.CreateTCP(ctx, "127.0.0.1", tg.port(), fmt.Sprint("t", i))
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, ch.URI)
	}
	_, err := h.srv.CreateTCP(ctx, "127.0.0.1", tg.port(), "t2")
	var fe *flow.Error
	if !errors.As(err, &fe) || fe.Code != flow.ErrCodeLimitExceeded || !strings.Contains(fe.Message, "maxTcpChannels") {
		t.Fatalf("a third TCP channel: %v, want -32004 naming maxTcpChannels", err)
	}
	if err := h.srv.CloseChannel(uris[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := h.srv.CreateTCP(ctx, "127.0.0.1", tg.port(), "t2"); err != nil {
		t.Fatalf("a TCP channel after one was closed: %v", err)
	}
}
