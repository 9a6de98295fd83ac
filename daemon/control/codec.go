package control

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// WireUnmarshaler is a request message that decodes its own protobuf
// bytes: the control server's codec hands them to UnmarshalWire instead
// of proto.Unmarshal, so that a hot stream (PublishTelemetry: millions of
// samples a second) is decoded without reflection or maps. b is valid only
// during the call; what is kept must be copied.
type WireUnmarshaler interface {
	UnmarshalWire(b []byte) error
}

// codec is gRPC's proto codec, except for WireUnmarshalers.
type codec struct{ proto encoding.CodecV2 }

func (c codec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	u, ok := v.(WireUnmarshaler)
	if !ok {
		return c.proto.Unmarshal(data, v)
	}
	if len(data) == 1 {
		return u.UnmarshalWire(data[0].ReadOnlyData())
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return u.UnmarshalWire(buf.ReadOnlyData())
}

func (c codec) Name() string { return c.proto.Name() }
