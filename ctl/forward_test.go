package ctl_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/ctl/client"
)

// These tests run ahpctl forward (and, for fault injection, the client's
// TCPStream in this process) over a real daemon to TCP servers on
// 127.0.0.1 that the daemon's allow-list admits (its config file's
// tcpAllow).

// tcpServer is a loopback TCP server run by a test.
type tcpServer struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex // guards conns
	conns []net.Conn
}

func newTCPServer(t *testing.T, serve func(*net.TCPConn)) *tcpServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &tcpServer{ln: ln}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Go(func() { defer c.Close(); serve(c.(*net.TCPConn)) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *tcpServer) addr() string { return s.ln.Addr().String() }

// echoServe copies what it reads back and half-closes after the peer's EOF.
func echoServe(c *net.TCPConn) {
	_, _ = io.Copy(c, c)
	_ = c.CloseWrite()
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// startTCPDaemon starts ahpd whose allow-list admits targets.
func startTCPDaemon(t *testing.T, targets ...string) *daemonProc {
	t.Helper()
	quoted := make([]string, len(targets))
	for i, a := range targets {
		quoted[i] = strconv.Quote(a)
	}
	cfg := filepath.Join(t.TempDir(), "ahpd.toml")
	if err := os.WriteFile(cfg, []byte("tcpAllow = ["+strings.Join(quoted, ", ")+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return startDaemonWith(t, []string{"--config", cfg}, nil)
}

// forwardProc is a running ahpctl forward.
type forwardProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	addr   string // where it listens
	mu     sync.Mutex
	stderr []string
	sig    chan struct{}
	exited chan error
}

var listeningRE = regexp.MustCompile(`^forward: listening on (\S+),`)

// startForward runs ahpctl forward with args (flags and both positional
// arguments) and waits until it listens. env entries are added.
func startForward(t *testing.T, d *daemonProc, env []string, args ...string) *forwardProc {
	t.Helper()
	f := &forwardProc{t: t, sig: make(chan struct{}, 1), exited: make(chan error, 1)}
	f.cmd = exec.Command(d.ahpctl, append([]string{"--control", d.control, "forward"}, args...)...)
	f.cmd.Env = append(append(os.Environ(), "AHP_URL=", "AHP_TOKEN="), env...)
	pipe, err := f.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			f.mu.Lock()
			f.stderr = append(f.stderr, sc.Text())
			f.mu.Unlock()
			select {
			case f.sig <- struct{}{}:
			default:
			}
		}
	}()
	go func() {
		<-done
		f.exited <- f.cmd.Wait()
	}()
	t.Cleanup(func() {
		if f.cmd.ProcessState == nil {
			_ = f.cmd.Process.Kill()
			<-f.exited
		}
		if t.Failed() {
			t.Logf("ahpctl forward stderr:\n%s", f.log())
		}
	})
	if slices.Contains(args, "--quiet") {
		return f // no listening line: the caller knows the address
	}
	if m := f.waitLine(listeningRE); m != nil {
		f.addr = m[1]
	}
	return f
}

func (f *forwardProc) log() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.stderr, "\n")
}

// waitLine waits for a stderr line matching re and returns its submatches;
// nil if forward exited first (the exit is kept for wait).
func (f *forwardProc) waitLine(re *regexp.Regexp) []string {
	f.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		f.mu.Lock()
		for _, l := range f.stderr {
			if m := re.FindStringSubmatch(l); m != nil {
				f.mu.Unlock()
				return m
			}
		}
		f.mu.Unlock()
		select {
		case <-f.sig:
		case err := <-f.exited:
			f.exited <- err
			f.mu.Lock()
			for _, l := range f.stderr {
				if m := re.FindStringSubmatch(l); m != nil {
					f.mu.Unlock()
					return m
				}
			}
			f.mu.Unlock()
			return nil
		case <-deadline:
			f.t.Fatalf("ahpctl forward: no stderr line %q within 30s:\n%s", re, f.log())
		}
	}
}

