// Command membench measures what a deployed ahpd holds in memory idle
// (issue 17's memory targets, docs/benchmarks-memory.md): the daemon is
// started the way `ahpd` with no config starts (the default terminal on
// the login shell), then idle viewers connect, each on a WebSocket of its
// own, subscribed to the default terminal, with permessage-deflate offered
// by the client and so negotiated whenever the daemon allows it. Every
// viewer receives a few KiB of output (messages above the daemon's 1 KiB
// compression threshold, so compression is used, not only negotiated) and
// sends one message large enough that the client compresses it too (a
// browser compresses everything it sends). Then the daemon is left idle
// and measured: VmRSS (and its anonymous and file parts) from /proc, the
// live heap, stacks and goroutines from /metrics, after the daemon's
// memory returner ran (a connection's end triggers it: a GC and the
// return of free memory to the OS 1 s later).
//
//	go build -o bin/ahpd ./cmd/ahpd
//	flock /tmp/ahp-bench.lock go run ./bench/membench -ahpd bin/ahpd -viewers 1,50,200
//
// -ahpd takes a comma-separated list of binaries, measured one after the
// other in the same run (e.g. an old build against the new one);
// -compression the daemon's --websocket-compression values to measure.
// -flood MiB adds a table of a terminal flood to one viewer with
// compression: wire bytes, the daemon's CPU per MB, for `cat` of a text
// file and for repeated screen redraws (what a context-takeover window
// buys), so that a compression mode's cost in bytes and CPU is measured
// with its memory.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ahp-dev/ahpd/bench/benchproc"
	"github.com/ahp-dev/ahpd/bench/termbench"
	"github.com/ahp-dev/ahpd/ctl/client"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

func main() {
	bins := flag.String("ahpd", "bin/ahpd", "comma-separated ahpd binaries to measure, one after the other")
	viewers := flag.String("viewers", "1,50,200", "comma-separated counts of idle viewers (cumulative, ascending)")
	modes := flag.String("compression", "deflate,none", "comma-separated --websocket-compression values")
	flood := flag.Int("flood", 0, "also measure a flood of this many MiB of text to one viewer with compression (0: no)")
	flag.StringVar(&heapProfile, "heapprofile", "", "after the last row of each daemon, have it write a heap profile to `prefix`.BINARY.MODE (AHPD_HEAPPROFILE, SIGUSR1)")
	flag.Parse()
	var counts []int
	for _, s := range strings.Split(*viewers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 1000 || len(counts) > 0 && n <= counts[len(counts)-1] {
			fmt.Fprintf(os.Stderr, "membench: -viewers: %q is not an ascending list of counts from 1 to 1000\n", *viewers)
			os.Exit(2)
		}
		counts = append(counts, n)
	}
	if err := run(strings.Split(*bins, ","), strings.Split(*modes, ","), counts, *flood); err != nil {
		fmt.Fprintln(os.Stderr, "membench:", err)
		os.Exit(1)
	}
}

func run(bins, modes []string, counts []int, flood int) error {
	fmt.Println("| binary | compression | viewers | RSS | RSS anon | RSS file | live heap | heap spans | stacks | goroutines | RSS / viewer | heap / viewer | heap spans + stacks / viewer |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, bin := range bins {
		for _, mode := range modes {
			if err := idleTable(bin, mode, counts); err != nil {
				return fmt.Errorf("%s, %s: %w", bin, mode, err)
			}
		}
	}
	fmt.Println("\n(at start: 3 s after the daemon is up, before any connection; the other rows after the memory returner ran: a GC and the return of free memory; per viewer: the difference to the row \"0\" over the viewers)")
	if flood > 0 {
		fmt.Printf("\n| binary | workload | message bytes | wire bytes | wire / message | ahpd CPU | ahpd CPU per MB of output |\n")
		fmt.Println("|---|---|---:|---:|---:|---:|---:|")
		for _, bin := range bins {
			if err := floodTable(bin, flood); err != nil {
				return fmt.Errorf("%s, flood: %w", bin, err)
			}
		}
	}
	return nil
}

