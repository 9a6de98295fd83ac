// Command tcpbench measures TCP channels through a real ahpd process (and
// a real `ahpctl forward`), against baselines measured in the same run,
// and prints two tables:
//
//   - throughput: -size bytes (default 1 GiB) downloaded from a loopback
//     target, and uploaded to it, directly over loopback TCP (the
//     ceiling), through a plain binary-WebSocket relay (a Go process of
//     its own copying TCP reads into 16 KiB binary WebSocket messages: the
//     floor of any TCP-over-WebSocket tunnel, what chisel does minus SSH),
//     through ahpd with the Go client in this process (ctl/client), and
//     through ahpd with `ahpctl forward` (with and without
//     permessage-deflate); MB/s as medians over -runs interleaved rounds,
//     and the CPU seconds per GiB of every process on the path;
//   - echo: 1-byte round trips (p50/p99) directly, through `ahpctl
//     forward` idle, and through the same forward (so the same WebSocket
//     connection) while a second forwarded connection downloads at full
//     speed: the bulk neighbour.
//
// Run it with `make bench-tcp` (which builds bin/ahpd and bin/ahpctl), or:
//
//	go build -o bin/ ./cmd/... && go run ./bench/tcpbench
//
// The target and the relay are copies of this program (-serve-target,
// -serve-relay), each a process of its own, so that the CPU figures are
// per process. -rtt D puts a delay line (-serve-delay, another copy) that
// adds D to the round trip between both forwards and the daemon: a
// tunnel's latency, on loopback. Only loopback addresses are used.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/ahp-dev/ahpd/bench/benchproc"
	"github.com/ahp-dev/ahpd/bench/termbench"
	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/internal/units"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

