package daemon_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/ahp-dev/ahpd/bench/termbench"
	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/flow"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// TestMemoryBudgetUnderAttack runs the attack of issue 12 against the ahpd
// binary (built without -race, so its memory is the deployed one's): view
// clients subscribe many times to a terminal holding a 10,000-line log,
// asking for the largest windows and messages, read every frame and never
// credit. The daemon's peak RSS (VmHWM) must stay under a bound computed
// from the limits, and a viewer of another terminal on another connection
// keeps receiving meanwhile. Then the attacks of issue 36 at their scale
// (attack_process_test.go): a view token's 64 × 1,024 subscriptions to a
// flooding terminal and to a telemetry channel, with revocation and
// shutdown under them, and a control token's retained TCP channels and
// create-and-drop churn.
func TestMemoryBudgetUnderAttack(t *testing.T) {
	bin := buildBins(t, false)
	for _, tc := range []struct {
		name        string
		conns, subs int
	}{
		{"OneConnection1024Subscriptions", 1, 1024},
		{"16Connections64Subscriptions", 16, 64},
	} {
		t.Run(tc.name, func(t *testing.T) { testMemoryAttack(t, bin, tc.conns, tc.subs) })
	}
	t.Run("ReturnedAfterLoad", func(t *testing.T) { testMemoryAfterLoad(t, bin) })
	t.Run("ViewToken64Connections1024SubscriptionsTerminal", func(t *testing.T) { testViewAttack(t, bin, "terminal") })
	t.Run("ViewToken64Connections1024SubscriptionsTelemetry", func(t *testing.T) { testViewAttack(t, bin, "telemetry") })
	t.Run("TCPRetentionAndChurn", func(t *testing.T) { testTCPAttack(t, bin) })
}

