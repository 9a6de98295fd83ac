// Command linkbench measures ahpd on emulated network links (issue 40,
// "Real links"): internal/linkemu between every client and its server,
// at one bandwidth each way (-rate, default 100 Mbit/s) and each round
// trip of -rtts (default 0, 20, 80 and 200 ms), the bottleneck queue one
// bandwidth-delay product (at least 64 KiB). Per round trip it starts a
// fresh bin/ahpd (temp state directory), `ahpctl forward --url` to it
// through the link and, when -chisel names a binary, a chisel server and
// client with the client's WebSocket through the same link, and measures
// side by side in the same run:
//
//   - throughput: -size bytes downloaded from and uploaded to a loopback
//     target, by a raw TCP copy through the link (the baseline), through
//     `ahpctl forward` and through chisel, the three tools alternated
//     within each of -rounds rounds (the order turns each round); medians
//     and ranges, and the ratio to the raw copy (target ≥ 0.85);
//   - keystroke echo: a terminal running `stty raw -echo; cat`, viewed
//     by the Go client (ctl/client) through the link, typed into every
//     -key-gap; the echo's p50/p99 idle, and beside a bulk download
//     (client.OpenTCP) on the same WebSocket connection (target: p99 ≤
//     RTT + 15 ms); a raw TCP echo through the link is the floor;
//   - `cat` of -cat-size bytes in a terminal shown by `ahpctl attach
//     --url` (in a pty of this program's) through the link: time until
//     the last line arrived against the link's time for the bytes
//     (target ≤ 1.3×) and the snapshots its subscription got (≤ 2);
//   - the daemon's VmHWM and VmRSS at the end of each round trip's run.
//
// It prints one markdown table per measurement, and the command line.
// Run it with `make bench-link` (CHISEL=/path/to/chisel to include
// chisel), or:
//
//	go run ./bench/linkbench -chisel /tmp/chisel
//
// Without -ahpd and -ahpctl it builds both from this module into a temp
// directory. It takes /tmp/ahp-bench.lock (-lock) once built, so that
// benchmarks on a shared machine never overlap. Only loopback addresses
// are used.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ahp-dev/ahpd/bench/benchproc"
	"github.com/ahp-dev/ahpd/bench/termbench"
	"github.com/ahp-dev/ahpd/internal/linkemu"
	"github.com/ahp-dev/ahpd/internal/units"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// config is what the flags say.
type config struct {
	ahpd, ahpctl, chisel string
	rev                  string // what the binaries were built from, for the tables
	rtts                 []time.Duration
	rate                 int64 // bytes/s each way
	rateText             string
	size                 int64
	rounds               int
	keys                 int
	keyGap               time.Duration
	catSize              int64
	cut                  time.Duration
	compress             bool
	verbose              bool
	daemonLog            string
}

