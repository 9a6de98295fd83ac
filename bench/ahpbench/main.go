// Command ahpbench measures a real ahpd process the way it is deployed —
// the daemon in its own process, the viewer in another (this one) — against
// the raw PTY in the same run, and prints a table:
//
//   - throughput: `cat` of a 64 MiB text file to one viewer, as a ratio to
//     reading the same PTY directly, and the daemon's CPU per MB (utime +
//     stime from /proc) as a ratio to the raw reader's (the raw read runs
//     in a process of its own, which reports its CPU: -rawread FILE,
//     termbench.RawReadProcess);
//   - keystroke echo p50/p99, idle and while a second subscription on the
//     same connection floods (`yes`), against a raw PTY echo;
//   - both against a minimal relay too (relay.go): PTY bytes copied to and
//     from binary WebSocket messages by a Go process of its own;
//   - echo against a C relay as well (floor.go, testdata/crelay.c), the
//     floor of any relay process, when the machine has a C compiler, and
//     against the same relay in Go (gorelay.go), the floor of a Go one;
//   - fan-out: the same `cat` to 8 viewers, each on a connection of its own;
//   - memory after load (memory.go): the daemon's live heap and RSS idle,
//     at the peak of a 256 MiB `cat` to 1 and to 8 viewers, and how long
//     after the terminal's end both are back near idle.
//
// Run it with `make bench-process` (which builds bin/ahpd first), or:
//
//	go build -o bin/ahpd ./cmd/ahpd && go run ./bench/ahpbench -ahpd bin/ahpd
//
// -procs N runs the daemon with GOMAXPROCS=N (default: its own plan, one
// P for terminals); -fanout N sets the fan-out viewers;
// -window, -frame and -message set the throughput viewer's receive limits
// (default: what `ahpctl attach` asks for, an 8 MiB window with the host's
// default frame and message limits; -window 0: the host's defaults, with
// which the viewer falls behind a flood and gets a snapshot instead of most
// of the stream).
// -gap D spaces the timed keystrokes D apart (default: back to back).
// -memory=false leaves the memory table out.
// -recordruns N adds N pairs of the one-viewer cat, without and with a
// recording (record = "output", issue 42), alternating, and prints the
// daemon's CPU per MB of both and their ratio (record.go).
//
// The last table sets the figures issue 17 names against its targets, all
// from this run: ahpd's CPU per MB over the raw reader's, each further
// viewer's CPU per MB over the raw reader's, the daemon's CPU per idle
// keystroke, and the idle echo p50 over the C relay's.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ahp-dev/ahpd/bench/benchproc"
	"github.com/ahp-dev/ahpd/bench/termbench"
	"github.com/ahp-dev/ahpd/ctl"
	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/flow"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

