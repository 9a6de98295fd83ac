package tcp

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/internal/statebuf"
)

var discard = slog.New(slog.DiscardHandler)

// frozenMidStream returns a channel's Freeze taken in the middle of an
// 8 MiB download: its first subscriber read 1 MiB crediting as it went,
// then filled its window without credit and lost its connection. It
// returns the data, the viewer (closed) and the position it credited.
func frozenMidStream(t *testing.T, budget *flow.Budget) ([]byte, *viewer, flow.Position, Frozen) {
	t.Helper()
	data := streamData(8 << 20)
	tg := newTarget(t, data, true)
	c := newChannel(t, tg, Config{Budget: budget})
	limits := flow.ReceiveLimits{WindowBytes: 256 << 10, MaximumFrameBytes: 16 << 10, MaximumMessageBytes: 64 << 10}
	v := attach(t, c, "before", limits, nil)
	var released flow.Position
	drive(t, "the first MiB", func() bool {
		released = v.accepted
		v.credit()
		return len(v.data) >= 1<<20
	}, v)
	drive(t, "the window to fill", func() bool {
		return v.received-v.credited >= limits.WindowBytes && v.cur == 0 && !v.snd.Pending()
	}, v)
	if _, err := c.Freeze(); err == nil {
		t.Fatal("Freeze took a channel a connection holds")
	}
	v.close()
	fr, err := c.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fr.Conn.Close() })
	select {
	case <-c.Done():
	case <-time.After(hangGuard):
		t.Fatal("a frozen channel did not end")
	}
	return data, v, released, fr
}

// TestHandOverResumesMidStream: a TCP channel frozen in the middle of a
// download (its client holding a full window it has not credited) and
// adopted from its state and socket resumes with the client's token:
// the client gets the rest of the target's bytes, each once, in order.
func TestHandOverResumesMidStream(t *testing.T) {
	data, v, released, fr := frozenMidStream(t, nil)
	f, err := dupFile(fr.Conn)
	if err != nil {
		t.Fatal(err)
	}
	budget := flow.NewBudget(64 << 20)
	c2, err := Adopt(Config{Budget: budget}, f, fr.State)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c2.Close() })
	if used, kept := budget.Used(), c2.Retained(); used == 0 || kept != v.received-v.credited {
		t.Fatalf("adopted channel: budget used %d, retained %d; want the %d bytes not credited", used, kept, v.received-v.credited)
	}
	if i := c2.Info(); i.Phase != "open, retained" || i.BytesOut != int64(len(v.data)) {
		t.Fatalf("adopted channel: %+v, want open and retained with %d bytes out", i, len(v.data))
	}
	if _, err := c2.Attach(flow.AttachRequest{Role: flow.RoleControl, Release: func(flow.Position) {}}); err == nil {
		t.Fatal("an adopted channel took a subscribe without a resume")
	}
	r := attach(t, c2, "after", v.limits, &flow.ResumeRequest{Token: v.res.Resume.Token, Accepted: v.accepted, Released: released})
	r.data = bytes.Clone(v.data)
	drive(t, "the rest of the stream", func() bool {
		r.credit()
		return r.eof
	}, r)
	if !bytes.Equal(r.data, data) {
		t.Fatalf("after the hand-over the client has %d bytes; they differ from the target's %d", len(r.data), len(data))
	}
	if len(r.violations) > 0 {
		t.Fatalf("window overruns: %q", r.violations)
	}
	r.close()
}

// dupFile returns a duplicate of f, as the execve keeps the descriptor
// for the new binary.
func dupFile(f *os.File) (*os.File, error) {
	c, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.(*net.TCPConn).File()
}

// An adopted channel nobody resumes ends when its retention runs out,
// and gives its journal's memory back.
func TestHandOverRetention(t *testing.T) {
	_, _, _, fr := frozenMidStream(t, nil)
	f, err := dupFile(fr.Conn)
	if err != nil {
		t.Fatal(err)
	}
	budget := flow.NewBudget(64 << 20)
	c2, err := Adopt(Config{Budget: budget, Retain: func() time.Duration { return 50 * time.Millisecond }}, f, fr.State)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	select {
	case <-c2.Done():
	case <-time.After(hangGuard):
		t.Fatal("an adopted channel outlived its retention")
	}
	if used := budget.Used(); used != 0 {
		t.Fatalf("after the retention the budget holds %d bytes", used)
	}
}