func main() {
	var c config
	flag.StringVar(&c.ahpd, "ahpd", "", "the ahpd binary to measure (empty: build ./cmd/ahpd into a temp directory)")
	flag.StringVar(&c.ahpctl, "ahpctl", "", "the ahpctl binary (forward, attach; empty: build ./cmd/ahpctl into a temp directory)")
	flag.StringVar(&c.rev, "rev", "HEAD", "without -ahpd and -ahpctl: the git revision to build them from (git archive, so that uncommitted edits in the tree are not measured), with this benchmark's own sources copied in and built there too, so that its client side (ctl/client) is of that revision as well; empty: the working tree as it is")
	builtFrom := flag.String("built-from", "", "set by linkbench when it runs the copy of itself it built for -rev: the revision, for the tables")
	flag.StringVar(&c.chisel, "chisel", os.Getenv("CHISEL"), "the chisel binary (default $CHISEL; empty or missing: chisel's columns say \"not available\")")
	rtts := flag.String("rtts", "0,20ms,80ms,200ms", "the round trips the link adds, comma-separated")
	flag.StringVar(&c.rateText, "rate", "100mbit", "the link's bandwidth each way (e.g. 100mbit, 12.5MB)")
	size := flag.String("size", "32MiB", "bytes per throughput transfer")
	flag.IntVar(&c.rounds, "rounds", 3, "rounds of the throughput table per round trip (the tools alternate within each)")
	flag.IntVar(&c.keys, "keys", 200, "keystrokes per echo measurement (0: no echo table)")
	flag.DurationVar(&c.keyGap, "key-gap", 50*time.Millisecond, "time between two keystrokes (a typist's pace; echoes are not waited for)")
	catSize := flag.String("cat-size", "64MiB", "bytes of the cat shown by ahpctl attach (0: no attach table)")
	flag.DurationVar(&c.cut, "cut", 15*time.Second, "the longest one transfer may take; a slower one is cut and its rate is that of the bytes moved")
	flag.BoolVar(&c.compress, "compress", false, "also measure `ahpctl forward --compress` (permessage-deflate; the target's bytes are random)")
	lock := flag.String("lock", "/tmp/ahp-bench.lock", "hold flock on this file while measuring (empty: none)")
	flag.StringVar(&c.daemonLog, "daemon-log", "warn", "ahpd's --log-level (debug: its tuner's window changes, with -v to see them)")
	flag.BoolVar(&c.verbose, "v", false, "pass the children's output (ahpd, forward, chisel) on to stderr")
	flag.Parse()
	if *builtFrom != "" {
		c.rev = *builtFrom
	}
	if err := parse(&c, *rtts, *size, *catSize); err != nil {
		fmt.Fprintln(os.Stderr, "linkbench:", err)
		os.Exit(2)
	}
	if err := run(&c, *lock); err != nil {
		fmt.Fprintln(os.Stderr, "linkbench:", err)
		os.Exit(1)
	}
}

func parse(c *config, rtts, size, catSize string) error {
	for _, f := range strings.Split(rtts, ",") {
		f = strings.TrimSpace(f)
		if f == "0" {
			f = "0s"
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < 0 || d > 2*time.Second {
			return fmt.Errorf("-rtts: %q: want durations of 0 to 2s", f)
		}
		c.rtts = append(c.rtts, d)
	}
	var err error
	if c.rate, err = linkemu.ParseRate(c.rateText); err != nil {
		return fmt.Errorf("-rate: %w", err)
	}
	if c.size, err = units.ParseSize(size); err != nil || c.size < 1<<20 {
		return fmt.Errorf("-size %q: at least 1MiB", size)
	}
	if c.catSize, err = units.ParseSize(catSize); err != nil {
		return fmt.Errorf("-cat-size: %w", err)
	}
	if c.rounds < 1 || c.rounds > 50 || c.keys < 0 || c.keys > 10000 || c.keyGap < time.Millisecond {
		return errors.New("-rounds 1..50, -keys 0..10000, -key-gap ≥ 1ms")
	}
	if c.cut < time.Second || c.cut > 10*time.Minute {
		return errors.New("-cut 1s..10m")
	}
	return nil
}

// linkParams is one direction of the link at rtt: half the round trip,
// the rate, and a bottleneck queue of one bandwidth-delay product, at
// least 64 KiB (what bench/linkemu's -queue defaults to).
func (c *config) linkParams(rtt time.Duration, seed uint64) linkemu.Params {
	return linkemu.Params{
		Delay: rtt / 2,
		Rate:  c.rate,
		Queue: max(int64(float64(c.rate)*rtt.Seconds()), 64<<10),
		Seed:  seed,
	}
}

// startLink puts the emulated link at rtt in front of target.
func (c *config) startLink(target string, rtt time.Duration) (*linkemu.Link, error) {
	return linkemu.Start(target, c.linkParams(rtt, 1), c.linkParams(rtt, 2))
}

func run(c *config, lockPath string) error {
	dir, err := os.MkdirTemp("", "linkbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	switch {
	case c.ahpd == "" || c.ahpctl == "":
		if err := build(dir, c); err != nil {
			return err
		}
		if self := filepath.Join(dir, "linkbench"); fileExists(self) {
			return reexec(self, c)
		}
	case os.Getenv("LINKBENCH_COMMAND") == "":
		c.rev = "the binaries given"
	}
	if c.chisel != "" {
		if st, err := os.Stat(c.chisel); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			fmt.Fprintf(os.Stderr, "linkbench: chisel %q is not an executable: chisel not available\n", c.chisel)
			c.chisel = ""
		}
	}
	if lockPath != "" {
		f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return err
		}
		defer f.Close()
		fmt.Fprintf(os.Stderr, "linkbench: waiting for %s\n", lockPath)
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			return fmt.Errorf("flock %s: %w", lockPath, err)
		}
		defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	}
	target, err := startTarget()
	if err != nil {
		return err
	}
	defer target.Close()
	var catFile string
	if c.catSize > 0 {
		catFile = filepath.Join(dir, "cat.txt")
		if err := termbench.WriteTextFile(catFile, int(c.catSize)); err != nil {
			return err
		}
	}
	start := time.Now()
	var results []*rttResult
	for _, rtt := range c.rtts {
		fmt.Fprintf(os.Stderr, "linkbench: RTT %v\n", rtt)
		r, err := c.runRTT(dir, target.Addr().String(), catFile, rtt)
		if err != nil {
			return fmt.Errorf("RTT %v: %w", rtt, err)
		}
		results = append(results, r)
	}
	c.print(results, time.Since(start))
	return nil
}