// wait waits for forward's exit and returns its status.
func (f *forwardProc) wait() int {
	f.t.Helper()
	select {
	case err := <-f.exited:
		f.exited <- err
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			f.t.Fatal(err)
		}
		return 0
	case <-time.After(30 * time.Second):
		f.t.Fatalf("ahpctl forward did not exit within 30s:\n%s", f.log())
		return -1
	}
}

// stop sends SIGTERM and wants exit 0.
func (f *forwardProc) stop() {
	f.t.Helper()
	_ = f.cmd.Process.Signal(syscall.SIGTERM)
	if code := f.wait(); code != 0 {
		f.t.Fatalf("ahpctl forward exit %d after SIGTERM, want 0", code)
	}
}

// roundTrip sends size random bytes through addr, reads what comes back
// until EOF, and checks it is the same stream (sha256 both ways).
func roundTrip(addr string, size int) (time.Duration, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	start := time.Now()
	sent := sha256.New()
	werr := make(chan error, 1)
	go func() {
		r := io.TeeReader(io.LimitReader(rand.Reader, int64(size)), sent)
		_, err := io.CopyBuffer(c, r, make([]byte, 256<<10))
		if err == nil {
			err = c.(*net.TCPConn).CloseWrite()
		}
		werr <- err
	}()
	got := sha256.New()
	n, err := io.CopyBuffer(got, c, make([]byte, 256<<10))
	if err != nil {
		return 0, fmt.Errorf("read after %d bytes: %w", n, err)
	}
	if err := <-werr; err != nil {
		return 0, fmt.Errorf("write: %w", err)
	}
	if n != int64(size) {
		return 0, fmt.Errorf("read %d bytes back, want %d", n, size)
	}
	if !bytes.Equal(sent.Sum(nil), got.Sum(nil)) {
		return 0, errors.New("the bytes read back differ from those sent (sha256)")
	}
	return time.Since(start), nil
}

// transferSize is 64 MiB each way; with -race (ahpd and ahpctl built with
// it too, about 20 times slower here) the same test runs with 4 MiB so
// that it stays within the package's time budget.
func transferSize() int {
	if raceEnabled {
		return 4 << 20
	}
	return 64 << 20
}

// TestE2EForwardEcho: three concurrent connections through one forward,
// each its own TCP channel to a real echo server, each carrying
// transferSize random bytes both ways; every stream comes back identical.
// Then SIGTERM ends forward with exit 0.
func TestE2EForwardEcho(t *testing.T) {
	echo := newTCPServer(t, echoServe)
	d := startTCPDaemon(t, echo.addr())
	f := startForward(t, d, nil, "127.0.0.1:0", echo.addr())
	if f.addr == "" {
		t.Fatalf("forward did not start:\n%s", f.log())
	}
	size := transferSize()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	took := make([]time.Duration, 3)
	for i := range 3 {
		wg.Go(func() { took[i], errs[i] = roundTrip(f.addr, size) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		t.Logf("connection %d: %d MiB each way in %v (%.1f MiB/s each way)", i, size>>20, took[i].Round(time.Millisecond), float64(size>>20)/took[i].Seconds())
	}
	// Each connection said opened (with its channel) and closed (with
	// the bytes each way).
	closed := regexp.MustCompile(`^forward: #\d+ from \S+: (ahp-tcp:/\S+) closed: sent (\d+) bytes, received (\d+) bytes$`)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		for _, l := range strings.Split(f.log(), "\n") {
			if m := closed.FindStringSubmatch(l); m != nil && m[2] == strconv.Itoa(size) && m[3] == strconv.Itoa(size) {
				n++
			}
		}
		if n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 closed lines with %d bytes each way:\n%s", n, size, f.log())
		}
		time.Sleep(20 * time.Millisecond) // polling another process's output
	}
	if opened := regexp.MustCompile(`(?m)^forward: #\d+ from \S+: opened ahp-tcp:/\S+ \(window \d+[KM]iB\)$`).FindAllString(f.log(), -1); len(opened) != 3 {
		t.Fatalf("opened lines: %q", opened)
	}
	// The channels ended with their connections.
	waitNoChannels(t, d)
	f.stop()
}

