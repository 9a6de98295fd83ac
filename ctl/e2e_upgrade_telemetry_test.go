package ctl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/ctl/client"
)

// telemetryLog is what a reconnecting viewer of a telemetry channel saw
// over all its subscriptions: each seq's values (a replay may repeat a
// seq: it must carry the same values), the telemetry/dropped ranges, and
// how many subscriptions it made.
type telemetryLog struct {
	mu      sync.Mutex
	values  map[uint64][]float64
	dropped [][2]uint64
	subs    int
	err     error // a seq seen twice with other values
}

func (l *telemetryLog) add(m client.Message) {
	var p struct {
		Seq     uint64 `json:"seq"`
		FromSeq uint64 `json:"fromSeq"`
		ToSeq   uint64 `json:"toSeq"`
		Samples []struct {
			Value float64 `json:"value"`
		} `json:"samples"`
	}
	_ = json.Unmarshal(m.Params, &p)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch m.Method {
	case "telemetry/samples":
		var vs []float64
		for _, s := range p.Samples {
			vs = append(vs, s.Value)
		}
		if old, ok := l.values[p.Seq]; ok && !slices.Equal(old, vs) && l.err == nil {
			l.err = fmt.Errorf("seq %d came with values %v, then %v", p.Seq, old, vs)
		}
		l.values[p.Seq] = vs
	case "telemetry/dropped":
		l.dropped = append(l.dropped, [2]uint64{p.FromSeq, p.ToSeq})
	}
}

// has reports whether the viewer got value v (a command's counter).
func (l *telemetryLog) has(v float64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, vs := range l.values {
		if slices.Contains(vs, v) {
			return true
		}
	}
	return false
}

// check returns the seqs from the first to the last seen that the viewer
// got neither as samples nor inside a telemetry/dropped range, and the
// values in seq order.
func (l *telemetryLog) check() (missing []uint64, values []float64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	seqs := slices.Sorted(func(yield func(uint64) bool) {
		for s := range l.values {
			if !yield(s) {
				return
			}
		}
	})
	if len(seqs) == 0 {
		return nil, nil, l.err
	}
	for s := seqs[0]; s <= seqs[len(seqs)-1]; s++ {
		vs, ok := l.values[s]
		if !ok && !slices.ContainsFunc(l.dropped, func(r [2]uint64) bool { return r[0] <= s && s <= r[1] }) {
			missing = append(missing, s)
		}
		values = append(values, vs...)
	}
	return missing, values, l.err
}

// watchTelemetry follows uri as the web page does: subscribe, read,
// release, and when the connection closes (1012 at an upgrade) dial and
// subscribe again, until stop is closed. Its goroutine ends before wait
// returns.
func watchTelemetry(t *testing.T, d *daemonProc, uri string, stop <-chan struct{}) (l *telemetryLog, wait func()) {
	tok, err := os.ReadFile(filepath.Join(filepath.Dir(d.control), "state", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	l = &telemetryLog{values: map[uint64][]float64{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			c, _, err := client.Dial(ctx, "ws://"+d.addr+"/v1/ws", client.Options{Token: strings.TrimSpace(string(tok))})
			if err != nil {
				select { // the daemon is handing over: try again
				case <-ctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
				continue
			}
			if s, err := c.Subscribe(ctx, uri, nil); err == nil {
				l.mu.Lock()
				l.subs++
				l.mu.Unlock()
				for {
					m, err := s.Next(ctx)
					if err != nil {
						break
					}
					l.add(m)
					if s.Release(ctx, m) != nil {
						break
					}
				}
			}
			c.Close()
		}
	})
	go func() { <-stop; cancel() }()
	return l, func() { <-stop; wg.Wait() }
}

// parentOf returns the parent pid of pid (from /proc/PID/stat).
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatalf("process %d: %v", pid, err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// waitFile waits (60 s at most) for the file and returns its content.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 60 s", path)
		}
	}
}

