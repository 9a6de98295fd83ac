// Command upgradebench measures an upgrade in place of bin/ahpd
// (docs/upgrade.md) under load: N terminals with a full scrollback, V
// viewers (WebSocket connections, one subscription each, spread over the
// terminals) and T TCP channels to an echo server of its own (a
// connection each). Each round asks the daemon to upgrade (the Upgrade call of
// `ahpctl daemon upgrade`, to the binary it runs) and times, from the
// request, until every viewer was closed with 1012, reconnected and had
// its terminal's snapshot again — its terminal/reset (which carries the
// screen as a preview) and the whole snapshot, scrollback included (the
// channel/ready after it) — and until every TCP channel resumed and
// echoed a line; the CPU the daemon (with the check process it
// runs) and this program's own clients spent meanwhile (they share the
// machine); and the daemon's RSS before and after. The clients offer
// permessage-deflate as a browser does (-client-deflate). Not a test
// (make test does not run it):
//
//	make bench-upgrade                              # = go run ./bench/upgradebench -ahpd bin/ahpd
//	make bench-upgrade BENCHFLAGS='-terminals 20 -viewers 100 -rounds 5'
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/ahp-dev/ahpd/bench/benchproc"
	"github.com/ahp-dev/ahpd/ctl/client"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

func main() {
	bin := flag.String("ahpd", "bin/ahpd", "the ahpd binary")
	terminals := flag.Int("terminals", 100, "terminals, each with a full scrollback")
	lines := flag.Int("lines", 10000, "scrollback lines of each terminal (each filled with 80-column lines)")
	viewers := flag.Int("viewers", 500, "viewers (WebSocket connections, one subscription each)")
	tcps := flag.Int("tcp", 20, "TCP channels to an echo server of the bench's (one WebSocket connection each), which resume after each upgrade")
	rounds := flag.Int("rounds", 3, "upgrades to time")
	compression := flag.String("compression", "deflate", "the daemon's --websocket-compression: deflate or none")
	clientDeflate := flag.Bool("client-deflate", true, "the viewers offer permessage-deflate (a browser does); the daemon compresses only with -compression deflate")
	settle := flag.Duration("settle", 5*time.Second, "how long after every viewer is back RSS is read again")
	logLevel := flag.String("log-level", "error", "the daemon's --log-level (its log goes to stderr)")
	config := flag.String("config", "", "lines of the daemon's config file, ';'-separated (default: no file), e.g. 'maxPendingConnections = 1024'")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this program (its viewers) to `file`")
	flag.Parse()
	if *terminals < 1 || *terminals > 250 || *viewers < 0 || *viewers > 2000 || *tcps < 0 || *tcps > 200 || *lines < 1 || *lines > 100000 || *rounds < 1 || *rounds > 50 {
		fmt.Fprintln(os.Stderr, "upgradebench: -terminals 1..250, -viewers 0..2000, -tcp 0..200, -lines 1..100000, -rounds 1..50")
		os.Exit(2)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "upgradebench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	p := params{bin: *bin, terminals: *terminals, lines: *lines, viewers: *viewers, tcps: *tcps, rounds: *rounds,
		compression: *compression, deflate: *clientDeflate, settle: *settle, logLevel: *logLevel, config: *config}
	if err := run(p); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "upgradebench:", err)
		os.Exit(1)
	}
}

// params are the flags.
type params struct {
	bin                             string
	terminals, lines, viewers, tcps int
	rounds                          int
	compression                     string
	deflate                         bool
	settle                          time.Duration
	logLevel                        string
	config                          string // the config file's lines, ';'-separated; "": none
}

