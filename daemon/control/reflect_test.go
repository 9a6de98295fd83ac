package control_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	rpba "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	_ "google.golang.org/genproto/googleapis/rpc/code" // a file of enums alone

	"github.com/ahp-dev/ahpd/daemon/control"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// reflectionClient starts a control server with the daemon service and
// returns a client connection to it.
func reflectionClient(t *testing.T) *grpc.ClientConn {
	t.Helper()
	ln, err := control.Listen(filepath.Join(t.TempDir(), "c.sock"))
	if err != nil {
		t.Fatal(err)
	}
	s := control.NewServer(control.Options{})
	ahpv1.RegisterDaemonServiceServer(s.GRPC, ahpv1.UnimplementedDaemonServiceServer{})
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	cc, err := grpc.NewClient("unix://"+ln.Path(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		s.Stop(time.Second)
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		ln.Close()
	})
	return cc
}

// TestReflection: the control socket answers gRPC server reflection (v1
// and v1alpha) well enough for a client such as grpcurl to list the
// services, fetch the files that define them and their imports, and
// resolve a method's request type from them.
func TestReflection(t *testing.T) {
	cc := reflectionClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := rpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ask := func(req *rpb.ServerReflectionRequest) *rpb.ServerReflectionResponse {
		t.Helper()
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		res, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	res := ask(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}})
	var names []string
	for _, s := range res.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"ahp.v1.DaemonService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"} {
		if !slices.Contains(names, want) {
			t.Errorf("ListServices = %v, missing %s", names, want)
		}
	}

	// A method's symbol: its file, then the files it imports.
	res = ask(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "ahp.v1.DaemonService.GetInfo"}})
	files := parseFiles(t, res.GetFileDescriptorResponse().GetFileDescriptorProto())
	if len(files.File) < 2 || files.File[0].GetName() != "ahp/v1/daemon.proto" {
		t.Fatalf("files for ahp.v1.DaemonService.GetInfo: %v", fileNames(files))
	}
	reg, err := protodesc.NewFiles(files)
	if err != nil {
		t.Fatalf("the files sent do not make a complete set: %v", err)
	}
	d, err := reg.FindDescriptorByName("ahp.v1.DaemonService")
	if err != nil {
		t.Fatal(err)
	}
	m := d.(protoreflect.ServiceDescriptor).Methods().ByName("GetInfo")
	if m == nil || m.Input().FullName() != "ahp.v1.GetInfoRequest" || m.Output().FullName() != "ahp.v1.GetInfoResponse" {
		t.Fatalf("GetInfo from reflection: %v", m)
	}

	// Asked again on the stream: the file itself, not its imports.
	res = ask(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "ahp.v1.GetInfoResponse"}})
	if again := parseFiles(t, res.GetFileDescriptorResponse().GetFileDescriptorProto()); len(again.File) != 1 || again.File[0].GetName() != "ahp/v1/daemon.proto" {
		t.Fatalf("asked again: %v, want ahp/v1/daemon.proto alone", fileNames(again))
	}

	res = ask(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileByFilename{FileByFilename: "google/protobuf/duration.proto"}})
	if f := parseFiles(t, res.GetFileDescriptorResponse().GetFileDescriptorProto()); len(f.File) != 1 || f.File[0].GetName() != "google/protobuf/duration.proto" {
		t.Fatalf("FileByFilename duration.proto: %v", fileNames(f))
	}

	res = ask(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_AllExtensionNumbersOfType{AllExtensionNumbersOfType: "ahp.v1.GetInfoRequest"}})
	if e := res.GetAllExtensionNumbersResponse(); e.GetBaseTypeName() != "ahp.v1.GetInfoRequest" || len(e.GetExtensionNumber()) != 0 {
		t.Fatalf("AllExtensionNumbersOfType: %v", res)
	}

	for _, req := range []*rpb.ServerReflectionRequest{
		{MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "no.such.Symbol"}},
		{MessageRequest: &rpb.ServerReflectionRequest_FileByFilename{FileByFilename: "no/such.proto"}},
		{MessageRequest: &rpb.ServerReflectionRequest_FileContainingExtension{FileContainingExtension: &rpb.ExtensionRequest{ContainingType: "ahp.v1.GetInfoRequest", ExtensionNumber: 100}}},
		{MessageRequest: &rpb.ServerReflectionRequest_AllExtensionNumbersOfType{AllExtensionNumbersOfType: "no.such.Type"}},
	} {
		if res := ask(req); res.GetErrorResponse().GetErrorCode() != int32(codes.NotFound) {
			t.Errorf("%v: %v, want NOT_FOUND", req, res)
		}
	}
	// A file of enums alone is read from its enum's legacy descriptor.
	res = ask(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "google.rpc.Code"}})
	if f := parseFiles(t, res.GetFileDescriptorResponse().GetFileDescriptorProto()); len(f.File) != 1 || f.File[0].GetName() != "google/rpc/code.proto" || len(f.File[0].GetEnumType()) != 1 {
		t.Fatalf("google.rpc.Code: %v (%v)", fileNames(f), res.GetErrorResponse())
	}
	// Empty names are not found, as with grpc-go's reflection.
	for _, req := range []*rpb.ServerReflectionRequest{
		{MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{}},
		{MessageRequest: &rpb.ServerReflectionRequest_FileByFilename{}},
	} {
		if res := ask(req); res.GetErrorResponse().GetErrorCode() != int32(codes.NotFound) {
			t.Errorf("%v: %v, want NOT_FOUND", req, res)
		}
	}
	// A request that asks for nothing ends the stream with INVALID_ARGUMENT.
	if err := stream.Send(&rpb.ServerReflectionRequest{}); err != nil {
		t.Fatal(err)
	}
	if res, err := stream.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("an empty request: %v, %v; want the stream ended with INVALID_ARGUMENT", res, err)
	}

	// v1alpha, for older clients: the same answers.
	alpha, err := rpba.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := alpha.Send(&rpba.ServerReflectionRequest{MessageRequest: &rpba.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "grpc.health.v1.Health"}}); err != nil {
		t.Fatal(err)
	}
	ares, err := alpha.Recv()
	if err != nil {
		t.Fatal(err)
	}
	health := parseFiles(t, ares.GetFileDescriptorResponse().GetFileDescriptorProto())
	if len(health.File) == 0 || health.File[0].GetName() != "grpc/health/v1/health.proto" {
		t.Fatalf("v1alpha files for grpc.health.v1.Health: %v", fileNames(health))
	}
	if ares.GetOriginalRequest().GetFileContainingSymbol() != "grpc.health.v1.Health" {
		t.Fatalf("v1alpha original request: %v", ares.GetOriginalRequest())
	}
	if err := alpha.CloseSend(); err != nil {
		t.Fatal(err)
	}
}

func parseFiles(t *testing.T, raw [][]byte) *descriptorpb.FileDescriptorSet {
	t.Helper()
	set := &descriptorpb.FileDescriptorSet{}
	for _, b := range raw {
		f := &descriptorpb.FileDescriptorProto{}
		if err := proto.Unmarshal(b, f); err != nil {
			t.Fatalf("a file sent is not a FileDescriptorProto: %v", err)
		}
		set.File = append(set.File, f)
	}
	return set
}

func fileNames(set *descriptorpb.FileDescriptorSet) []string {
	var names []string
	for _, f := range set.File {
		names = append(names, f.GetName())
	}
	return names
}