// waitNoChannels waits until the daemon lists no channel.
func waitNoChannels(t *testing.T, d *daemonProc) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out := strings.TrimSpace(d.mustCtl("channels", "list", "-o", "json"))
		if out == "[]" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("channels still listed: %s", out)
		}
		time.Sleep(50 * time.Millisecond) // polling another process's state
	}
}

// TestE2EForwardHalfClose: a half-close passes each way. The target
// speaks first and closes its half while the local side goes on writing;
// then the local side closes its half and the target sees it all.
func TestE2EForwardHalfClose(t *testing.T) {
	got := make(chan string, 1)
	banner := newTCPServer(t, func(c *net.TCPConn) {
		_, _ = c.Write([]byte("hello from the target\n"))
		_ = c.CloseWrite()
		b, _ := io.ReadAll(c)
		got <- string(b)
	})
	d := startTCPDaemon(t, banner.addr())
	tok := strings.TrimSpace(d.mustCtl("token", "create", "--role", "control"))
	// Remotely, with a token file: no control socket needed.
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := startForward(t, d, nil, "--url", "http://"+d.addr, "--token-file", tokFile, "127.0.0.1:0", banner.addr())
	if f.addr == "" {
		t.Fatalf("forward did not start:\n%s", f.log())
	}
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	b, err := io.ReadAll(c) // up to the target's EOF, passed on as CloseWrite
	if err != nil || string(b) != "hello from the target\n" {
		t.Fatalf("read %q, %v; want the banner, then EOF", b, err)
	}
	// Our half is still open: write, then close it.
	if _, err := c.Write([]byte("written after the target's EOF")); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != "written after the target's EOF" {
			t.Fatalf("the target read %q", s)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the target saw no EOF")
	}
	f.waitLine(regexp.MustCompile(`closed: sent 30 bytes, received 22 bytes$`))
	waitNoChannels(t, d)

	// SIGTERM with a connection open: forward exits 0 and the local
	// connection ends.
	c, err = net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	b = make([]byte, 22)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	f.stop()
	if _, err := io.ReadAll(c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("local connection after forward's SIGTERM: %v, want it closed", err)
	}
}

// TestE2EForwardChannelURI: forward serves a channel made with 'ahpctl
// tcp create' to its first local connection, refuses a second one while
// it is served, and exits 0 once the channel has ended. --quiet prints
// nothing.
func TestE2EForwardChannelURI(t *testing.T) {
	echo := newTCPServer(t, echoServe)
	d := startTCPDaemon(t, echo.addr())
	uri := strings.TrimSpace(d.mustCtl("tcp", "create", echo.addr()))
	if !strings.HasPrefix(uri, "ahp-tcp:/") {
		t.Fatalf("tcp create printed %q", uri)
	}
	addr := closedPort(t)
	// By the channel's bare ID (the same as the URI when no other channel
	// has it).
	f := startForward(t, d, nil, "--quiet", addr, strings.TrimPrefix(uri, "ahp-tcp:/"))
	var c net.Conn
	deadline := time.Now().Add(20 * time.Second)
	for {
		var err error
		if c, err = net.Dial("tcp", addr); err == nil {
			break
		}
		if time.Now().After(deadline) || f.cmd.ProcessState != nil {
			t.Fatalf("forward does not listen on %s: %v\n%s", addr, err, f.log())
		}
		time.Sleep(20 * time.Millisecond) // waiting for another process to listen
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
		t.Fatalf("echo through the channel: %q, %v", b, err)
	}
	// A second local connection is refused: closed without a byte.
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c2.SetDeadline(time.Now().Add(20 * time.Second))
	if b, err := io.ReadAll(c2); len(b) != 0 || err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("second local connection: read %q, %v; want it closed", b, err)
	}
	c2.Close()
	// The first goes on; its end ends the channel and forward.
	if _, err := c.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(c); err != nil || string(b) != "pong" {
		t.Fatalf("echo then EOF: %q, %v", b, err)
	}
	if code := f.wait(); code != 0 {
		t.Fatalf("forward exit %d after its channel ended, want 0", code)
	}
	if log := f.log(); log != "" {
		t.Fatalf("--quiet printed:\n%s", log)
	}
	waitNoChannels(t, d)
}

