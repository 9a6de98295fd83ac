package pty_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/bench/termbench"
	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/pty"
	"github.com/ahp-dev/ahpd/pty/record"
)

// floodViewer runs floodWriter (n bytes of numbered lines) on a Terminal
// of cfg with one viewer pulling 64 KiB messages, and returns the time
// and this process's CPU from the go signal until the viewer has pulled
// terminal/exit and the Terminal is closed (its recording, if any,
// written and closed).
func floodViewer(b *testing.B, n int, cfg pty.Config) (time.Duration, time.Duration) {
	cfg.Command = []string{os.Args[0]}
	cfg.Env = append(os.Environ(), pty.FloodWriterEnv+"="+strconv.Itoa(n))
	cfg.ViewerBacklog = 2 * n
	term, err := pty.Start(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer term.Close()
	v := attach(b, term, 64<<10)
	untilReady(b, v)
	cpu := termbench.CPUTime()
	began := time.Now()
	if err := term.Input([]byte("\n"), nil); err != nil {
		b.Fatal(err)
	}
	// The viewer takes each message as a connection would, without
	// decoding it: the CPU measured is the Terminal's.
	got := int64(0)
	timeout := time.NewTimer(2 * time.Minute)
	defer timeout.Stop()
	for {
		m, ok := v.v.Pull(true, 64<<10)
		if ok {
			got += m.Size
			if m.Class == flow.Lifecycle {
				break
			}
			continue
		}
		select {
		case <-v.wake:
		case <-timeout.C:
			b.Fatalf("no terminal/exit after %d bytes", got)
		}
	}
	term.Close()
	d, c := time.Since(began), termbench.CPUTime()-cpu
	if got < int64(n) {
		b.Fatalf("the viewer got %d bytes of %d", got, n)
	}
	return d, c
}

// BenchmarkRecordFlood compares, in the same run, a 64 MiB flood of
// numbered lines through a Terminal to one viewer without a recording and
// with one (record.Output, default limits: a keyframe per MiB, a file per
// 64 MiB), alternating. It reports this process's CPU per MB of output
// for both (the Terminal, its viewer and, when on, the recording's
// formatting and writes; not the writing program nor the kernel's tty
// work) and their ratio, the cost recording adds.
func BenchmarkRecordFlood(b *testing.B) {
	const n = benchBytes
	var offCPU, onCPU, offT, onT time.Duration
	runs := 0
	for b.Loop() {
		d, c := floodViewer(b, n, pty.Config{})
		offT, offCPU = offT+d, offCPU+c
		store, err := record.OpenStore(filepath.Join(b.TempDir(), fmt.Sprint("rec", runs)), record.Limits{MaxTotalBytes: 4 * n}, nil)
		if err != nil {
			b.Fatal(err)
		}
		d, c = floodViewer(b, n, pty.Config{Record: record.Output, Recordings: store, Channel: "bench"})
		onT, onCPU = onT+d, onCPU+c
		if st := store.Stats(); st.DroppedBytes > 0 {
			b.Logf("the recording dropped %d bytes", st.DroppedBytes)
		}
		store.Close()
		runs++
	}
	mb := float64(n) / 1e6 * float64(runs)
	b.ReportMetric(offCPU.Seconds()*1e3/mb, "off-cpu-ms/MB")
	b.ReportMetric(onCPU.Seconds()*1e3/mb, "rec-cpu-ms/MB")
	b.ReportMetric(onCPU.Seconds()/offCPU.Seconds(), "cpu-ratio")
	b.ReportMetric(mb/offT.Seconds(), "off-MB/s")
	b.ReportMetric(mb/onT.Seconds(), "rec-MB/s")
}
