package control

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	rpba "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// reflection is gRPC server reflection (grpc.reflection.v1, and v1alpha
// for older clients) answered from the descriptors compiled into the
// binary: grpcurl and other clients list the services and fetch the .proto
// files they need. It replaces google.golang.org/grpc/reflection, which
// re-encodes descriptors with protodesc; linking that package alone cost
// an idle daemon 1 MB of resident memory (its initialisation unmarshals
// the protobuf editions' defaults, building every type of descriptor.proto;
// docs/benchmarks-memory.md). Here a file's bytes are the ones its
// generated Go code embeds (the legacy Descriptor method of a message of
// the file), read on first use and kept.
type reflection struct {
	srv *grpc.Server

	mu    sync.Mutex
	files map[string][]byte // path → serialized FileDescriptorProto
}

func registerReflection(s *grpc.Server) {
	r := &reflection{srv: s, files: map[string][]byte{}}
	rpb.RegisterServerReflectionServer(s, reflectionV1{r})
	rpba.RegisterServerReflectionServer(s, reflectionV1alpha{r})
}

// notFound is the in-band NOT_FOUND answer to a lookup that failed with
// err, or nil when it did not.
func notFound(err error, format string, args ...any) *rpb.ErrorResponse {
	if err == nil {
		return nil
	}
	return errorResponse(codes.NotFound, fmt.Sprintf(format, args...)+": "+err.Error())
}

// errorResponse is an in-band error answer.
func errorResponse(code codes.Code, msg string) *rpb.ErrorResponse {
	return &rpb.ErrorResponse{ErrorCode: int32(code), ErrorMessage: msg}
}

// withImports returns fd and, breadth first, the files it imports,
// directly or not, that were not sent yet on the stream (grpc-go's
// reflection does the same: fd itself always, so that a client that asks
// again gets an answer).
func (r *reflection) withImports(fd protoreflect.FileDescriptor, sent map[string]bool) ([][]byte, *rpb.ErrorResponse) {
	if fd.IsPlaceholder() {
		return nil, errorResponse(codes.NotFound, fmt.Sprintf("file %q is not compiled in", fd.Path()))
	}
	var files [][]byte
	queue := []protoreflect.FileDescriptor{fd}
	seen := map[string]bool{}
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		if f.IsPlaceholder() || seen[f.Path()] {
			continue
		}
		seen[f.Path()] = true
		if len(files) == 0 || !sent[f.Path()] {
			b, err := r.fileBytes(f)
			if err != nil {
				return nil, errorResponse(codes.Internal, err.Error())
			}
			sent[f.Path()] = true
			files = append(files, b)
		}
		imps := f.Imports()
		for i := range imps.Len() {
			queue = append(queue, imps.Get(i).FileDescriptor)
		}
	}
	return files, nil
}

// legacyDescriptor is the method generated messages keep for the legacy
// API: the gzipped serialized descriptor of their file.
type legacyDescriptor interface {
	Descriptor() ([]byte, []int)
}

// legacyEnumDescriptor is the same method of generated enums.
type legacyEnumDescriptor interface {
	EnumDescriptor() ([]byte, []int)
}

// fileBytes returns fd serialized, read from a generated message of the
// file or, for a file of enums alone (google/rpc/code.proto), a generated
// enum. A file with neither (services or extensions alone) has no legacy
// descriptor to read it from: it is refused with an error naming it.
func (r *reflection) fileBytes(fd protoreflect.FileDescriptor) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b, ok := r.files[fd.Path()]; ok {
		return b, nil
	}
	gz := legacyBytes(fd)
	if gz == nil {
		return nil, fmt.Errorf("descriptor of %s: no generated message or enum to read it from", fd.Path())
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("descriptor of %s: %w", fd.Path(), err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("descriptor of %s: %w", fd.Path(), err)
	}
	r.files[fd.Path()] = b
	return b, nil
}

// legacyBytes returns the gzipped descriptor of fd that its first
// generated message, or else its first generated enum, embeds, or nil.
func legacyBytes(fd protoreflect.FileDescriptor) []byte {
	msgs := fd.Messages()
	for i := range msgs.Len() {
		if mt, err := protoregistry.GlobalTypes.FindMessageByName(msgs.Get(i).FullName()); err == nil {
			if ld, ok := mt.New().Interface().(legacyDescriptor); ok {
				gz, _ := ld.Descriptor()
				return gz
			}
		}
	}
	enums := fd.Enums()
	for i := range enums.Len() {
		if et, err := protoregistry.GlobalTypes.FindEnumByName(enums.Get(i).FullName()); err == nil {
			if ld, ok := et.New(0).(legacyEnumDescriptor); ok {
				gz, _ := ld.EnumDescriptor()
				return gz
			}
		}
	}
	return nil
}

// reflectionV1 serves grpc.reflection.v1.ServerReflection.
type reflectionV1 struct{ r *reflection }

func (v reflectionV1) ServerReflectionInfo(stream rpb.ServerReflection_ServerReflectionInfoServer) error {
	sent := map[string]bool{}
	return serveStream(stream.Recv, stream.Send, func(req *rpb.ServerReflectionRequest) (*rpb.ServerReflectionResponse, error) {
		return v.r.respond(req, sent)
	})
}