func main() {
	bin := flag.String("ahpd", "bin/ahpd", "the ahpd binary to measure")
	runs := flag.Int("runs", 3, "throughput runs (each one raw read and one through ahpd)")
	samples := flag.Int("samples", 300, "keystrokes per echo measurement")
	fanout := flag.Int("fanout", 8, "viewers in the fan-out runs, each on a connection of its own (0: none, else at least 2)")
	procs := flag.Int("procs", 0, "run the daemon with GOMAXPROCS set to this (0: the daemon's default)")
	profile := flag.String("cpuprofile", "", "write this process's (the viewer's) CPU profile to `file`")
	// With the frame and message flags' defaults, which are the host's,
	// the throughput viewer subscribes as `ahpctl attach` does.
	flag.Int64Var(&benchLimits.WindowBytes, "window", ctl.AttachWindow, "the throughput viewer's windowBytes, by default ahpctl attach's (0: the host's defaults for all three limits)")
	flag.Int64Var(&benchLimits.MaximumFrameBytes, "frame", 64<<10, "the throughput viewer's maximumFrameBytes (with -window)")
	flag.Int64Var(&benchLimits.MaximumMessageBytes, "message", 1<<20, "the throughput viewer's maximumMessageBytes (with -window)")
	flag.DurationVar(&keyGap, "gap", 0, "pause between timed keystrokes (0: back to back; 10ms: a fast typist, every wake-up from idle)")
	flag.StringVar(&daemonLog, "log", "warn", "the daemon's --log-level (its log goes to stderr)")
	flag.BoolVar(&floodEcho, "flood", true, "time keystrokes with a neighbour flooding too (false: idle echo only, e.g. to profile it)")
	flag.IntVar(&recordRuns, "recordruns", 0, "recording runs (issue 42): pairs of the throughput cat to one viewer, without and with record = \"output\", alternating, and the ratio of the daemon's CPU per MB (0: none; they run with -runs 0 too)")
	flag.BoolVar(&memoryRuns, "memory", true, "measure the daemon's heap and RSS after a 256 MiB cat to 1 and to -fanout viewers")
	relayMode := flag.Bool("relay", false, "serve the minimal relay (ahpbench starts it itself)")
	tcpRelayMode := flag.Bool(tcpRelayFlag, false, "serve the Go TCP relay to one connection (ahpbench starts it itself)")
	rawFile := flag.String(termbench.RawReadFlag, "", "read `file` raw from a PTY and print the bytes, time and CPU as JSON (ahpbench starts it itself; so does make bench-browser)")
	flag.Float64Var(&pace, "pace", 0, "also run the fan-out at this rate in MB/s (0: not), with the program writing no faster, so that every viewer keeps up")
	flag.IntVar(&pacedRuns, "pacedruns", 2, "paced fan-out runs (with -pace and -fanout; they run with -runs 0 too); the further viewer's figure spreads widely from run to run, so take its median over many")
	pacedFile := flag.String(pacedCatFlag, "", "write `file` to stdout at -pace MB/s (ahpbench starts it itself)")
	loopAddr := flag.String(loopSendFlag, "", "with -pacedcat: write the file to TCP connections to `address` instead, and print the CPU the sending took as JSON (ahpbench starts it itself)")
	loopConns := flag.Int(loopConnsFlag, 1, "with -loopsend: this many connections, each sent the same bytes")
	loopBytes := flag.Int64(loopBytesFlag, 0, "with -loopsend: send only the file's first `bytes` (0: all)")
	flag.Parse()
	if *loopAddr != "" && *pacedFile == "" {
		fmt.Fprintln(os.Stderr, "ahpbench -loopsend: needs -pacedcat FILE and -pace R")
		os.Exit(2)
	}
	if *rawFile != "" {
		termbench.RawReadMain("ahpbench", *rawFile)
	}
	if *pacedFile != "" {
		if pace <= 0 {
			fmt.Fprintln(os.Stderr, "ahpbench -pacedcat: -pace must be above 0")
			os.Exit(2)
		}
		if *loopAddr != "" {
			if err := loopSendMain(*loopAddr, *loopConns, *loopBytes, *pacedFile, pace*1e6); err != nil {
				fmt.Fprintln(os.Stderr, "ahpbench -loopsend:", err)
				os.Exit(1)
			}
			return
		}
		if err := pacedCat(os.Stdout, *pacedFile, pace*1e6); err != nil {
			fmt.Fprintln(os.Stderr, "ahpbench -pacedcat:", err)
			os.Exit(1)
		}
		return
	}
	if *relayMode {
		if err := serveRelay(); err != nil {
			fmt.Fprintln(os.Stderr, "ahpbench -relay:", err)
			os.Exit(1)
		}
		return
	}
	if *tcpRelayMode {
		if err := tcpRelayMain(); err != nil {
			fmt.Fprintln(os.Stderr, "ahpbench -tcprelay:", err)
			os.Exit(1)
		}
		return
	}
	if err := checkFanout(*fanout); err != nil {
		fmt.Fprintln(os.Stderr, "ahpbench:", err)
		os.Exit(2)
	}
	if pace > 0 && pacedRuns < 1 {
		fmt.Fprintf(os.Stderr, "ahpbench: -pacedruns %d: want at least 1 paced run with -pace\n", pacedRuns)
		os.Exit(2)
	}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "ahpbench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*bin, *runs, *samples, *procs, *fanout); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "ahpbench:", err)
		os.Exit(1)
	}
}

const fileSize = 64 << 20

// checkFanout rejects a -fanout the fan-out table cannot use: it reports
// each viewer past the first, and with one there is none (the throughput
// table is the one-viewer run).
func checkFanout(n int) error {
	if n < 0 || n == 1 {
		return fmt.Errorf("-fanout %d: want 0 (no fan-out runs) or 2 and more viewers", n)
	}
	return nil
}

