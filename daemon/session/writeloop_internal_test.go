package session

import (
	"context"
	"log/slog"
	"net"
	"testing"

	"github.com/coder/websocket"

	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/internal/cork"
)

// recordingConn is a socket that records each write it is given.
type recordingConn struct {
	net.Conn // nil: only Write is used
	writes   []string
}

func (r *recordingConn) Write(p []byte) (int, error) {
	r.writes = append(r.writes, string(p))
	return len(p), nil
}

// writeThrough is a transport whose messages are written as they are to w
// (no WebSocket framing), so a test sees what reaches the socket.
type writeThrough struct {
	transport // nil: only Write is used
	w         *countingConn
}

func (t writeThrough) Write(_ context.Context, _ websocket.MessageType, p []byte) error {
	_, err := t.w.Write(p)
	return err
}

// TestWriteLoopBatchesQueuedFrames: the frames queued behind the one the
// writer takes leave with it in one write to the socket, in order, and
// each is handed back to the run loop; a frame queued alone is a write of
// its own.
func TestWriteLoopBatchesQueuedFrames(t *testing.T) {
	rec := &recordingConn{}
	wire := &countingConn{Conn: cork.New(rec)}
	c := &conn{ws: writeThrough{w: wire}, wire: wire, out: make(chan []byte, 4), written: make(chan []byte, 4), writeFailed: make(chan struct{})}
	frames := []string{"one", "two", "three"}
	for _, f := range frames {
		c.out <- []byte(f)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.writeLoop()
	}()
	for _, f := range frames {
		if got := string(<-c.written); got != f {
			t.Fatalf("handed back %q, want %q", got, f)
		}
	}
	c.out <- []byte("four")
	if got := string(<-c.written); got != "four" {
		t.Fatalf("handed back %q, want four", got)
	}
	close(c.out)
	<-done
	want := []string{"onetwothree", "four"}
	if len(rec.writes) != len(want) || rec.writes[0] != want[0] || rec.writes[1] != want[1] {
		t.Fatalf("socket writes %q, want %q", rec.writes, want)
	}
	if got := wire.Written(); got != int64(len("onetwothreefour")) {
		t.Errorf("counted %d bytes out, want %d", got, len("onetwothreefour"))
	}
}

// TestMutedWriterWritesNothing: once a connection is muted (its token was
// revoked: RecheckTokens mutes it before the revoke returns), the writer
// writes none of the frames queued to it, yet hands each back to the run
// loop, whose accounting goes on until the close.
func TestMutedWriterWritesNothing(t *testing.T) {
	rec := &recordingConn{}
	wire := &countingConn{Conn: cork.New(rec)}
	c := &conn{ws: writeThrough{w: wire}, wire: wire, out: make(chan []byte, 4), written: make(chan []byte, 4), writeFailed: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.writeLoop()
	}()
	c.out <- []byte("before")
	<-c.written
	c.muted.Store(true)
	for _, f := range []string{"after1", "after2", "after3"} {
		c.out <- []byte(f)
		if got := string(<-c.written); got != f {
			t.Fatalf("handed back %q, want %q", got, f)
		}
	}
	close(c.out)
	<-done
	if len(rec.writes) != 1 || rec.writes[0] != "before" {
		t.Fatalf("socket writes %q, want only the frame before the mute", rec.writes)
	}
}

// TestRecheckTokensMutesBeforeReturning: when RecheckTokens returns (a
// revoke calls it), every connection whose token was revoked is muted,
// and the others are not.
func TestRecheckTokensMutesBeforeReturning(t *testing.T) {
	tokens := auth.NewTokens("admin-secret")
	_, revokedID := tokens.Mint(auth.Grant{Role: auth.RoleView})
	_, keptID := tokens.Mint(auth.Grant{Role: auth.RoleView})
	s := New(Options{Tokens: tokens, Log: slog.New(slog.DiscardHandler)})
	mk := func(id string) *conn {
		c := &conn{srv: s, wakeSig: make(chan struct{}, 1)}
		c.token.Store(&tokenRef{ID: id, grant: auth.Grant{ID: id, Role: auth.RoleView}})
		s.conns[c] = struct{}{}
		return c
	}
	revoked, kept := mk(revokedID), mk(keptID)
	if !tokens.Revoke(revokedID) {
		t.Fatal("revoke found nothing")
	}
	s.RecheckTokens()
	if !revoked.muted.Load() {
		t.Error("the revoked token's connection is not muted when RecheckTokens returns")
	}
	if kept.muted.Load() {
		t.Error("another token's connection was muted")
	}
}