// A state that is cut, padded, of another version or inconsistent is
// refused by CheckState and Adopt, which closes the socket.
func TestHandOverStateChecked(t *testing.T) {
	_, _, _, fr := frozenMidStream(t, nil)
	if err := CheckState(fr.State); err != nil {
		t.Fatalf("the state Freeze wrote: %v", err)
	}
	for n := 0; n < len(fr.State); n += max(1, len(fr.State)/997) {
		if err := CheckState(fr.State[:n]); !errors.Is(err, ErrState) {
			t.Fatalf("a state cut to %d of %d bytes: %v", n, len(fr.State), err)
		}
	}
	if err := CheckState(append(bytes.Clone(fr.State), 0)); !errors.Is(err, ErrState) {
		t.Fatalf("a padded state: %v", err)
	}
	newer := statebuf.AppendInt(nil, handoverVersion+1)
	if err := CheckState(append(newer, fr.State[1:]...)); !errors.Is(err, ErrState) {
		t.Fatalf("a newer state: %v", err)
	}
	s, err := decodeState(fr.State)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.records) == 0 || !s.hasJournal {
		t.Fatalf("the mid-stream state has %d journalled messages", len(s.records))
	}
	f, err := dupFile(fr.Conn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Adopt(Config{}, f, fr.State[:len(fr.State)/2]); !errors.Is(err, ErrState) {
		t.Fatalf("Adopt of a cut state: %v", err)
	}
	if err := f.Close(); err == nil {
		t.Fatal("Adopt refused the state but left the socket open")
	}
}

func FuzzTCPState(f *testing.F) {
	// A channel that never had a consumer, and one mid-stream with a
	// journal, read buffers and queued writes (built without sockets).
	idle := makeChannel(Config{Logger: discard})
	idle.target, idle.remote = "127.0.0.1:80", "127.0.0.1:80"
	f.Add(idle.encodeState())
	busy := makeChannel(Config{Logger: discard})
	busy.target, busy.remote, busy.tokens = "localhost:8080", "[::1]:8080", []string{"tok1", "tok2"}
	text := `{"jsonrpc":"2.0","method":"tcp/data","params":{"offset":0,"data":"aGVsbG8="}}`
	var err error
	busy.journal, err = flow.RestoreJournal(flow.Position{MessageID: 3, Position: 900}, []flow.JournalRecord{
		{ID: 4, Start: 900, End: 900 + flow.UTF16Len(text), Class: flow.Data, Text: text, PlainFrom: 66, PlainTo: 74}})
	if err != nil {
		f.Fatal(err)
	}
	limits := flow.ReceiveLimits{WindowBytes: 256 << 10, MaximumFrameBytes: 64 << 10, MaximumMessageBytes: 256 << 10}
	if busy.recv, err = flow.RestoreReceiver(limits, flow.Position{MessageID: 5, Position: 700}, flow.Position{MessageID: 4, Position: 500}); err != nil {
		f.Fatal(err)
	}
	busy.pend = [][]byte{[]byte("abc"), []byte("defg")}
	busy.outOff, busy.inOff = 5, 12
	busy.written = flow.Position{MessageID: 4, Position: 500}
	busy.wq = []writeItem{{data: []byte("xyz"), pos: flow.Position{MessageID: 5, Position: 700}}}
	f.Add(busy.encodeState())
	for _, st := range [][]byte{idle.encodeState(), busy.encodeState()} {
		if _, err := decodeState(st); err != nil {
			f.Fatalf("a seed is refused: %v", err)
		}
	}
	f.Fuzz(func(t *testing.T, state []byte) {
		s, err := decodeState(state)
		if err != nil {
			if !errors.Is(err, ErrState) {
				t.Fatalf("an error that is not ErrState: %v", err)
			}
			return
		}
		if len(s.pend) > 2 || s.hasJournal && len(s.tokens) == 0 {
			t.Fatalf("accepted an impossible state: %d read buffers, %d tokens", len(s.pend), len(s.tokens))
		}
	})
}
