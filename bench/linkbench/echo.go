package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/creack/pty"

	"github.com/ahp-dev/ahpd/bench/benchproc"
	"github.com/ahp-dev/ahpd/bench/termbench"
	"github.com/ahp-dev/ahpd/ctl/client"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// keyAlphabet is what is typed, in turn: each echo is matched to its
// keystroke by order and checked against it (the terminal's ready mark
// "R" is not in it).
const keyAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

func key(i int) byte { return keyAlphabet[i%len(keyAlphabet)] }

// typeKeys types n keys, gap apart, with send, without waiting for their
// echoes, and reads the echoes with recv: each key's time from its send
// to the arrival of the bytes that echo it. Bytes not in keyAlphabet are
// skipped.
func typeKeys(ctx context.Context, n int, gap time.Duration, send func(context.Context, byte) error, recv func(context.Context) ([]byte, error)) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(n)*gap+time.Minute)
	defer cancel()
	sent := make([]atomic.Int64, n)
	typed := make(chan error, 1)
	go func() {
		start := time.Now()
		for i := range n {
			select {
			case <-time.After(time.Until(start.Add(time.Duration(i) * gap))):
			case <-ctx.Done():
				typed <- ctx.Err()
				return
			}
			sent[i].Store(time.Now().UnixNano())
			if err := send(ctx, key(i)); err != nil {
				typed <- err
				return
			}
		}
		typed <- nil
	}()
	out := make([]time.Duration, 0, n)
	for len(out) < n {
		b, err := recv(ctx)
		now := time.Now()
		if err != nil {
			cancel()
			return nil, errors.Join(err, <-typed)
		}
		for _, x := range b {
			if !strings.ContainsRune(keyAlphabet, rune(x)) {
				continue
			}
			i := len(out)
			if i >= n || x != key(i) {
				cancel()
				<-typed
				return nil, fmt.Errorf("echo %d is %q, want %q", i, x, key(i))
			}
			t := sent[i].Load()
			if t == 0 {
				cancel()
				<-typed
				return nil, fmt.Errorf("echo %d arrived before its key was typed", i)
			}
			out = append(out, now.Sub(time.Unix(0, t)))
		}
	}
	return out, <-typed
}

// echoResult is the keystroke echo at one round trip.
type echoResult struct {
	raw, idle, busy []time.Duration
	// steady are the busy keys typed once the bulk stream's start is past
	// (settleTime after it opened): its slow start and the queue an
	// overshoot leaves behind, which a round trip's feedback cannot
	// prevent (docs/benchmarks.md, "Real links").
	steady     []time.Duration
	bulkMBps   float64 // the bulk download's rate during busy
	bulkWindow int64   // the receive window the bulk stream asked for
}