// TestE2EForwardTargetReset: a target that resets its connection resets
// the local one too.
func TestE2EForwardTargetReset(t *testing.T) {
	rst := newTCPServer(t, func(c *net.TCPConn) {
		b := make([]byte, 5)
		if _, err := io.ReadFull(c, b); err != nil {
			return
		}
		_ = c.SetLinger(0)
		c.Close() // RST
	})
	d := startTCPDaemon(t, rst.addr())
	f := startForward(t, d, nil, "127.0.0.1:0", rst.addr())
	if f.addr == "" {
		t.Fatalf("forward did not start:\n%s", f.log())
	}
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(c)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("local read after the target's reset: %v, want ECONNRESET", err)
	}
	f.waitLine(regexp.MustCompile(`closed: sent \d+ bytes, received \d+ bytes \(the target reset the connection \(.*connection reset by the target\)\)$`))
	// forward goes on serving.
	if f.cmd.ProcessState != nil {
		t.Fatal("forward exited after one connection's reset")
	}
	f.stop()
}

// TestE2EForwardRefusals: a refused dial fails that connection (-32008)
// and forward goes on; a target the allow-list does not admit (-32003)
// and a view-only token end forward at start with exit 1; each said in
// words, without the JSON-RPC code.
func TestE2EForwardRefusals(t *testing.T) {
	refused := closedPort(t)
	echo := newTCPServer(t, echoServe)
	d := startTCPDaemon(t, refused, echo.addr())

	f := startForward(t, d, nil, "127.0.0.1:0", refused)
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if b, err := io.ReadAll(c); len(b) != 0 || err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("local connection to a refused target: read %q, %v; want it closed", b, err)
	}
	c.Close()
	f.waitLine(regexp.MustCompile(`failed: connect failed: ` + regexp.QuoteMeta(refused) + `: connection refused$`))
	if f.cmd.ProcessState != nil {
		t.Fatal("forward exited after a refused dial")
	}
	f.stop()

	// Known at start (channels/check), before it listens.
	notAllowed := closedPort(t)
	f = startForward(t, d, nil, "127.0.0.1:0", notAllowed)
	if code := f.wait(); code != 1 || f.addr != "" || !strings.Contains(f.log(), "forward: not allowed: tcp target "+notAllowed+" (allow it with: ahpctl tcp allow "+notAllowed+")") || strings.Contains(f.log(), "code -32") {
		t.Fatalf("forward to a target not allowed: exit %d (listening on %q), want 1 before listening, naming it:\n%s", code, f.addr, f.log())
	}

	view := strings.TrimSpace(d.mustCtl("token", "create", "--role", "view"))
	f = startForward(t, d, []string{"AHP_TOKEN=" + view}, "--url", "http://"+d.addr, "127.0.0.1:0", echo.addr())
	if f.addr != "" {
		if c, err := net.Dial("tcp", f.addr); err == nil {
			_, _ = io.Copy(io.Discard, c)
			c.Close()
		}
	}
	// Known at start, before it listens.
	if code := f.wait(); code != 1 || f.addr != "" || !strings.Contains(f.log(), "forward: the token may not create TCP channels: its role is view, and creating one needs role control over every channel; mint one with 'ahpctl token create --role control'") {
		t.Fatalf("forward with a view-only token: exit %d (listening on %q), want 1 before listening, saying what the token lacks:\n%s", code, f.addr, f.log())
	}
}

