package telemetry_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ahp-dev/ahpd/telemetry"
)

// fakePub collects what a source publishes.
type fakePub struct {
	mu      sync.Mutex
	batches [][]telemetry.Sample
	signal  chan struct{}
}

func newFakePub() *fakePub { return &fakePub{signal: make(chan struct{}, 1)} }

func (p *fakePub) Publish(s []telemetry.Sample) error {
	for i := range s {
		if err := s[i].Normalize(); err != nil {
			panic(err)
		}
	}
	p.mu.Lock()
	p.batches = append(p.batches, append([]telemetry.Sample(nil), s...))
	p.mu.Unlock()
	select {
	case p.signal <- struct{}{}:
	default:
	}
	return nil
}

func (p *fakePub) all() []telemetry.Sample {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []telemetry.Sample
	for _, b := range p.batches {
		out = append(out, b...)
	}
	return out
}

// waitFor waits (at most 10 s) until cond holds of what was published.
func (p *fakePub) waitFor(t *testing.T, what string, cond func([]telemetry.Sample) bool) []telemetry.Sample {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if s := p.all(); cond(s) {
			return s
		}
		select {
		case <-p.signal:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; got %v", what, p.all())
		}
	}
}

func find(ss []telemetry.Sample, name string, labels ...telemetry.Label) (telemetry.Sample, bool) {
	for i := len(ss) - 1; i >= 0; i-- {
		s := ss[i]
		if s.Name != name {
			continue
		}
		match := true
		for _, l := range labels {
			found := false
			for _, sl := range s.Labels {
				found = found || sl == l
			}
			match = match && found
		}
		if match {
			return s, true
		}
	}
	return telemetry.Sample{}, false
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// procFixture writes a /proc with two readings' worth of counters.
func procFixture(t *testing.T, dir string, cpu0 [4]int, rx, tx, rdSect, wrSect int) {
	stat := "cpu  " + strconv.Itoa(cpu0[0]) + " 0 " + strconv.Itoa(cpu0[1]) + " " + strconv.Itoa(cpu0[2]) + " " + strconv.Itoa(cpu0[3]) + " 0 0 0 0 0\n" +
		"cpu0 " + strconv.Itoa(cpu0[0]) + " 0 " + strconv.Itoa(cpu0[1]) + " " + strconv.Itoa(cpu0[2]) + " " + strconv.Itoa(cpu0[3]) + " 0 0 0 0 0\n" +
		"intr 0\nctxt 0\nbtime 1\nprocesses 1\nprocs_running 1\nprocs_blocked 0\nsoftirq 0 0 0 0 0 0 0 0 0 0 0\n"
	writeFile(t, filepath.Join(dir, "proc/stat"), stat)
	writeFile(t, filepath.Join(dir, "proc/meminfo"), "MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    400 kB\n")
	writeFile(t, filepath.Join(dir, "proc/loadavg"), "0.50 0.25 0.10 1/100 1234\n")
	writeFile(t, filepath.Join(dir, "proc/net/dev"), "Inter-|   Receive                                                |  Transmit\n"+
		" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"+
		"  eth0: "+strconv.Itoa(rx)+" 0 0 0 0 0 0 0 "+strconv.Itoa(tx)+" 0 0 0 0 0 0 0\n")
	writeFile(t, filepath.Join(dir, "proc/diskstats"),
		"   8       0 sda 1 0 "+strconv.Itoa(rdSect)+" 0 1 0 "+strconv.Itoa(wrSect)+" 0 0 0 0 0 0 0 0 0 0\n"+
			"   7       0 loop0 1 0 100 0 1 0 100 0 0 0 0 0 0 0 0 0 0\n")
}

func TestSystemRatesFromCounters(t *testing.T) {
	dir := t.TempDir()
	// USER_HZ is 100: user, system, idle, iowait in ticks.
	procFixture(t, dir, [4]int{100, 100, 800, 0}, 1000, 2000, 10, 20)
	s, err := telemetry.NewSystem(telemetry.SystemConfig{ProcRoot: filepath.Join(dir, "proc")})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	first, err := s.Collect(t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := find(first, "system_cpu_usage_ratio"); ok {
		t.Error("first collection has a CPU ratio: it needs two readings")
	}
	for name, want := range map[string]float64{"system_memory_total_bytes": 1024000, "system_memory_available_bytes": 409600, "system_memory_used_bytes": 614400, "system_load1": 0.5, "system_load15": 0.1} {
		if got, ok := find(first, name); !ok || got.Value != want {
			t.Errorf("%s = %v (%v), want %v", name, got.Value, ok, want)
		}
	}
	// 2 s later: 100 ticks busy of 200; 2000 bytes in, 4000 out; 1024
	// sectors read (512 KiB), 0 written.
	procFixture(t, dir, [4]int{150, 150, 900, 0}, 3000, 6000, 1034, 20)
	second, err := s.Collect(t0.Add(2 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		label telemetry.Label
		want  float64
	}{
		{"system_cpu_usage_ratio", telemetry.Label{Name: "cpu", Value: "total"}, 0.5},
		{"system_cpu_usage_ratio", telemetry.Label{Name: "cpu", Value: "0"}, 0.5},
		{"system_network_receive_bytes_per_second", telemetry.Label{Name: "device", Value: "eth0"}, 1000},
		{"system_network_transmit_bytes_per_second", telemetry.Label{Name: "device", Value: "eth0"}, 2000},
		{"system_disk_read_bytes_per_second", telemetry.Label{Name: "device", Value: "sda"}, 1024 * 512 / 2},
		{"system_disk_write_bytes_per_second", telemetry.Label{Name: "device", Value: "sda"}, 0},
	} {
		if got, ok := find(second, c.name, c.label); !ok || got.Value != c.want {
			t.Errorf("%s{%s} = %v (found %v), want %v", c.name, c.label.Value, got.Value, ok, c.want)
		}
	}
	if _, ok := find(second, "system_disk_read_bytes_per_second", telemetry.Label{Name: "device", Value: "loop0"}); ok {
		t.Error("a loop device is reported")
	}
	if second[0].T != 1002000 {
		t.Errorf("T = %v, want 1002000 (Unix ms)", second[0].T)
	}
}

func TestSystemRealProc(t *testing.T) {
	s, err := telemetry.NewSystem(telemetry.SystemConfig{Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p := newFakePub()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, p) }()
	got := p.waitFor(t, "a CPU ratio", func(ss []telemetry.Sample) bool {
		_, ok := find(ss, "system_cpu_usage_ratio", telemetry.Label{Name: "cpu", Value: "total"})
		return ok
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	r, _ := find(got, "system_cpu_usage_ratio", telemetry.Label{Name: "cpu", Value: "total"})
	m, _ := find(got, "system_memory_total_bytes")
	if r.Value < 0 || r.Value > 1 || m.Value <= 0 {
		t.Errorf("cpu ratio %v, memory %v", r.Value, m.Value)
	}
	if _, err := telemetry.NewSystem(telemetry.SystemConfig{Interval: time.Millisecond}); err == nil {
		t.Error("an interval of 1 ms was accepted")
	}
}

func TestCommandSource(t *testing.T) {
	script := `echo 'cpu 0.5 core=1'
echo 'not a sample'
echo '{"name":"mem","value":42,"labels":{"unit":"MiB"}}'
echo '{"name":"mem"'
echo '# comment'
echo 'ticks 1'
exit 3`
	c, err := telemetry.NewCommand(telemetry.CommandConfig{Command: []string{"sh", "-c", script}, MinBackoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p := newFakePub()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, p) }()
	// Restarted after it exits: "ticks" comes twice.
	got := p.waitFor(t, "two runs", func(ss []telemetry.Sample) bool {
		n := 0
		for _, s := range ss {
			if s.Name == "ticks" {
				n++
			}
		}
		return n >= 2
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	if s, ok := find(got, "cpu", telemetry.Label{Name: "core", Value: "1"}); !ok || s.Value != 0.5 {
		t.Errorf("cpu: %+v %v", s, ok)
	}
	if s, ok := find(got, "mem", telemetry.Label{Name: "unit", Value: "MiB"}); !ok || s.Value != 42 {
		t.Errorf("mem: %+v %v", s, ok)
	}
	st := c.Stats()
	// Each run prints 2 bad lines; a run that the cancel killed (a busy
	// test may cancel while a third run prints) printed 0, 1 or 2.
	if st.Starts < 2 || st.BadLines < 4 || st.BadLines > 2*st.Starts || st.BadLines < 2*(st.Starts-1) {
		t.Errorf("Stats = %+v, want 2 bad lines per completed run", st)
	}
}

func TestCommandBackoffAndKill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := telemetry.NewCommand(telemetry.CommandConfig{Command: []string{"/nonexistent/cmd"}, MinBackoff: time.Second, MaxBackoff: 4 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx, newFakePub()) }()
		// Failed starts back off 1, 2, 4, 4 s: by 11.5 s, 5 attempts.
		time.Sleep(11500 * time.Millisecond)
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
		if st := c.Stats(); st.Starts != 0 {
			t.Errorf("a nonexistent command started %d times", st.Starts)
		}
	})
	// A child that runs forever is killed and reaped when Run is cancelled.
	c, _ := telemetry.NewCommand(telemetry.CommandConfig{Command: []string{"sh", "-c", "echo up 1; sleep 60 & wait"}})
	p := newFakePub()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, p) }()
	p.waitFor(t, "up", func(ss []telemetry.Sample) bool { return len(ss) > 0 })
	start := time.Now()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	// The child sleeps 60 s: a Run that waited for it would take that
	// long; a busy machine does not.
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("Run took %v to return after cancel", d)
	}
}

func TestProcessSourceSeesSleepChild(t *testing.T) {
	sh := exec.Command("sh", "-c", "sleep 30; :")
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Process.Kill(); sh.Wait() })
	p, err := telemetry.NewProcess(sh.Process.Pid, 20*time.Millisecond, "")
	if err != nil {
		t.Fatal(err)
	}
	pub := newFakePub()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, pub) }()
	got := pub.waitFor(t, "sleep in the tree", func(ss []telemetry.Sample) bool {
		_, ok := find(ss, "process_command_count", telemetry.Label{Name: "command", Value: "sleep"})
		_, cpu := find(ss, "process_cpu_usage_ratio")
		return ok && cpu
	})
	cancel()
	<-done
	if s, _ := find(got, "process_count"); s.Value != 2 {
		t.Errorf("process_count = %v, want 2 (sh and sleep)", s.Value)
	}
	if s, _ := find(got, "process_resident_memory_bytes"); s.Value <= 0 {
		t.Errorf("RSS = %v", s.Value)
	}
	if s, _ := find(got, "process_threads"); s.Value < 2 {
		t.Errorf("threads = %v", s.Value)
	}
	// The root gone: the source ends with ErrProcessGone.
	sh.Process.Kill()
	sh.Wait()
	if _, err := p.Collect(time.Now()); err == nil {
		t.Error("Collect after the root exited: no error")
	}
}

func TestFuncSourceInChannel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		c, err := telemetry.New(telemetry.Config{Source: "daemon"}, telemetry.Func{Interval: time.Second, Collect: func(now time.Time) []telemetry.Sample {
			n++
			return []telemetry.Sample{{T: float64(now.UnixMilli()), Name: "ahpd_ticks", Value: float64(n)}}
		}})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		if st := c.Stats(); st.Batches != 3 {
			t.Errorf("%d batches after 2.5 s at 1 s, want 3", st.Batches)
		}
		c.Close()
	})
}
