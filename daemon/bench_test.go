package daemon_test

import (
	"context"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/bench/termbench"
	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/flow"
)

// Benchmarks compare the daemon with the raw PTY measured in the same run
// (CI machines are noisy: ratios, not absolute numbers, are the result).
// Run: go test -run '^$' -bench . -benchtime 3x ./daemon/

const benchFileSize = 64 << 20

func benchFile(b *testing.B) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "data.txt")
	if err := termbench.WriteTextFile(path, benchFileSize); err != nil {
		b.Fatal(err)
	}
	return path
}

var bigWindow = &flow.ReceiveLimits{WindowBytes: 8 << 20, MaximumFrameBytes: 1 << 20, MaximumMessageBytes: 1 << 20}

func benchThroughput(b *testing.B, viewers int) { benchThroughputWith(b, viewers, false) }

func benchThroughputWith(b *testing.B, viewers int, stalledNeighbour bool) {
	path := benchFile(b)
	var rawRate, ahpRate float64
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		n, rawD, err := termbench.RawPTYRead(path)
		if err != nil {
			b.Fatal(err)
		}
		rawRate += float64(n) / rawD.Seconds()

		h := startBench(b)
		ch, err := h.srv.CreateTerminal(shellSpec("cat", "/bin/sh", "-c", "read x; cat "+path+"; echo; echo BENCH-END; read y"))
		if err != nil {
			b.Fatal(err)
		}
		subs := make([]*client.Sub, viewers)
		for v := range subs {
			c, _, err := client.Dial(context.Background(), h.url, client.Options{Token: adminToken})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if subs[v], err = c.Subscribe(context.Background(), ch.URI, bigWindow); err != nil {
				b.Fatal(err)
			}
			if err := termbench.UntilReady(context.Background(), subs[v]); err != nil {
				b.Fatal(err)
			}
		}
		if stalledNeighbour {
			// A subscription that takes its snapshot and never credits.
			c, _, err := client.Dial(context.Background(), h.url, client.Options{Token: adminToken})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Subscribe(context.Background(), ch.URI, &flow.ReceiveLimits{WindowBytes: 64 << 10, MaximumFrameBytes: 16 << 10, MaximumMessageBytes: 64 << 10}); err != nil {
				b.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		var wg sync.WaitGroup
		got := make([]int64, viewers)
		cpu0 := termbench.CPUTime()
		startT := time.Now()
		if err := subs[0].Send(ctx, termbench.Input("\r")); err != nil {
			b.Fatal(err)
		}
		for v := range subs {
			wg.Go(func() {
				n, _, err := termbench.Drain(ctx, subs[v], "BENCH-END")
				if err != nil {
					b.Error(err)
				}
				got[v] = n
			})
		}
		wg.Wait()
		d := time.Since(startT)
		cpu += termbench.CPUTime() - cpu0
		cancel()
		var total int64
		for _, g := range got {
			total += g
			if g < n {
				// A viewer that fell behind the PTY got a snapshot
				// instead of part of the stream; report it.
				b.ReportMetric(float64(n-g), "lost-bytes")
			}
		}
		b.Logf("raw %d bytes in %v; ahpd %d bytes in %v", n, rawD, total, d)
		ahpRate += float64(total) / d.Seconds()
		h.stop()
	}
	b.ReportMetric(rawRate/float64(b.N)/1e6, "raw-MB/s")
	b.ReportMetric(ahpRate/float64(b.N)/1e6, "ahpd-MB/s")
	b.ReportMetric(ahpRate/rawRate, "ratio")
	// CPU of this process — the daemon and the in-process client(s)
	// together — per MB of the file.
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N)/(benchFileSize/1e6), "cpu-ms/MB-with-client")
}

func BenchmarkTerminalThroughput1Viewer(b *testing.B)  { benchThroughput(b, 1) }
func BenchmarkTerminalThroughput8Viewers(b *testing.B) { benchThroughput(b, 8) }

// One viewer that credits, beside one that never does: its rate should
// match the single-viewer case (the PTY is never paused by a viewer).
func BenchmarkTerminalThroughputStalledNeighbour(b *testing.B) { benchThroughputWith(b, 1, true) }

// BenchmarkEchoLatency: a keystroke through ahpd (input frame → PTY → echo
// → output frame) against the same keystroke on a raw PTY, idle and while
// a neighbour subscription on the same connection floods.
func BenchmarkEchoLatency(b *testing.B) {
	const samples = 300
	raw, err := termbench.RawPTYEcho(samples, 0)
	if err != nil {
		b.Fatal(err)
	}
	h := startBench(b)
	defer h.stop()
	ch, err := h.srv.CreateTerminal(shellSpec("echo", "/bin/sh", "-c", termbench.EchoCommand))
	if err != nil {
		b.Fatal(err)
	}
	flood, err := h.srv.CreateTerminal(shellSpec("flood", "/bin/sh", "-c", "read x; exec yes"))
	if err != nil {
		b.Fatal(err)
	}
	c, _, err := client.Dial(context.Background(), h.url, client.Options{Token: adminToken})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	sub, err := c.Subscribe(context.Background(), ch.URI, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := termbench.UntilReady(context.Background(), sub); err != nil {
		b.Fatal(err)
	}
	idle := keystrokes(b, sub, samples)
	fsub, err := c.Subscribe(context.Background(), flood.URI, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _, _, _ = termbench.Drain(ctx, fsub, "\x00never") })
	_ = fsub.Send(ctx, termbench.Input("\r"))
	time.Sleep(200 * time.Millisecond) // let the flood reach full speed
	busy := keystrokes(b, sub, samples)
	cancel()
	wg.Wait()
	b.ReportMetric(pct(raw, 50), "raw-p50-µs")
	b.ReportMetric(pct(raw, 99), "raw-p99-µs")
	b.ReportMetric(pct(idle, 50), "idle-p50-µs")
	b.ReportMetric(pct(idle, 99), "idle-p99-µs")
	b.ReportMetric(pct(busy, 50), "flood-p50-µs")
	b.ReportMetric(pct(busy, 99), "flood-p99-µs")
	b.ReportMetric(pct(idle, 99)/pct(raw, 99), "idle-p99-ratio")
}

// pct is the p-th percentile of d in µs.
func pct(d []time.Duration, p int) float64 {
	return float64(termbench.Percentile(d, p).Microseconds())
}

func keystrokes(b *testing.B, sub *client.Sub, n int) []time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := termbench.Keystrokes(ctx, sub, n, 0)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// benchHarness is a daemon for benchmarks.
type benchHarness struct {
	*harness
	stop func()
}

func startBench(b *testing.B) *benchHarness {
	h, stop, err := startServer(b.TempDir(), true, nil, nil, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	return &benchHarness{h, func() {
		if err := stop(); err != nil {
			b.Error(err)
		}
	}}
}
