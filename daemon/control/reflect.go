package control

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
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

// reflRequest is a request of either version: kind says which of its
// fields is asked for (the others are empty).
type reflRequest struct {
	kind                            reflKind
	file, symbol, extType, allExtOf string
	extNumber                       int32
}

// reflKind is the request's oneof that is set.
type reflKind int

const (
	reflNone reflKind = iota // none: the stream ends with InvalidArgument
	reflFile
	reflSymbol
	reflExtension
	reflAllExtensions
	reflList
)

// reflAnswer is an answer of either version: files, services, extension
// numbers, or an error (code non-zero).
type reflAnswer struct {
	files      [][]byte
	services   []string
	baseType   string
	extNumbers []int32
	code       codes.Code
	msg        string
}

func notFound(format string, args ...any) reflAnswer {
	return reflAnswer{code: codes.NotFound, msg: fmt.Sprintf(format, args...)}
}

// answer serves one request; sent holds the paths of the files already
// sent on the stream, which are not sent again (as grpc-go's reflection).
func (r *reflection) answer(q reflRequest, sent map[string]bool) reflAnswer {
	switch q.kind {
	case reflList:
		var a reflAnswer
		for name := range r.srv.GetServiceInfo() {
			a.services = append(a.services, name)
		}
		slices.Sort(a.services)
		return a
	case reflFile:
		fd, err := protoregistry.GlobalFiles.FindFileByPath(q.file)
		if err != nil {
			return notFound("file %q: %v", q.file, err)
		}
		return r.withImports(fd, sent)
	case reflSymbol:
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(q.symbol))
		if err != nil {
			return notFound("symbol %q: %v", q.symbol, err)
		}
		return r.withImports(d.ParentFile(), sent)
	case reflExtension:
		xt, err := protoregistry.GlobalTypes.FindExtensionByNumber(protoreflect.FullName(q.extType), protoreflect.FieldNumber(q.extNumber))
		if err != nil {
			return notFound("extension %d of %q: %v", q.extNumber, q.extType, err)
		}
		return r.withImports(xt.TypeDescriptor().ParentFile(), sent)
	case reflAllExtensions:
		if _, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(q.allExtOf)); err != nil {
			return notFound("type %q: %v", q.allExtOf, err)
		}
		a := reflAnswer{baseType: q.allExtOf}
		protoregistry.GlobalTypes.RangeExtensionsByMessage(protoreflect.FullName(q.allExtOf), func(xt protoreflect.ExtensionType) bool {
			a.extNumbers = append(a.extNumbers, int32(xt.TypeDescriptor().Number()))
			return true
		})
		slices.Sort(a.extNumbers)
		return a
	}
	return reflAnswer{code: codes.InvalidArgument, msg: "invalid reflection request: it asks for nothing"}
}

// withImports returns fd and, breadth first, the files it imports,
// directly or not, that were not sent yet on the stream (grpc-go's
// reflection does the same: fd itself always, so that a client that asks
// again gets an answer).
func (r *reflection) withImports(fd protoreflect.FileDescriptor, sent map[string]bool) reflAnswer {
	if fd.IsPlaceholder() {
		return notFound("file %q is not compiled in", fd.Path())
	}
	var a reflAnswer
	queue := []protoreflect.FileDescriptor{fd}
	seen := map[string]bool{}
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		if f.IsPlaceholder() || seen[f.Path()] {
			continue
		}
		seen[f.Path()] = true
		if len(a.files) == 0 || !sent[f.Path()] {
			b, err := r.fileBytes(f)
			if err != nil {
				return reflAnswer{code: codes.Internal, msg: err.Error()}
			}
			sent[f.Path()] = true
			a.files = append(a.files, b)
		}
		imps := f.Imports()
		for i := range imps.Len() {
			queue = append(queue, imps.Get(i).FileDescriptor)
		}
	}
	return a
}

// legacyDescriptor is the method generated messages and enums keep for
// the legacy API: the gzipped serialized descriptor of their file.
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

// respond answers one request of the stream. A request that asks for
// nothing ends the stream with InvalidArgument, as grpc-go's reflection
// does; a name that is empty is not found, in the answer.
func (r *reflection) respond(req *rpb.ServerReflectionRequest, sent map[string]bool) (*rpb.ServerReflectionResponse, error) {
	q := reflRequest{}
	switch m := req.GetMessageRequest().(type) {
	case *rpb.ServerReflectionRequest_FileByFilename:
		q.kind, q.file = reflFile, m.FileByFilename
	case *rpb.ServerReflectionRequest_FileContainingSymbol:
		q.kind, q.symbol = reflSymbol, m.FileContainingSymbol
	case *rpb.ServerReflectionRequest_FileContainingExtension:
		q.kind, q.extType, q.extNumber = reflExtension, m.FileContainingExtension.GetContainingType(), m.FileContainingExtension.GetExtensionNumber()
	case *rpb.ServerReflectionRequest_AllExtensionNumbersOfType:
		q.kind, q.allExtOf = reflAllExtensions, m.AllExtensionNumbersOfType
	case *rpb.ServerReflectionRequest_ListServices:
		q.kind = reflList
	default:
		return nil, status.Errorf(codes.InvalidArgument, "invalid reflection request: it asks for nothing")
	}
	a := r.answer(q, sent)
	res := &rpb.ServerReflectionResponse{ValidHost: req.GetHost(), OriginalRequest: req}
	switch {
	case a.code != codes.OK:
		res.MessageResponse = &rpb.ServerReflectionResponse_ErrorResponse{ErrorResponse: &rpb.ErrorResponse{ErrorCode: int32(a.code), ErrorMessage: a.msg}}
	case q.kind == reflList:
		l := &rpb.ListServiceResponse{}
		for _, name := range a.services {
			l.Service = append(l.Service, &rpb.ServiceResponse{Name: name})
		}
		res.MessageResponse = &rpb.ServerReflectionResponse_ListServicesResponse{ListServicesResponse: l}
	case q.kind == reflAllExtensions:
		res.MessageResponse = &rpb.ServerReflectionResponse_AllExtensionNumbersResponse{AllExtensionNumbersResponse: &rpb.ExtensionNumberResponse{BaseTypeName: a.baseType, ExtensionNumber: a.extNumbers}}
	default:
		res.MessageResponse = &rpb.ServerReflectionResponse_FileDescriptorResponse{FileDescriptorResponse: &rpb.FileDescriptorResponse{FileDescriptorProto: a.files}}
	}
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
