package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ahp-dev/ahpd/bench/termbench"
	"github.com/ahp-dev/ahpd/flow"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// recordSettle is how long a recording run waits after the viewer has
// the end before it reads the daemon's CPU: the recording's writer sends
// its last lines to the file within 20 ms (pty/record's flush delay).
// The run without a recording waits as long.
const recordSettle = 100 * time.Millisecond

// recordTable prints runs pairs of `cat file` to one viewer, each pair
// once into a terminal that is not recorded and once into one recorded
// with record = "output" (issue 42), in the same daemon, the order
// alternating from pair to pair, and the medians: the daemon's CPU per
// MB of each and their ratio. The viewer's window holds the whole file
// (frame and message as -frame and -message), so that it gets every byte
// even when the shared machine stalls it for a while: a viewer that got a
// snapshot instead of part of the stream costs the daemon less, and the
// runs would not compare.
func recordTable(d *daemon, file string, runs int) error {
	lim := benchLimits
	lim.WindowBytes = 2 * fileSize
	fmt.Printf("recording (issue 42): cat of a %.0f MB file to one viewer (window %d), without and with record = \"output\", alternating; load average %s\n\n", mb, lim.WindowBytes, loadAvg())
	fmt.Println("| run | first | off: ahpd CPU | recorded: ahpd CPU | CPU ratio | off | recorded | of it in user space, off, recorded | ahpd syscalls/MB, off, recorded | snapshots off, recorded | recorded .cast | dropped by the recording |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	recs := ahpv1.NewRecordingServiceClient(d.Conn)
	var offs, ons, ratios []float64
	snapshots := 0
	for i := 1; i <= runs; i++ {
		var off, on result
		var cast, dropped int64
		for k := range 2 {
			recorded := (i+k)%2 == 0 // odd pairs start without a recording
			if !recorded {
				r, _, err := d.catTo(fmt.Sprintf("recoff%d", i), "cat "+file, 1, catOptions{lim: &lim, settle: recordSettle})
				if err != nil {
					return fmt.Errorf("recording run %d without a recording: %w", i, err)
				}
				off = r
				continue
			}
			dropped0, err := d.recordingDropped()
			if err != nil {
				return err
			}
			r, uri, err := d.catTo(fmt.Sprintf("recon%d", i), "cat "+file, 1, catOptions{lim: &lim, record: "output", settle: recordSettle})
			if err != nil {
				return fmt.Errorf("recording run %d with a recording: %w", i, err)
			}
			on = r
			dropped1, err := d.recordingDropped()
			if err != nil {
				return err
			}
			dropped = dropped1 - dropped0
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			l, err := recs.ListRecordings(ctx, &ahpv1.ListRecordingsRequest{Channel: uri})
			cancel()
			if err != nil {
				return fmt.Errorf("recording run %d: listing its recordings: %w", i, err)
			}
			if len(l.GetRecordings()) == 0 {
				return fmt.Errorf("recording run %d: the terminal %s has no recording (does this ahpd record?)", i, uri)
			}
			cast = 0
			for _, x := range l.GetRecordings() {
				cast += x.GetBytes()
			}
		}
		first := "off"
		if i%2 == 0 {
			first = "recorded"
		}
		snapshots += off.snapshots + on.snapshots
		offMs, onMs := float64(off.cpu.Milliseconds())/mb, float64(on.cpu.Milliseconds())/mb
		offs, ons, ratios = append(offs, offMs), append(ons, onMs), append(ratios, onMs/offMs)
		fmt.Printf("| %d | %s | %.2f ms/MB | %.2f ms/MB | %.3f | %.1f MB/s | %.1f MB/s | %.2f, %.2f ms/MB | %.0f, %.0f | %d, %d | %.1f MB | %.1f MB |\n",
			i, first, offMs, onMs, onMs/offMs, mbps(min(off.bytes, fileSize), off.elapsed), mbps(min(on.bytes, fileSize), on.elapsed),
			float64(off.userCPU.Milliseconds())/mb, float64(on.userCPU.Milliseconds())/mb, float64(off.syscalls)/mb, float64(on.syscalls)/mb,
			off.snapshots, on.snapshots, float64(cast)/1e6, float64(dropped)/1e6)
	}
	if snapshots > 0 {
		fmt.Printf("\n(%d snapshots: the viewer fell behind by a window of twice the file and got snapshots instead of part of the stream, and the daemon's CPU per MB of the file is lower for it; such runs do not compare)\n", snapshots)
	}
	fmt.Printf("\nmedian CPU ratio recorded / off %.3f (target ≤ 1.10); median ahpd CPU %.2f ms/MB off, %.2f recorded; load average after %s\n\n",
		median(ratios), median(offs), median(ons), loadAvg())
	return nil
}

// viewerLimits are the throughput viewer's receive limits (nil: the
// host's defaults), as throughput uses them.
func viewerLimits() *flow.ReceiveLimits {
	if benchLimits.WindowBytes > 0 {
		return &benchLimits
	}
	return nil
}

// recordingDropped reads the bytes the daemon's recordings have dropped
// so far (ahpd_recording_dropped_bytes_total).
func (d *daemon) recordingDropped() (int64, error) {
	body, err := termbench.Metrics(context.Background(), d.Base(), d.Token)
	if err != nil {
		return 0, err
	}
	v, err := termbench.Metric(bytes.NewReader(body), "ahpd_recording_dropped_bytes_total")
	return int64(v), err
}

// loadAvg is the machine's load average over 1, 5 and 15 minutes
// (/proc/loadavg), or "?".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}