func run(p params) error {
	terminals, lines, viewers, rounds, compression, deflate, settle := p.terminals, p.lines, p.viewers, p.rounds, p.compression, p.deflate, p.settle
	abs, err := filepath.Abs(p.bin)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "upgradebench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	conf := "none"
	if p.config != "" {
		conf = filepath.Join(dir, "config.toml")
		if err := os.WriteFile(conf, []byte(strings.ReplaceAll(p.config, ";", "\n")+"\n"), 0o600); err != nil {
			return err
		}
	}
	d, err := benchproc.StartDaemon(abs, dir, []string{"--config", conf, "--no-default-terminal", "--log-level", p.logLevel, "--websocket-compression", compression}, nil)
	if err != nil {
		return err
	}
	defer d.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	daemonc, terms := ahpv1.NewDaemonServiceClient(d.Conn), ahpv1.NewTerminalServiceClient(d.Conn)

	// Terminals: lines of 80 columns (a line number and filler) until the
	// scrollback is full, then a marker; each waits on cat afterwards.
	script := fmt.Sprintf(`awk 'BEGIN { for (i = 1; i <= %d; i++) printf "%%06d %%s\n", i, "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789a" }'; echo FILLED; exec cat`, lines+50)
	uris := make([]string, terminals)
	for i := range uris {
		r, err := terms.CreateTerminal(ctx, &ahpv1.CreateTerminalRequest{Id: "t" + strconv.Itoa(i), Command: "/bin/sh", Args: []string{"-c", script},
			Rows: 24, Cols: 80, Scrollback: int32(lines)})
		if err != nil {
			return fmt.Errorf("terminal %d: %w", i, err)
		}
		uris[i] = r.Channel.Uri
	}
	// Viewers: each waits for FILLED in its snapshot or stream first.
	vs := make([]*viewer, viewers)
	var wg sync.WaitGroup
	errs := make(chan error, viewers)
	for i := range vs {
		vs[i] = &viewer{url: d.WS(), token: d.Token, uri: uris[i%len(uris)], deflate: deflate, snaps: make(chan time.Time, 64), fulls: make(chan time.Time, 64)}
		wg.Go(func() {
			if err := vs[i].run(ctx); err != nil && ctx.Err() == nil {
				errs <- err
			}
		})
	}
	defer func() { cancel(); wg.Wait() }()
	deadline := time.Now().Add(10 * time.Minute)
	for _, v := range vs {
		if err := v.waitFilled(deadline); err != nil {
			return err
		}
	}
	// TCP channels: each echoes once before the first round.
	streams, err := openStreams(ctx, d, p.tcps, deflate)
	if err != nil {
		return err
	}
	defer func() {
		for _, st := range streams {
			st.close()
		}
	}()
	time.Sleep(time.Second) // let the fill's garbage go
	pid := d.Cmd.Process.Pid
	fmt.Printf("ahpd %s: %d terminals × %d scrollback lines of 80 columns, %d viewers, %d TCP channels, compression %s, clients offer deflate: %v\n\n", abs, terminals, lines, viewers, len(streams), compression, deflate)
	fmt.Printf("| round | request → the new binary answers | request → viewers' terminal/reset (screen): median / last | request → viewers' whole snapshot (scrollback): median / last | request → every TCP channel resumed and echoing | viewers' connection attempts | slowest viewer: closed → reset | CPU: daemon + check | CPU: the bench's clients | RSS before | RSS when all are back | RSS %v later | later / before |\n", settle)
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for round := 1; round <= rounds; round++ {
		before, err := rss(pid)
		if err != nil {
			return err
		}
		for _, v := range vs {
			v.drain()
		}
		dcpu0, bcpu0, dials0 := cpuWithChildren(pid), cpuWithChildren(os.Getpid()), dials.Load()
		start := time.Now()
		if _, err := daemonc.Upgrade(ctx, &ahpv1.UpgradeRequest{}); err != nil {
			return fmt.Errorf("upgrade: %w", err)
		}
		answered := make(chan time.Duration, 1)
		go func() { answered <- waitUpgrades(ctx, daemonc, int64(round), start) }()
		echoed := make(chan error, len(streams))
		echoes := make([]time.Duration, len(streams))
		for i, st := range streams {
			go func() {
				t, err := st.backAfter(start, round)
				echoes[i] = t.Sub(start)
				echoed <- err
			}()
		}
		screens, fulls := make([]time.Duration, len(vs)), make([]time.Duration, len(vs))
		for i, v := range vs {
			t, err := v.after(v.snaps, start, time.Now().Add(time.Minute))
			if err != nil {
				return err
			}
			screens[i] = t.Sub(start)
		}
		for i, v := range vs {
			t, err := v.after(v.fulls, start, time.Now().Add(time.Minute))
			if err != nil {
				return err
			}
			fulls[i] = t.Sub(start)
		}
		for range streams {
			if err := <-echoed; err != nil {
				return err
			}
		}
		dcpu, bcpu, ndials := cpuWithChildren(pid)-dcpu0, cpuWithChildren(os.Getpid())-bcpu0, dials.Load()-dials0
		back := <-answered
		slices.Sort(screens)
		slices.Sort(fulls)
		// The median viewer's and the last one's.
		screen, full := "–", "–"
		if n := len(vs); n > 0 {
			screen = fmt.Sprintf("%v / %v", screens[n/2].Round(time.Millisecond), screens[n-1].Round(time.Millisecond))
			full = fmt.Sprintf("%v / %v", fulls[n/2].Round(time.Millisecond), fulls[n-1].Round(time.Millisecond))
		}
		slowest := time.Duration(0)
		for _, v := range vs {
			slowest = max(slowest, v.lastGap())
		}
		after, err := rss(pid)
		if err != nil {
			return err
		}
		time.Sleep(settle)
		later, err := rss(pid)
		if err != nil {
			return err
		}
		tcpBack := "–"
		if len(echoes) > 0 {
			tcpBack = slices.Max(echoes).Round(time.Millisecond).String()
		}
		fmt.Printf("| %d | %v | %s | %s | %s | %d | %v | %.2f s | %.2f s | %.1f MiB | %.1f MiB | %.1f MiB | %.2f |\n", round, back.Round(time.Millisecond),
			screen, full, tcpBack, ndials, slowest.Round(time.Millisecond), dcpu.Seconds(), bcpu.Seconds(),
			float64(before)/(1<<20), float64(after)/(1<<20), float64(later)/(1<<20), float64(later)/float64(before))
		select {
		case err := <-errs:
			return err
		default:
		}
	}
	return nil
}