// recordRuns is how many recording pairs to run (-recordruns).
var recordRuns int

// memoryRuns: print the memory-after-load table (-memory).
var memoryRuns bool

// floodEcho: time keystrokes with a neighbour flooding too (-flood).
var floodEcho bool

// pace is the paced fan-out's rate in MB/s (-pace; 0: none).
var pace float64

// pacedRuns is how many paced fan-out runs to make (-pacedruns).
var pacedRuns int

// keyGap is the pause between two timed keystrokes (-gap).
var keyGap time.Duration

// benchLimits are the throughput viewer's receive limits (flags).
var benchLimits flow.ReceiveLimits

func run(bin string, runs, samples, procs, fanout int) error {
	dir, err := os.MkdirTemp("", "ahpbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "data.txt")
	if err := termbench.WriteTextFile(file, fileSize); err != nil {
		return fmt.Errorf("writing the test file: %w", err)
	}
	d, err := startDaemon(bin, dir, procs)
	if err != nil {
		return err
	}
	defer d.Stop()

	rl, err := startRelay()
	if err != nil {
		return err
	}
	defer rl.stop()

	fmt.Printf("ahpbench: %s (GOMAXPROCS %s), %d runs, viewer limits %s\n\n", bin, map[bool]string{true: "default", false: strconv.Itoa(procs)}[procs == 0], runs, limitsName())
	var cRelay string // "": no C compiler
	if runs > 0 || samples > 0 {
		cRelay, err = buildCRelay(dir)
		if errors.Is(err, errNoCompiler) {
			fmt.Println("(no C compiler: the C relay's figures are left out)")
		} else if err != nil {
			return err
		}
	}
	if runs > 0 {
		if err := throughputTable(d, rl, cRelay, file, runs); err != nil {
			return err
		}
		if fanout > 0 {
			if err := fanoutTable(d, file, fanout); err != nil {
				return err
			}
		}
	}
	if recordRuns > 0 {
		if err := recordTable(d, file, recordRuns); err != nil {
			return err
		}
	}
	if fanout > 0 && pace > 0 {
		if err := pacedTable(d, file, fanout, pace, pacedRuns); err != nil {
			return err
		}
	}
	if memoryRuns {
		if err := memoryTable(d, file, fanout); err != nil {
			return err
		}
	}
	if samples > 0 {
		if err := echoTable(d, rl, cRelay, samples); err != nil {
			return err
		}
	}
	printTargets()
	return nil
}

// mb is the test file's size in MB.
const mb = float64(fileSize) / 1e6

// throughputTable prints runs of `cat file` read raw, through the relays
// and through ahpd to one viewer, and the medians. cRelay is the C
// relay's binary ("": its column is left empty).
func throughputTable(d *daemon, rl *relay, cRelay, file string, runs int) error {
	fmt.Println("| run | raw PTY read | minimal relay | through ahpd | ratio to raw | ratio to relay | ahpd CPU | of it in user space | viewer CPU | ahpd syscalls | snapshots | whole file | raw reader CPU | raw reader reads | ahpd CPU / raw reader CPU | relay CPU / raw reader CPU | C relay CPU / raw reader CPU |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	var ratios, relayRatios, cpus, userCPUs, rawCPUs, cpuRatios, relayCPURatios, cRelayCPURatios, shares []float64
	snapshots := 0
	for i := 1; i <= runs; i++ {
		rr, err := rawRead(file)
		if err != nil {
			return err
		}
		raw := rr.Elapsed
		rn, relayed, relayCPU, err := rl.throughput(file)
		if err != nil {
			return fmt.Errorf("minimal relay throughput: %w", err)
		}
		if rn < fileSize {
			return fmt.Errorf("minimal relay: %d of %d bytes", rn, fileSize)
		}
		cRelayCol := "–"
		if cRelay != "" {
			cn, _, cCPU, err := cRelayThroughput(cRelay, file, nil)
			if err != nil {
				return fmt.Errorf("C relay throughput: %w", err)
			}
			if cn < fileSize {
				return fmt.Errorf("C relay: %d of %d bytes", cn, fileSize)
			}
			x := perMB(cCPU) / rawMsPerMB(rr)
			cRelayCPURatios, cRelayCol = append(cRelayCPURatios, x), fmt.Sprintf("%.2f", x)
		}
		r, err := d.throughput(fmt.Sprintf("cat%d", i), file, 1)
		if err != nil {
			return fmt.Errorf("throughput run %d through ahpd (cat of a %d-byte file to one viewer): %w", i, fileSize, err)
		}
		// The file's bytes only (the rest is the echoed newline and the
		// marker line).
		rawRate, relayRate, rate := mbps(fileSize, raw), mbps(fileSize, relayed), mbps(min(r.bytes, fileSize), r.elapsed)
		msPerMB, userPerMB := float64(r.cpu.Milliseconds())/mb, float64(r.userCPU.Milliseconds())/mb
		ratios, relayRatios, cpus = append(ratios, rate/rawRate), append(relayRatios, rate/relayRate), append(cpus, msPerMB)
		userCPUs = append(userCPUs, userPerMB)
		rawCPUs, cpuRatios = append(rawCPUs, rawMsPerMB(rr)), append(cpuRatios, msPerMB/rawMsPerMB(rr))
		relayMsPerMB := perMB(relayCPU)
		relayCPURatios = append(relayCPURatios, relayMsPerMB/rawMsPerMB(rr))
		shares, snapshots = append(shares, float64(min(r.bytes, fileSize))/fileSize), snapshots+r.snapshots
		// whole file: the file's size over the time until the viewer had
		// its end (what a viewer that got snapshots shows it at).
		fmt.Printf("| %d | %.1f MB/s | %.1f MB/s | %.1f MB/s | %.2f | %.2f | %.1f ms/MB | %.1f ms/MB | %.1f ms/MB | %.0f/MB | %d | %.1f MB/s | %.1f ms/MB | %.0f/MB | %.2f | %.2f | %s |\n",
			i, rawRate, relayRate, rate, rate/rawRate, rate/relayRate, msPerMB, userPerMB, float64(r.viewerCPU.Milliseconds())/mb, float64(r.syscalls)/mb, r.snapshots, mbps(fileSize, r.elapsed),
			rawMsPerMB(rr), float64(rr.Reads)/mb, msPerMB/rawMsPerMB(rr), relayMsPerMB/rawMsPerMB(rr), cRelayCol)
	}
	fmt.Printf("\nmedian ratio to raw %.2f, to the relay %.2f; median ahpd CPU %.1f ms/MB, %.1f of it in user space\n", median(ratios), median(relayRatios), median(cpus), median(userCPUs))
	fmt.Printf("median raw reader CPU %.1f ms/MB; median ahpd CPU / raw reader CPU %.2f, the minimal relay's %.2f\n\n", median(rawCPUs), median(cpuRatios), median(relayCPURatios))
	targets.rawCPU, targets.cpu1, targets.cpuRatio = median(rawCPUs), median(cpus), median(cpuRatios)
	targets.relayCPURatio, targets.cRelayCPURatio = median(relayCPURatios), median(cRelayCPURatios)
	if len(cRelayCPURatios) > 0 {
		fmt.Printf("median C relay CPU / raw reader CPU %.2f\n\n", targets.cRelayCPURatio)
	}
	targets.shares, targets.snapshots = shares, snapshots
	return nil
}

// targets are the figures of issue 17's targets, gathered over the run
// and printed at its end (printTargets).
var targets struct {
	rawCPU, cpu1, cpuRatio float64   // medians, ms/MB: the raw reader's, ahpd's to one viewer, their ratio
	relayCPURatio          float64   // median: the minimal relay's CPU per MB / the raw reader's
	cRelayCPURatio         float64   // median: the C relay's (batched) CPU per MB / the raw reader's; 0 without a C compiler
	shares                 []float64 // per run, the share of the stream that viewer received (the rest it got as snapshots)
	snapshots              int       // snapshots it got over the runs
	viewers                int
	perViewer              []float64 // the fan-out runs' (cpu(N) − cpu(1)) / (N − 1) / raw reader CPU
	pacedPerViewer         []float64 // the same at -pace, cpu(1) measured at that pace too
	pacedOverBare          []float64 // the paced further viewer's CPU per MB / a further bare loopback socket's
	keystroke              time.Duration
	p50Ratio               float64 // ahpd's idle echo p50 / the C relay's
	p99, cP99              time.Duration
}

// printTargets prints issue 17's figures from this run, beside its targets.
func printTargets() {
	fmt.Println("\n| issue 17, this run | measured | target |")
	fmt.Println("|---|---:|---:|")
	if targets.rawCPU > 0 {
		fmt.Printf("| ahpd CPU per MB / raw reader's, one viewer (median ratio; %.1f / %.1f ms/MB; %s) | %.2f | ≤ 1.30 |\n", targets.cpu1, targets.rawCPU, received(), targets.cpuRatio)
		fmt.Printf("| (the minimal Go WebSocket relay's, the same runs: no protocol, no emulator, a binary message per read) | %.2f | |\n", targets.relayCPURatio)
		if targets.cRelayCPURatio > 0 {
			fmt.Printf("| (the C relay's, the same runs: an epoll loop, no WebSocket, the PTY's reads batched into one socket write) | %.2f | |\n", targets.cRelayCPURatio)
		}
	}
	if len(targets.perViewer) > 0 {
		fmt.Printf("| each further viewer's CPU per MB / raw reader's (%d viewers, per run) | %s | ≤ 0.15 |\n", targets.viewers, perRun(targets.perViewer))
	}
	if len(targets.pacedPerViewer) > 0 {
		fmt.Printf("| the same with the program paced at %g MB/s, every viewer keeping up (per run; median %.2f) | %s | ≤ 0.15 |\n", pace, median(targets.pacedPerViewer), perRun(targets.pacedPerViewer))
		fmt.Printf("| (that further viewer's CPU per MB / a further bare loopback socket's at the same rate: the floor is 1) | %s | |\n", perRun(targets.pacedOverBare))
	}
	if targets.keystroke > 0 {
		fmt.Printf("| ahpd CPU per keystroke, idle | %v | ≤ 60µs |\n", targets.keystroke)
	}
	if targets.p50Ratio > 0 {
		fmt.Printf("| idle echo p50 / C relay p50 (p99 %v, C relay's %v) | %.2f | ≤ 1.10 |\n", targets.p99, targets.cP99, targets.p50Ratio)
	}
}

// received says how much of the stream the one-viewer runs' viewer got:
// a viewer that fell behind and got snapshots instead cost the daemon
// less per MB of the file than one that got every byte.
func received() string {
	if targets.snapshots == 0 {
		return "the viewer got every byte"
	}
	return fmt.Sprintf("the viewer got %.0f %% of the stream at the median and %d snapshots in %d runs instead of the rest", 100*median(targets.shares), targets.snapshots, len(targets.shares))
}

// perRun writes one figure per run, two decimals each.
func perRun(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(s, ", ")
}

// fanoutTable prints two runs of `cat file` to viewers subscriptions on
// connections of their own, against a raw read each.
func fanoutTable(d *daemon, file string, viewers int) error {
	fmt.Printf("| %d viewers | raw PTY read | aggregate through ahpd | ratio to raw | ahpd CPU per MB of the file | snapshots | whole file | raw reader CPU | each further viewer / raw reader CPU | the same per MB it received |\n", viewers)
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	targets.viewers = viewers
	for i := 1; i <= 2; i++ {
		rr, err := rawRead(file)
		if err != nil {
			return err
		}
		raw := rr.Elapsed
		r, err := d.throughput(fmt.Sprintf("fan%d", i), file, viewers)
		if err != nil {
			return fmt.Errorf("fan-out run %d through ahpd (cat of a %d-byte file to %d viewers): %w", i, fileSize, viewers, err)
		}
		rawRate, rate := mbps(fileSize, raw), mbps(min(r.bytes, int64(viewers)*fileSize), r.elapsed)
		// Each viewer past the first: (cpu(N) − cpu(1)) / (N − 1), cpu(1)
		// the median of the one-viewer runs above, over this run's raw
		// reader.
		msPerMB := float64(r.cpu.Milliseconds()) / mb
		further := (msPerMB - targets.cpu1) / float64(viewers-1) / rawMsPerMB(rr)
		targets.perViewer = append(targets.perViewer, further)
		// Viewers that fell behind got snapshots instead of part of the
		// stream, so per MB of the file the others look cheaper than
		// they are: the same CPU over the bytes they received (all the
		// viewers' less one whole file, the first viewer's share).
		received := "—"
		if others := float64(r.bytes-fileSize) / 1e6; others > 0 {
			received = fmt.Sprintf("%.2f", (msPerMB-targets.cpu1)*mb/others/rawMsPerMB(rr))
		}
		fmt.Printf("| run %d | %.1f MB/s | %.1f MB/s | %.2f | %.1f ms/MB | %d | %.1f MB/s | %.1f ms/MB | %.2f | %s |\n",
			i, rawRate, rate, rate/rawRate, msPerMB, r.snapshots, mbps(fileSize, r.elapsed), rawMsPerMB(rr), further, received)
	}
	fmt.Println()
	return nil
}

// echoTable prints keystroke echo p50/p99 for the raw PTY, the C relay
// (when cRelay, its binary, is not ""), the same relay in Go, the minimal
// Go WebSocket relay and ahpd (idle, and with a neighbour flooding).
func echoTable(d *daemon, rl *relay, cRelay string, samples int) error {
	raw, err := termbench.RawPTYEcho(samples, keyGap)
	if err != nil {
		return fmt.Errorf("raw PTY echo: %w", err)
	}
	var floor timed
	if cRelay != "" {
		if floor, err = cRelayEcho(cRelay, samples, keyGap); err != nil {
			return fmt.Errorf("echo through the C relay: %w", err)
		}
	}
	cmd, err := goTCPRelayCommand()
	if err != nil {
		return err
	}
	goFloor, err := tcpRelayEcho(cmd, samples, keyGap)
	if err != nil {
		return fmt.Errorf("echo through the Go TCP relay: %w", err)
	}
	relayed, err := rl.echo(samples, keyGap)
	if err != nil {
		return fmt.Errorf("minimal relay echo: %w", err)
	}
	idle, flood, err := d.echo(samples, keyGap)
	if err != nil {
		return fmt.Errorf("keystroke echo through ahpd: %w", err)
	}
	ratio := func(p99 time.Duration, to []time.Duration) string {
		if len(to) == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f", float64(p99)/float64(termbench.Percentile(to, 99)))
	}
	if keyGap > 0 {
		fmt.Printf("keystrokes %v apart\n\n", keyGap)
	}
	fmt.Println("| echo | p50 | p99 | p99 / raw p99 | p99 / C relay p99 | p99 / Go relay p99 | server CPU per keystroke | p50 / C relay p50 |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|")
	rows := []struct {
		name string
		t    timed
	}{{"raw PTY", timed{d: raw}}, {"C relay (TCP, no WebSocket)", floor}, {"Go relay (TCP, no WebSocket)", goFloor}, {"minimal Go relay (WebSocket)", relayed}, {"ahpd, idle", idle}, {"ahpd, neighbour flooding", timed{d: flood}}}
	for _, r := range rows {
		if len(r.t.d) == 0 {
			continue // no C compiler
		}
		p50, p99 := termbench.Percentile(r.t.d, 50), termbench.Percentile(r.t.d, 99)
		cpu := "—"
		if r.t.cpu > 0 {
			cpu = (r.t.cpu / time.Duration(len(r.t.d))).Round(time.Microsecond).String()
		}
		p50C := "—"
		if len(floor.d) > 0 {
			p50C = fmt.Sprintf("%.2f", float64(p50)/float64(termbench.Percentile(floor.d, 50)))
		}
		fmt.Printf("| %s | %v | %v | %s | %s | %s | %s | %s |\n", r.name, p50.Round(time.Microsecond), p99.Round(time.Microsecond),
			ratio(p99, raw), ratio(p99, floor.d), ratio(p99, relayed.d), cpu, p50C)
	}
	fmt.Println("\n(server CPU per keystroke: the server process's threads' run time over the keystrokes, /proc/PID/task/*/schedstat)")
	targets.keystroke = (idle.cpu / time.Duration(len(idle.d))).Round(time.Microsecond)
	targets.p99 = termbench.Percentile(idle.d, 99).Round(time.Microsecond)
	if len(floor.d) > 0 {
		targets.p50Ratio = float64(termbench.Percentile(idle.d, 50)) / float64(termbench.Percentile(floor.d, 50))
		targets.cP99 = termbench.Percentile(floor.d, 99).Round(time.Microsecond)
	}
	return nil
}

func limitsName() string {
	if benchLimits.WindowBytes == 0 {
		return "the host's defaults"
	}
	return fmt.Sprintf("window %d, frame %d, message %d", benchLimits.WindowBytes, benchLimits.MaximumFrameBytes, benchLimits.MaximumMessageBytes)
}

func mbps(n int64, d time.Duration) float64 { return float64(n) / d.Seconds() / 1e6 }

// median returns the median of v (of an even count, the mean of the two
// middle values).
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// daemon is a running ahpd.
type daemon struct {
	*benchproc.Daemon
	terms ahpv1.TerminalServiceClient
	chans ahpv1.ChannelServiceClient
}

// daemonLog is the daemon's --log-level (flag -log).
var daemonLog string

func startDaemon(bin, dir string, procs int) (*daemon, error) {
	var env []string
	if procs > 0 {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(procs))
	}
	bd, err := benchproc.StartDaemon(bin, dir, []string{"--no-default-terminal", "--websocket-compression", "none", "--log-level", daemonLog}, env)
	if err != nil {
		return nil, err
	}
	return &daemon{Daemon: bd, terms: ahpv1.NewTerminalServiceClient(bd.Conn), chans: ahpv1.NewChannelServiceClient(bd.Conn)}, nil
}

// cpu returns the daemon's user and system CPU time so far.
func (d *daemon) cpu() (user, sys time.Duration, err error) {
	return benchproc.CPUSplit(d.Cmd.Process.Pid)
}

// syscalls returns how many read and write system calls the daemon has
// made so far.
func (d *daemon) syscalls() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", d.Cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	var n int64
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok && (k == "syscr" || k == "syscw") {
			x, _ := strconv.ParseInt(v, 10, 64)
			n += x
		}
	}
	return n, nil
}

