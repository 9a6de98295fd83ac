package pty_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/pty"
)

// TestStalledSnapshotsBounded: viewers that join a flooding terminal at
// different moments, each stopping to credit halfway through its
// snapshot, keep at most pty.MaxSnapshots snapshot texts alive between
// them — not one each — and a viewer whose snapshot was dropped
// meanwhile starts over from a terminal/reset once it credits, and
// reaches channel/ready.
func TestStalledSnapshotsBounded(t *testing.T) {
	const waves, perWave = 24, 4
	// 2,000 lines of 37 bytes: a snapshot (74 KB) is larger than the
	// 16 KiB window, so every viewer stalls inside its snapshot.
	term := start(t, pty.Config{Command: sh("exec yes 0123456789abcdefghijklmnopqrstuvwxyz"), Scrollback: 2000})
	for deadline := time.Now().Add(30 * time.Second); term.Stats().BytesRead < 4<<20; {
		if time.Now().After(deadline) {
			t.Fatalf("the flood wrote %d bytes in 30 s", term.Stats().BytesRead)
		}
		time.Sleep(10 * time.Millisecond)
	}
	limits := flow.ReceiveLimits{WindowBytes: 16 << 10, MaximumFrameBytes: 4 << 10, MaximumMessageBytes: 16 << 10}
	var vs []*pty.Viewer
	var windows []*flow.SendWindow
	var methods [][]string // per viewer, the methods of the messages it was sent
	// Each viewer is pulled as a Sender pulls it, until its window is
	// full; its messages count as sent whole at once.
	pull := func(i int) {
		w := windows[i]
		for w.MayStart() {
			m, ok := vs[i].Pull(true, w.PullSize())
			if !ok {
				return
			}
			if m.Size == 0 {
				m.Size = flow.UTF16Len(m.Text)
			}
			methods[i] = append(methods[i], method(m))
			if err := w.Start(m.Size, m.Class); err != nil {
				t.Fatal(err)
			}
			w.Reserve(m.Size)
			w.Finish()
			vs[i].Finished(w.MayStart())
		}
	}
	for w := range waves {
		for range perWave {
			sub, err := term.Attach(flow.AttachRequest{Window: limits.WindowBytes, Role: flow.RoleView})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(sub.Close)
			vs, windows, methods = append(vs, sub.(*pty.Viewer)), append(windows, flow.NewSendWindow(limits)), append(methods, nil)
			pull(len(vs) - 1)
		}
		if w < waves-1 {
			time.Sleep(pty.SnapReuse + 50*time.Millisecond) // the next wave needs a newer snapshot
		}
	}
	n, bytes := pty.SnapshotsHeld(vs)
	t.Logf("%d viewers in %d waves, stalled in their snapshots, keep %d snapshot texts alive (%d KB)", len(vs), waves, n, bytes>>10)
	if n > pty.MaxSnapshots {
		t.Fatalf("%d snapshot texts alive, want at most %d", n, pty.MaxSnapshots)
	}
	// The first viewer's snapshot was dropped (more waves than
	// snapshots kept): credited, it starts over and reaches channel/ready.
	i := 0
	for range 1000 {
		if _, err := windows[i].Credit(windows[i].Sent()); err != nil {
			t.Fatal(err)
		}
		pull(i)
		if len(methods[i]) > 0 && methods[i][len(methods[i])-1] == "channel/ready" {
			break
		}
	}
	got := strings.Join(methods[i], " ")
	if !strings.Contains(got, "channel/ready") {
		t.Fatalf("the first viewer never reached channel/ready: %s", got)
	}
	if strings.Count(got, "terminal/reset") < 2 {
		t.Fatalf("the first viewer's dropped snapshot did not start over: %s", got)
	}
}

// method returns a message's JSON-RPC method.
func method(m flow.Message) string {
	text := m.Text
	if m.Escaped != "" {
		text = strings.ReplaceAll(m.Escaped, `\"`, `"`)
	}
	const key = `"method":"`
	i := strings.Index(text, key)
	if i < 0 {
		return ""
	}
	rest := text[i+len(key):]
	return rest[:strings.IndexByte(rest, '"')]
}
