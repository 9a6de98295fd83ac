package tcp

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/flow"
)

// hangGuard bounds every wait of these tests. It is no assertion about
// speed: a wait that reaches it means the test would otherwise hang.
const hangGuard = 2 * time.Minute

// hostLimits are the host's receive limits for client→host messages.
var hostLimits = flow.ReceiveLimits{WindowBytes: 256 << 10, MaximumFrameBytes: 64 << 10, MaximumMessageBytes: 256 << 10}

// streamData returns n reproducible bytes that are not all alike.
func streamData(n int) []byte {
	r := rand.New(rand.NewPCG(36, 1))
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// target is a loopback server that accepts one connection, writes data
// to it and then half-closes it (when eof), and reads what comes until
// the connection closes. The test's cleanup stops it.
type target struct {
	ln      net.Listener
	wg      sync.WaitGroup
	written atomic.Int64 // bytes its writes returned

	mu   sync.Mutex
	conn net.Conn
}

func newTarget(t *testing.T, data []byte, eof bool) *target {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tg := &target{ln: ln}
	tg.wg.Go(func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		tg.mu.Lock()
		tg.conn = conn
		tg.mu.Unlock()
		defer conn.Close()
		for off := 0; off < len(data); {
			n, err := conn.Write(data[off:min(off+32<<10, len(data))])
			off += n
			tg.written.Add(int64(n))
			if err != nil {
				return
			}
		}
		if eof {
			_ = conn.(*net.TCPConn).CloseWrite()
		}
		var buf [4096]byte
		for {
			if _, err := conn.Read(buf[:]); err != nil {
				return
			}
		}
	})
	t.Cleanup(func() {
		ln.Close()
		tg.mu.Lock()
		if tg.conn != nil {
			tg.conn.Close()
		}
		tg.mu.Unlock()
		tg.wg.Wait()
	})
	return tg
}

