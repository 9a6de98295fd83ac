package pty_test

import (
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	cpty "github.com/creack/pty"

	"github.com/ahp-dev/ahpd/bench/termbench"
	"github.com/ahp-dev/ahpd/pty"
)

const benchBytes = 64 << 20

func floodCmd(n int) string {
	return fmt.Sprintf("stty raw -echo; read x; head -c %d /dev/zero | tr '\\0' a", n)
}

// rawPTY reads the same command's PTY directly and returns the time from
// the go signal to EIO.
func rawPTY(b *testing.B, n int) time.Duration {
	cmd := exec.Command("/bin/sh", "-c", floodCmd(n))
	f, err := cpty.StartWithSize(cmd, &cpty.Winsize{Rows: 24, Cols: 80})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	// Give the shell time to run stty before the go signal (an external
	// process: there is nothing to wait on).
	time.Sleep(50 * time.Millisecond)
	buf := make([]byte, 64<<10)
	began := time.Now()
	f.Write([]byte("\n"))
	got := 0
	for {
		k, err := f.Read(buf)
		got += k
		if err != nil {
			if !errors.Is(err, syscall.EIO) {
				b.Fatal(err)
			}
			break
		}
	}
	d := time.Since(began)
	cmd.Wait()
	if got < n {
		b.Fatalf("raw read %d of %d bytes", got, n)
	}
	return d
}

// throughViewers runs the command on a Terminal with k viewers pulling
// 64 KiB messages as fast as they can and returns the time until the last
// one has pulled terminal/exit. The viewers may hold the whole output
// (ViewerBacklog n): the benchmark measures the pipeline's speed to
// viewers that get every byte, and the reader may outrun these, which
// copy every message.
func throughViewers(b *testing.B, n, k int) time.Duration {
	term, err := pty.Start(pty.Config{Command: []string{"/bin/sh", "-c", floodCmd(n)}, ViewerBacklog: n})
	if err != nil {
		b.Fatal(err)
	}
	defer term.Close()
	vs := make([]*viewer, k)
	for i := range vs {
		vs[i] = attach(b, term, 64<<10)
		untilReady(b, vs[i])
	}
	time.Sleep(50 * time.Millisecond) // let stty run before the go signal
	var wg sync.WaitGroup
	began := time.Now()
	if err := term.Input([]byte("\n"), nil); err != nil {
		b.Fatal(err)
	}
	var total sync.Map
	for i, v := range vs {
		wg.Go(func() {
			bytes := 0
			for {
				m, ok := v.pullRaw(60 * time.Second)
				if !ok {
					return
				}
				bytes += len(m.Text)
				if m.Class == 1 {
					total.Store(i, bytes)
					return
				}
			}
		})
	}
	wg.Wait()
	d := time.Since(began)
	for i, v := range vs {
		if st := v.v.Stats(); st.BytesDropped != 0 {
			b.Errorf("viewer %d dropped %d bytes", i, st.BytesDropped)
		}
		if got, _ := total.Load(i); got == nil || got.(int) < n {
			b.Fatalf("viewer %d got %v bytes of %d", i, got, n)
		}
	}
	return d
}

// BenchmarkEndToEnd compares reading a flood from the PTY directly with the
// same flood through a Terminal to one viewer, in the same run.
func BenchmarkEndToEnd(b *testing.B) {
	for b.Loop() {
		rawCPU := termbench.CPUTime()
		raw := rawPTY(b, benchBytes)
		rawCPU = termbench.CPUTime() - rawCPU
		e2eCPU := termbench.CPUTime()
		e2e := throughViewers(b, benchBytes, 1)
		e2eCPU = termbench.CPUTime() - e2eCPU
		b.ReportMetric(float64(benchBytes)/raw.Seconds()/1e6, "raw-MB/s")
		b.ReportMetric(float64(benchBytes)/e2e.Seconds()/1e6, "e2e-MB/s")
		b.ReportMetric(raw.Seconds()/e2e.Seconds(), "ratio")
		// CPU of this process (the reader, or the Terminal and its viewer)
		// per MB; the writing processes and the kernel's tty work are not
		// counted.
		b.ReportMetric(float64(rawCPU.Milliseconds())/(benchBytes/1e6), "raw-cpu-ms/MB")
		b.ReportMetric(float64(e2eCPU.Milliseconds())/(benchBytes/1e6), "e2e-cpu-ms/MB")
	}
}

// BenchmarkFanOut8 is BenchmarkEndToEnd with 8 viewers.
func BenchmarkFanOut8(b *testing.B) {
	for b.Loop() {
		raw := rawPTY(b, benchBytes)
		e2e := throughViewers(b, benchBytes, 8)
		b.ReportMetric(float64(benchBytes)/raw.Seconds()/1e6, "raw-MB/s")
		b.ReportMetric(float64(benchBytes)/e2e.Seconds()/1e6, "e2e-MB/s")
		b.ReportMetric(raw.Seconds()/e2e.Seconds(), "ratio")
	}
}
