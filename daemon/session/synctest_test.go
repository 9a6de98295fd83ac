package session

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/coder/websocket"

	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/internal/wire"
)

// The connection's timing — heartbeat, output stall, initialize timeout,
// how often an idle connection wakes — tested in a synctest bubble over an
// in-memory transport: fake time, so the deadlines are checked exactly and
// the tests take no real time. (coder/websocket builds a Conn only from
// an HTTP upgrade, so the transport here is the interface conn uses, not a
// WebSocket over net.Pipe.)

var errPipeClosed = errors.New("pipe closed")

// pipe is an in-memory transport: the test writes what the client sends
// to in and reads what the connection writes from out.
type pipe struct {
	in     chan []byte
	out    chan []byte
	pongs  atomic.Bool // answer pings
	stall  atomic.Bool // Write blocks, as on a socket whose peer stopped reading
	closed chan struct{}

	mu       sync.Mutex
	once     sync.Once
	code     websocket.StatusCode // of Close; 0 for CloseNow
	reason   string
	closeNow bool
}

func newPipe() *pipe {
	return &pipe{in: make(chan []byte, 16), out: make(chan []byte, 64), closed: make(chan struct{})}
}

func (p *pipe) Read(ctx context.Context) (websocket.MessageType, []byte, error) {
	select {
	case b := <-p.in:
		return websocket.MessageText, b, nil
	case <-ctx.Done():
		return 0, nil, ctx.Err()
	case <-p.closed:
		return 0, nil, errPipeClosed
	}
}

func (p *pipe) Write(ctx context.Context, _ websocket.MessageType, b []byte) error {
	if p.stall.Load() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.closed:
			return errPipeClosed
		}
	}
	select {
	case p.out <- append([]byte(nil), b...):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-p.closed:
		return errPipeClosed
	}
}

func (p *pipe) Ping(ctx context.Context) error {
	if p.pongs.Load() {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-p.closed:
		return errPipeClosed
	}
}

func (p *pipe) end(code websocket.StatusCode, reason string, now bool) {
	p.once.Do(func() {
		p.mu.Lock()
		p.code, p.reason, p.closeNow = code, reason, now
		p.mu.Unlock()
		close(p.closed)
	})
}

func (p *pipe) Close(code websocket.StatusCode, reason string) error {
	p.end(code, reason, false)
	return nil
}

func (p *pipe) CloseNow() error {
	p.end(0, "", true)
	return nil
}

// closing returns how the connection closed the pipe.
func (p *pipe) closing() (code websocket.StatusCode, reason string, now bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code, p.reason, p.closeNow
}

const pipeToken = "ahp_test-pipe-token-0123456789abcdef"

// countingHost counts Limits calls: every deadline check makes one, so
// they show how often an idle connection wakes.
type countingHost struct {
	testHost
	calls atomic.Int64
}

func (h *countingHost) Limits() config.Limits {
	h.calls.Add(1)
	return h.testHost.Limits()
}

// servePipe starts a connection over a new pipe, in the current bubble.
// done yields serveConn's result when the connection has ended.
func servePipe(t *testing.T, mutate func(*config.Limits)) (*pipe, *countingHost, <-chan bool) {
	t.Helper()
	p, srv, done := servePipeServer(t, mutate)
	return p, srv.host.(*countingHost), done
}

// servePipeServer is servePipe, returning the Server.
func servePipeServer(t *testing.T, mutate func(*config.Limits)) (*pipe, *Server, <-chan bool) {
	t.Helper()
	cfg := config.Config{Listen: "127.0.0.1:0", StateDir: t.TempDir(), NoDefaultTerminal: true, WebsocketCompression: "none"}
	if mutate != nil {
		mutate(&cfg.Limits)
	}
	srv := newTestServer(cfg, auth.NewTokens(pipeToken))
	host := &countingHost{testHost: srv.host.(testHost)}
	srv.host = host
	p := newPipe()
	p.pongs.Store(true)
	done := make(chan bool, 1)
	go func() { done <- srv.serveConn(p, "pipe", nil, "") }()
	return p, srv, done
}