// build builds ahpd and ahpctl into dir, as the Makefile does (no cgo):
// from c.rev (git archive of the working directory's repository) with a
// copy of this benchmark (bench/linkbench of the working directory) built
// there too, or from the working tree when c.rev is empty. It sets c.rev
// to what it built.
func build(dir string, c *config) error {
	src, pkgs := ".", []string{"./cmd/ahpd", "./cmd/ahpctl"}
	if c.rev != "" {
		out, err := exec.Command("git", "rev-parse", "--short", c.rev+"^{commit}").Output()
		if err != nil {
			return fmt.Errorf("-rev %s: git rev-parse: %w", c.rev, err)
		}
		rev := strings.TrimSpace(string(out))
		src = filepath.Join(dir, "src")
		if err := os.Mkdir(src, 0o700); err != nil {
			return err
		}
		archive := exec.Command("sh", "-c", `git archive --format=tar "$1" | tar -x -C "$2"`, "sh", rev, src)
		archive.Stderr = os.Stderr
		if err := archive.Run(); err != nil {
			return fmt.Errorf("git archive %s: %w", rev, err)
		}
		// This benchmark, as it is here, built against that revision.
		own, err := filepath.Glob("bench/linkbench/*.go")
		if err != nil || len(own) == 0 {
			return errors.New("-rev: run from the repository's root (bench/linkbench/*.go is copied into the revision's tree)")
		}
		to := filepath.Join(src, "bench", "linkbench")
		if err := os.MkdirAll(to, 0o700); err != nil {
			return err
		}
		for _, f := range own {
			b, err := os.ReadFile(f)
			if err == nil {
				err = os.WriteFile(filepath.Join(to, filepath.Base(f)), b, 0o600)
			}
			if err != nil {
				return err
			}
		}
		pkgs = append(pkgs, "./bench/linkbench")
		c.rev = rev
	} else {
		c.rev = gitDescribe() + " (the working tree)"
	}
	fmt.Fprintf(os.Stderr, "linkbench: building %s of %s into %s\n", strings.Join(pkgs, " "), c.rev, dir)
	cmd := exec.Command("go", append([]string{"build", "-o", dir + "/"}, pkgs...)...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	if c.ahpd == "" {
		c.ahpd = filepath.Join(dir, "ahpd")
	}
	if c.ahpctl == "" {
		c.ahpctl = filepath.Join(dir, "ahpctl")
	}
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// reexec runs self, the copy of this benchmark built from c.rev, with this
// run's flags and the binaries built beside it, and exits with its status.
func reexec(self string, c *config) error {
	var args []string
	for i := 1; i < len(os.Args); i++ {
		a := os.Args[i]
		name := strings.TrimLeft(a, "-")
		if name == "rev" || name == "ahpd" || name == "ahpctl" || name == "built-from" {
			i++ // its value
			continue
		}
		if strings.HasPrefix(name, "rev=") || strings.HasPrefix(name, "ahpd=") || strings.HasPrefix(name, "ahpctl=") || strings.HasPrefix(name, "built-from=") {
			continue
		}
		args = append(args, a)
	}
	args = append(args, "-ahpd", c.ahpd, "-ahpctl", c.ahpctl, "-built-from", c.rev)
	cmd := exec.Command(self, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "LINKBENCH_COMMAND="+commandLine())
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		os.RemoveAll(filepath.Dir(self))
		os.Exit(ee.ExitCode())
	}
	return err
}

// The target's operations (bench/tcpbench's): a client sends one byte and
// a big-endian uint64, then:
const (
	opDownload = 'D' // the target writes n bytes and half-closes
	opUpload   = 'U' // the client writes n bytes; the target answers their count (no half-close: chisel does not pass one on)
	opEcho     = 'E' // the target echoes until EOF
	opStream   = 'S' // the target writes until the client closes
)

// pattern is what the target and the uploads send, cycled: random bytes.
var pattern = func() []byte {
	b := make([]byte, 256<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}()

// startTarget serves the target on a loopback port, in this process.
func startTarget() (net.Listener, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go serveTarget(c.(*net.TCPConn))
		}
	}()
	return l, nil
}

