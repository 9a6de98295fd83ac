package ctl_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// eventLine is a line of ahpctl events -o json.
type eventLine struct {
	Seq     uint64 `json:"seq"`
	Kind    string `json:"kind"`
	Channel string `json:"channel"`
}

// followEvents runs ahpctl events -o json with args and collects its
// events until stop; stop returns them and what it wrote on stderr.
func followEvents(t *testing.T, d *daemonProc, args ...string) (seen func() []eventLine, stop func() ([]eventLine, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, d.ahpctl, append([]string{"--control", d.control, "events", "-o", "json"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var evs []eventLine
	var wg sync.WaitGroup
	wg.Go(func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e eventLine
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Errorf("events -o json line %q: %v", sc.Text(), err)
				continue
			}
			mu.Lock()
			evs = append(evs, e)
			mu.Unlock()
		}
	})
	seen = func() []eventLine {
		mu.Lock()
		defer mu.Unlock()
		return append([]eventLine(nil), evs...)
	}
	stopped := false
	stop = func() ([]eventLine, string) {
		if !stopped {
			stopped = true
			cancel()
			wg.Wait()
			_ = cmd.Wait()
		}
		return seen(), stderr.String()
	}
	t.Cleanup(func() { stop() })
	return seen, stop
}

// awaitEvent waits (60 s at most) until seen has an event of kind about
// channel.
func awaitEvent(t *testing.T, seen func() []eventLine, kind, channel string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		for _, e := range seen() {
			if e.Kind == kind && e.Channel == channel {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s %s within 60 s; events %+v", kind, channel, seen())
		}
	}
}

// TestE2EUpgradeEventSeq: the daemon's event seq goes on across upgrades
// in place. `ahpctl events` followed through 3 upgrades prints every
// event once, its seqs contiguous (no reset to 1, none twice, none
// skipped), the ones the hand-over itself makes included; a watcher that
// resumes after the upgrades with a seq seen before them (--after) gets
// the same events after it, and nothing lost.
func TestE2EUpgradeEventSeq(t *testing.T) {
	d := startDaemon(t)
	seen, stop := followEvents(t, d)
	// The watch is in place once an event made after it shows up.
	for i := 0; ; i++ {
		id := "probe" + strconv.Itoa(i)
		d.mustCtl("terminal", "create", "--id", id, "--", "/bin/sh", "-c", "exec cat")
		if func() bool {
			for _, e := range seen() {
				if e.Kind == "channel.created" && e.Channel == "ahp-terminal:/"+id {
					return true
				}
			}
			return false
		}() {
			break
		}
		if i == 200 {
			t.Fatal("ahpctl events shows no event")
		}
	}
	resumeAfter := seen()[len(seen())-1].Seq
	for i := 1; i <= 3; i++ {
		d.upgrade(i)
		id := "after" + strconv.Itoa(i)
		d.mustCtl("terminal", "create", "--id", id, "--", "/bin/sh", "-c", "exec cat")
		awaitEvent(t, seen, "channel.created", "ahp-terminal:/"+id)
	}
	evs, stderr := stop()
	if strings.Contains(stderr, "lost") {
		t.Errorf("ahpctl events: %s", stderr)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq != evs[i-1].Seq+1 {
			t.Fatalf("event %d: seq %d after %d (%+v after %+v)", i, evs[i].Seq, evs[i-1].Seq, evs[i], evs[i-1])
		}
	}
	// A watcher resuming after a seq of before the upgrades gets every
	// event since, the same.
	var want []eventLine
	for _, e := range evs {
		if e.Seq > resumeAfter {
			want = append(want, e)
		}
	}
	seen2, stop2 := followEvents(t, d, "--after", strconv.FormatUint(resumeAfter, 10))
	awaitEvent(t, seen2, "channel.created", "ahp-terminal:/after3")
	got, stderr2 := stop2()
	if strings.Contains(stderr2, "lost") {
		t.Errorf("ahpctl events --after: %s", stderr2)
	}
	if len(got) < len(want) {
		t.Fatalf("resumed after %d: %d events, want %d", resumeAfter, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("resumed after %d: event %d is %+v, want %+v", resumeAfter, i, got[i], want[i])
		}
	}
	kinds := map[string]int{}
	for _, e := range evs {
		kinds[e.Kind]++
	}
	t.Logf("%d events, seqs %d–%d, through 3 upgrades: %v; resumed after %d: %d events", len(evs), evs[0].Seq, evs[len(evs)-1].Seq, kinds, resumeAfter, len(got))
}