// cpuWithChildren is a process's CPU time (user and system) with that of
// its children it has waited for (the daemon's --upgrade-check run; the
// PID is the same across an execve); 0 if unreadable.
func cpuWithChildren(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 > len(b) {
		return 0
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 15 {
		return 0
	}
	var ticks int64
	for _, s := range f[11:15] { // utime, stime, cutime, cstime
		n, _ := strconv.ParseInt(s, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ
}

// waitUpgrades waits until the daemon answers with n upgrades and
// returns the time since start.
func waitUpgrades(ctx context.Context, c ahpv1.DaemonServiceClient, n int64, start time.Time) time.Duration {
	for time.Since(start) < time.Minute {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		info, err := c.GetInfo(cctx, &ahpv1.GetInfoRequest{})
		cancel()
		if err == nil && info.Upgrades >= n {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// rss is a process's resident set (VmRSS).
func rss(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// dials counts the viewers' connection attempts: one per viewer and
// round when the daemon closes none of them before its snapshot (it
// closes the oldest of more than maxPendingConnections waiting for their
// initialize, and the viewer dials again).
var dials atomic.Int64

// viewer is one WebSocket connection with one subscription, which
// reconnects at once (no backoff: the daemon is measured, not a client's
// patience) when the host closes it, and notes when each snapshot
// arrived.
type viewer struct {
	url, token, uri string
	deflate         bool
	snaps           chan time.Time // a terminal/reset arrived (whole)
	fulls           chan time.Time // a snapshot's channel/ready arrived

	mu       sync.Mutex
	filled   bool
	closedAt time.Time     // the last close by the host
	gap      time.Duration // closedAt → the next snapshot
}

func (v *viewer) run(ctx context.Context) error {
	for ctx.Err() == nil {
		dials.Add(1)
		c, _, err := client.Dial(ctx, v.url, client.Options{Token: v.token, ClientName: "upgradebench", Deflate: v.deflate})
		if err != nil {
			time.Sleep(2 * time.Millisecond) // the listener is kept: this is a refusal of another kind
			continue
		}
		err = v.serve(ctx, c)
		c.Close()
		v.mu.Lock()
		v.closedAt = time.Now()
		v.mu.Unlock()
		if code := websocket.CloseStatus(err); code != -1 && code != websocket.StatusServiceRestart {
			return fmt.Errorf("viewer of %s: closed %v", v.uri, err)
		}
	}
	return nil
}

func (v *viewer) serve(ctx context.Context, c *client.Conn) error {
	s, err := c.Subscribe(ctx, v.uri, nil)
	if err != nil {
		return err
	}
	inSnap := false // between a terminal/reset and its channel/ready
	v.mu.Lock()
	filled := v.filled
	v.mu.Unlock()
	for {
		m, err := s.Next(ctx)
		if err != nil {
			if cerr := c.Err(); cerr != nil {
				return cerr
			}
			return err
		}
		if !filled && (m.Method == "terminal/reset" || m.Method == "terminal/output") && bytes.Contains(m.Text, []byte("FILLED")) {
			// Looked for until found only: the viewers share the cores
			// with the daemon, and each snapshot is ~0.8 MB.
			filled = true
			v.mu.Lock()
			v.filled = true
			v.mu.Unlock()
		}
		if m.Method == "terminal/reset" {
			now := time.Now()
			v.mu.Lock()
			if !v.closedAt.IsZero() {
				v.gap = now.Sub(v.closedAt)
			}
			v.mu.Unlock()
			select {
			case v.snaps <- now:
			default:
			}
			inSnap = true
		}
		if m.Method == "channel/ready" && inSnap {
			inSnap = false
			select {
			case v.fulls <- time.Now():
			default:
			}
		}
		if err := s.Release(ctx, m); err != nil {
			return err
		}
	}
}

func (v *viewer) waitFilled(deadline time.Time) error {
	for {
		v.mu.Lock()
		ok := v.filled
		v.mu.Unlock()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("viewer of %s: the terminal did not fill its scrollback in time", v.uri)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// drain forgets the snapshots noted so far.
func (v *viewer) drain() {
	for {
		select {
		case <-v.snaps:
		case <-v.fulls:
		default:
			return
		}
	}
}

// after returns the first time noted on ch after start.
func (v *viewer) after(ch chan time.Time, start, deadline time.Time) (time.Time, error) {
	for {
		select {
		case t := <-ch:
			if t.After(start) {
				return t, nil
			}
		case <-time.After(time.Until(deadline)):
			return time.Time{}, fmt.Errorf("viewer of %s: no snapshot within a minute of the upgrade", v.uri)
		}
	}
}

func (v *viewer) lastGap() time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.gap
}

// openStreams starts an echo server, allows it, and opens n TCP channels
// to it, each on a WebSocket connection of its own; each echoes once.
func openStreams(ctx context.Context, d *benchproc.Daemon, n int, deflate bool) ([]*stream, error) {
	if n == 0 {
		return nil, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() { // the echo server, until the bench ends
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	if _, err := ahpv1.NewTCPServiceClient(d.Conn).AllowTCP(ctx, &ahpv1.AllowTCPRequest{Rule: l.Addr().String()}); err != nil {
		return nil, fmt.Errorf("allowing the echo server: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	var streams []*stream
	for i := 0; i < n; i++ {
		s := &stream{resumed: make(chan time.Time, 8)}
		s.st, err = client.OpenTCP(ctx, client.TCPOptions{
			Dial: func(ctx context.Context) (*client.Conn, error) {
				c, _, err := client.Dial(ctx, d.WS(), client.Options{Token: d.Token, ClientName: "upgradebench", Deflate: deflate})
				if err != nil {
					return nil, err
				}
				s.mu.Lock()
				old := s.conn
				s.conn = c
				s.mu.Unlock()
				if old != nil {
					old.Close() // closed by the host: an upgrade
				}
				return c, nil
			},
			Host: "127.0.0.1", Port: port,
			// At once, as the viewers: the daemon is measured, not a
			// client's patience.
			MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond,
			OnEvent: func(e client.TCPEvent) {
				if e.Kind == client.TCPResumed {
					select {
					case s.resumed <- time.Now():
					default:
					}
				}
			},
		})
		if err != nil {
			return nil, fmt.Errorf("TCP channel %d: %w", i, err)
		}
		streams = append(streams, s)
		if err := s.echo(0); err != nil {
			return nil, fmt.Errorf("TCP channel %d: %w", i, err)
		}
	}
	return streams, nil
}

// stream is a TCP channel to the echo server. Its stream resumes on a new
// connection when the host closes its own (1012).
type stream struct {
	st      *client.TCPStream
	resumed chan time.Time // the stream resumed

	mu   sync.Mutex
	conn *client.Conn // the connection in use
}

// backAfter waits for the stream to resume after start, then for an echo
// through it, and returns when the echo came back.
func (s *stream) backAfter(start time.Time, seq int) (time.Time, error) {
	deadline := time.After(time.Minute)
	for {
		select {
		case t := <-s.resumed:
			if t.Before(start) {
				continue
			}
			if err := s.echo(seq); err != nil {
				return time.Time{}, fmt.Errorf("TCP channel %s after the upgrade: %w", s.st.Channel(), err)
			}
			return time.Now(), nil
		case <-deadline:
			return time.Time{}, fmt.Errorf("TCP channel %s: not resumed within a minute of the upgrade", s.st.Channel())
		}
	}
}

// echo writes a numbered line and reads it back.
func (s *stream) echo(seq int) error {
	msg := fmt.Sprintf("%08d\n", seq)
	if _, err := s.st.Write([]byte(msg)); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(s.st, got); err != nil {
		return err
	}
	if string(got) != msg {
		return fmt.Errorf("echo %q, want %q", got, msg)
	}
	return nil
}

func (s *stream) close() {
	s.st.Abort()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.Close()
	}
}