// terminal creates a terminal running script in sh, recorded in mode
// record ("": the daemon's default, which ahpbench leaves off).
func (d *daemon) terminal(ctx context.Context, id, script, record string) (string, error) {
	r, err := d.terms.CreateTerminal(ctx, &ahpv1.CreateTerminalRequest{Id: id, Command: "/bin/sh", Args: []string{"-c", script}, Record: record})
	if err != nil {
		return "", err
	}
	return r.GetChannel().GetUri(), nil
}

func (d *daemon) dial(ctx context.Context) (*client.Conn, error) {
	c, _, err := client.Dial(ctx, d.WS(), client.Options{Token: d.Token})
	return c, err
}

// throughput starts `cat path` in a new terminal and reads it through
// viewers subscriptions, each on a connection of its own (browser tabs),
// releasing every message at once. bytes and snapshots are summed over
// the viewers; elapsed is until the last has the end.
func (d *daemon) throughput(id, path string, viewers int) (r result, err error) {
	r, _, err = d.catTo(id, "cat "+path, viewers, catOptions{lim: viewerLimits()})
	return r, err
}

// catOptions are catTo's optional settings.
type catOptions struct {
	lim    *flow.ReceiveLimits // the viewers' receive limits (nil: the host's defaults)
	during func()              // called every 100 ms during the run (nil: nothing)
	record string              // the terminal's recording mode ("": the daemon's default, off)
	// settle is a pause after the last viewer has the end and before the
	// daemon's CPU is read, so that work left after it (a recording's
	// last write) is counted.
	settle time.Duration
}

