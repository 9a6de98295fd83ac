package wire

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/coder/websocket"
)

// TestReadAll: whatever the reader's chunking and the buffer given, the
// bytes come back whole; memory that is large enough is used as it is,
// and growth doubles (a 64 KiB message from nothing takes 6 buffers —
// 4 to 64 KiB, and 128 KiB to see the end — not append's score).
func TestReadAll(t *testing.T) {
	msg := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	for _, buf := range [][]byte{nil, make([]byte, 7, 100), make([]byte, 0, 1<<20)} {
		for _, r := range []io.Reader{bytes.NewReader(msg), iotest.OneByteReader(bytes.NewReader(msg)), iotest.HalfReader(bytes.NewReader(msg))} {
			got, err := ReadAll(r, buf)
			if err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("ReadAll = %d bytes, %v; want the %d bytes", len(got), err, len(msg))
			}
			if cap(buf) >= len(msg) && &got[0] != &buf[:1][0] {
				t.Fatal("ReadAll did not read into memory that was large enough")
			}
		}
	}
	allocs := testing.AllocsPerRun(10, func() { ReadAll(bytes.NewReader(msg), nil) })
	if allocs > 7 {
		t.Errorf("reading 64 KiB into nothing took %v allocations, want ≤ 7 (the reader, and 4 KiB doubled to 128 KiB)", allocs)
	}
	boom := errors.New("boom")
	if _, err := ReadAll(iotest.ErrReader(boom), nil); !errors.Is(err, boom) {
		t.Errorf("a reader's error: %v", err)
	}
}

// readerFunc is a MessageReader whose Reader is f.
type readerFunc func(context.Context) (websocket.MessageType, io.Reader, error)

func (f readerFunc) Reader(ctx context.Context) (websocket.MessageType, io.Reader, error) {
	return f(ctx)
}

// TestReadMessageInto: the memory is asked for only once a message has
// begun (a reader waiting for one, or failing, holds none), and the
// message is read into it.
func TestReadMessageInto(t *testing.T) {
	begun := false
	gets := 0
	buf := make([]byte, 0, 64)
	get := func() []byte {
		if !begun {
			t.Fatal("get called before the message began")
		}
		gets++
		return buf
	}
	closed := errors.New("closed")
	fail := readerFunc(func(context.Context) (websocket.MessageType, io.Reader, error) { return 0, nil, closed })
	if _, _, err := ReadMessageInto(context.Background(), fail, get); !errors.Is(err, closed) {
		t.Fatalf("ReadMessageInto on a failing reader: %v, want its error", err)
	}
	msg := readerFunc(func(context.Context) (websocket.MessageType, io.Reader, error) {
		begun = true
		return websocket.MessageText, bytes.NewReader([]byte(`{"jsonrpc":"2.0"}`)), nil
	})
	typ, b, err := ReadMessageInto(context.Background(), msg, get)
	if err != nil || typ != websocket.MessageText || string(b) != `{"jsonrpc":"2.0"}` {
		t.Fatalf("ReadMessageInto = %v, %q, %v; want the text message", typ, b, err)
	}
	if gets != 1 || &b[0] != &buf[:1][0] {
		t.Fatalf("get called %d times, message read into its memory: %v; want once, true", gets, &b[0] == &buf[:1][0])
	}
}
