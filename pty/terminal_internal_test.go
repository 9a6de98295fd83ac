package pty

import (
	"bytes"
	"runtime"
	"strings"
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

// TestViewerIdleBuffers: a viewer that sent large messages keeps no
// message buffer larger than idleBuf once it has nothing to send.
func TestViewerIdleBuffers(t *testing.T) {
	term, err := Start(Config{Command: []string{"/bin/sh", "-c", "stty raw -echo; read x; head -c 3000000 /dev/zero | tr '\\0' a; read y"}, ViewerBacklog: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	wake := make(chan struct{}, 1)
	v := term.Attach(func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	defer v.Close()
	// Take the initial snapshot first, so that what follows is live.
	for {
		m, ok := v.Pull(true, 1<<20)
		if ok && m.Text == readyMsg {
			break
		}
		if !ok {
			<-wake
		}
	}
	if err := term.Input([]byte("\r"), nil); err != nil {
		t.Fatal(err)
	}
	// Let the output pile up, so that messages are large.
	for term.Stats().BytesRead < 3000000 {
		time.Sleep(10 * time.Millisecond)
	}
	largest, got := 0, 0
	deadline := time.After(20 * time.Second)
	for got < 3000000 {
		m, ok := v.Pull(true, 1<<20)
		if !ok {
			select {
			case <-wake:
			case <-deadline:
				t.Fatalf("got %d of 3000000 bytes", got)
			}
			continue
		}
		if strings.HasPrefix(m.Text, outPrefix) {
			got += strings.Count(m.Text[len(outPrefix):len(m.Text)-len(outSuffix)], "a")
		}
		largest = max(largest, cap(v.bufs[v.cur]))
	}
	if largest <= idleBuf {
		t.Fatalf("the largest message buffer was %d bytes; the test needs messages above %d", largest, idleBuf)
	}
	if _, ok := v.Pull(true, 1<<20); ok {
		t.Fatal("more output than the command wrote")
	}
	for i, b := range v.bufs {
		if cap(b) > idleBuf {
			t.Fatalf("idle viewer keeps a %d-byte buffer %d (bound %d)", cap(b), i, idleBuf)
		}
	}
}