// initializePipe sends initialize and reads its result.
func initializePipe(t *testing.T, p *pipe) {
	t.Helper()
	p.in <- []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"ahp/1","token":"` + pipeToken + `","client":{"name":"t","version":"0"}}}`)
	if got := string(<-p.out); !strings.Contains(got, `"result"`) {
		t.Fatalf("initialize: %s", got)
	}
}

// TestHeartbeatSilentPeer: a peer that answers no ping and sends nothing
// is closed with 1008 after three heartbeat intervals; one that answers
// stays.
func TestHeartbeatSilentPeer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const hb = time.Second
		p, _, done := servePipe(t, func(l *config.Limits) { l.HeartbeatInterval = hb })
		initializePipe(t, p)
		// Answering pings for 10 intervals keeps it open.
		time.Sleep(10 * hb)
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("a peer that answers pings was closed")
		default:
		}
		p.pongs.Store(false)
		silent := time.Now()
		<-done
		took := time.Since(silent)
		code, reason, _ := p.closing()
		if code != websocket.StatusPolicyViolation || !strings.HasPrefix(reason, wire.ReasonNoPong) {
			t.Fatalf("closed with %d %q, want 1008 %q…", code, reason, wire.ReasonNoPong)
		}
		// The last pong came at most one interval before silence began.
		if took < 2*hb || took > 3*hb+maxCheckInterval {
			t.Fatalf("closed %v after the pongs stopped, want within three intervals (%v) of the last", took, 3*hb)
		}
	})
}

// TestInitializeTimeoutExact: a connection that never initializes is
// closed with 1008 at initializeTimeout, not at a coarse tick.
func TestInitializeTimeoutExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 200 * time.Millisecond
		start := time.Now()
		p, _, done := servePipe(t, func(l *config.Limits) { l.InitializeTimeout = timeout })
		if initialized := <-done; initialized {
			t.Fatal("serveConn reports an initialized connection")
		}
		took := time.Since(start)
		code, reason, _ := p.closing()
		if code != websocket.StatusPolicyViolation || !strings.Contains(reason, "initialize not received") {
			t.Fatalf("closed with %d %q, want 1008 initialize not received", code, reason)
		}
		if took < timeout || took > timeout+10*time.Millisecond {
			t.Fatalf("closed %v after the upgrade, want at the %v initializeTimeout", took, timeout)
		}
	})
}

// TestOutputStallCloses: when the socket takes nothing for maxOutputStall
// while the connection has something to write, it is dropped without a
// close frame (none could get through).
func TestOutputStallCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stall = 2 * time.Second
		p, _, done := servePipe(t, func(l *config.Limits) { l.MaxOutputStall = stall })
		initializePipe(t, p)
		p.stall.Store(true)
		stalled := time.Now()
		p.in <- []byte(`{"jsonrpc":"2.0","id":2,"method":"channels/list","params":{}}`)
		<-done
		took := time.Since(stalled)
		_, _, now := p.closing()
		if !now {
			t.Fatal("a stalled connection was closed with a close frame, want CloseNow")
		}
		if took < stall || took > stall+maxCheckInterval {
			t.Fatalf("dropped %v after the socket stalled, want at maxOutputStall (%v)", took, stall)
		}
	})
}

// TestIdleConnectionWakesRarely: an idle, initialized connection checks
// its deadlines about once a second (maxCheckInterval): each wake-up costs
// an idle daemon CPU (a 100 ms tick cost an idle viewer 0.2 % of a core).
func TestIdleConnectionWakesRarely(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, host, done := servePipe(t, nil) // heartbeat 15 s: no ping in the window
		initializePipe(t, p)
		synctest.Wait()
		before := host.calls.Load()
		const idle = 10 * time.Second
		time.Sleep(idle)
		synctest.Wait()
		// Each wake-up reads the limits twice (checkTimers, nextCheck);
		// the bound is the target's (a second), not maxCheckInterval's.
		n := host.calls.Load() - before
		if max := 2 * int64(idle/time.Second+1); n > max || n == 0 {
			t.Fatalf("an idle connection read its limits %d times in %v, want 1 to %d (about one wake-up a second)", n, idle, max)
		}
		p.CloseNow()
		<-done
	})
}