func serveTarget(c *net.TCPConn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(15 * time.Minute)) // bounded, whatever the client does
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
		// The count so far goes back after every MiB and at the end, so
		// that a cut upload knows what arrived.
		buf := make([]byte, 256<<10)
		var got, told int64
		for got < n {
			k, err := c.Read(buf[:min(int64(len(buf)), n-got)])
			got += int64(k)
			if got-told >= 1<<20 || got == n {
				binary.BigEndian.PutUint64(hdr[1:], uint64(got))
				if _, err := c.Write(hdr[1:]); err != nil {
					return
				}
				told = got
			}
			if err != nil {
				return
			}
		}
	case opEcho:
		_ = c.SetNoDelay(true)
		_, _ = io.Copy(c, c)
	}
}

func header(op byte, n int64) []byte {
	b := make([]byte, 9)
	b[0] = op
	binary.BigEndian.PutUint64(b[1:], uint64(n))
	return b
}

// sample is one transfer: the bytes moved and the time taken; cut when
// the transfer was stopped at -cut before its end.
type sample struct {
	bytes   int64
	elapsed time.Duration
	cut     bool
	wire    int64 // bytes the link delivered in the transfer's direction meanwhile (tunnel framing included)
	// The second half: from the first count of at least half the bytes
	// (halfBytes, at halfAt after the start) to the end; zero if cut.
	halfBytes int64
	halfAt    time.Duration
}

// secondHalf is the MB/s from halfAt to the end (0: not known).
func (s sample) secondHalf() float64 {
	if s.cut || s.halfBytes == 0 || s.elapsed <= s.halfAt {
		return 0
	}
	return float64(s.bytes-s.halfBytes) / (s.elapsed - s.halfAt).Seconds() / 1e6
}

func (s sample) mbps() float64 { return float64(s.bytes) / s.elapsed.Seconds() / 1e6 }

