package daemon_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/daemon/registry"
	"github.com/ahp-dev/ahpd/daemon/service"
	"github.com/ahp-dev/ahpd/flow"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// These tests run real PTYs behind a real daemon over loopback WebSockets.

// shellSpec runs /bin/sh with a recognisable prompt and no rc files.
func shellSpec(id string, command ...string) service.TerminalSpec {
	if len(command) == 0 {
		command = []string{"/bin/sh"}
	}
	return service.TerminalSpec{ID: id, Command: command, Env: []string{"PS1=PROMPT> ", "HOME=/tmp", "TERM=xterm-256color"}, Rows: 24, Cols: 80}
}

// viewer collects a subscription's terminal output, releasing every
// message as it is read (like xterm.js's write callback).
type viewer struct {
	t     *testing.T
	sub   *client.Sub
	out   strings.Builder
	kinds []string
}

func (h *harness) subscribe(token, uri string, limits *flow.ReceiveLimits) (*client.Conn, *viewer) {
	h.t.Helper()
	c := h.dial(token)
	sub, err := c.Subscribe(ctxT(h.t), uri, limits)
	if err != nil {
		h.t.Fatal(err)
	}
	return c, &viewer{t: h.t, sub: sub}
}

// next reads one message, records it and releases it.
func (v *viewer) next(ctx context.Context) (client.Message, error) {
	m, err := v.sub.Next(ctx)
	if err != nil {
		return m, err
	}
	v.kinds = append(v.kinds, m.Method)
	if m.Method == "terminal/output" {
		var p struct {
			Data string `json:"data"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil {
			v.t.Fatalf("terminal/output params: %v", err)
		}
		v.out.WriteString(p.Data)
	}
	return m, v.sub.Release(ctx, m)
}

// until reads until the last 64 KiB of the collected output satisfy ok,
// or d passes.
func (v *viewer) until(d time.Duration, ok func(tail string) bool) {
	v.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for !ok(tail(v.out.String(), 64<<10)) {
		if _, err := v.next(ctx); err != nil {
			tail := v.out.String()
			if len(tail) > 400 {
				tail = tail[len(tail)-400:]
			}
			v.t.Fatalf("waiting for output: %v; last output: %q", err, tail)
		}
	}
}

func (v *viewer) send(text string) {
	v.t.Helper()
	msg := string(client.AppendNotification(nil, "terminal/input", map[string]string{"data": text}))
	if err := v.sub.Send(ctxT(v.t), msg); err != nil {
		v.t.Fatal(err)
	}
}

func TestPTYEchoRoundTrip(t *testing.T) {
	h := start(t, true, nil)
	ch, err := h.srv.CreateTerminal(shellSpec("sh"))
	if err != nil {
		t.Fatal(err)
	}
	_, v := h.subscribe(adminToken, ch.URI, nil)
	v.until(10*time.Second, func(o string) bool { return strings.Contains(o, "PROMPT> ") })
	if v.kinds[0] != "terminal/reset" {
		t.Fatalf("first message %s, want terminal/reset", v.kinds[0])
	}
	v.send("echo hel''lo\r")
	v.until(10*time.Second, func(o string) bool { return strings.Contains(o, "\nhello") })
}

func TestTwoViewersSeeIdenticalOutput(t *testing.T) {
	h := start(t, true, nil)
	ch, err := h.srv.CreateTerminal(shellSpec("gen", "/bin/sh", "-c", "read x; seq 1 30000; echo DONE; read y"))
	if err != nil {
		t.Fatal(err)
	}
	_, a := h.subscribe(adminToken, ch.URI, nil)
	_, b := h.subscribe(adminToken, ch.URI, nil)
	for _, v := range []*viewer{a, b} {
		v.until(10*time.Second, func(string) bool { return len(v.kinds) > 0 && v.kinds[len(v.kinds)-1] == "channel/ready" })
		v.out.Reset()
	}
	a.send("\r")
	for _, v := range []*viewer{a, b} {
		v.until(20*time.Second, func(o string) bool { return strings.Contains(o, "DONE") })
	}
	if a.out.String() != b.out.String() {
		t.Fatalf("viewers differ: %d vs %d bytes", a.out.Len(), b.out.Len())
	}
	if !strings.Contains(a.out.String(), "\r\n29999\r\n30000\r\n") {
		t.Fatalf("output misses lines")
	}
}

// A viewer that never returns credit must not hold back one that does;
// when its credit returns it gets a fresh snapshot.
func TestStalledViewerDoesNotHoldBackOthers(t *testing.T) {
	h := start(t, true, nil)
	// 4 MB in 400 writes: far more than the stalled viewer's window plus
	// backlog, at a pace any viewer keeps up with, even under -race.
	ch, err := h.srv.CreateTerminal(shellSpec("flood", "/bin/sh", "-c", "read x; for i in $(seq 1 400); do head -c 10000 /dev/zero | tr '\\0' 'a'; done; echo; echo FLOOD-END; read y"))
	if err != nil {
		t.Fatal(err)
	}
	small := &flow.ReceiveLimits{WindowBytes: 64 << 10, MaximumFrameBytes: 16 << 10, MaximumMessageBytes: 64 << 10}
	_, stalled := h.subscribe(adminToken, ch.URI, small)
	_, fast := h.subscribe(adminToken, ch.URI, nil)
	fast.until(10*time.Second, func(string) bool { return len(fast.kinds) > 0 && fast.kinds[len(fast.kinds)-1] == "channel/ready" })
	fast.out.Reset()
	fast.send("\r")
	// The fast viewer receives every byte, in order, while the other
	// never credits.
	fast.until(60*time.Second, func(o string) bool { return strings.Contains(o, "FLOOD-END") })
	if n := strings.Count(fast.out.String(), "a"); n != 4000000 {
		t.Fatalf("fast viewer got %d 'a', want 4000000", n)
	}
	// The stalled viewer was handed at most its window plus one message.
	var last client.Message
	var held int64
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		m, err := stalled.sub.Next(ctx)
		cancel()
		if err != nil {
			break
		}
		held += flow.UTF16Len(string(m.Text))
		last = m
	}
	if held == 0 || held >= small.WindowBytes+small.MaximumMessageBytes {
		t.Fatalf("stalled viewer holds %d bytes, want 0 < held < window+maxMessage = %d", held, small.WindowBytes+small.MaximumMessageBytes)
	}
	// Its credit returns: it gets reset + snapshot + channel/ready, and
	// the snapshot shows the screen as it is now.
	stalled.kinds = nil
	stalled.out.Reset()
	if err := stalled.sub.Release(ctxT(t), last); err != nil {
		t.Fatal(err)
	}
	stalled.until(20*time.Second, func(string) bool {
		n := len(stalled.kinds)
		return n > 0 && stalled.kinds[n-1] == "channel/ready"
	})
	if stalled.kinds[0] != "terminal/reset" {
		t.Fatalf("after the stall: %v, want terminal/reset first", stalled.kinds)
	}
	if !strings.Contains(stalled.out.String(), "FLOOD-END") {
		t.Fatalf("snapshot does not show the end of the flood: %q", tail(stalled.out.String(), 300))
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Ctrl-C typed under a `yes` flood reaches the PTY and the prompt is back
// quickly: input and control never queue behind output.
//
// "Quickly" is 200 ms on a normal build (make test runs this test once
// without -race for that), but how long is also the machine's. The figure
// is the best of up to three floods (a daemon that queues input behind
// output misses every time, a load spike once), and the same Ctrl-C at an
// idle prompt, measured in this run, is the baseline: over 200 ms and
// over ctrlCFactor× the baseline fails; over 200 ms within it is
// inconclusive (the machine was slow, not the daemon). Under the race
// detector the client decodes 10–50× slower, so only "never freezes" is
// checked.
func TestCtrlCUnderFlood(t *testing.T) {
	const (
		target      = 200 * time.Millisecond
		ctrlCFactor = 50
		hang        = 15 * time.Second
	)
	h := start(t, true, nil)
	ch, err := h.srv.CreateTerminal(shellSpec("yes"))
	if err != nil {
		t.Fatal(err)
	}
	_, v := h.subscribe(adminToken, ch.URI, nil)
	v.until(10*time.Second, func(o string) bool { return strings.Contains(o, "PROMPT> ") })
	// ctrlC types Ctrl-C and returns how long until the prompt is back.
	ctrlC := func() time.Duration {
		v.out.Reset()
		sent := time.Now()
		v.send("\x03")
		v.until(20*time.Second, func(o string) bool { return strings.Contains(o, "PROMPT> ") })
		return time.Since(sent)
	}
	// The baseline: the slowest of three at an idle prompt, taken before
	// each flood, so that load during the test counts.
	var baseline time.Duration
	took := time.Duration(1<<63 - 1)
	for round := 0; round < 3 && took > target; round++ {
		for range 3 {
			baseline = max(baseline, ctrlC())
		}
		v.send("yes\r")
		// A slow (race-instrumented) viewer may be in snapshot mode, seeing
		// screens of y rather than the stream: a screenful is enough.
		v.until(20*time.Second, func(o string) bool { return strings.Count(o, "y\r\n") > 20 })
		d := ctrlC()
		t.Logf("Ctrl-C to prompt under flood: %v; at an idle prompt: at most %v", d, baseline)
		if d > hang {
			t.Fatalf("Ctrl-C to prompt under flood took %v, want < %v", d, hang)
		}
		took = min(took, d)
	}
	switch {
	case raceEnabled || took <= target:
	case took > ctrlCFactor*baseline:
		t.Errorf("Ctrl-C to prompt under flood took %v (best of 3), want < %v or < %d× the %v at an idle prompt", took, target, ctrlCFactor, baseline)
	default:
		t.Skipf("inconclusive: Ctrl-C to prompt under flood took %v (best of 3, target %v), but up to %v at an idle prompt: the machine is too slow to judge", took, target, baseline)
	}
}

// Every byte the command wrote reaches a viewer that keeps up before
// terminal/exit, and the channel stays listable as exited.
func TestExitAfterAllOutput(t *testing.T) {
	h := start(t, true, nil)
	ch, err := h.srv.CreateTerminal(shellSpec("exit", "/bin/sh", "-c", "read x; seq 1 100000; exit 3"))
	if err != nil {
		t.Fatal(err)
	}
	c, v := h.subscribe(adminToken, ch.URI, nil)
	v.until(10*time.Second, func(string) bool { return len(v.kinds) > 0 && v.kinds[len(v.kinds)-1] == "channel/ready" })
	v.out.Reset()
	v.send("\r")
	ctx := ctxT(t)
	var exit client.Message
	for {
		m, err := v.next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.Method == "terminal/exit" {
			exit = m
			break
		}
	}
	var want strings.Builder
	want.WriteString("\r\n")
	for i := 1; i <= 100000; i++ {
		want.WriteString(strconvItoa(i) + "\r\n")
	}
	if got := v.out.String(); got != want.String() {
		t.Fatalf("output before exit: %d bytes, want %d (tail %q)", len(got), want.Len(), tail(got, 40))
	}
	if !strings.Contains(string(exit.Params), `"code":3`) {
		t.Fatalf("terminal/exit params = %s, want code 3", exit.Params)
	}
	var list struct {
		Channels []registry.ChannelInfo `json:"channels"`
	}
	if err := c.Call(ctx, "channels/list", map[string]any{}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Channels) != 1 || list.Channels[0].State != "exited" {
		t.Fatalf("channels/list after exit = %+v, want state exited", list.Channels)
	}
}

func strconvItoa(i int) string { return strconv.Itoa(i) }

// A resize by a control viewer reaches the PTY (the program sees it) and
// every viewer gets terminal/resize in stream order.
func TestResizeReachesPTYAndViewers(t *testing.T) {
	h := start(t, true, nil)
	ch, err := h.srv.CreateTerminal(shellSpec("rs"))
	if err != nil {
		t.Fatal(err)
	}
	c, a := h.subscribe(adminToken, ch.URI, nil)
	_, b := h.subscribe(adminToken, ch.URI, nil)
	a.until(10*time.Second, func(o string) bool { return strings.Contains(o, "PROMPT> ") })
	if err := c.Call(ctxT(t), "terminal/resize", map[string]any{"subscriptionId": a.sub.ID, "rows": 40, "cols": 100}, nil); err != nil {
		t.Fatal(err)
	}
	err = c.Call(ctxT(t), "terminal/resize", map[string]any{"subscriptionId": a.sub.ID, "rows": 0, "cols": 100}, nil)
	if rpcCode(err) != flow.ErrCodeInvalidParams {
		t.Fatalf("resize to 0 rows: %v, want -32602", err)
	}
	for _, v := range []*viewer{a, b} {
		v.until(10*time.Second, func(string) bool {
			for _, k := range v.kinds {
				if k == "terminal/resize" {
					return true
				}
			}
			return false
		})
	}
	a.send("stty size\r")
	a.until(10*time.Second, func(o string) bool { return strings.Contains(o, "40 100") })
}

// TestViewerCreditsBatched: a viewer (ctl/client) that keeps up with 300
// small terminal/output messages, releasing each, credits them about once
// a quarter window, not once each: the daemon's socket receives a few
// hundred bytes from it meanwhile, not a channel/credit per message.
func TestViewerCreditsBatched(t *testing.T) {
	h := start(t, true, nil)
	c := h.control()
	ch, err := h.srv.CreateTerminal(shellSpec("lines", "/bin/sh", "-c", "read x; i=0; while [ $i -lt 300 ]; do i=$((i+1)); echo line$i; sleep 0.002; done; sleep 30"))
	if err != nil {
		t.Fatal(err)
	}
	// Window 256 KiB: the quarter is 64 KiB, far more than the lines.
	_, v := h.subscribe(adminToken, ch.URI, &flow.ReceiveLimits{WindowBytes: 256 << 10, MaximumFrameBytes: 64 << 10, MaximumMessageBytes: 64 << 10})
	v.until(10*time.Second, func(string) bool { return len(v.kinds) > 0 && v.kinds[len(v.kinds)-1] == "channel/ready" })
	bytesIn := func() int64 {
		t.Helper()
		st, err := c.daemon.GetStats(ctxT(t), &ahpv1.GetStatsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(st.GetConnections()) != 1 {
			t.Fatalf("%d connections, want 1", len(st.GetConnections()))
		}
		return st.GetConnections()[0].GetCounters().GetWireBytesIn()
	}
	v.send("\r")
	before, outputs := bytesIn(), 0
	v.until(20*time.Second, func(o string) bool { return strings.Contains(o, "line300\r\n") })
	for _, k := range v.kinds {
		if k == "terminal/output" {
			outputs++
		}
	}
	in := bytesIn() - before
	if outputs < 30 {
		t.Fatalf("300 lines came in %d terminal/output messages: the test needs many small ones", outputs)
	}
	// A channel/credit is about 100 bytes on the wire: one per message
	// would be some 30,000 bytes here.
	if in > 1000 {
		t.Fatalf("the viewer sent %d bytes while it received %d terminal/output messages: it credits them one by one", in, outputs)
	}
}