func main() {
	ahpd := flag.String("ahpd", "bin/ahpd", "the ahpd binary to measure")
	ahpctl := flag.String("ahpctl", "bin/ahpctl", "the ahpctl binary (for forward)")
	sizeFlag := flag.String("size", "1GiB", "bytes per transfer (integer with optional KiB/MiB/GiB)")
	runs := flag.Int("runs", 3, "interleaved rounds of the throughput table")
	samples := flag.Int("samples", 300, "round trips per echo measurement")
	gap := flag.Duration("gap", 2*time.Millisecond, "pause between two timed round trips")
	flag.BoolVar(&traceRun, "trace", false, "with -cpuprofile, write execution traces of ahpd and forward (ahpd.trace, forward.trace: go tool trace) instead of their CPU profiles")
	flag.StringVar(&profileDir, "cpuprofile", "", "write CPU profiles of ahpd (ahpd.prof), of ahpctl forward without --compress (forward.prof) and of this process (client.prof) into `dir`")
	flag.StringVar(&only, "only", "", "measure only the throughput paths whose name matches this regular expression, e.g. 'relay|forward$' (the raw TCP baseline always runs)")
	flag.StringVar(&dirs, "dirs", "download,upload", "the throughput directions to measure")
	flag.BoolVar(&echoRuns, "echo", true, "measure the echo table")
	flag.Int64Var(&recvLimits.WindowBytes, "window", 0, "the in-process client's windowBytes (0: the host's defaults for all three limits)")
	flag.Int64Var(&recvLimits.MaximumFrameBytes, "frame", 64<<10, "the in-process client's maximumFrameBytes (with -window)")
	flag.Int64Var(&recvLimits.MaximumMessageBytes, "message", 1<<20, "the in-process client's maximumMessageBytes (with -window)")
	flag.IntVar(&daemonProcs, "procs", 0, "run the daemon with GOMAXPROCS set to this (0: the daemon's own plan)")
	flag.StringVar(&daemonConfig, "config", "", "lines of the daemon's config file, ';'-separated (default: no file), e.g. 'hostReceive.windowBytes = \"4MiB\"'")
	serveTarget := flag.Bool("serve-target", false, "serve the loopback target (tcpbench starts it itself)")
	serveRelay := flag.String("serve-relay", "", "serve the WebSocket relay to this target `address` (tcpbench starts it itself)")
	flag.DurationVar(&rtt, "rtt", 0, "put a delay line that adds this round trip between ahpctl forward and the daemon (forward then dials it with --url and the admin token), as a tunnel would")
	serveDelay := flag.String("serve-delay", "", "serve a delay line of -rtt to this `address` (tcpbench starts it itself)")
	flag.Parse()
	if recvLimits.WindowBytes == 0 {
		recvLimits = flow.ReceiveLimits{}
	}
	var err error
	switch {
	case *serveTarget:
		err = runTarget()
	case *serveRelay != "":
		err = runRelay(*serveRelay)
	case *serveDelay != "":
		err = runDelay(*serveDelay, rtt/2)
	default:
		var size int64
		size, err = units.ParseSize(*sizeFlag)
		if err == nil && size < 1<<20 {
			err = fmt.Errorf("-size %s: at least 1 MiB", *sizeFlag)
		}
		if err == nil {
			err = run(*ahpd, *ahpctl, size, *runs, *samples, *gap)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tcpbench:", err)
		os.Exit(1)
	}
}

// Selections (-only, -dirs, -echo).
var (
	only     string
	dirs     string
	echoRuns bool
)

// recvLimits are the in-process client's receive limits (-window).
var recvLimits flow.ReceiveLimits

// daemonConfig is the daemon's config file's text (-config; "": none).
var daemonConfig string

// daemonProcs is the daemon's GOMAXPROCS (-procs; 0: its own plan).
var daemonProcs int

// profileDir is where -cpuprofile writes the profiles ("": none).
var profileDir string

// traceRun (-trace) makes ahpd and forward write execution traces.
var traceRun bool

// profileName is the file ahpd's or forward's profile goes to.
func profileName(name string) string {
	if traceRun {
		return filepath.Join(profileDir, name+".trace")
	}
	return filepath.Join(profileDir, name+".prof")
}

// The target's operations: a client sends one byte and a big-endian
// uint64, then:
const (
	opDownload = 'D' // the target writes n bytes and half-closes
	opUpload   = 'U' // the client writes bytes and half-closes; the target answers their count
	opEcho     = 'E' // the target echoes until EOF
	opStream   = 'S' // the target writes until the client closes
)

// pattern is what the target sends, cycled: random bytes, which deflate
// cannot shrink (the worst case for --compress).
var pattern = func() []byte {
	b := make([]byte, 256<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}()

// runTarget serves the target on a loopback port, printed on stdout, until
// stdin closes.
func runTarget() error { return serveChild(serveTarget) }

// serveChild listens on a loopback port, prints it on stdout and serves
// each connection with serve until stdin closes (the process then exits
// with its connections): what tcpbench's copies of itself do.
func serveChild(serve func(*net.TCPConn)) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(l.Addr().String())
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); l.Close() }()
	for {
		c, err := l.Accept()
		if err != nil {
			return nil
		}
		go serve(c.(*net.TCPConn))
	}
}

func serveTarget(c *net.TCPConn) {
	defer c.Close()
	var hdr [9]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return
	}
	n := int64(binary.BigEndian.Uint64(hdr[1:]))
	switch hdr[0] {
	case opDownload:
		for n > 0 {
			k, err := c.Write(pattern[:min(n, int64(len(pattern)))])
			n -= int64(k)
			if err != nil {
				return
			}
		}
		_ = c.CloseWrite()
		_, _ = io.Copy(io.Discard, c)
	case opStream:
		for {
			if _, err := c.Write(pattern); err != nil {
				return
			}
		}
	case opUpload:
		got, _ := io.Copy(io.Discard, c)
		binary.BigEndian.PutUint64(hdr[1:], uint64(got))
		_, _ = c.Write(hdr[1:])
	case opEcho:
		_, _ = io.Copy(c, c)
	}
}

// runRelay serves the WebSocket relay on a loopback port, printed on
// stdout, until stdin closes: each WebSocket connection gets a TCP
// connection to target; TCP reads (up to 16 KiB) become binary messages
// and binary messages are written to TCP.
func runRelay(target string) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		relayConn(w, r, target)
	}), ReadHeaderTimeout: 10 * time.Second}
	fmt.Println(l.Addr().String())
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); srv.Close() }()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func relayConn(w http.ResponseWriter, r *http.Request, target string) {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20)
	c, err := net.Dial("tcp", target)
	if err != nil {
		ws.Close(websocket.StatusInternalError, err.Error())
		return
	}
	benchproc.Relay(r.Context(), ws, c, 16<<10)
}

