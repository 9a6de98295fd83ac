package pty_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/pty"
)

// firstMethod pulls one message and returns its method. It waits up to
// 15 s for one (a resnapshot may be deferred by up to a quarter second,
// and a loaded machine under -race applies a backlog slowly).
func firstMethod(t *testing.T, v *pty.Viewer) string {
	t.Helper()
	m, ok := v.Pull(true, 1<<20)
	for deadline := time.Now().Add(15 * time.Second); !ok; m, ok = v.Pull(true, 1<<20) {
		if time.Now().After(deadline) {
			t.Fatal("nothing to pull")
		}
		time.Sleep(5 * time.Millisecond)
	}
	var env struct {
		Method string `json:"method"`
	}
	if err := json.Unmarshal([]byte(pty.MessageText(t, m)), &env); err != nil {
		t.Fatal(err)
	}
	return env.Method
}

// A viewer may fall behind by its window plus the backlog before it is
// resnapshotted (PROTOCOL.md §8); one attached without a window only by
// the backlog.
func TestViewerWindowAllowance(t *testing.T) {
	term := start(t, pty.Config{
		Command:       sh("read x; head -c 3000000 /dev/zero | tr '\\0' a; echo; read y"),
		ViewerBacklog: 1 << 20,
	})
	wide := term.AttachWindow(nil, 8<<20)
	narrow := term.AttachWindow(nil, 0)
	for _, v := range []*pty.Viewer{wide, narrow} {
		for firstMethod(t, v) != "channel/ready" {
		}
	}
	if err := term.Input([]byte("\r"), nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for term.Stats().BytesRead < 3000000 {
		if time.Now().After(deadline) {
			t.Fatalf("read %d bytes, want 3000000", term.Stats().BytesRead)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if m := firstMethod(t, narrow); m != "terminal/reset" {
		t.Errorf("narrow viewer 3 MB behind: next message %s, want terminal/reset", m)
	}
	if m := firstMethod(t, wide); m != "terminal/output" {
		t.Errorf("viewer with an 8 MiB window 3 MB behind: next message %s, want terminal/output", m)
	}
	if d := wide.Stats().BytesDropped; d != 0 {
		t.Errorf("wide viewer dropped %d bytes", d)
	}
}