// newChannel creates a channel to tg with cfg's Budget and MaxRetained,
// waits for the dial, and closes it when the test ends.
func newChannel(t *testing.T, tg *target, cfg Config) *Channel {
	t.Helper()
	ap := netip.MustParseAddrPort(tg.ln.Addr().String())
	rule, err := ParseRule(ap.String())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Host, cfg.Port, cfg.Allow = "127.0.0.1", ap.Port(), NewAllowList([]Rule{rule})
	c, err := Create(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.WaitDialed(t.Context()); err != nil {
		t.Fatal(err)
	}
	return c
}

// viewer is one connection's side of one subscription, driven as the
// daemon's session drives it (daemon/session): the test's goroutine owns
// a flow.Sender, opens the stream once the subscriber is Ready, resets
// and Closes it (stream first, then subscriber) when it reports an End,
// and hands frames to a transport that writes each at once. It is also
// the client: it reassembles the frames, notes the outstanding bytes at
// the start of every new message, and credits when the test says so.
type viewer struct {
	t      *testing.T
	name   string
	c      *Channel
	limits flow.ReceiveLimits // the client's receive limits
	sub    flow.Subscriber
	snd    *flow.Sender
	st     *flow.Stream
	res    flow.AttachResult
	woke   chan struct{} // AttachRequest.Wake (cap 1)
	end    *flow.Reset   // the End the subscription was reset with
	closed bool

	// the client
	frames     int           // frames received
	received   int64         // UTF-16 bytes of frame payloads received
	credited   int64         // consumedBytes sent
	accepted   flow.Position // the last complete message
	newFrom    int64         // ids from here on are new messages, not replays
	cur        int64         // the id of the message under way, 0 for none
	curStart   int64         // outstanding bytes when it started
	buf        []byte
	frame      flow.Frame
	methods    []string // every complete message's method
	data       []byte   // tcp/data's bytes, in order
	eof        bool     // tcp/eof came
	violations []string // new data messages started with the window shut
}

// attach subscribes to c (resume: nil for a first subscribe) with the
// client's limits.
func attach(t *testing.T, c *Channel, name string, limits flow.ReceiveLimits, resume *flow.ResumeRequest) *viewer {
	t.Helper()
	snd, err := flow.NewSender(flow.SenderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	v := &viewer{t: t, name: name, c: c, limits: limits, snd: snd, woke: make(chan struct{}, 1)}
	sub, err := c.Attach(flow.AttachRequest{
		Wake: func() {
			select {
			case v.woke <- struct{}{}:
			default:
			}
		},
		Window: limits.WindowBytes, Role: flow.RoleControl, Resume: resume, Receive: hostLimits,
		Release: func(flow.Position) {},
	})
	if err != nil {
		t.Fatalf("%s: Attach: %v", name, err)
	}
	v.sub = sub
	if resume != nil {
		v.received, v.credited, v.accepted = resume.Accepted.Position, resume.Released.Position, resume.Accepted
	}
	v.start()
	return v
}

// start opens the stream once the subscriber is Ready.
func (v *viewer) start() {
	res, ok, err := v.sub.Ready()
	if err != nil {
		v.t.Fatalf("%s: Ready: %v", v.name, err)
	}
	if !ok {
		return
	}
	st, err := v.snd.Open(flow.StreamConfig{
		Channel: "ahp-tcp:/test", SubscriptionID: v.name, Source: v.sub, Send: v.limits, Receive: hostLimits,
		Receiver: res.Receiver, Journal: res.Journal, Resume: res.ResumeFrom,
	})
	if err != nil {
		v.t.Fatalf("%s: Open: %v", v.name, err)
	}
	v.res, v.st, v.newFrom = res, st, st.NextMessageID()
	v.snd.Wake(st)
}

// woken handles a wake-up as the session does: a pending subscription
// may start, an ended one is reset and closed, a live one is pulled.
func (v *viewer) woken() {
	switch {
	case v.closed:
	case v.st == nil:
		v.start()
	default:
		if e := v.sub.End(); e != nil {
			v.end = e
			v.close()
			return
		}
		v.snd.Wake(v.st)
	}
}

// close ends the subscription: its stream, then its subscriber.
func (v *viewer) close() {
	if v.closed {
		return
	}
	v.closed = true
	if v.st != nil {
		v.snd.Close(v.st)
	}
	v.sub.Close()
}

// pump hands out frames until the Sender has none, and receives them.
func (v *viewer) pump() {
	for !v.closed {
		b, err := v.snd.Next(nil)
		if err != nil {
			v.t.Fatalf("%s: Next: %v", v.name, err)
		}
		if b == nil {
			return
		}
		v.snd.Written(len(b))
		v.receive(b)
	}
}

func (v *viewer) receive(b []byte) {
	f := &v.frame
	if err := flow.DecodeFrame(b, f); err != nil {
		v.t.Fatalf("%s: not a frame: %v: %.200s", v.name, err, b)
	}
	v.frames++
	if v.cur == 0 {
		v.cur, v.curStart, v.buf = f.MessageID, v.received-v.credited, v.buf[:0]
	} else if f.MessageID != v.cur {
		v.t.Fatalf("%s: frame of message %d while %d is incomplete", v.name, f.MessageID, v.cur)
	}
	var n int64
	var err error
	if v.buf, n, err = f.AppendData(v.buf); err != nil {
		v.t.Fatal(err)
	}
	v.received += n
	if !f.Final {
		return
	}
	id := v.cur
	v.cur, v.accepted = 0, flow.Position{MessageID: id, Position: v.received}
	method, params, err := flow.DecodeNotification(v.buf)
	if err != nil {
		v.t.Fatalf("%s: message %d: %v", v.name, id, err)
	}
	v.methods = append(v.methods, method)
	// PROTOCOL.md §5: a new data message starts only while outstanding <
	// windowBytes; lifecycle messages (tcp/eof, tcp/closed) and the
	// replay of a resume are exempt.
	if id >= v.newFrom && method != "tcp/eof" && method != "tcp/closed" && v.curStart >= v.limits.WindowBytes {
		v.violations = append(v.violations, fmt.Sprintf("%s: message %d (%s) started with %d bytes outstanding ≥ windowBytes %d",
			v.name, id, method, v.curStart, v.limits.WindowBytes))
	}
	switch method {
	case "tcp/data":
		var d struct {
			Offset int64  `json:"offset"`
			Data   string `json:"data"`
		}
		if err := json.Unmarshal(params, &d); err != nil {
			v.t.Fatal(err)
		}
		b, err := base64.StdEncoding.DecodeString(d.Data)
		if err != nil || d.Offset != int64(len(v.data)) {
			v.t.Fatalf("%s: tcp/data at offset %d after %d bytes (%v)", v.name, d.Offset, len(v.data), err)
		}
		v.data = append(v.data, b...)
	case "tcp/eof":
		v.eof = true
	}
}

// credit releases every complete message received.
func (v *viewer) credit() {
	if v.closed || v.accepted.Position <= v.credited {
		return
	}
	v.credited = v.accepted.Position
	if err := v.snd.Credit(v.st, v.credited); err != nil {
		v.t.Fatalf("%s: Credit(%d): %v", v.name, v.credited, err)
	}
}

// stalled reports whether the channel refuses to make the next message
// although it has the target's bytes for it and the reader has no buffer
// left to read into (so it is not reading the socket): it pulls once
// more and sees that nothing came.
func (v *viewer) stalled() bool {
	c := v.c
	c.mu.Lock()
	full := len(c.pend) > 0 && len(c.free) == 0
	c.mu.Unlock()
	if !full || v.st == nil || v.closed {
		return false
	}
	// A wake-up already queued is handled here, by this pull: one left
	// queued would wake the test's next wait whatever it waits for.
	select {
	case <-v.woke:
		if v.woken(); v.closed {
			return false
		}
	default:
	}
	before := v.frames
	v.snd.Wake(v.st)
	v.pump()
	return v.frames == before
}

// drive pumps the viewers and waits for their wake-ups until cond holds
// (checked after each round), or fails after hangGuard.
func drive(t *testing.T, what string, cond func() bool, vs ...*viewer) {
	t.Helper()
	guard := time.NewTimer(hangGuard)
	defer guard.Stop()
	for {
		for _, v := range vs {
			v.pump()
		}
		if cond() {
			return
		}
		pending := false
		for _, v := range vs {
			pending = pending || !v.closed && v.snd.Pending()
		}
		if pending {
			continue // cond's credit woke a stream: the Sender has it ready
		}
		var w0, w1 chan struct{}
		w0 = vs[0].woke
		if len(vs) > 1 {
			w1 = vs[1].woke
		}
		select {
		case <-w0:
			vs[0].woken()
		case <-w1:
			vs[1].woken()
		case <-guard.C:
			t.Fatalf("waited %v for %s", hangGuard, what)
		}
	}
}
