package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/ahp-dev/ahpd/bench/termbench"
)

// print writes the tables, markdown.
func (c *config) print(rs []*rttResult, took time.Duration) {
	fmt.Printf("linkbench, %s, ahpd and ahpctl of %s, %d CPUs (%s), %s %s/%s, load average %s, the whole run %v\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), c.rev, runtime.NumCPU(), cpuModel(),
		runtime.Version(), runtime.GOOS, runtime.GOARCH, loadAvg(), took.Round(time.Second))
	fmt.Printf("    %s\n\n", commandLine())
	fmt.Printf("The link: %s each way (%.1f MB/s), the bottleneck queue one bandwidth-delay product (at least 64 KiB), no jitter; a link per connection (internal/linkemu in this process). ahpd: %s; ahpctl: %s; chisel: %s.\n\n",
		c.rateText, float64(c.rate)/1e6, c.ahpd, c.ahpctl, orNA(c.chisel))

	// Throughput.
	fmt.Printf("### Throughput: %s per transfer, median (min–max) of %d rounds, tools alternated\n\n", sizeText(c.size), c.rounds)
	zHead, zSep := "", ""
	if c.compress {
		zHead, zSep = " forward --compress | --compress / raw |", "---:|---:|"
	}
	fmt.Printf("| RTT | queue | direction | raw TCP copy | ahpctl forward | forward / raw | target ≥ 0.85 | chisel | chisel / raw | forward / chisel | link use: raw, forward, chisel | wire bytes per payload byte: forward, chisel |%s\n", zHead)
	fmt.Printf("|---:|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|%s\n", zSep)
	anyCut := false
	for _, r := range rs {
		for i, dir := range []string{"download", "upload"} {
			raw := r.throughput["raw TCP"][i]
			fw := r.throughput["ahpctl forward"][i]
			ch := r.throughput["chisel"][i]
			rawM, fwM, chM := medianMBps(raw), medianMBps(fw), medianMBps(ch)
			anyCut = anyCut || hasCut(raw) || hasCut(fw) || hasCut(ch)
			chCell, chRatio, fwCh := "chisel: not available", "–", "–"
			if len(ch) > 0 {
				chCell, chRatio, fwCh = rateCell(ch), fmt.Sprintf("%.2f", chM/rawM), fmt.Sprintf("%.2f", fwM/chM)
			}
			z := ""
			if c.compress {
				fz := r.throughput["ahpctl forward --compress"][i]
				anyCut = anyCut || hasCut(fz)
				z = fmt.Sprintf(" %s | %.2f |", rateCell(fz), medianMBps(fz)/rawM)
			}
			use := func(ss []sample) string {
				if len(ss) == 0 {
					return "–"
				}
				v := make([]float64, len(ss))
				for i, s := range ss {
					v[i] = float64(s.wire) / s.elapsed.Seconds() / float64(c.rate)
				}
				return fmt.Sprintf("%.2f", median(v))
			}
			overhead := func(ss []sample) string {
				if len(ss) == 0 {
					return "–"
				}
				v := make([]float64, len(ss))
				for i, s := range ss {
					v[i] = float64(s.wire) / float64(s.bytes)
				}
				return fmt.Sprintf("%.3f", median(v))
			}
			fmt.Printf("| %s | %s | %s | %s | %s | %.2f | %s | %s | %s | %s | %s, %s, %s | %s, %s |%s\n",
				rttText(r.rtt), sizeText(r.queue), dir, rateCell(raw), rateCell(fw), fwM/rawM, target(fwM/rawM >= 0.85, fmt.Sprintf("%.2f short", 0.85-fwM/rawM)),
				chCell, chRatio, fwCh, use(raw), use(fw), use(ch), overhead(fw), overhead(ch), z)
		}
	}
	fmt.Println()
	fmt.Println("MB/s of payload (10⁶ bytes/s); the link carries at most the rate above each way. A transfer's time runs from the dial of the local port to its last byte (an upload's: to the target's count of it), so it includes each tool's channel set-up over the link. Link use: the bytes the link carried in the transfer's direction (the tunnel's framing included) per second, over the link's rate (medians); wire bytes per payload byte: the same bytes over the payload (forward's tcp/data carries base64 in JSON: at least 4/3).")
	if anyCut {
		fmt.Printf("† a transfer of the cell was cut at -cut %v; its rate is that of the bytes it moved.\n", c.cut)
	}
	fmt.Println()

	// The second halves.
	fmt.Printf("### Throughput in the second half of each transfer (past set-up, slow start and window growth), median of %d rounds\n\n", c.rounds)
	fmt.Println("| RTT | direction | raw TCP copy | ahpctl forward | forward / raw | chisel | chisel / raw |")
	fmt.Println("|---:|---|---:|---:|---:|---:|---:|")
	for _, r := range rs {
		for i, dir := range []string{"download", "upload"} {
			half := func(name string) float64 {
				var v []float64
				for _, s := range r.throughput[name][i] {
					if h := s.secondHalf(); h > 0 {
						v = append(v, h)
					}
				}
				return median(v)
			}
			cell := func(x float64) string {
				if x == 0 {
					return "–"
				}
				return fmt.Sprintf("%.2f", x)
			}
			ratio := func(a, b float64) string {
				if a == 0 || b == 0 {
					return "–"
				}
				return fmt.Sprintf("%.2f", a/b)
			}
			raw, fw, ch := half("raw TCP"), half("ahpctl forward"), half("chisel")
			chCell := cell(ch)
			if len(r.throughput["chisel"][i]) == 0 {
				chCell = "chisel: not available"
			}
			fmt.Printf("| %s | %s | %s | %s | %s | %s | %s |\n", rttText(r.rtt), dir, cell(raw), cell(fw), ratio(fw, raw), chCell, ratio(ch, raw))
		}
	}
	fmt.Println()
	fmt.Println("MB/s from the moment half the bytes had arrived (a download's reads; an upload's counts from the target, every MiB) to the end; \"–\": every transfer of the cell was cut.")
	fmt.Println()

	// Echo.
	if c.keys > 0 {
		fmt.Printf("### Keystroke echo: %d keys, one every %v, p50 / p99\n\n", c.keys, c.keyGap)
		fmt.Println("| RTT | raw TCP echo | terminal, idle | terminal, beside a bulk download on the same WebSocket: all keys | target p99 ≤ RTT + 15 ms | keys typed from 3 s + 10 RTT after the download opened (n) | target p99 ≤ RTT + 15 ms | the bulk download meanwhile | its window at open |")
		fmt.Println("|---:|---:|---:|---:|---|---:|---|---:|---:|")
		for _, r := range rs {
			e := r.echo
			if e == nil {
				continue
			}
			lim := r.rtt + 15*time.Millisecond
			p99 := termbench.Percentile(e.busy, 99)
			steady, steadyTarget := "–", "– (no key typed so late)"
			if len(e.steady) > 0 {
				s99 := termbench.Percentile(e.steady, 99)
				steady = fmt.Sprintf("%s / %s (%d)", ms(termbench.Percentile(e.steady, 50)), ms(s99), len(e.steady))
				steadyTarget = target(s99 <= lim, fmt.Sprintf("%s over %s", ms(s99-lim), ms(lim)))
			}
			fmt.Printf("| %s | %s / %s | %s / %s | %s / %s | %s | %s | %s | %.2f MB/s | %s |\n", rttText(r.rtt),
				ms(termbench.Percentile(e.raw, 50)), ms(termbench.Percentile(e.raw, 99)),
				ms(termbench.Percentile(e.idle, 50)), ms(termbench.Percentile(e.idle, 99)),
				ms(termbench.Percentile(e.busy, 50)), ms(p99),
				target(p99 <= lim, fmt.Sprintf("%s over %s", ms(p99-lim), ms(lim))),
				steady, steadyTarget, e.bulkMBps, sizeText(e.bulkWindow))
		}
		fmt.Println()
		fmt.Println("The terminal runs `stty raw -echo; cat`, viewed by the Go client (ctl/client, the host's default window) through the link; a key is typed every gap whether or not the last one's echo is back, and each echo is timed from its key's send. The bulk download is client.OpenTCP on the same connection with its default receive limits (as ctl/client of the measured revision sizes them), reading a target that writes without end. The raw TCP echo is a loopback echo server through the same link: the floor. Keys are typed from the moment the download has moved 2 MiB; the later column leaves out the download's start (its slow start, and the queue its overshoot leaves for a round trip or two), which feedback a round trip late cannot prevent.")
		fmt.Println()
	}

	// cat to attach.
	if c.catSize > 0 {
		fmt.Printf("### `cat` of %s in a terminal to `ahpctl attach` through the link\n\n", sizeText(c.catSize))
		linkTime := time.Duration(float64(c.catSize) / float64(c.rate) * float64(time.Second))
		fmt.Println("| RTT | the link's time for the bytes | the raw TCP copy's (same run, median download) | attach: last line after | / the link's time | target ≤ 1.3× | snapshots | target ≤ 2 | bytes attach wrote (of the cat's) | attach's window |")
		fmt.Println("|---:|---:|---:|---:|---:|---|---:|---|---:|---:|")
		for _, r := range rs {
			cr := r.cat
			if cr == nil {
				continue
			}
			rawTime := "–"
			if m := medianMBps(r.throughput["raw TCP"][0]); m > 0 {
				rawTime = secs(time.Duration(float64(c.catSize) / (m * 1e6) * float64(time.Second)))
			}
			ratio := cr.elapsed.Seconds() / linkTime.Seconds()
			fmt.Printf("| %s | %s | %s | %s | %.2f | %s | %d | %s | %s | %s |\n", rttText(r.rtt), secs(linkTime), rawTime, secs(cr.elapsed), ratio,
				target(ratio <= 1.3, fmt.Sprintf("%.2f× over", ratio-1.3)), cr.snapshots, target(cr.snapshots <= 2, fmt.Sprintf("%d over", cr.snapshots-2)),
				fmt.Sprintf("%s (%.0f%%)", sizeText(cr.received), 100*float64(cr.received)/float64(c.catSize)), sizeText(cr.window))
		}
		fmt.Println()
		fmt.Println("`ahpctl attach --url` (its default window) runs in a pty of the benchmark, which reads it as fast as it writes; the time runs from the key that starts the cat to the arrival of the marker line after it. Snapshots: the subscription's count from ListViewers, before and after. The daemon never pauses a terminal for a viewer: one that falls its window and the terminal's backlog behind gets a snapshot instead of the bytes, so a cat faster than the link is shown in part (the bytes attach wrote, its redraws included, against the cat's), and its last line comes when the cat ends, not when the link could have carried the whole of it.")
		fmt.Println()
	}

	// Memory.
	fmt.Println("### The daemon's memory at the end of each round trip's run")
	fmt.Println()
	fmt.Println("| RTT | VmRSS once started | VmHWM (peak RSS) | VmRSS at the end | peak over the start | budget: maxBufferedBytes × 2 connections | target: within it |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range rs {
		over := float64(r.hwm-r.idle) / 1024
		budget := float64(2*r.maxBuf) / (1 << 20)
		fmt.Printf("| %s | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB | %.0f MiB | %s |\n", rttText(r.rtt), float64(r.idle)/1024, float64(r.hwm)/1024, float64(r.rss)/1024,
			over, budget, target(over <= budget, fmt.Sprintf("%.1f MiB over", over-budget)))
	}
	fmt.Println()
	fmt.Println("A fresh ahpd per round trip (its defaults, a temp state directory), so each peak is that round trip's: the throughput rounds, the echo and the cat. At most 2 WebSocket connections are open at once (forward's, and the echo's or attach's); maxBufferedBytes bounds what one connection's traffic makes the daemon hold (the fixed per-connection buffers and the kernel's aside, docs/protocol-decisions.md).")
}

func target(met bool, short string) string {
	if met {
		return "met"
	}
	return "not met: " + short
}

func orNA(s string) string {
	if s == "" {
		return "not available"
	}
	return s
}

func medianMBps(ss []sample) float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = s.mbps()
	}
	return median(v)
}

func hasCut(ss []sample) bool {
	return slices.ContainsFunc(ss, func(s sample) bool { return s.cut })
}

// rateCell is "median (min–max)" of the samples' MB/s, with † when one
// was cut.
func rateCell(ss []sample) string {
	if len(ss) == 0 {
		return "–"
	}
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = s.mbps()
	}
	cut := ""
	if hasCut(ss) {
		cut = " †"
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)%s", median(v), slices.Min(v), slices.Max(v), cut)
}

func rttText(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

func ms(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000)
	}
	return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

func commandLine() string {
	if s := os.Getenv("LINKBENCH_COMMAND"); s != "" {
		return s // the run that built this copy of linkbench for -rev
	}
	args := []string{"go run ./bench/linkbench"}
	for _, a := range os.Args[1:] {
		if a == "" || strings.ContainsAny(a, " \t'\"$;&|") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		args = append(args, a)
	}
	return strings.Join(args, " ")
}

func gitDescribe() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return "?"
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
