package ctl_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/ctl/client"
)

// slowConn is a client WebSocket's net.Conn whose writes each wait delay
// first: a link with that much more latency one way.
type slowConn struct {
	net.Conn
	delay time.Duration
}

func (c *slowConn) Write(b []byte) (int, error) {
	time.Sleep(c.delay)
	return c.Conn.Write(b)
}

// echoDaemon starts an echo server and a daemon that allows it, and
// returns the daemon, a control token and the echo server's host and port.
func echoDaemon(t *testing.T) (d *daemonProc, tok, host string, port int) {
	echo := newTCPServer(t, echoServe)
	d = startTCPDaemon(t, echo.addr())
	tok = strings.TrimSpace(d.mustCtl("token", "create", "--role", "control"))
	host, ps, _ := net.SplitHostPort(echo.addr())
	port, _ = strconv.Atoi(ps)
	return d, tok, host, port
}

// TestE2ETCPWindowFromRoundTrip: a TCPStream that asks for no limits gets
// a window sized from its connection's round trip — the floor on
// loopback, rtt × AutoWindowRate over a slower link — the daemon grants
// it, and bytes flow.
func TestE2ETCPWindowFromRoundTrip(t *testing.T) {
	d, tok, host, p := echoDaemon(t)
	const delay = 30 * time.Millisecond
	// The window a stream opens with; it is tuned to the path from then
	// on (TestE2ETCPWindowsFitThePath), here on a link whose every client
	// write waits, which reads as a queue.
	open := func(delay time.Duration) (int64, *client.Conn) {
		hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil || delay == 0 {
				return c, err
			}
			return &slowConn{Conn: c, delay: delay}, nil
		}}}
		conn, res, err := client.Dial(ctxT(t), "ws://"+d.addr+"/v1/ws", client.Options{Token: tok, HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		st, err := client.OpenTCP(ctxT(t), client.TCPOptions{Dial: func(context.Context) (*client.Conn, error) { return conn, nil }, Host: host, Port: p})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Abort() })
		fc := res.Capabilities.FlowControl
		want := client.AutoReceive(fc.ClientDefaults, fc.Maximums, conn.RTT())
		got := st.ReceiveLimits()
		if got != want || want.WindowBytes < client.AutoWindowMin {
			t.Fatalf("round trip %v: limits %+v, want %+v", conn.RTT(), got, want)
		}
		msg := make([]byte, 100<<10)
		_, _ = rand.Read(msg)
		if _, err := st.Write(msg); err != nil {
			t.Fatal(err)
		}
		back := make([]byte, len(msg))
		if _, err := io.ReadFull(st, back); err != nil || !bytes.Equal(back, msg) {
			t.Fatalf("echo: %v (equal %v)", err, bytes.Equal(back, msg))
		}
		return got.WindowBytes, conn
	}
	fw, fastConn := open(0)
	sw, slowConn := open(delay)
	if slowConn.RTT() < delay {
		t.Fatalf("round trip over a link %v slower one way measured %v", delay, slowConn.RTT())
	}
	if min := int64(delay.Seconds() * client.AutoWindowRate); sw < min {
		t.Fatalf("window over a %v round trip: %d, want at least %d", slowConn.RTT(), sw, min)
	}
	t.Logf("windows: %d bytes at a %v round trip, %d at %v", fw, fastConn.RTT(), sw, slowConn.RTT())
}

// TestE2ETCPWindowOpensSmallBesideATerminal: a TCPStream on a connection
// that also carries a terminal opens at AutoWindowMin, whatever the round
// trip, and slow-starts from there (flow.WindowTuner), so that its first
// round trip's bytes do not queue ahead of the terminal's echo; one on a
// connection of TCP streams only opens at the round trip's guess
// (TestE2ETCPWindowFromRoundTrip).
func TestE2ETCPWindowOpensSmallBesideATerminal(t *testing.T) {
	d, tok, host, p := echoDaemon(t)
	d.mustCtl("terminal", "create", "--id", "beside", "--", "/bin/sh", "-c", "sleep 60")
	const delay = 30 * time.Millisecond
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return c, err
		}
		return &slowConn{Conn: c, delay: delay}, nil
	}}}
	conn, res, err := client.Dial(ctxT(t), "ws://"+d.addr+"/v1/ws", client.Options{Token: tok, HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if !conn.WindowUpdates() {
		t.Fatal("the daemon does not take channel/window")
	}
	sub, err := conn.Subscribe(ctxT(t), "ahp-terminal:/beside", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe(ctxT(t)) }()
	st, err := client.OpenTCP(ctxT(t), client.TCPOptions{Dial: func(context.Context) (*client.Conn, error) { return conn, nil }, Host: host, Port: p})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Abort()
	fc := res.Capabilities.FlowControl
	if got, guess := st.ReceiveLimits().WindowBytes, client.AutoReceive(fc.ClientDefaults, fc.Maximums, conn.RTT()).WindowBytes; got != client.AutoWindowMin || guess <= got {
		t.Fatalf("beside a terminal at a %v round trip the stream opened with %d, want AutoWindowMin %d (the guess: %d)", conn.RTT(), got, client.AutoWindowMin, guess)
	}
	msg := make([]byte, 100<<10)
	_, _ = rand.Read(msg)
	if _, err := st.Write(msg); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, len(msg))
	if _, err := io.ReadFull(st, back); err != nil || !bytes.Equal(back, msg) {
		t.Fatalf("echo: %v (equal %v)", err, bytes.Equal(back, msg))
	}
}

// TestE2ETCPStreamGracefulEnd: once both halves are closed, the client
// releases tcp/closed and the host ends the channel, so Close returns at
// once instead of waiting out its CloseTimeout (it used to: the credit
// for tcp/closed was never sent).
func TestE2ETCPStreamGracefulEnd(t *testing.T) {
	d, tok, host, p := echoDaemon(t)
	conn, _, err := client.Dial(ctxT(t), "ws://"+d.addr+"/v1/ws", client.Options{Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const closeTimeout = time.Minute
	st, err := client.OpenTCP(ctxT(t), client.TCPOptions{Dial: func(context.Context) (*client.Conn, error) { return conn, nil }, Host: host, Port: p, CloseTimeout: closeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := st.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(st); err != nil || string(b) != "hello" {
		t.Fatalf("read %q, %v", b, err)
	}
	start := time.Now()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > closeTimeout/2 {
		t.Fatalf("Close took %v: the host did not end the channel after tcp/closed", took)
	}
}
