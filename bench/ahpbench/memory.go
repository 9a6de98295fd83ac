package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ahp-dev/ahpd/bench/termbench"
	"github.com/ahp-dev/ahpd/flow"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// The memory table's load and its bounds (issue 12): after a 256 MiB cat
// to its viewers and the terminal's end, the live heap is back within
// heapSlack of its idle figure and RSS within rssSlack, within
// returnWithin.
const (
	memoryLoadCopies = 4 // of the 64 MiB test file: 256 MiB
	heapSlack        = 4 << 20
	rssSlack         = 32 << 20
	returnWithin     = 60 * time.Second
)

// memoryTable prints, for one viewer and for fanout viewers, the daemon's
// live heap and RSS idle, at the peak of a 256 MiB cat, and after the
// terminal is closed: how long until both are back near idle.
func memoryTable(d *daemon, file string, fanout int) error {
	fmt.Printf("| memory after load (cat of %d MiB) | idle heap | idle RSS | peak heap | peak RSS | back within %d MiB heap and %d MiB RSS of idle after | heap then | RSS then |\n",
		memoryLoadCopies*fileSize>>20, heapSlack>>20, rssSlack>>20)
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|")
	// The largest limits a client may ask for: the daemon builds messages
	// of up to 16 MiB for each viewer that lags.
	largest := &flow.ReceiveLimits{WindowBytes: 64 << 20, MaximumFrameBytes: 1 << 20, MaximumMessageBytes: 16 << 20}
	type row struct {
		viewers int
		lim     *flow.ReceiveLimits
	}
	rows := []row{{1, nil}}
	if fanout > 1 {
		rows = append(rows, row{fanout, nil}, row{fanout, largest})
	}
	cmd := "cat" + strings.Repeat(" "+file, memoryLoadCopies)
	for i, r := range rows {
		viewers := r.viewers
		idleHeap, err := d.heap()
		if err != nil {
			return err
		}
		idleRSS, err := d.rss()
		if err != nil {
			return err
		}
		var peakHeap, peakRSS int64
		var sampleErr error
		sample := func() {
			h, err := d.heap()
			if err != nil {
				sampleErr = err
				return
			}
			r, err := d.rss()
			if err != nil {
				sampleErr = err
				return
			}
			peakHeap, peakRSS = max(peakHeap, h), max(peakRSS, r)
		}
		_, uri, err := d.catTo(fmt.Sprintf("mem%d", i), cmd, viewers, catOptions{lim: r.lim, during: sample})
		if err != nil {
			return fmt.Errorf("memory run with %d viewers: %w", viewers, err)
		}
		if sampleErr != nil {
			return sampleErr
		}
		sample()
		// The viewers' connections closed as catTo returned; now the terminal.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = d.chans.CloseChannel(ctx, &ahpv1.CloseChannelRequest{Channel: uri})
		cancel()
		if err != nil {
			return err
		}
		closed := time.Now()
		var heap, rss int64
		back := "NOT within " + returnWithin.String()
		for {
			if heap, err = d.heap(); err != nil {
				return err
			}
			if rss, err = d.rss(); err != nil {
				return err
			}
			if heap <= idleHeap+heapSlack && rss <= idleRSS+rssSlack {
				back = time.Since(closed).Round(100 * time.Millisecond).String()
				break
			}
			if time.Since(closed) > returnWithin {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		name := fmt.Sprintf("%d viewer(s), the host's default limits", viewers)
		if r.lim != nil {
			name = fmt.Sprintf("%d viewers, the largest limits (window 64 MiB, message 16 MiB)", viewers)
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", name,
			mib(idleHeap), mib(idleRSS), mib(peakHeap), mib(peakRSS), back, mib(heap), mib(rss))
	}
	fmt.Println()
	return nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// heap reads the daemon's live heap (go_memstats_heap_alloc_bytes) from
// its /metrics, with the admin token.
func (d *daemon) heap() (int64, error) {
	body, err := termbench.Metrics(context.Background(), d.Base(), d.Token)
	if err != nil {
		return 0, err
	}
	v, err := termbench.Metric(bytes.NewReader(body), "go_memstats_heap_alloc_bytes")
	return int64(v), err
}

// rss reads the daemon's resident set size from /proc.
func (d *daemon) rss() (int64, error) {
	kib, err := termbench.StatusKiB(d.Cmd.Process.Pid, "VmRSS")
	return kib << 10, err
}
