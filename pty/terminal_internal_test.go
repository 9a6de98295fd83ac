package pty

import (
	"bytes"
	"runtime"
	"testing"
	"time"
)

// TestReplyQueueBound: query replies waiting for the PTY never exceed
// ReplyQueue bytes; the excess is dropped and counted.
func TestReplyQueueBound(t *testing.T) {
	const bound = 2048
	term, err := Start(Config{Command: []string{"/bin/sh", "-c", "stty -icanon -echo; sleep 30"}, ReplyQueue: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	reply := bytes.Repeat([]byte("r"), 1000)
	for i := 0; i < 100; i++ {
		term.queueReply(reply)
		term.mu.Lock()
		q := term.replyBytes
		term.mu.Unlock()
		if q > bound {
			t.Fatalf("%d reply bytes queued, bound %d", q, bound)
		}
	}
	if st := term.Stats(); st.RepliesLost == 0 || st.Replies+st.RepliesLost != 100 {
		t.Fatalf("stats %+v: the PTY cannot take 100 KB of input, some replies must be dropped", st)
	}
}

// TestEmulatorBacklogBound: the reader never lets the emulator lag more
// than EmulatorBacklog (plus one read) behind, and does wait for it.
func TestEmulatorBacklogBound(t *testing.T) {
	const bound = 64 << 10
	term, err := Start(Config{Command: []string{"/bin/sh", "-c", "head -c 5000000 /dev/zero | tr '\\0' a"}, EmulatorBacklog: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	// Stall the emulator: the reader must stop at the bound.
	term.emuMu.Lock()
	var maxLag int64
	for deadline := time.Now().Add(500 * time.Millisecond); time.Now().Before(deadline); runtime.Gosched() {
		maxLag = max(maxLag, term.Stats().EmulatorLag)
	}
	term.emuMu.Unlock()
	if maxLag < bound || maxLag > bound+readSize {
		t.Fatalf("emulator lag reached %d, want within [%d, %d]", maxLag, bound, bound+readSize)
	}
	select {
	case <-term.exitDone:
	case <-time.After(30 * time.Second):
		t.Fatal("no exit after the emulator resumed")
	}
}