// transfer moves n bytes through addr (a TCP connection dialed to it):
// down from the target, or up to it. A transfer still running at cut is
// stopped and returns the bytes moved so far, cut.
func transfer(addr string, up bool, n int64, cut time.Duration) (sample, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return sample{}, err
	}
	defer c.Close()
	tc := c.(*net.TCPConn)
	start := time.Now()
	_ = tc.SetDeadline(start.Add(cut))
	var moved, halfBytes int64
	var halfAt time.Duration
	if up {
		// The target's counts: the last one and when it came.
		type count struct {
			n  int64
			at time.Time
		}
		counts := make(chan count, 1)
		var last count
		var half atomic.Pointer[count] // written by the reader before it ends
		go func() {
			defer close(counts)
			var cnt [8]byte
			for {
				if _, err := io.ReadFull(tc, cnt[:]); err != nil {
					return
				}
				got := count{int64(binary.BigEndian.Uint64(cnt[:])), time.Now()}
				if got.n >= n/2 && half.Load() == nil {
					half.Store(&got)
				}
				select {
				case <-counts:
				default:
				}
				counts <- got
				if got.n >= n {
					return
				}
			}
		}()
		err = func() error {
			if _, err := tc.Write(header(opUpload, n)); err != nil {
				return err
			}
			for sent := int64(0); sent < n; {
				k, err := tc.Write(pattern[:min(n-sent, int64(len(pattern)))])
				sent += int64(k)
				if err != nil {
					return err
				}
			}
			return nil
		}()
		for got := range counts { // until the reader ends: the end, or the deadline
			last = got
		}
		if err == nil && last.n != n {
			err = fmt.Errorf("the target got %d bytes of %d", last.n, n)
			if time.Since(start) >= cut {
				err = os.ErrDeadlineExceeded
			}
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if last.n == 0 {
				return sample{}, fmt.Errorf("upload: nothing arrived within %v", cut)
			}
			return sample{bytes: last.n, elapsed: last.at.Sub(start), cut: true}, nil
		}
		if err != nil {
			return sample{}, err
		}
		done := sample{bytes: n, elapsed: last.at.Sub(start)}
		if h := half.Load(); h != nil {
			done.halfBytes, done.halfAt = h.n, h.at.Sub(start)
		}
		return done, nil
	} else {
		err = func() error {
			if _, err := tc.Write(header(opDownload, n)); err != nil {
				return err
			}
			buf := make([]byte, 256<<10)
			for {
				k, err := tc.Read(buf)
				moved += int64(k)
				if halfBytes == 0 && moved >= n/2 {
					halfBytes, halfAt = moved, time.Since(start)
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					return err
				}
			}
			if moved != n {
				return fmt.Errorf("downloaded %d bytes of %d", moved, n)
			}
			return nil
		}()
	}
	s := sample{bytes: moved, elapsed: time.Since(start), halfBytes: halfBytes, halfAt: halfAt}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		s.cut, err = true, nil
	}
	return s, err
}

// tool is one way through the link for the throughput table.
type tool struct {
	name string
	addr string        // where a transfer dials ("": not available)
	link *linkemu.Link // the link its bytes cross, for their count on the wire
}

// rttResult is everything measured at one round trip.
type rttResult struct {
	rtt        time.Duration
	throughput map[string][2][]sample // tool name → [download, upload]
	echo       *echoResult
	cat        *catResult
	hwm, rss   int64 // the daemon's VmHWM and VmRSS at the end, KiB
	idle       int64 // its VmRSS once started, KiB
	maxBuf     int64 // its maxBufferedBytes (a connection's budget)
	queue      int64
}