// echo measures keystroke echo: a raw TCP echo through the raw link, then
// a terminal viewed by the Go client through the daemon's link, idle and
// beside a bulk download on the same connection.
func (c *config) echo(ctx context.Context, d *benchproc.Daemon, daemonAddr, rawAddr, target string, rtt time.Duration) (*echoResult, error) {
	res := &echoResult{}
	// Raw: the floor.
	rc, err := net.DialTimeout("tcp", rawAddr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	_ = rc.(*net.TCPConn).SetNoDelay(true)
	_ = rc.SetDeadline(time.Now().Add(time.Duration(c.keys)*c.keyGap + time.Minute))
	if _, err := rc.Write(header(opEcho, 0)); err != nil {
		return nil, err
	}
	rbuf := make([]byte, 4096)
	res.raw, err = typeKeys(ctx, c.keys, c.keyGap,
		func(_ context.Context, b byte) error { _, err := rc.Write([]byte{b}); return err },
		func(context.Context) ([]byte, error) { k, err := rc.Read(rbuf); return rbuf[:k], err })
	if err != nil {
		return nil, fmt.Errorf("raw TCP: %w", err)
	}
	rc.Close()

	// The terminal, through the daemon's link.
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	tr, err := ahpv1.NewTerminalServiceClient(d.Conn).CreateTerminal(cctx, &ahpv1.CreateTerminalRequest{Id: "echo", Command: "/bin/sh", Args: []string{"-c", termbench.EchoCommand}})
	ccancel()
	if err != nil {
		return nil, err
	}
	conn, _, err := client.Dial(ctx, "ws://"+daemonAddr+"/v1/ws", client.Options{Token: d.Token})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	sub, err := conn.Subscribe(ctx, tr.GetChannel().GetUri(), nil)
	if err != nil {
		return nil, err
	}
	if err := termbench.UntilReady(ctx, sub); err != nil {
		return nil, err
	}
	var data []byte
	send := func(ctx context.Context, b byte) error { return sub.Send(ctx, termbench.Input(string(rune(b)))) }
	recv := func(ctx context.Context) ([]byte, error) {
		for {
			m, err := sub.Next(ctx)
			if err != nil {
				return nil, err
			}
			if err := sub.Release(ctx, m); err != nil {
				return nil, err
			}
			switch m.Method {
			case "terminal/output":
				if data, err = m.AppendTerminalData(data[:0]); err != nil {
					return nil, err
				}
				return data, nil
			case "terminal/reset":
				return nil, errors.New("the terminal's viewer got a snapshot (terminal/reset): echoes lost")
			}
		}
	}
	if res.idle, err = typeKeys(ctx, c.keys, c.keyGap, send, recv); err != nil {
		return nil, fmt.Errorf("terminal, idle: %w", err)
	}

	// Beside a bulk download on the same connection.
	host, port, _ := net.SplitHostPort(target)
	tport, _ := strconv.Atoi(port)
	st, err := client.OpenTCP(ctx, client.TCPOptions{
		Dial: func(context.Context) (*client.Conn, error) { return conn, nil },
		Host: host, Port: tport,
	})
	if err != nil {
		return nil, fmt.Errorf("bulk stream: %w", err)
	}
	opened := time.Now()
	res.bulkWindow = st.ReceiveLimits().WindowBytes
	defer st.Abort()
	if _, err := st.Write(header(opStream, 0)); err != nil {
		return nil, err
	}
	var bulk atomic.Int64
	bulkDone := make(chan error, 1)
	go func() {
		buf := make([]byte, 256<<10)
		for {
			k, err := st.Read(buf)
			bulk.Add(int64(k))
			if err != nil {
				bulkDone <- err
				return
			}
		}
	}()
	// Until the stream flows at full speed: 2 MiB, or 20 s at most.
	for deadline := time.Now().Add(20 * time.Second); bulk.Load() < 2<<20; {
		if time.Now().After(deadline) {
			return nil, errors.New("the bulk stream moved less than 2 MiB in 20 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	b0, t0 := bulk.Load(), time.Now()
	// With -v, each echo's arrival is traced with the bulk stream's
	// window and bytes at that moment: where the slow ones fall.
	var trace []string
	busyRecv := recv
	if c.verbose {
		// The bulk stream's window over time, every change seen at a
		// 5 ms poll.
		stopPoll := make(chan struct{})
		polled := make(chan struct{})
		go func() {
			defer close(polled)
			last := int64(-1)
			for {
				select {
				case <-stopPoll:
					return
				case <-time.After(5 * time.Millisecond):
				}
				if w := st.ReceiveLimits().WindowBytes; w != last {
					fmt.Fprintf(os.Stderr, "window %7.3fs %d\n", time.Since(t0).Seconds(), w)
					last = w
				}
			}
		}()
		defer func() { close(stopPoll); <-polled }()
		busyRecv = func(ctx context.Context) ([]byte, error) {
			b, err := recv(ctx)
			trace = append(trace, fmt.Sprintf("%7.3fs window=%d bulk=%.1fMB", time.Since(t0).Seconds(), st.ReceiveLimits().WindowBytes, float64(bulk.Load())/1e6))
			return b, err
		}
	}
	res.busy, err = typeKeys(ctx, c.keys, c.keyGap, send, busyRecv)
	if k := int(math.Ceil(float64(opened.Add(settleTime(rtt)).Sub(t0)) / float64(c.keyGap))); k < len(res.busy) {
		res.steady = res.busy[max(k, 0):]
	}
	for i, line := range trace {
		if i < len(res.busy) {
			fmt.Fprintf(os.Stderr, "echo %3d %s %6.1fms\n", i, line, float64(res.busy[i].Microseconds())/1e3)
		}
	}
	res.bulkMBps = float64(bulk.Load()-b0) / time.Since(t0).Seconds() / 1e6
	if err != nil {
		return nil, fmt.Errorf("terminal, beside bulk: %w", err)
	}
	select {
	case err := <-bulkDone:
		return nil, fmt.Errorf("the bulk stream ended during the keystrokes: %v", err)
	default:
	}
	st.Abort()
	select {
	case <-bulkDone:
	case <-time.After(10 * time.Second):
		return nil, errors.New("the bulk stream's reader did not end within 10 s of Abort")
	}
	return res, nil
}

// settleTime is how long after a bulk stream opens the echo beside it is
// counted as steady: 3 s and ten round trips (TCP's slow start to
// 100 Mbit/s takes about eight).
func settleTime(rtt time.Duration) time.Duration { return 3*time.Second + 10*rtt }

// catResult is a cat shown by ahpctl attach at one round trip.
type catResult struct {
	elapsed   time.Duration // from the key that starts the cat to the last line's arrival
	snapshots int64         // snapshots attach's subscription got meanwhile
	window    int64         // its window
	received  int64         // bytes attach wrote to its terminal meanwhile
}

const catMarker = "BENCH-END"

// catAttach runs `ahpctl attach --url` through the daemon's link in a pty
// of this process, types the key that starts `cat file` in the terminal
// and times until the marker line after it has arrived in the pty.
func (c *config) catAttach(ctx context.Context, d *benchproc.Daemon, daemonAddr, file string, rtt time.Duration) (*catResult, error) {
	const id = "cat"
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := ahpv1.NewTerminalServiceClient(d.Conn).CreateTerminal(cctx, &ahpv1.CreateTerminalRequest{
		Id: id, Command: "/bin/sh", Args: []string{"-c", "read x; cat " + file + "; echo; echo " + catMarker + "; read y"},
		Rows: 24, Cols: 80,
	})
	ccancel()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(c.ahpctl, "attach", "--quiet", "--url", "http://"+daemonAddr, id)
	cmd.Env = append(os.Environ(), "AHP_TOKEN="+d.Token, "TERM=xterm-256color")
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 80})
	if err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		f.Close()
	}()
	first, marker := make(chan struct{}), make(chan time.Time, 1)
	var received atomic.Int64
	go func() {
		buf := make([]byte, 64<<10)
		tail, seen := "", false
		for {
			k, err := f.Read(buf)
			if k > 0 && received.Add(int64(k)) == int64(k) {
				close(first)
			}
			if !seen && k > 0 {
				keep := len(catMarker) + 64
				tail += string(buf[max(0, k-keep):k])
				tail = tail[max(0, len(tail)-keep):]
				if strings.Contains(tail, catMarker) {
					seen = true
					marker <- time.Now()
				}
			}
			if err != nil {
				return // EIO: attach has exited
			}
		}
	}()
	detach := func() { _, _ = f.Write([]byte{0x1d, 'd'}) } // Ctrl-] d
	defer detach()
	select {
	case <-first:
	case <-exited:
		return nil, errors.New("ahpctl attach exited before drawing anything")
	case <-time.After(30 * time.Second):
		return nil, errors.New("ahpctl attach drew nothing within 30 s")
	}
	time.Sleep(500*time.Millisecond + 2*rtt) // the snapshot and the resize settle
	s0, err := subscription(ctx, d, "ahp-terminal:/"+id)
	if err != nil {
		return nil, err
	}
	r0 := received.Load()
	start := time.Now()
	if _, err := f.Write([]byte("\r")); err != nil {
		return nil, err
	}
	limit := min(10*time.Minute, time.Minute+10*time.Duration(float64(c.catSize)/float64(c.rate)*float64(time.Second)))
	var end time.Time
	select {
	case end = <-marker:
	case <-exited:
		return nil, errors.New("ahpctl attach exited before the cat's end")
	case <-time.After(limit):
		return nil, fmt.Errorf("no end of the cat within %v", limit)
	}
	res := &catResult{elapsed: end.Sub(start), received: received.Load() - r0}
	s1, err := subscription(ctx, d, "ahp-terminal:/"+id)
	if err != nil {
		return nil, err
	}
	res.snapshots = s1.GetSnapshots() - s0.GetSnapshots()
	res.window = s1.GetWindowBytes()
	return res, nil
}

// subscription returns the daemon's account of the one subscription to
// uri.
func subscription(ctx context.Context, d *benchproc.Daemon, uri string) (*ahpv1.Subscription, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := ahpv1.NewViewerServiceClient(d.Conn).ListViewers(ctx, &ahpv1.ListViewersRequest{})
	if err != nil {
		return nil, err
	}
	var found []*ahpv1.Subscription
	for _, v := range r.GetViewers() {
		for _, s := range v.GetSubscriptions() {
			if s.GetChannel() == uri {
				found = append(found, s)
			}
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%d subscriptions to %s, want 1", len(found), uri)
	}
	return found[0], nil
}
