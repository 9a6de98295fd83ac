package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"time"
)

// pacedCatFlag runs ahpbench as a `cat` that writes at a set rate (-pace):
// the paced fan-out table's program, slow enough that every viewer keeps
// up, so that each further viewer's CPU is that of a viewer that gets
// every byte.
const pacedCatFlag = "pacedcat"

// pacedPiece is the size of the paced program's writes.
const pacedPiece = 16 << 10

// pacedCat writes the file at path to w at rate bytes per second
// (pacedCopy).
func pacedCat(w io.Writer, path string, rate float64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = pacedCopy(w, f, rate)
	return err
}

// pacedCopy copies r to w at rate bytes per second, in pieces of
// pacedPiece bytes, sleeping to keep to the rate, and returns the bytes
// written.
func pacedCopy(w io.Writer, r io.Reader, rate float64) (int64, error) {
	buf := make([]byte, pacedPiece)
	start := time.Now()
	var written int64
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return written, err
			}
			written += int64(n)
			time.Sleep(time.Until(start.Add(time.Duration(float64(written) / rate * float64(time.Second)))))
		}
		if rerr == io.EOF {
			return written, nil
		}
		if rerr != nil {
			return written, rerr
		}
	}
}

// pacedTable prints, for runs runs, ahpd's CPU per MB with one viewer and
// with viewers viewers while the program writes at rate MB/s, and each
// further viewer's share, over the run's raw reader's CPU per MB and over
// what each further socket costs a bare sender that writes the file to 1
// and to viewers loopback TCP connections at the same rate in the same
// pieces (bareSocket): the part of a viewer's cost that is the kernel's,
// whatever the daemon does. It ends with the medians over the runs.
func pacedTable(d *daemon, file string, viewers int, rate float64, runs int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := fmt.Sprintf("%s -%s %s -pace %g", self, pacedCatFlag, file, rate)
	fmt.Printf("| paced at %g MB/s | raw reader CPU | ahpd CPU, 1 viewer | ahpd CPU, %d viewers | snapshots | each further viewer | the same / raw reader CPU | each further bare loopback socket | each further viewer / bare socket |\n", rate, viewers)
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	var furthers []float64 // ms/MB; the ratios go to targets
	for i := 1; i <= runs; i++ {
		rr, err := rawRead(file)
		if err != nil {
			return err
		}
		one, _, err := d.catTo(fmt.Sprintf("paced1-%d", i), cmd, 1, catOptions{})
		if err != nil {
			return fmt.Errorf("paced run %d, one viewer: %w", i, err)
		}
		many, _, err := d.catTo(fmt.Sprintf("pacedN-%d", i), cmd, viewers, catOptions{})
		if err != nil {
			return fmt.Errorf("paced run %d, %d viewers: %w", i, viewers, err)
		}
		bare, err := bareSocket(file, rate*1e6, viewers)
		if err != nil {
			return fmt.Errorf("paced run %d: %w", i, err)
		}
		cpu1, cpuN := float64(one.cpu.Milliseconds())/mb, float64(many.cpu.Milliseconds())/mb
		further := (cpuN - cpu1) / float64(viewers-1)
		targets.pacedPerViewer = append(targets.pacedPerViewer, further/rawMsPerMB(rr))
		furthers = append(furthers, further)
		overBare := "— (no cost measured)"
		if bare > 0 {
			overBare = fmt.Sprintf("%.2f", further/bare)
			targets.pacedOverBare = append(targets.pacedOverBare, further/bare)
		}
		fmt.Printf("| run %d | %.1f ms/MB | %.1f ms/MB | %.1f ms/MB | %d, %d | %.2f ms/MB | %.2f | %.2f ms/MB | %s |\n",
			i, rawMsPerMB(rr), cpu1, cpuN, one.snapshots, many.snapshots, further, further/rawMsPerMB(rr), bare, overBare)
	}
	fmt.Printf("\neach further viewer, paced, over %d runs: %.2f–%.2f, median %.2f ms/MB; %.2f–%.2f, median %.2f of the raw reader", runs, slices.Min(furthers), slices.Max(furthers), median(furthers),
		slices.Min(targets.pacedPerViewer), slices.Max(targets.pacedPerViewer), median(targets.pacedPerViewer))
	if len(targets.pacedOverBare) > 0 {
		fmt.Printf("; median %.2f bare sockets", median(targets.pacedOverBare))
	}
	fmt.Print("\n\n")
	return nil
}