// heapProfile is -heapprofile.
var heapProfile string

// daemon is a running ahpd with its default terminal.
type daemon struct {
	*benchproc.Daemon
	dir     string
	profile string // the heap profile's file (-heapprofile), or ""
}

func start(bin, mode string, defaultTerminal bool) (*daemon, error) {
	dir, err := os.MkdirTemp("", "membench")
	if err != nil {
		return nil, err
	}
	args := []string{"--config", "none", "--websocket-compression", mode, "--log-level", "warn"}
	if !defaultTerminal {
		args = append(args, "--no-default-terminal")
	}
	// The login shell, whatever the user's: a POSIX sh, the same for
	// every run (the default terminal runs $SHELL).
	env := []string{"SHELL=/bin/sh", "PS1=$ "}
	var profile string
	if heapProfile != "" {
		p, err := filepath.Abs(fmt.Sprintf("%s.%s.%s", heapProfile, filepath.Base(bin), mode))
		if err != nil {
			return nil, err
		}
		env = append(env, "AHPD_HEAPPROFILE="+p)
		profile = p
	}
	bd, err := benchproc.StartDaemon(bin, dir, args, env)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &daemon{Daemon: bd, dir: dir, profile: profile}, nil
}

func (d *daemon) stop() {
	d.Stop()
	os.RemoveAll(d.dir)
}

// figures are one measurement of the daemon.
type figures struct {
	rss, anon, file int64
	heap, inuse     int64 // live heap, heap spans in use
	stacks, gors    int64
}

func (d *daemon) measure() (figures, error) {
	var f figures
	var err error
	pid := d.Cmd.Process.Pid
	for _, v := range []struct {
		field string
		dst   *int64
	}{{"VmRSS", &f.rss}, {"RssAnon", &f.anon}, {"RssFile", &f.file}} {
		kib, e := termbench.StatusKiB(pid, v.field)
		if e != nil {
			return f, e
		}
		*v.dst = kib << 10
	}
	body, err := termbench.Metrics(context.Background(), d.Base(), d.Token)
	if err != nil {
		return f, err
	}
	for _, v := range []struct {
		name string
		dst  *int64
	}{{"go_memstats_heap_alloc_bytes", &f.heap}, {"go_memstats_heap_inuse_bytes", &f.inuse}, {"go_memstats_stack_inuse_bytes", &f.stacks}, {"go_goroutines", &f.gors}} {
		x, err := termbench.Metric(bytes.NewReader(body), v.name)
		if err != nil {
			return f, err
		}
		*v.dst = int64(x)
	}
	return f, nil
}

// settle lets the daemon's memory returner run: a connection that ends
// arms it (a GC and the return of free memory 1 s later).
func (d *daemon) settle(ctx context.Context) error {
	c, _, err := client.Dial(ctx, d.WS(), client.Options{Token: d.Token})
	if err != nil {
		return err
	}
	c.Close()
	time.Sleep(2500 * time.Millisecond)
	return nil
}