func (c *config) runRTT(dir, target, catFile string, rtt time.Duration) (*rttResult, error) {
	res := &rttResult{rtt: rtt, throughput: map[string][2][]sample{}, queue: c.linkParams(rtt, 0).Queue}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	rawLink, err := c.startLink(target, rtt)
	if err != nil {
		return nil, err
	}
	defer rawLink.Close()

	ddir, err := os.MkdirTemp(dir, "ahpd")
	if err != nil {
		return nil, err
	}
	d, err := benchproc.StartDaemon(c.ahpd, ddir, []string{"--no-default-terminal", "--log-level", c.daemonLog}, nil)
	if err != nil {
		return nil, err
	}
	defer d.Stop()
	{
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = ahpv1.NewTCPServiceClient(d.Conn).AllowTCP(cctx, &ahpv1.AllowTCPRequest{Rule: target})
		ccancel()
		if err != nil {
			return nil, err
		}
	}
	if res.idle, err = termbench.StatusKiB(d.Cmd.Process.Pid, "VmRSS"); err != nil {
		return nil, err
	}
	if res.maxBuf, err = c.limit(d, "maxBufferedBytes"); err != nil {
		return nil, err
	}
	daemonLink, err := c.startLink(d.Addr, rtt)
	if err != nil {
		return nil, err
	}
	defer daemonLink.Close()
	fwd, err := c.startForward(daemonLink.Addr(), d.Token, target, false)
	if err != nil {
		return nil, err
	}
	defer fwd.stop()

	tools := []tool{{name: "raw TCP", addr: rawLink.Addr(), link: rawLink}, {name: "ahpctl forward", addr: fwd.addr, link: daemonLink}, {name: "chisel"}}
	if c.compress {
		fz, err := c.startForward(daemonLink.Addr(), d.Token, target, true)
		if err != nil {
			return nil, err
		}
		defer fz.stop()
		tools = append(tools, tool{name: "ahpctl forward --compress", addr: fz.addr, link: daemonLink})
	}
	if c.chisel != "" {
		ch, err := c.startChisel(rtt, target)
		if err != nil {
			return nil, fmt.Errorf("chisel: %w", err)
		}
		defer ch.stop()
		tools[2].addr, tools[2].link = ch.addr, ch.link
	}

	// Throughput: per round, download then upload, the tools in an order
	// that turns round by round.
	for r := range c.rounds {
		for _, up := range []bool{false, true} {
			for k := range tools {
				t := tools[(k+r)%len(tools)]
				if t.addr == "" {
					continue
				}
				w0 := wireBytes(t.link, up)
				s, err := transfer(t.addr, up, c.size, c.cut)
				if err != nil {
					return nil, fmt.Errorf("%s %s: %w", t.name, dirName(up), err)
				}
				s.wire = wireBytes(t.link, up) - w0
				fmt.Fprintf(os.Stderr, "  round %d %-26s %-8s %7.2f MB/s%s\n", r+1, t.name, dirName(up), s.mbps(), cutNote(s))
				v := res.throughput[t.name]
				i := 0
				if up {
					i = 1
				}
				v[i] = append(v[i], s)
				res.throughput[t.name] = v
			}
		}
	}

	if c.keys > 0 {
		e, err := c.echo(ctx, d, daemonLink.Addr(), rawLink.Addr(), target, rtt)
		if err != nil {
			return nil, fmt.Errorf("echo: %w", err)
		}
		res.echo = e
	}
	if catFile != "" {
		cr, err := c.catAttach(ctx, d, daemonLink.Addr(), catFile, rtt)
		if err != nil {
			return nil, fmt.Errorf("cat to attach: %w", err)
		}
		res.cat = cr
	}
	pid := d.Cmd.Process.Pid
	if res.hwm, err = termbench.StatusKiB(pid, "VmHWM"); err != nil {
		return nil, err
	}
	if res.rss, err = termbench.StatusKiB(pid, "VmRSS"); err != nil {
		return nil, err
	}
	return res, nil
}

// limit reads one of the daemon's limits (`ahpctl limits get`), a size.
func (c *config) limit(d *benchproc.Daemon, key string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.ahpctl, "--control", d.Sock, "-o", "json", "limits", "get", key).Output()
	if err != nil {
		return 0, fmt.Errorf("ahpctl limits get %s: %w", key, err)
	}
	var v struct{ Value string }
	if err := json.Unmarshal(out, &v); err != nil {
		return 0, fmt.Errorf("ahpctl limits get %s: %w", key, err)
	}
	return units.ParseSize(v.Value)
}