// dropConn is a client WebSocket's net.Conn that drops itself (RST) once
// limit bytes have passed either way, or when told to.
type dropConn struct {
	net.Conn
	limit int64 // 0: never
	n     atomic.Int64
	once  sync.Once
}

func (c *dropConn) count(n int) {
	if c.limit > 0 && c.n.Add(int64(n)) > c.limit {
		c.drop()
	}
}

func (c *dropConn) drop() {
	c.once.Do(func() {
		_ = c.Conn.(*net.TCPConn).SetLinger(0)
		c.Conn.Close()
	})
}

func (c *dropConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.count(n)
	return n, err
}

func (c *dropConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.count(n)
	return n, err
}

// faultDialer dials the daemon's WebSocket through dropConns: the first
// drops connections drop at a random point (after 32–512 KiB), and the
// first channel/credit the client writes is lost with its connection.
type faultDialer struct {
	url, token string
	drops      int64
	refuse     atomic.Bool // dials fail while set
	dials      atomic.Int64
	lostCredit atomic.Bool
	mu         sync.Mutex // guards cur
	cur        *dropConn
}

func (fd *faultDialer) dial(ctx context.Context) (*client.Conn, error) {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if fd.refuse.Load() {
			return nil, errors.New("test: the network is down")
		}
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		dc := &dropConn{Conn: c}
		if fd.dials.Add(1) <= fd.drops {
			dc.limit = 32<<10 + mrand.Int64N(480<<10)
		}
		fd.mu.Lock()
		fd.cur = dc
		fd.mu.Unlock()
		return dc, nil
	}}}
	c, _, err := client.Dial(ctx, fd.url, client.Options{Token: fd.token, HTTPClient: hc, ClientName: "fault test", OnSend: func(msg []byte) {
		// Just before the write: the credit never reaches the host.
		if bytes.Contains(msg, []byte(`"method":"channel/credit"`)) && fd.lostCredit.CompareAndSwap(false, true) {
			fd.mu.Lock()
			fd.cur.drop()
			fd.mu.Unlock()
		}
	}})
	return c, err
}