// TestE2EUpgradeTelemetryCommand: a command source printing a counter
// (each line in two writes, so that an upgrade may cut one) goes through
// 3 upgrades in place with its process: the same pid, still the daemon's
// child, started once. A viewer that reconnects after each upgrade, as
// the page does, sees every value the command printed exactly once and in
// order, and the seqs from its first to its last with none missing
// (telemetry/dropped would account for a gap; none is due). A system
// source sampling every 20 ms meanwhile keeps its seqs the same way.
func TestE2EUpgradeTelemetryCommand(t *testing.T) {
	d := startDaemon(t)
	dir := t.TempDir()
	// While DIR/hold exists the command stops after the first half of a
	// line and writes its number to DIR/waiting.
	script := `echo $$ >> DIR/pids; i=0; while :; do i=$((i+1)); printf 'n '; if [ -e DIR/hold ]; then echo $i > DIR/waiting; while [ -e DIR/hold ]; do sleep 0.005; done; fi; sleep 0.01; printf '%d\n' $i; done`
	script = strings.ReplaceAll(script, "DIR", dir)
	cmdURI := strings.TrimSpace(d.mustCtl("telemetry", "create", "--kind", "command", "--id", "count", "--history", "10m", "--", "/bin/sh", "-c", script))
	sysURI := strings.TrimSpace(d.mustCtl("telemetry", "create", "--kind", "system", "--id", "sys", "--interval", "20ms", "--history", "10m"))
	pidText := waitFile(t, filepath.Join(dir, "pids"))
	pid, err := strconv.Atoi(pidText)
	if err != nil {
		t.Fatalf("pids file %q", pidText)
	}
	stop := make(chan struct{})
	cmdLog, waitCmd := watchTelemetry(t, d, cmdURI, stop)
	sysLog, waitSys := watchTelemetry(t, d, sysURI, stop)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		waitCmd()
		waitSys()
	}()
	awaitValue := func(v float64) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); !cmdLog.has(v); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("value %v not seen within 60 s", v)
			}
		}
	}
	awaitValue(5)
	for i := 1; i <= 3; i++ {
		d.upgrade(i)
		// The viewer is back and the command goes on.
		_, vs, _ := cmdLog.check()
		awaitValue(float64(len(vs) + 5))
	}
	// The command stops within a line; the viewer must then have every
	// value before it.
	if err := os.WriteFile(filepath.Join(dir, "hold"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	last, err := strconv.Atoi(waitFile(t, filepath.Join(dir, "waiting")))
	if err != nil {
		t.Fatal(err)
	}
	awaitValue(float64(last - 1))
	close(stop)
	waitCmd()
	waitSys()

	if got := strings.TrimSpace(readFile(t, filepath.Join(dir, "pids"))); got != pidText {
		t.Fatalf("the command started as pids %q, want once (%s)", got, pidText)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the command's process %d after 3 upgrades: %v", pid, err)
	}
	if ppid := parentOf(t, pid); ppid != d.cmd.Process.Pid {
		t.Fatalf("the command's parent is %d, want the daemon %d", ppid, d.cmd.Process.Pid)
	}
	missing, values, err := cmdLog.check()
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("command channel: seqs %v neither received nor reported dropped", missing)
	}
	for i, v := range values {
		if v != float64(i+1) {
			t.Fatalf("command channel: value %v where %d was due (values %v…)", v, i+1, values[:min(len(values), i+3)])
		}
	}
	if len(values) != last-1 {
		t.Fatalf("command channel: %d values, the command printed %d whole lines", len(values), last-1)
	}
	sysMissing, _, err := sysLog.check()
	if err != nil {
		t.Fatal(err)
	}
	if len(sysMissing) > 0 {
		t.Errorf("system channel: seqs %v neither received nor reported dropped", sysMissing)
	}
	sysLog.mu.Lock()
	t.Logf("command: %d values, pid %d kept across 3 upgrades, %d subscriptions, %d dropped ranges; system: %d seqs, %d subscriptions, %d dropped ranges",
		len(values), pid, cmdLog.subs, len(cmdLog.dropped), len(sysLog.values), sysLog.subs, len(sysLog.dropped))
	sysLog.mu.Unlock()
	if cmdLog.subs < 4 || sysLog.subs < 4 {
		t.Errorf("subscriptions: command %d, system %d; want one before and one after each upgrade", cmdLog.subs, sysLog.subs)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