func idleTable(bin, mode string, counts []int) error {
	d, err := start(bin, mode, true)
	if err != nil {
		return err
	}
	defer d.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	time.Sleep(3 * time.Second)
	f, err := d.measure()
	if err != nil {
		return err
	}
	name := filepath.Base(bin)
	row := func(what string, f figures, n int, base figures) {
		per := func(a, b int64) string {
			if n == 0 {
				return "—"
			}
			return fmt.Sprintf("%.1f KiB", float64(a-b)/float64(n)/1024)
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %s | %s | %s |\n", name, mode, what, mib(f.rss), mib(f.anon), mib(f.file),
			mib(f.heap), mib(f.inuse), kib(f.stacks), f.gors, per(f.rss, base.rss), per(f.heap, base.heap), per(f.inuse+f.stacks, base.inuse+base.stacks))
	}
	row("0 (at start)", f, 0, f)
	if err := d.settle(ctx); err != nil {
		return err
	}
	base, err := d.measure()
	if err != nil {
		return err
	}
	row("0", base, 0, base)
	const uri = "ahp-terminal:/shell"
	var subs []*client.Sub
	var conns []*client.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for round, n := range counts {
		for len(subs) < n {
			c, _, err := client.Dial(ctx, d.WS(), client.Options{Token: d.Token, Deflate: true})
			if err != nil {
				return fmt.Errorf("viewer %d: %w", len(subs)+1, err)
			}
			conns = append(conns, c)
			s, err := c.Subscribe(ctx, uri, nil)
			if err != nil {
				return fmt.Errorf("viewer %d: %w", len(subs)+1, err)
			}
			subs = append(subs, s)
			if err := termbench.UntilReady(ctx, s); err != nil {
				return err
			}
			// A message the client compresses (a browser compresses
			// every message; this client those of 512 bytes and more):
			// a request for a method that does not exist, answered with
			// an error.
			if err := c.Call(ctx, "membench/pad", map[string]string{"pad": strings.Repeat("x", 600)}, nil); err == nil {
				return errors.New("membench/pad: no error")
			}
		}
		// Output for every viewer: a few KiB in messages above the
		// compression threshold.
		marker := fmt.Sprintf("MEMBENCH-%d-DONE", round)
		cmd := fmt.Sprintf("i=0; while [ $i -lt 150 ]; do echo \"line $i of the membench output, the quick brown fox jumps over the lazy dog\"; i=$((i+1)); done; echo %s\r",
			strings.Replace(marker, "-", "-''", 1))
		if err := subs[0].Send(ctx, termbench.Input(cmd)); err != nil {
			return err
		}
		var wg sync.WaitGroup
		errs := make(chan error, len(subs))
		for _, s := range subs {
			wg.Go(func() {
				if _, _, err := termbench.Drain(ctx, s, marker); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
		if err := d.settle(ctx); err != nil {
			return err
		}
		f, err := d.measure()
		if err != nil {
			return err
		}
		row(strconv.Itoa(n), f, n, base)
	}
	// Goroutine stacks shrink by half at most per collection: an idle
	// daemon collects at least every 2 minutes, so a viewer idle for a
	// few minutes has had several. Two more runs of the returner.
	n := counts[len(counts)-1]
	for range 2 {
		if err := d.settle(ctx); err != nil {
			return err
		}
	}
	if f, err = d.measure(); err != nil {
		return err
	}
	row(fmt.Sprintf("%d, 2 GCs later", n), f, n, base)
	if d.profile != "" {
		return d.writeHeapProfile(ctx)
	}
	return nil
}

// writeHeapProfile has the daemon write its heap profile (SIGUSR1) and
// waits until the file holds a whole one: a gzip stream that reads to its
// end. An earlier run's file is removed first, so the one found is new.
func (d *daemon) writeHeapProfile(ctx context.Context) error {
	if err := os.Remove(d.profile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := d.Cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if wholeGzip(d.profile) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("heap profile %s not written: %w", d.profile, ctx.Err())
		case <-tick.C:
		}
	}
}

// wholeGzip reports whether the file at path is a complete gzip stream
// (a heap profile being written is not yet).
func wholeGzip(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return false
	}
	_, err = io.Copy(io.Discard, z)
	return err == nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
func kib(n int64) string { return fmt.Sprintf("%.0f KiB", float64(n)/1024) }

// countingDialer counts the bytes a client reads from its sockets: the
// compressed size of what the daemon sent.
type countingDialer struct{ in atomic.Int64 }

type countedConn struct {
	net.Conn
	in *atomic.Int64
}

func (c countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.Add(int64(n))
	return n, err
}

func (cd *countingDialer) client() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countedConn{c, &cd.in}, nil
	}}}
}