// testMemoryAfterLoad: after a 256 MiB cat to 8 viewers asking for the
// largest limits (the daemon builds messages of up to 16 MiB for each, so
// its heap grows to hundreds of MiB), once the viewers and the terminal
// are gone, the live heap is back within 4 MiB of its idle figure and RSS
// within 32 MiB. Issue 12 asks for that within 60 s; the Go runtime alone
// gets there in about 30 s (measured with the returner disabled), the
// daemon's memory returner in about 1 s, so the test allows 20 s (a
// loaded machine delays the returner's timer and its GC, not by 30 s).
func testMemoryAfterLoad(t *testing.T, bin string) {
	const viewers, within = 8, 20 * time.Second
	d := startMetricsDaemon(t, bin, "")
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	pid := d.p.cmd.Process.Pid
	// The viewers are this process's goroutines decoding 2 GiB between
	// them; on a loaded machine one may not read for the 45 s after which
	// a heartbeat counts its socket as stalled (1008). The test is about
	// memory, not the stall policy.
	if _, err := d.limits.SetLimits(ctx, &ahpv1.SetLimitsRequest{
		Limits:     &ahpv1.Limits{HeartbeatInterval: durationpb.New(10 * time.Minute), MaxOutputStall: durationpb.New(10 * time.Minute)},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"heartbeat_interval", "max_output_stall"}},
	}); err != nil {
		t.Fatal(err)
	}
	liveHeap := func() int64 { return int64(d.metric(t, "go_memstats_heap_alloc_bytes")) }
	idleHeap, idleRSS := liveHeap(), vmKiB(t, pid, "VmRSS")<<10

	r, err := d.terms.CreateTerminal(ctx, &ahpv1.CreateTerminalRequest{Id: "cat", Command: "/bin/sh",
		Args: []string{"-c", `read x; yes 'the quick brown fox jumps over the lazy dog 0123456789' | head -c 268435456; printf 'ALL%sDONE\n' X; exec sleep 600`}})
	if err != nil {
		t.Fatal(err)
	}
	uri := r.GetChannel().GetUri()
	url := strings.Replace(d.base, "http://", "ws://", 1) + "/v1/ws"
	subs, conns := make([]*client.Sub, viewers), make([]*client.Conn, viewers)
	for i := range subs {
		// Without compression, the daemon keeps up with the PTY and
		// builds the largest messages.
		c, _, err := client.Dial(ctx, url, client.Options{Token: d.adminToken(t)})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
		// The largest limits a client may ask for.
		if subs[i], err = c.Subscribe(ctx, uri, &flow.ReceiveLimits{WindowBytes: 64 << 20, MaximumFrameBytes: 1 << 20, MaximumMessageBytes: 16 << 20}); err != nil {
			t.Fatal(err)
		}
		if err := termbench.UntilReady(ctx, subs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := subs[0].Send(ctx, termbench.Input("\r")); err != nil {
		t.Fatal(err)
	}
	// Until the end of the output (a slow viewer gets snapshots in place
	// of some of it, so count nothing, look for the mark), while sampling
	// the daemon's RSS.
	errs := make(chan error, viewers)
	var got atomic.Int64
	for _, sub := range subs {
		go func() {
			n, _, err := termbench.Drain(ctx, sub, "ALLXDONE")
			got.Add(n)
			errs <- err
		}()
	}
	var peakRSS int64
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for n := 0; n < viewers; {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatalf("a viewer, after %d bytes in all: %v", got.Load(), err)
			}
			n++
		case <-tick.C:
			peakRSS = max(peakRSS, vmKiB(t, pid, "VmRSS")<<10)
		}
	}
	if peakRSS <= idleRSS+32<<20 {
		t.Fatalf("the load took RSS only from %d to %d MiB: it does not test the return (want a peak above idle + 32 MiB)", idleRSS>>20, peakRSS>>20)
	}
	for _, c := range conns {
		c.Close()
	}
	if _, err := d.chans.CloseChannel(ctx, &ahpv1.CloseChannelRequest{Channel: uri}); err != nil {
		t.Fatal(err)
	}
	closed := time.Now()
	var heap, rss int64
	for {
		heap, rss = liveHeap(), vmKiB(t, pid, "VmRSS")<<10
		if heap <= idleHeap+4<<20 && rss <= idleRSS+32<<20 {
			break
		}
		if time.Since(closed) > within {
			t.Fatalf("%v after the load: live heap %.1f MiB (idle %.1f), RSS %d MiB (idle %d, peak %d); want within 4 and 32 MiB of idle",
				within, float64(heap)/(1<<20), float64(idleHeap)/(1<<20), rss>>20, idleRSS>>20, peakRSS>>20)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("after a 256 MiB cat to %d viewers (%d MiB reached them; snapshots stood in for any gap): back near idle %v after the terminal closed: live heap %.1f MiB (idle %.1f), RSS %d MiB (idle %d, peak %d)",
		viewers, got.Load()>>20, time.Since(closed).Round(100*time.Millisecond), float64(heap)/(1<<20), float64(idleHeap)/(1<<20), rss>>20, idleRSS>>20, peakRSS>>20)
}

func testMemoryAttack(t *testing.T, bin string, conns, subs int) {
	d := startMetricsDaemon(t, bin, "")
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	mk := func(id, script string) string { return d.shell(ctx, t, id, script) }
	// 10,000 lines of about 140 characters each, as a build log has.
	done := filepath.Join(d.dir, "log.done")
	logURI := mk("log", `i=0; while [ $i -lt 10000 ]; do printf '%05d %0130d\n' $i 0; i=$((i+1)); done; touch `+done+`; exec sleep 600`)
	tickURI := mk("tick", `while :; do echo tick; sleep 0.05; done`)
	pid := d.p.cmd.Process.Pid
	// Let the whole log reach the emulator (the shell's loop takes a
	// while on a loaded machine), then take the idle figure.
	for {
		if _, err := os.Stat(done); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the log's 10,000 lines were not written")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	idle := vmKiB(t, pid, "VmRSS")

	// maxBufferedBytes, maxTotalBufferedBytes and the largest message a
	// client may ask for, at their defaults (PROTOCOL.md §9).
	const maxBuffered, maxTotal, maxMessage = 64 << 20, 512 << 20, 16 << 20
	// Each connection's started messages and control lane stay within
	// maxBufferedBytes, all connections' within maxTotalBufferedBytes
	// (UTF-16 bytes: a text takes at most as many UTF-8 bytes here,
	// ASCII), plus one unsplittable message each; a text's buffer may
	// have twice its length's capacity; an idle viewer keeps a buffer of
	// at most 64 KiB; the garbage collector lets the heap grow to twice
	// what is live.
	n := int64(conns)
	held := 2*(min(n*maxBuffered, maxTotal)+n*maxMessage) + n*int64(subs)*64<<10
	// The soft memory limit (2 × maxTotalBufferedBytes + 256 MiB) caps
	// the collector's headroom.
	bound := idle*1024 + min(2*held, 2*maxTotal+256<<20) + 64<<20
	t.Logf("bound: idle RSS %d MiB + min(2 × %d MiB held, the soft memory limit) + 64 MiB = %d MiB", idle>>10, held>>20, bound>>20)

	// The attack needs no more than a view token of the log terminal.
	tok, err := d.tokens.CreateToken(ctx, &ahpv1.CreateTokenRequest{Channels: []string{logURI}, Role: ahpv1.Role_ROLE_VIEW})
	if err != nil {
		t.Fatal(err)
	}
	viewToken := tok.GetSecret()
	url := strings.Replace(d.base, "http://", "ws://", 1) + "/v1/ws"

	// The fast viewer: another connection, another terminal, releasing
	// everything it gets.
	fast, _, err := client.Dial(ctx, url, client.Options{Token: d.adminToken(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	tick, err := fast.Subscribe(ctx, tickURI, nil)
	if err != nil {
		t.Fatal(err)
	}

	attack, stop := context.WithCancel(ctx)
	var wg, sending sync.WaitGroup
	var frames sync.Map
	var answers atomic.Int64 // responses to the subscribes
	socks := make([]*websocket.Conn, conns)
	for i := range conns {
		ws := attacker(t, attack, url, viewToken)
		socks[i] = ws
		wg.Go(func() {
			defer ws.CloseNow()
			n := 0
			for {
				_, b, err := ws.Read(attack)
				if err != nil {
					frames.Store(i, n)
					return
				}
				if bytes.HasPrefix(b, []byte(`{"jsonrpc":"2.0","id":`)) {
					answers.Add(1)
				}
				n++
			}
		})
	}
	for _, ws := range socks {
		subscribeAll(attack, &sending, ws, logURI, subs)
	}
	// Every subscribe sent and answered (subscribed, or refused when the
	// budgets are spent), however long the machine takes.
	sending.Wait()
	for answers.Load() < int64(conns*subs) {
		if ctx.Err() != nil {
			t.Fatalf("%d of %d subscribes answered when the test's time ran out", answers.Load(), conns*subs)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Four seconds of attack; the fast viewer must keep getting ticks (a
	// tick every 50 ms; 30 s without one is a stall, not a busy machine).
	ticks := 0
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		mctx, mcancel := context.WithTimeout(ctx, 30*time.Second)
		m, err := tick.Next(mctx)
		mcancel()
		if err != nil {
			t.Fatalf("the fast viewer got nothing for 30 s during the attack (after %d messages): %v", ticks, err)
		}
		if err := tick.Release(ctx, m); err != nil {
			t.Fatal(err)
		}
		ticks++
	}
	peak := vmKiB(t, pid, "VmHWM") * 1024
	heap := int64(d.metric(t, "go_memstats_heap_inuse_bytes"))
	stop()
	wg.Wait()
	total := 0
	frames.Range(func(_, v any) bool { total += v.(int); return true })
	t.Logf("peak RSS %d MiB (idle %d MiB, bound %d MiB), heap in use at the end %d MiB; attackers read %d messages; the fast viewer %d",
		peak>>20, idle>>10, bound>>20, heap>>20, total, ticks)
	if total <= conns*subs {
		t.Errorf("attackers read %d messages for %d subscriptions: answers only, no output; the attack did not run", total, conns*subs)
	}
	if peak > bound {
		t.Errorf("ahpd's peak RSS %d MiB > bound %d MiB", peak>>20, bound>>20)
	}
}

// attacker opens a raw connection, initializes it and returns it for the
// caller to read.
func attacker(t *testing.T, ctx context.Context, url, token string) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: []string{"ahp.v1"}})
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(64 << 20)
	init := fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"ahp/1","token":%s,"client":{"name":"attack","version":"1"},"capabilities":{"flowControl":true}}}`, strconv.Quote(token))
	if err := ws.Write(ctx, websocket.MessageText, []byte(init)); err != nil {
		t.Fatal(err)
	}
	_, resp, err := ws.Read(ctx)
	if err != nil {
		t.Fatalf("attacker: initialize: %v", err)
	}
	if !strings.Contains(string(resp), `"id":0,"result"`) {
		t.Fatalf("attacker: initialize answered %.300s", resp)
	}
	return ws
}

// subscribeAll sends subs subscribes to uri on ws, asking for the largest
// limits, from a goroutine counted in sending. Callers initialize every
// attacker first (a token whose budget the others' subscriptions spent is
// refused at initialize) and read each from the start: a client that
// sends a thousand subscribes before it reads anything stalls itself on
// the daemon's backpressure (the run loop stops taking requests while
// their responses and snapshots wait for the socket), which on a loaded
// machine outlasted the test's deadline.
func subscribeAll(ctx context.Context, sending *sync.WaitGroup, ws *websocket.Conn, uri string, subs int) {
	sending.Go(func() {
		for i := range subs {
			msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscribe","params":{"channel":%q,"flowControl":{"receive":{"windowBytes":67108864,"maximumFrameBytes":1048576,"maximumMessageBytes":16777216}}}}`, i+1, uri)
			if err := ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
				// The daemon closed the connection (revocation and
				// shutdown close it) and the reader closed its end:
				// what the attack achieved is the caller's to judge.
				return
			}
		}
	})
}

// vmKiB reads a field such as VmRSS or VmHWM (KiB) of /proc/PID/status.
func vmKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	n, err := termbench.StatusKiB(pid, field)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