// wireBytes is what l has delivered so far up or down.
func wireBytes(l *linkemu.Link, up bool) int64 {
	if up {
		return l.Stats().Up.Bytes
	}
	return l.Stats().Down.Bytes
}

func dirName(up bool) string {
	if up {
		return "upload"
	}
	return "download"
}

func cutNote(s sample) string {
	if s.cut {
		return fmt.Sprintf(" (cut at %v: %d MiB moved)", s.elapsed.Round(time.Second), s.bytes>>20)
	}
	return ""
}

// proc is a child process listening on addr.
type proc struct {
	cmd  *exec.Cmd
	addr string
	also *proc         // a second process stopped with this one (chisel's server)
	link *linkemu.Link // a link closed with it (in front of chisel's server)
}

func (p *proc) stop() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	benchproc.WaitOrKill(p.cmd, 10*time.Second)
	if p.link != nil {
		p.link.Close()
	}
	p.also.stop()
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func (c *config) command(bin string, args []string, env []string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	if c.verbose {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	return cmd
}

// waitListen waits (timeout at most) until addr accepts a connection.
func waitListen(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on %s after %v", addr, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startForward runs `ahpctl forward --url` to the daemon through the
// link at daemonAddr, forwarding a free local port to target.
func (c *config) startForward(daemonAddr, token, target string, compress bool) (*proc, error) {
	local, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{"forward", "--quiet", "--url", "http://" + daemonAddr}
	if compress {
		args = append(args, "--compress")
	}
	args = append(args, local, target)
	cmd := c.command(c.ahpctl, args, []string{"AHP_TOKEN=" + token})
	if !c.verbose {
		cmd.Stderr = os.Stderr // its errors
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, addr: local}
	if err := waitListen(local, 20*time.Second); err != nil {
		p.stop()
		return nil, fmt.Errorf("ahpctl forward: %w", err)
	}
	return p, nil
}

// startChisel runs a chisel server on a free port, a link at rtt in front
// of it, and a chisel client through the link forwarding a free local
// port to target; it returns when a byte went through the tunnel.
func (c *config) startChisel(rtt time.Duration, target string) (*proc, error) {
	saddr, err := freePort()
	if err != nil {
		return nil, err
	}
	_, sport, _ := net.SplitHostPort(saddr)
	srv := c.command(c.chisel, []string{"server", "--host", "127.0.0.1", "--port", sport}, nil)
	if err := srv.Start(); err != nil {
		return nil, err
	}
	sp := &proc{cmd: srv, addr: saddr}
	if err := waitListen(saddr, 20*time.Second); err != nil {
		sp.stop()
		return nil, fmt.Errorf("server: %w", err)
	}
	link, err := c.startLink(saddr, rtt)
	if err != nil {
		sp.stop()
		return nil, err
	}
	local, err := freePort()
	if err != nil {
		sp.stop()
		link.Close()
		return nil, err
	}
	lhost, lport, _ := net.SplitHostPort(local)
	cli := c.command(c.chisel, []string{"client", "--keepalive", "0", "http://" + link.Addr(), lhost + ":" + lport + ":" + target}, nil)
	if err := cli.Start(); err != nil {
		sp.stop()
		link.Close()
		return nil, err
	}
	cp := &proc{cmd: cli, addr: local, also: sp, link: link}
	// The client listens before its SSH session is up: wait until a
	// download of a byte goes through.
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := transfer(local, false, 1, 5*time.Second)
		if err == nil && !s.cut {
			break
		}
		if time.Now().After(deadline) {
			cp.stop()
			return nil, fmt.Errorf("no byte through the chisel client within 30 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return cp, nil
}

// median returns the median of v (0 for none).
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