// TestE2ETCPStreamFaults: a TCPStream over a WebSocket that is dropped 20
// times at random points, and once right under a credit, carries random
// bytes to an echo server and back: the streams are identical (the
// stream fails on any gap; duplicates would show in the hash).
func TestE2ETCPStreamFaults(t *testing.T) {
	echo := newTCPServer(t, echoServe)
	d := startTCPDaemon(t, echo.addr())
	tok := strings.TrimSpace(d.mustCtl("token", "create", "--role", "control"))
	const drops = 20
	fd := &faultDialer{url: "ws://" + d.addr + "/v1/ws", token: tok, drops: drops}
	conns := client.NewRedialer(fd.dial)
	defer conns.Close()
	host, port, _ := net.SplitHostPort(echo.addr())
	p, _ := strconv.Atoi(port)
	var lost, resumed atomic.Int64
	ctx := ctxT(t)
	st, err := client.OpenTCP(ctx, client.TCPOptions{
		Dial: conns.Get, Host: host, Port: p, MinBackoff: 10 * time.Millisecond,
		OnEvent: func(e client.TCPEvent) {
			switch e.Kind {
			case client.TCPLost:
				lost.Add(1)
			case client.TCPResumed:
				resumed.Add(1)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	size := 16 << 20
	if raceEnabled {
		size = 8 << 20
	}
	data := make([]byte, size)
	_, _ = rand.Read(data)
	werr := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := st.Write(data)
		if err == nil {
			err = st.CloseWrite()
		}
		werr <- err
	}()
	got := sha256.New()
	n, err := io.Copy(got, st)
	if err != nil {
		t.Fatalf("read after %d bytes: %v", n, err)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(data)
	if n != int64(size) || !bytes.Equal(got.Sum(nil), want[:]) {
		t.Fatalf("read %d bytes back (want %d); equal: %v", n, size, bytes.Equal(got.Sum(nil), want[:]))
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	s := st.Stats()
	t.Logf("%d MiB each way in %v over %d connections: %+v", size>>20, time.Since(start).Round(time.Millisecond), fd.dials.Load(), s)
	if !fd.lostCredit.Load() {
		t.Fatal("no credit was lost")
	}
	if fd.dials.Load() <= drops || lost.Load() < drops || s.Resumes != resumed.Load() || s.Resumes < drops {
		t.Fatalf("dials %d, lost %d, resumed %d (stats %d): want more than %d drops, each resumed", fd.dials.Load(), lost.Load(), resumed.Load(), s.Resumes, drops)
	}
	waitNoChannels(t, d)
}

// TestE2EForwardKick: an operator's kick of forward's connection ends
// forward (exit 1, saying why) instead of coming back, as for attach.
func TestE2EForwardKick(t *testing.T) {
	echo := newTCPServer(t, echoServe)
	d := startTCPDaemon(t, echo.addr())
	f := startForward(t, d, nil, "127.0.0.1:0", echo.addr())
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	var viewers []viewerJSON
	if err := json.Unmarshal([]byte(d.mustCtl("viewers", "list", "-o", "json")), &viewers); err != nil {
		t.Fatal(err)
	}
	id := ""
	for _, v := range viewers {
		if v.Client == "ahpctl forward" {
			id = v.ID
		}
	}
	if id == "" {
		t.Fatalf("no ahpctl forward among the viewers: %+v", viewers)
	}
	d.mustCtl("viewers", "kick", id, "--reason", "forward kick")
	if code := f.wait(); code != 1 || !strings.Contains(f.log(), "forward kick") {
		t.Fatalf("forward after a kick: exit %d, want 1 naming the reason:\n%s", code, f.log())
	}
	if _, err := io.ReadAll(c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("local connection after the kick: %v", err)
	}
}

// TestE2ETCPStreamResumeFails: a stream that comes back after the
// channel's retention expired gets -32006 and fails for good (no new
// socket, no further attempts), well within its reconnect budget.
func TestE2ETCPStreamResumeFails(t *testing.T) {
	echo := newTCPServer(t, echoServe)
	d := startTCPDaemon(t, echo.addr())
	d.mustCtl("limits", "set", "tcpRetain=1s")
	tok := strings.TrimSpace(d.mustCtl("token", "create", "--role", "control"))
	fd := &faultDialer{url: "ws://" + d.addr + "/v1/ws", token: tok}
	conns := client.NewRedialer(fd.dial)
	defer conns.Close()
	host, port, _ := net.SplitHostPort(echo.addr())
	p, _ := strconv.Atoi(port)
	st, err := client.OpenTCP(ctxT(t), client.TCPOptions{Dial: conns.Get, Host: host, Port: p, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(st, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	// The network goes down until the daemon has given the channel up.
	fd.refuse.Store(true)
	fd.mu.Lock()
	fd.cur.drop()
	fd.mu.Unlock()
	waitNoChannels(t, d)
	fd.refuse.Store(false)
	_, err = st.Read(make([]byte, 1))
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != -32006 {
		t.Fatalf("Read after the retention expired: %v, want the -32006 resume failure", err)
	}
	dials := fd.dials.Load()
	if _, err := st.Write([]byte("x")); !errors.As(err, &ce) {
		t.Fatalf("Write after the failure: %v, want the same error", err)
	}
	if fd.dials.Load() != dials {
		t.Fatal("the stream dialed again after -32006")
	}
}
