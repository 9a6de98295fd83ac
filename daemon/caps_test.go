package daemon_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/daemon/service"
	"github.com/ahp-dev/ahpd/flow"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// TestMaxPendingConnections: at most maxPendingConnections sockets wait
// unauthenticated; a new one closes the oldest (not a 503 for the new
// one, which would let a flood of idle upgrades lock everyone out), an
// initialized connection no longer counts, and an upgrade that carries a
// valid bearer token never counts.
func TestMaxPendingConnections(t *testing.T) {
	h := start(t, false, func(c *config.Config) { c.Limits.MaxPendingConnections = 2 })
	a, _, err := h.raw(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.CloseNow()
	// An initialized connection is no longer pending.
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"ahp/1","token":"` + adminToken + `","client":{"name":"t","version":"0"}}}`
	if err := a.Write(ctxT(t), websocket.MessageText, []byte(init)); err != nil {
		t.Fatal(err)
	}
	if got := readJSON(t, a); !strings.Contains(got, `"result"`) {
		t.Fatalf("initialize: %s", got)
	}
	var idle []*websocket.Conn
	for range 3 {
		c, _, err := h.raw(nil)
		if err != nil {
			t.Fatalf("a new pending connection was refused: %v", err)
		}
		defer c.CloseNow()
		idle = append(idle, c)
	}
	// The first of the three was closed for the third; the other two and
	// the initialized one stay.
	if _, _, err := idle[0].Read(ctxT(t)); err == nil {
		t.Fatal("the oldest pending connection got a message instead of its end")
	}
	for _, c := range idle[1:] {
		if err := c.Write(ctxT(t), websocket.MessageText, []byte(init)); err != nil {
			t.Fatal(err)
		}
		if got := readJSON(t, c); !strings.Contains(got, `"result"`) {
			t.Fatalf("a newer pending connection could not initialize: %s", got)
		}
	}
	list := `{"jsonrpc":"2.0","id":1,"method":"channels/list","params":{}}`
	if err := a.Write(ctxT(t), websocket.MessageText, []byte(list)); err != nil {
		t.Fatalf("the initialized connection was closed: %v", err)
	}
	if got := readJSON(t, a); !strings.Contains(got, `"result"`) {
		t.Fatalf("channels/list on the initialized connection: %s", got)
	}
	// An upgrade with a valid bearer token is not counted once upgraded:
	// the pending sockets opened after it do not close it, however long
	// it takes to initialize.
	var bearers []*websocket.Conn
	for range 3 {
		c, _, err := h.raw(http.Header{"Authorization": {"Bearer " + adminToken}})
		if err != nil {
			t.Fatalf("bearer upgrade: %v", err)
		}
		defer c.CloseNow()
		bearers = append(bearers, c)
	}
	for range 4 {
		c, _, err := h.raw(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
	}
	for _, c := range bearers {
		if err := c.Write(ctxT(t), websocket.MessageText, []byte(init)); err != nil {
			t.Fatal(err)
		}
		if got := readJSON(t, c); !strings.Contains(got, `"result"`) {
			t.Fatalf("an upgrade with a bearer token was closed for later pending ones: %s", got)
		}
	}
}

// TestMaxTerminals: creating a terminal beyond maxTerminals fails with a
// clear error (ResourceExhausted over gRPC) until one is closed; the
// limit is settable at run time like the others.
func TestMaxTerminals(t *testing.T) {
	h := start(t, false, func(c *config.Config) { c.Limits.MaxTerminals = 2 })
	cp := h.control()
	ctx := ctxT(t)
	for _, id := range []string{"a", "b"} {
		if _, err := cp.terminals.CreateTerminal(ctx, &ahpv1.CreateTerminalRequest{Id: id}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := cp.terminals.CreateTerminal(ctx, &ahpv1.CreateTerminalRequest{Id: "c"})
	wantCode(t, err, codes.ResourceExhausted, "too many: 2 terminals (maxTerminals, the maximum); close one first")
	if _, err := h.srv.CreateTerminal(service.TerminalSpec{ID: "c"}); !errors.Is(err, service.ErrTooMany) {
		t.Fatalf("CreateTerminal beyond the limit: %v, want ErrTooMany", err)
	}
	if _, err := cp.channels.CloseChannel(ctx, &ahpv1.CloseChannelRequest{Channel: "ahp-terminal:/a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.terminals.CreateTerminal(ctx, &ahpv1.CreateTerminalRequest{Id: "c"}); err != nil {
		t.Fatalf("after closing one: %v", err)
	}
	// Raised at run time through SetLimits, as `ahpctl limits set` does.
	res, err := cp.limits.SetLimits(ctx, &ahpv1.SetLimitsRequest{
		Limits:     &ahpv1.Limits{MaxTerminals: 3, MaxPendingConnections: 7},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"max_terminals", "max_pending_connections"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Effective.GetMaxTerminals() != 3 || res.Effective.GetMaxPendingConnections() != 7 {
		t.Fatalf("SetLimits: %+v", res.Effective)
	}
	if _, err := cp.terminals.CreateTerminal(ctx, &ahpv1.CreateTerminalRequest{Id: "d"}); err != nil {
		t.Fatalf("after raising the limit: %v", err)
	}
	got, err := cp.limits.GetLimits(ctx, &ahpv1.GetLimitsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Defaults.GetMaxTerminals() != 256 || got.Defaults.GetMaxPendingConnections() != 256 {
		t.Fatalf("defaults: %+v", got.Defaults)
	}
}

// TestFailedAuthLogIsRateLimited: a client failing authentication in a
// loop gets at most about one log line a second, and the next line says how
// many were suppressed.
func TestFailedAuthLogIsRateLimited(t *testing.T) {
	h, logs := startLogged(t)
	began := time.Now()
	const tries = 30
	for range tries {
		_, _, err := client.Dial(ctxT(t), h.url, client.Options{Token: "ahp_wrong"})
		if rpcCode(err) != flow.ErrCodeUnauthorized {
			t.Fatalf("wrong token: %v, want -32001", err)
		}
	}
	elapsed := time.Since(began)
	lines := strings.Count(logs.String(), "authentication failed")
	if max := 1 + int(elapsed/time.Second); lines < 1 || lines > max {
		t.Fatalf("%d failed-auth lines for %d failures in %v, want 1 to %d", lines, tries, elapsed, max)
	}
	// The next line after the interval carries the count suppressed: so
	// every failure is a line or counted in a later one. (Summed, not read
	// off the last line: a failure that got a line of its own suppressed
	// nothing, and how many did is the machine's.)
	time.Sleep(time.Second) // the rate limit's interval must pass
	_, _, _ = client.Dial(ctxT(t), h.url, client.Options{Token: "ahp_wrong"})
	logged, suppressed := 0, 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if !strings.Contains(line, "authentication failed") {
			continue
		}
		// slog ends the line with the last attribute: "suppressed=N\n".
		_, v, ok := strings.Cut(line, " suppressed=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil {
			t.Fatalf("a failed-auth line without a suppressed count: %s", line)
		}
		logged++
		suppressed += n
	}
	if logged+suppressed != tries+1 {
		t.Fatalf("%d failed-auth lines counting %d suppressed, want %d failures in all:\n%s", logged, suppressed, tries+1, logs.String())
	}
}

// TestLimitsChangedLogSaysWhat: the "limits changed" line names each
// limit changed with its new value, as `ahpctl limits set` writes it.
func TestLimitsChangedLogSaysWhat(t *testing.T) {
	h, logs := startLogged(t)
	l := h.srv.Limits()
	l.MaxOutputStall = 2 * time.Second
	l.MaxBufferedBytes = 8 << 20
	if err := h.srv.SetLimits(l); err != nil {
		t.Fatal(err)
	}
	if want := "limits changed\" maxBufferedBytes=8MiB maxOutputStall=2s"; !strings.Contains(logs.String(), want) {
		t.Fatalf("log lacks %q:\n%s", want, logs.String())
	}
}

// TestLimitsNoChangeIsQuiet: setting the limits already in force (as
// `ahpctl limits set maxOutputStall=1m` when it is 1m) neither logs
// "limits changed" nor publishes limits.changed; a real change does both.
func TestLimitsNoChangeIsQuiet(t *testing.T) {
	h, logs := startLogged(t)
	next, stop := h.srv.Watch()
	defer stop()
	closed := make(chan struct{})
	close(closed)
	if err := h.srv.SetLimits(h.srv.Limits()); err != nil {
		t.Fatal(err)
	}
	if evs, lost, _ := next(closed); len(evs) != 0 || lost != 0 {
		t.Fatalf("a no-op SetLimits published %v (lost %d)", evs, lost)
	}
	if strings.Contains(logs.String(), "limits changed") {
		t.Fatalf("a no-op SetLimits logged:\n%s", logs.String())
	}
	l := h.srv.Limits()
	l.MaxOutputStall += time.Second
	if err := h.srv.SetLimits(l); err != nil {
		t.Fatal(err)
	}
	if evs, _, _ := next(closed); len(evs) != 1 || evs[0].Kind != "limits.changed" {
		t.Fatalf("SetLimits published %v, want one limits.changed", evs)
	}
	if !strings.Contains(logs.String(), "limits changed") {
		t.Fatalf("SetLimits did not log:\n%s", logs.String())
	}
}

// startLogged starts a daemon (fake terminals) whose log the test reads.
func startLogged(t *testing.T) (*harness, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	return startWithLog(t, false, nil, nil, logs), logs
}

// TestTerminalEndIsOneLine: a terminal's end is one line of the log at
// info: "channel exited" when its program exits, "channel closed" when it
// is closed (its process's exit under the close is a debug detail).
func TestTerminalEndIsOneLine(t *testing.T) {
	logs := &syncBuffer{}
	h := startWithLog(t, true, nil, nil, logs)
	count := func(msg string) int { return strings.Count(logs.String(), `level=INFO msg="`+msg+`"`) }
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); {
			if time.Now().After(deadline) {
				t.Fatalf("%s; log:\n%s", what, logs.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	exits, err := h.srv.StartTerminal(ctxT(t), service.TerminalRequest{ID: "exits", Command: "/bin/sh", Args: []string{"-c", "exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor("the program's exit was not logged", func() bool { return count("channel exited") == 1 })
	runs, err := h.srv.StartTerminal(ctxT(t), service.TerminalRequest{ID: "runs", Command: "/bin/sleep", Args: []string{"30"}})
	if err != nil {
		t.Fatal(err)
	}
	next, stop := h.srv.Watch()
	defer stop()
	if err := h.srv.CloseChannel(runs.URI); err != nil {
		t.Fatal(err)
	}
	// The killed process's exit is published after it is logged.
	timeout := make(chan struct{})
	time.AfterFunc(10*time.Second, func() { close(timeout) })
	for exited := false; !exited; {
		evs, _, ok := next(timeout)
		if !ok {
			t.Fatalf("no channel.exited for %s; log:\n%s", runs.URI, logs.String())
		}
		for _, e := range evs {
			exited = exited || (e.Kind == "channel.exited" && e.Channel == runs.URI)
		}
	}
	if n := count("channel closed"); n != 1 {
		t.Fatalf("%d \"channel closed\" lines, want 1:\n%s", n, logs.String())
	}
	if n := count("channel exited"); n != 1 {
		t.Fatalf("%d \"channel exited\" lines at info, want 1 (%s's; %s was closed):\n%s", n, exits.URI, runs.URI, logs.String())
	}
}

// TestPendingFloodLocksNobodyOut: a peer that needs no credential at all
// holds 3,000 idle TCP sockets and 300 upgrades that never initialize,
// reopening whatever the daemon closes, while 50 legitimate clients
// connect one after another — half with the token in initialize, half
// with a bearer token on the upgrade. All 50 get in; the daemon holds no
// more pending sockets than maxPendingConnections allows.
func TestPendingFloodLocksNobodyOut(t *testing.T) {
	h := start(t, false, nil)
	const idleSockets, upgrades, legit = 3000, 300, 50
	max := h.srv.Limits().MaxPendingConnections
	flood, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	var opened atomic.Int64
	// Idle sockets: connect, send nothing, reconnect when closed.
	for range idleSockets / 100 {
		wg.Go(func() {
			var held []net.Conn
			defer func() {
				for _, c := range held {
					c.Close()
				}
			}()
			for range 100 {
				c, err := net.Dial("tcp", h.addr)
				if err != nil {
					continue
				}
				held = append(held, c)
				opened.Add(1)
			}
			<-flood.Done()
		})
	}
	// Upgrades that never initialize, reopened as the daemon closes them;
	// each loop is bounded by the flood's end and a count.
	for range upgrades / 10 {
		wg.Go(func() {
			for i := 0; i < 2000 && flood.Err() == nil; i++ {
				ws, _, err := websocket.Dial(flood, h.url, &websocket.DialOptions{Subprotocols: []string{"ahp.v1"}})
				if err != nil {
					continue
				}
				opened.Add(1)
				_, _, _ = ws.Read(flood) // until the daemon closes it, or the flood ends
				ws.CloseNow()
			}
		})
	}
	time.Sleep(time.Second) // the flood is up
	for i := range legit {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		opts := client.Options{Token: adminToken}
		if i%2 == 1 {
			opts = client.Options{Header: http.Header{"Authorization": {"Bearer " + adminToken}}}
		}
		c, _, err := client.Dial(ctx, h.url, opts)
		cancel()
		if err != nil {
			t.Fatalf("legitimate client %d of %d under the flood: %v", i+1, legit, err)
		}
		c.Close()
	}
	pending := h.srv.Session().PendingConnections()
	t.Logf("%d sockets opened by the flood; %d legitimate clients got in; %d pending now (max %d)", opened.Load(), legit, pending, max)
	if pending > max {
		t.Errorf("%d sockets pending, more than maxPendingConnections %d", pending, max)
	}
}

// TestMaxViewersPerTerminal: a terminal's subscriptions over every
// connection stop at maxViewersPerTerminal with -32004 naming the limit;
// one that leaves makes room, and the limit applies at run time.
func TestMaxViewersPerTerminal(t *testing.T) {
	h := start(t, true, func(c *config.Config) { c.Limits.MaxViewersPerTerminal = 2 })
	ch, err := h.srv.CreateTerminal(service.TerminalSpec{ID: "v", Command: []string{"/bin/sh", "-c", "exec sleep 60"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	a, b := h.dial(adminToken), h.dial(adminToken)
	s1, err := a.Subscribe(ctx, ch.URI, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Subscribe(ctx, ch.URI, nil); err != nil {
		t.Fatal(err)
	}
	_, err = b.Subscribe(ctx, ch.URI, nil)
	if rpcCode(err) != flow.ErrCodeLimitExceeded || !strings.Contains(err.Error(), "maxViewersPerTerminal") {
		t.Fatalf("a third viewer: %v, want -32004 naming maxViewersPerTerminal", err)
	}
	if err := s1.Unsubscribe(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Subscribe(ctx, ch.URI, nil); err != nil {
		t.Fatalf("a viewer after one left: %v", err)
	}
	l := h.srv.Limits()
	l.MaxViewersPerTerminal = 3
	if err := h.srv.SetLimits(l); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Subscribe(ctx, ch.URI, nil); err != nil {
		t.Fatalf("a third viewer once the limit is 3: %v", err)
	}
}