// floodTable runs two workloads through a daemon with compression, to one
// viewer that offers permessage-deflate: `cat` of a text file of mib MiB,
// and 2,000 redraws of a 24×80 screen whose lines change a little from one
// to the next (a `top` or `watch`).
func floodTable(bin string, mib int) error {
	d, err := start(bin, "deflate", false)
	if err != nil {
		return err
	}
	defer d.stop()
	file := filepath.Join(d.dir, "data.txt")
	if err := termbench.WriteTextFile(file, mib<<20); err != nil {
		return err
	}
	script := filepath.Join(d.dir, "redraw.sh")
	// Each redraw: home, 22 lines of a process table whose figures
	// change, in a message of its own (the loop sleeps between screens).
	redraw := `i=0; while [ $i -lt 2000 ]; do printf '\033[H'; j=0; while [ $j -lt 22 ]; do printf '%5d root      20   0 %7d %6d %5d S  %4d.%d  0.%d   0:%02d.%02d kworker/u%d:%d-events\033[K\r\n' $((1000+j)) $((i*7+j*13)) $((j*311)) $((i%97)) $((i%13)) $((j%10)) $((i%7)) $((i%60)) $((j*3%60)) $j $((i%4)); j=$((j+1)); done; i=$((i+1)); sleep 0.002; done`
	if err := os.WriteFile(script, []byte(redraw), 0o600); err != nil {
		return err
	}
	terms := ahpv1.NewTerminalServiceClient(d.Conn)
	for _, w := range []struct{ name, cmd string }{
		{fmt.Sprintf("cat of a %d MiB text file", mib), "cat " + file},
		{"2,000 redraws of a 22-line process table", "sh " + script},
	} {
		if err := floodRow(d, terms, bin, w.name, w.cmd); err != nil {
			return err
		}
	}
	return nil
}

func floodRow(d *daemon, terms ahpv1.TerminalServiceClient, bin, name, cmd string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	id := fmt.Sprintf("flood%d", time.Now().UnixNano())
	r, err := terms.CreateTerminal(ctx, &ahpv1.CreateTerminalRequest{Id: id, Command: "/bin/sh",
		Args: []string{"-c", "read x; " + cmd + "; echo; echo MEMBENCH''-END; read y"}})
	if err != nil {
		return err
	}
	var cd countingDialer
	c, _, err := client.Dial(ctx, d.WS(), client.Options{Token: d.Token, Deflate: true, HTTPClient: cd.client()})
	if err != nil {
		return err
	}
	defer c.Close()
	sub, err := c.Subscribe(ctx, r.GetChannel().GetUri(), nil)
	if err != nil {
		return err
	}
	if err := termbench.UntilReady(ctx, sub); err != nil {
		return err
	}
	st0, err := d.connBytes(ctx)
	if err != nil {
		return err
	}
	in0, cpu0 := cd.in.Load(), d.CPU()
	if err := sub.Send(ctx, termbench.Input("\r")); err != nil {
		return err
	}
	out, snaps, err := termbench.Drain(ctx, sub, "MEMBENCH-END")
	if err != nil {
		return err
	}
	cpu := d.CPU() - cpu0
	wire := cd.in.Load() - in0
	st1, err := d.connBytes(ctx)
	if err != nil {
		return err
	}
	msg := st1 - st0
	note := ""
	if snaps > 0 {
		note = fmt.Sprintf(" (%d snapshots)", snaps)
	}
	fmt.Printf("| %s | %s%s | %.1f MB | %.2f MB | %.3f | %v | %.2f ms/MB |\n", filepath.Base(bin), name, note, float64(msg)/1e6, float64(wire)/1e6,
		float64(wire)/float64(msg), cpu, float64(cpu.Microseconds())/1e3/(float64(out)/1e6))
	return nil
}

// connBytes is the message bytes the daemon sent on its connections
// (before compression), from its stats.
func (d *daemon) connBytes(ctx context.Context) (int64, error) {
	st, err := ahpv1.NewDaemonServiceClient(d.Conn).GetStats(ctx, &ahpv1.GetStatsRequest{})
	if err != nil {
		return 0, err
	}
	var n int64
	for _, c := range st.GetConnections() {
		n += c.GetCounters().GetBytesOut()
	}
	return n, nil
}
