package wire

import (
	"context"
	"io"

	"github.com/coder/websocket"
)

// MessageReader is a WebSocket connection's reading side
// (*websocket.Conn).
type MessageReader interface {
	Reader(ctx context.Context) (websocket.MessageType, io.Reader, error)
}

// ReadMessage reads the next message of ws into buf's memory (ReadAll).
func ReadMessage(ctx context.Context, ws MessageReader, buf []byte) (websocket.MessageType, []byte, error) {
	return ReadMessageInto(ctx, ws, func() []byte { return buf })
}

// ReadMessageInto reads the next message of ws into the memory get
// returns (ReadAll; nil: new memory). get is called only once a message
// has begun, so a reader waiting for one holds no memory for it (a
// daemon's idle connections share a pool).
func ReadMessageInto(ctx context.Context, ws MessageReader, get func() []byte) (websocket.MessageType, []byte, error) {
	typ, r, err := ws.Reader(ctx)
	if err != nil {
		return 0, nil, err
	}
	b, err := ReadAll(r, get())
	if err != nil {
		return 0, nil, err
	}
	return typ, b, nil
}

// ReadAll reads r to its end into buf's memory and returns what it read.
// When the memory is full it doubles it (from 4 KiB): append's gentler
// growth for large slices reallocates a 64 KiB WebSocket message a dozen
// times. The caller bounds r (the WebSocket's read limit).
func ReadAll(r io.Reader, buf []byte) ([]byte, error) {
	b := buf[:0]
	for {
		if len(b) == cap(b) {
			nb := make([]byte, len(b), max(2*cap(b), 4<<10))
			copy(nb, b)
			b = nb
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}