// child is a copy of this program (target, relay) or ahpctl forward.
type child struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	addr string
}

// startChild runs this program with args and reads the address it prints.
func startChild(args ...string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} // if tcpbench is killed
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		in.Close()
		benchproc.WaitOrKill(cmd, 5*time.Second)
		return nil, fmt.Errorf("%s did not start: %w", args[0], err)
	}
	return &child{cmd: cmd, in: in, addr: strings.TrimSpace(addr)}, nil
}

func (c *child) stop() {
	if c.in != nil {
		c.in.Close() // a copy of this program exits when its stdin closes
	} else {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	benchproc.WaitOrKill(c.cmd, 10*time.Second)
}

func (c *child) cpu() time.Duration {
	d, err := benchproc.CPU(c.cmd.Process.Pid)
	if err != nil {
		return 0
	}
	return d
}

// daemon is a running bin/ahpd with the target allow-listed.
type daemon struct {
	*benchproc.Daemon
	delay *child // the delay line to it (-rtt), or nil
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func startDaemon(bin, dir, target string) (*daemon, error) {
	// The daemon's defaults (permessage-deflate when the client offers
	// it), with no config file and no default terminal.
	conf := "none"
	if daemonConfig != "" {
		conf = filepath.Join(dir, "config.toml")
		if err := os.WriteFile(conf, []byte(strings.ReplaceAll(daemonConfig, ";", "\n")+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	var env []string
	if profileDir != "" {
		env = append(env, "AHPD_CPUPROFILE="+profileName("ahpd"))
	}
	if daemonProcs > 0 {
		env = append(env, fmt.Sprintf("GOMAXPROCS=%d", daemonProcs))
	}
	bd, err := benchproc.StartDaemon(bin, dir, []string{"--config", conf, "--no-default-terminal", "--log-level", "warn"}, env)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err = ahpv1.NewTCPServiceClient(bd.Conn).AllowTCP(ctx, &ahpv1.AllowTCPRequest{Rule: target})
	cancel()
	if err != nil {
		bd.Stop()
		return nil, err
	}
	return &daemon{Daemon: bd}, nil
}

// cpu is the daemon's CPU time so far, for measure.
func (d *daemon) cpu() time.Duration { return d.CPU() }

// startForward runs `ahpctl forward` to target and waits until it accepts.
func startForward(bin string, d *daemon, target string, compress bool) (*child, error) {
	local, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{"--control", d.Sock, "forward", "--quiet"}
	env := os.Environ()
	if d.delay != nil {
		args = []string{"forward", "--quiet", "--url", "http://" + d.delay.addr}
		env = append(env, "AHP_TOKEN="+d.Token)
	}
	if compress {
		args = append(args, "--compress")
	}
	cmd := exec.Command(bin, append(args, local, target)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if profileDir != "" && !compress {
		env = append(env, "AHPCTL_CPUPROFILE="+profileName("forward"))
	}
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	f := &child{cmd: cmd, addr: local}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", local, time.Second)
		if err == nil {
			c.Close()
			return f, nil
		}
		if time.Now().After(deadline) {
			f.stop()
			return nil, fmt.Errorf("ahpctl forward did not listen on %s within 10 s", local)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func header(op byte, n int64) []byte {
	b := make([]byte, 9)
	b[0] = op
	binary.BigEndian.PutUint64(b[1:], uint64(n))
	return b
}

// download asks for n bytes over rw and reads them to EOF.
func download(rw io.ReadWriter, n int64) error {
	if _, err := rw.Write(header(opDownload, n)); err != nil {
		return err
	}
	buf := make([]byte, 256<<10)
	got, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{rw}, buf)
	if err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("downloaded %d bytes of %d", got, n)
	}
	return nil
}

// upload writes n bytes over rw, half-closes with closeWrite and checks
// the target's count.
func upload(rw io.ReadWriter, closeWrite func() error, n int64) error {
	if _, err := rw.Write(header(opUpload, n)); err != nil {
		return err
	}
	for left := n; left > 0; {
		k, err := rw.Write(pattern[:min(left, int64(len(pattern)))])
		left -= int64(k)
		if err != nil {
			return err
		}
	}
	if err := closeWrite(); err != nil {
		return err
	}
	var cnt [8]byte
	if _, err := io.ReadFull(rw, cnt[:]); err != nil {
		return err
	}
	if got := int64(binary.BigEndian.Uint64(cnt[:])); got != n {
		return fmt.Errorf("the target got %d bytes of %d", got, n)
	}
	return nil
}

func dialTCP(ctx context.Context, addr string) (*net.TCPConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	return c.(*net.TCPConn), nil
}

// sample is one timed transfer: its duration and the CPU of each process
// on its path.
type sample struct {
	elapsed time.Duration
	cpu     []time.Duration
}

// path is one way to move the bytes, with the processes whose CPU counts.
type path struct {
	name  string
	procs []string // names of the CPU columns
	// run moves n bytes (down or up) and returns the sample.
	run func(ctx context.Context, up bool, n int64) (sample, error)
}

func measure(cpus []func() time.Duration, f func() error) (sample, error) {
	c0 := make([]time.Duration, len(cpus))
	for i, c := range cpus {
		c0[i] = c()
	}
	start := time.Now()
	if err := f(); err != nil {
		return sample{}, err
	}
	s := sample{elapsed: time.Since(start)}
	for i, c := range cpus {
		s.cpu = append(s.cpu, c()-c0[i])
	}
	return s, nil
}

func run(ahpdBin, ahpctlBin string, size int64, runs, samples int, gap time.Duration) error {
	dir, err := os.MkdirTemp("", "tcpbench")
	if err != nil {
		return err
	}
	if profileDir != "" {
		f, err := os.Create(filepath.Join(profileDir, "client.prof"))
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	defer os.RemoveAll(dir)
	target, err := startChild("-serve-target")
	if err != nil {
		return err
	}
	defer target.stop()
	relay, err := startChild("-serve-relay", target.addr)
	if err != nil {
		return err
	}
	defer relay.stop()
	d, err := startDaemon(ahpdBin, dir, target.addr)
	if err != nil {
		return err
	}
	defer d.Stop()
	if rtt > 0 {
		if d.delay, err = startChild("-serve-delay", d.Addr, "-rtt", rtt.String()); err != nil {
			return err
		}
		defer d.delay.stop()
		fmt.Printf("ahpctl forward reaches the daemon through a delay line: %v more round trip\n\n", rtt)
	}
	fwd, err := startForward(ahpctlBin, d, target.addr, false)
	if err != nil {
		return err
	}
	defer fwd.stop()
	fwdZ, err := startForward(ahpctlBin, d, target.addr, true)
	if err != nil {
		return err
	}
	defer fwdZ.stop()
	host, port, _ := net.SplitHostPort(target.addr)
	var tport int
	fmt.Sscan(port, &tport)

	// A connection of the in-process client, shared by its streams.
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	conn, _, err := client.Dial(cctx, d.WS(), client.Options{Token: d.Token})
	ccancel()
	if err != nil {
		return err
	}
	defer conn.Close()

	overTCP := func(addr string, cpus []func() time.Duration) func(ctx context.Context, up bool, n int64) (sample, error) {
		return func(ctx context.Context, up bool, n int64) (sample, error) {
			return measure(cpus, func() error {
				c, err := dialTCP(ctx, addr)
				if err != nil {
					return err
				}
				defer c.Close()
				if up {
					return upload(c, c.CloseWrite, n)
				}
				return download(c, n)
			})
		}
	}
	onlyRE, err := regexp.Compile(only)
	if err != nil {
		return fmt.Errorf("-only: %w", err)
	}
	paths := []path{
		{name: "raw loopback TCP", procs: []string{"client"},
			run: overTCP(target.addr, []func() time.Duration{termbench.CPUTime})},
		{name: "WebSocket relay (16 KiB binary messages)", procs: []string{"relay", "client"},
			run: func(ctx context.Context, up bool, n int64) (sample, error) {
				if up {
					return sample{}, errSkip
				}
				return measure([]func() time.Duration{relay.cpu, termbench.CPUTime}, func() error {
					return relayDownload(ctx, relay.addr, n)
				})
			}},
		{name: "ahpd, Go client in process", procs: []string{"ahpd", "client"},
			run: func(ctx context.Context, up bool, n int64) (sample, error) {
				return measure([]func() time.Duration{d.cpu, termbench.CPUTime}, func() error {
					st, err := client.OpenTCP(ctx, client.TCPOptions{
						Dial: func(context.Context) (*client.Conn, error) { return conn, nil },
						Host: host, Port: tport, Receive: recvLimits,
					})
					if err != nil {
						return err
					}
					defer st.Close()
					if up {
						return upload(st, st.CloseWrite, n)
					}
					return download(st, n)
				})
			}},
		{name: "ahpd, ahpctl forward", procs: []string{"ahpd", "ahpctl"},
			run: overTCP(fwd.addr, []func() time.Duration{d.cpu, fwd.cpu})},
		{name: "ahpd, ahpctl forward --compress", procs: []string{"ahpd", "ahpctl"},
			run: overTCP(fwdZ.addr, []func() time.Duration{d.cpu, fwdZ.cpu})},
	}
	fmt.Printf("TCP throughput, %s random bytes per transfer, median of %d interleaved rounds\n", fmt.Sprintf("%d MiB", size>>20), runs)
	fmt.Printf("(CPU: seconds per GiB moved, of each process on the path; the bench's own reading and writing is the \"client\")\n\n")
	type key struct {
		path int
		up   bool
	}
	got := map[key][]sample{}
	for r := 0; r < runs; r++ {
		for _, up := range []bool{false, true} {
			if !strings.Contains(dirs, dirName(up)) {
				continue
			}
			for i, p := range paths {
				if i > 0 && !onlyRE.MatchString(p.name) {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				s, err := p.run(ctx, up, size)
				cancel()
				if errors.Is(err, errSkip) {
					continue
				}
				if err != nil {
					return fmt.Errorf("%s (%s): %w", p.name, dirName(up), err)
				}
				got[key{i, up}] = append(got[key{i, up}], s)
			}
		}
	}
	medianMBps := func(ss []sample) float64 {
		v := make([]float64, len(ss))
		for i, s := range ss {
			v[i] = float64(size) / s.elapsed.Seconds() / 1e6
		}
		return median(v)
	}
	wsDown := medianMBps(got[key{1, false}])
	if wsDown == 0 {
		wsDown = math.NaN()
	}
	fmt.Printf("%-42s %-9s %9s %9s %9s  %s\n", "path", "direction", "MB/s", "× raw TCP", "× WS relay", "CPU s/GiB")
	for _, up := range []bool{false, true} {
		raw := medianMBps(got[key{0, up}])
		for i, p := range paths {
			ss := got[key{i, up}]
			if len(ss) == 0 {
				continue
			}
			m := medianMBps(ss)
			vsWS := "–"
			if !up {
				vsWS = fmt.Sprintf("%.2f", m/wsDown)
			}
			var cpu []string
			for j, name := range p.procs {
				v := make([]float64, len(ss))
				for k, s := range ss {
					v[k] = s.cpu[j].Seconds() / (float64(size) / (1 << 30))
				}
				cpu = append(cpu, fmt.Sprintf("%s %.2f", name, median(v)))
			}
			fmt.Printf("%-42s %-9s %9.0f %9.2f %9s  %s\n", p.name, dirName(up), m, m/raw, vsWS, strings.Join(cpu, ", "))
		}
	}

	if !echoRuns {
		return nil
	}
	fmt.Printf("\nEcho: %d round trips of 1 byte each, %v apart (p50 / p99 / max)\n\n", samples, gap)
	rawEcho, err := echo(target.addr, samples, gap, nil)
	if err != nil {
		return fmt.Errorf("raw echo: %w", err)
	}
	idle, err := echo(fwd.addr, samples, gap, nil)
	if err != nil {
		return fmt.Errorf("forward echo: %w", err)
	}
	var bulk int64
	busy, err := echo(fwd.addr, samples, gap, &bulk)
	if err != nil {
		return fmt.Errorf("forward echo under a bulk neighbour: %w", err)
	}
	fmt.Printf("%-62s %9s %9s %9s\n", "path", "p50", "p99", "max")
	row := func(name string, t []time.Duration) {
		fmt.Printf("%-62s %9s %9s %9s\n", name, pct(t, 50), pct(t, 99), pct(t, 100))
	}
	row("raw loopback TCP", rawEcho.rtt)
	row("ahpctl forward, idle", idle.rtt)
	row("ahpctl forward, bulk download on the same WebSocket", busy.rtt)
	fmt.Printf("\nthe bulk neighbour moved %.0f MB/s meanwhile\n", float64(bulk)/busy.elapsed.Seconds()/1e6)
	return nil
}

var errSkip = errors.New("not measured")

func dirName(up bool) string {
	if up {
		return "upload"
	}
	return "download"
}

// relayDownload downloads n bytes through the WebSocket relay.
func relayDownload(ctx context.Context, addr string, n int64) error {
	ws, _, err := websocket.Dial(ctx, "ws://"+addr+"/", nil)
	if err != nil {
		return err
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20)
	if err := ws.Write(ctx, websocket.MessageBinary, header(opDownload, n)); err != nil {
		return err
	}
	var got int64
	buf := make([]byte, 64<<10)
	for got < n {
		_, r, err := ws.Reader(ctx)
		if err != nil {
			return fmt.Errorf("after %d bytes: %w", got, err)
		}
		for {
			k, err := r.Read(buf)
			got += int64(k)
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

type echoResult struct {
	rtt     []time.Duration
	elapsed time.Duration
}

// echo times samples round trips of one byte through addr. With bulk set,
// a second connection to addr downloads at full speed meanwhile and bulk
// gets its byte count.
func echo(addr string, samples int, gap time.Duration, bulk *int64) (echoResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var bulkDone chan error
	if bulk != nil {
		b, err := dialTCP(ctx, addr)
		if err != nil {
			return echoResult{}, err
		}
		if _, err := b.Write(header(opStream, 0)); err != nil {
			b.Close()
			return echoResult{}, err
		}
		// Wait until the stream flows, so every round trip has it beside.
		buf := make([]byte, 256<<10)
		for *bulk < 8<<20 {
			k, err := b.Read(buf)
			*bulk += int64(k)
			if err != nil {
				b.Close()
				return echoResult{}, err
			}
		}
		*bulk = 0
		bulkDone = make(chan error, 1)
		stop := make(chan struct{})
		defer func() {
			close(stop)
			b.Close()
			<-bulkDone
		}()
		go func() {
			for {
				k, err := b.Read(buf)
				*bulk += int64(k)
				select {
				case <-stop:
					bulkDone <- nil
					return
				default:
				}
				if err != nil {
					bulkDone <- err
					return
				}
			}
		}()
	}
	c, err := dialTCP(ctx, addr)
	if err != nil {
		return echoResult{}, err
	}
	defer c.Close()
	_ = c.SetNoDelay(true)
	if _, err := c.Write(header(opEcho, 0)); err != nil {
		return echoResult{}, err
	}
	res := echoResult{rtt: make([]time.Duration, 0, samples)}
	b := []byte{0}
	start := time.Now()
	for i := 0; i < samples+10; i++ { // the first 10 warm up
		b[0] = byte('a' + i%26)
		t0 := time.Now()
		if _, err := c.Write(b); err != nil {
			return echoResult{}, err
		}
		if _, err := io.ReadFull(c, b); err != nil {
			return echoResult{}, err
		}
		if b[0] != byte('a'+i%26) {
			return echoResult{}, fmt.Errorf("round trip %d: got %q", i, b)
		}
		if i >= 10 {
			res.rtt = append(res.rtt, time.Since(t0))
		}
		if bulkDone != nil {
			select {
			case err := <-bulkDone:
				bulkDone <- err
				return echoResult{}, fmt.Errorf("the bulk neighbour ended: %v", err)
			default:
			}
		}
		time.Sleep(gap)
	}
	res.elapsed = time.Since(start)
	return res, nil
}

func pct(t []time.Duration, p int) string {
	s := slices.Clone(t)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	i = min(max(i-1, 0), len(s)-1)
	d := s[i]
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	default:
		return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000)
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