// catTo runs cmd in a new terminal, as throughput does, and returns the
// terminal's URI too.
func (d *daemon) catTo(id, cmd string, viewers int, o catOptions) (r result, uri string, err error) {
	lim, during := o.lim, o.during
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	uri, err = d.terminal(ctx, id, "read x; "+cmd+"; echo; echo BENCH-END; read y", o.record)
	if err != nil {
		return r, uri, err
	}
	subs := make([]*client.Sub, viewers)
	for i := range subs {
		c, err := d.dial(ctx)
		if err != nil {
			return r, uri, err
		}
		defer c.Close()
		if subs[i], err = c.Subscribe(ctx, uri, lim); err != nil {
			return r, uri, err
		}
		if err := termbench.UntilReady(ctx, subs[i]); err != nil {
			return r, uri, err
		}
	}
	user0, sysCPU0, err := d.cpu()
	if err != nil {
		return r, uri, err
	}
	sys0, err := d.syscalls()
	if err != nil {
		return r, uri, err
	}
	self0 := termbench.CPUTime()
	start := time.Now()
	if err := subs[0].Send(ctx, termbench.Input("\r")); err != nil {
		return r, uri, err
	}
	type drained struct {
		bytes     int64
		snapshots int
		err       error
	}
	done := make(chan drained, viewers)
	for _, sub := range subs {
		go func() {
			var d drained
			d.bytes, d.snapshots, d.err = termbench.Drain(ctx, sub, "BENCH-END")
			done <- d
		}()
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for n := 0; n < viewers; {
		var d drained
		select {
		case <-tick.C:
			if during != nil {
				during()
			}
			continue
		case d = <-done:
			n++
		}
		r.bytes += d.bytes
		r.snapshots += d.snapshots
		if d.err != nil && err == nil {
			err = d.err
			cancel() // the others stop too
		}
	}
	if err != nil {
		return r, uri, err
	}
	r.elapsed = time.Since(start)
	time.Sleep(o.settle)
	r.viewerCPU = termbench.CPUTime() - self0
	sys1, err := d.syscalls()
	if err != nil {
		return r, uri, err
	}
	r.syscalls = sys1 - sys0
	user1, sysCPU1, err := d.cpu()
	r.cpu = user1 + sysCPU1 - user0 - sysCPU0
	r.userCPU = user1 - user0
	return r, uri, err
}

// result is one throughput run through ahpd.
type result struct {
	bytes     int64 // output received (the file, the echoed newline, the marker line), summed over the viewers
	snapshots int   // snapshots received instead of part of the stream
	elapsed   time.Duration
	cpu       time.Duration // the daemon's
	userCPU   time.Duration // the part of cpu in user space (the rest is the kernel's: PTY reads, socket writes)
	viewerCPU time.Duration // this process's (the viewers')
	syscalls  int64         // the daemon's reads and writes
}

// echo times keystrokes through ahpd, idle and while a second
// subscription on the same connection floods.
func (d *daemon) echo(n int, gap time.Duration) (idle timed, flood []time.Duration, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	echoURI, err := d.terminal(ctx, "echo", termbench.EchoCommand, "")
	if err != nil {
		return idle, nil, err
	}
	floodURI, err := d.terminal(ctx, "flood", "read x; exec yes", "")
	if err != nil {
		return idle, nil, err
	}
	c, err := d.dial(ctx)
	if err != nil {
		return idle, nil, err
	}
	defer c.Close()
	sub, err := c.Subscribe(ctx, echoURI, nil)
	if err != nil {
		return idle, nil, err
	}
	if err := termbench.UntilReady(ctx, sub); err != nil {
		return idle, nil, err
	}
	// Idle: a second after the throughput runs' flood, as a typist would
	// come back to it (and as builds that raised the Ps for a flood, for
	// half a second after it, were measured).
	time.Sleep(time.Second)
	cpu0, err := taskCPU(d.Cmd.Process.Pid)
	if err != nil {
		return idle, nil, err
	}
	if idle.d, err = termbench.Keystrokes(ctx, sub, n, gap); err != nil {
		return idle, nil, err
	}
	cpu1, err := taskCPU(d.Cmd.Process.Pid)
	if err != nil {
		return idle, nil, err
	}
	idle.cpu = cpu1 - cpu0
	if !floodEcho {
		return idle, nil, nil
	}
	fsub, err := c.Subscribe(ctx, floodURI, nil)
	if err != nil {
		return idle, nil, err
	}
	fctx, stop := context.WithCancel(ctx)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		_, _, _ = termbench.Drain(fctx, fsub, "\x00never") // until stopped
	}()
	defer func() { stop(); <-drained }()
	if err := fsub.Send(ctx, termbench.Input("\r")); err != nil {
		return idle, nil, err
	}
	time.Sleep(200 * time.Millisecond) // let the flood reach full speed
	flood, err = termbench.Keystrokes(ctx, sub, n, gap)
	return idle, flood, err
}

// timed is a latency measurement and the daemon's CPU time during it.
type timed struct {
	d   []time.Duration
	cpu time.Duration
}