// serveStream answers each request received until the client closes its
// side (nil) or the stream fails.
func serveStream[Req, Res any](recv func() (*Req, error), send func(*Res) error, answer func(*Req) (*Res, error)) error {
	for {
		req, err := recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		res, err := answer(req)
		if err != nil {
			return err
		}
		if err := send(res); err != nil {
			return err
		}
	}
}

// respond answers one request of the stream: a file and its imports,
// the services, or a type's extension numbers, or NOT_FOUND in the answer
// (also for an empty name). A request that asks for nothing ends the
// stream with InvalidArgument, as grpc-go's reflection does.
func (r *reflection) respond(req *rpb.ServerReflectionRequest, sent map[string]bool) (*rpb.ServerReflectionResponse, error) {
	res := &rpb.ServerReflectionResponse{ValidHost: req.GetHost(), OriginalRequest: req}
	var fd protoreflect.FileDescriptor
	var fail *rpb.ErrorResponse
	switch m := req.GetMessageRequest().(type) {
	case *rpb.ServerReflectionRequest_FileByFilename:
		f, err := protoregistry.GlobalFiles.FindFileByPath(m.FileByFilename)
		fd, fail = f, notFound(err, "file %q", m.FileByFilename)
	case *rpb.ServerReflectionRequest_FileContainingSymbol:
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(m.FileContainingSymbol))
		if fail = notFound(err, "symbol %q", m.FileContainingSymbol); fail == nil {
			fd = d.ParentFile()
		}
	case *rpb.ServerReflectionRequest_FileContainingExtension:
		typ, num := m.FileContainingExtension.GetContainingType(), m.FileContainingExtension.GetExtensionNumber()
		xt, err := protoregistry.GlobalTypes.FindExtensionByNumber(protoreflect.FullName(typ), protoreflect.FieldNumber(num))
		if fail = notFound(err, "extension %d of %q", num, typ); fail == nil {
			fd = xt.TypeDescriptor().ParentFile()
		}
	case *rpb.ServerReflectionRequest_AllExtensionNumbersOfType:
		name := protoreflect.FullName(m.AllExtensionNumbersOfType)
		_, err := protoregistry.GlobalTypes.FindMessageByName(name)
		if fail = notFound(err, "type %q", name); fail != nil {
			break
		}
		e := &rpb.ExtensionNumberResponse{BaseTypeName: string(name)}
		protoregistry.GlobalTypes.RangeExtensionsByMessage(name, func(xt protoreflect.ExtensionType) bool {
			e.ExtensionNumber = append(e.ExtensionNumber, int32(xt.TypeDescriptor().Number()))
			return true
		})
		slices.Sort(e.ExtensionNumber)
		res.MessageResponse = &rpb.ServerReflectionResponse_AllExtensionNumbersResponse{AllExtensionNumbersResponse: e}
		return res, nil
	case *rpb.ServerReflectionRequest_ListServices:
		l := &rpb.ListServiceResponse{}
		for _, name := range slices.Sorted(maps.Keys(r.srv.GetServiceInfo())) {
			l.Service = append(l.Service, &rpb.ServiceResponse{Name: name})
		}
		res.MessageResponse = &rpb.ServerReflectionResponse_ListServicesResponse{ListServicesResponse: l}
		return res, nil
	default:
		return nil, status.Errorf(codes.InvalidArgument, "invalid reflection request: it asks for nothing")
	}
	if fail == nil {
		var files [][]byte
		if files, fail = r.withImports(fd, sent); fail == nil {
			res.MessageResponse = &rpb.ServerReflectionResponse_FileDescriptorResponse{FileDescriptorResponse: &rpb.FileDescriptorResponse{FileDescriptorProto: files}}
			return res, nil
		}
	}
	res.MessageResponse = &rpb.ServerReflectionResponse_ErrorResponse{ErrorResponse: fail}
	return res, nil
}

// reflectionV1alpha serves grpc.reflection.v1alpha.ServerReflection, the
// same service under its older name, whose messages are v1's on the wire:
// each request and answer goes through its encoding.
type reflectionV1alpha struct{ r *reflection }

func (v reflectionV1alpha) ServerReflectionInfo(stream rpba.ServerReflection_ServerReflectionInfoServer) error {
	sent := map[string]bool{}
	return serveStream(stream.Recv, stream.Send, func(req *rpba.ServerReflectionRequest) (*rpba.ServerReflectionResponse, error) {
		var q rpb.ServerReflectionRequest
		if err := convert(req, &q); err != nil {
			return nil, err
		}
		answer, err := v.r.respond(&q, sent)
		if err != nil {
			return nil, err
		}
		var res rpba.ServerReflectionResponse
		if err := convert(answer, &res); err != nil {
			return nil, err
		}
		return &res, nil
	})
}

// convert re-reads from as to, a message of the same encoding.
func convert(from, to proto.Message) error {
	b, err := proto.Marshal(from)
	if err == nil {
		err = proto.Unmarshal(b, to)
	}
	if err != nil {
		return status.Errorf(codes.Internal, "reflection v1alpha: %v", err)
	}
	return nil
}
