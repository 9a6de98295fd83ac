package control

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // the codec wrapped
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Options configure NewServer. Zero fields take defaults.
type Options struct {
	// Logger receives failed RPCs (Internal and Unknown at warn, the rest at
	// debug). Default: slog.Default().
	Logger *slog.Logger
	// MaxConcurrentStreams bounds the RPCs in flight per client connection.
	// Default 256.
	MaxConcurrentStreams uint32
	// HealthServices are marked SERVING in grpc.health.v1 besides "".
	HealthServices []string
}

// Server is a gRPC server with health, reflection and request logging,
// built for the control socket. Register services on GRPC before Serve.
type Server struct {
	GRPC   *grpc.Server
	health *health.Server
	log    *slog.Logger
	names  []string

	ctx    context.Context // cancelled when Stop begins
	cancel context.CancelFunc
	once   sync.Once
}

// NewServer builds a Server.
func NewServer(opts Options) *Server {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	streams := opts.MaxConcurrentStreams
	if streams == 0 {
		streams = 256
	}
	s := &Server{log: log, health: health.NewServer(), names: append([]string{""}, opts.HealthServices...)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.GRPC = grpc.NewServer(
		grpc.MaxConcurrentStreams(streams),
		grpc.ForceServerCodecV2(codec{encoding.GetCodecV2("proto")}),
		// A client-streaming producer (PublishTelemetry) may run a few
		// messages ahead of the handler instead of waiting for each
		// window update: flow control stays on, the bound is 1 MiB a
		// stream and 4 MiB a connection.
		grpc.InitialWindowSize(1<<20),
		grpc.InitialConnWindowSize(4<<20),
		grpc.ChainUnaryInterceptor(s.logUnary),
		grpc.ChainStreamInterceptor(s.logStream),
	)
	healthpb.RegisterHealthServer(s.GRPC, s.health)
	registerReflection(s.GRPC)
	return s
}

// Context is cancelled when Stop begins: long-lived handlers (streams)
// watch it so that a graceful stop does not wait for them.
func (s *Server) Context() context.Context { return s.ctx }

// Serve marks the health services SERVING and serves ln until Stop; it
// returns nil after a Stop.
func (s *Server) Serve(ln net.Listener) error {
	for _, n := range s.names {
		s.health.SetServingStatus(n, healthpb.HealthCheckResponse_SERVING)
	}
	err := s.GRPC.Serve(ln)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Stop marks the server NOT_SERVING, ends streams (Context is cancelled),
// lets unary RPCs in flight finish for at most timeout, then closes every
// connection. It returns when the server has stopped. Stop is idempotent.
func (s *Server) Stop(timeout time.Duration) {
	s.once.Do(func() {
		s.health.Shutdown()
		s.cancel()
		done := make(chan struct{})
		go func() {
			s.GRPC.GracefulStop()
			close(done)
		}()
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			s.log.Warn("control plane: graceful stop timed out; closing connections", "timeout", timeout)
			s.GRPC.Stop()
			<-done
		}
	})
}

func (s *Server) logUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	s.logErr(info.FullMethod, err)
	return resp, err
}

func (s *Server) logStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	err := h(srv, ss)
	s.logErr(info.FullMethod, err)
	return err
}

func (s *Server) logErr(method string, err error) {
	if err == nil {
		return
	}
	st := status.Convert(err)
	switch st.Code() {
	case codes.Internal, codes.Unknown:
		s.log.Warn("control rpc failed", "method", method, "code", st.Code().String(), "err", st.Message())
	case codes.Canceled:
	default:
		s.log.Debug("control rpc refused", "method", method, "code", st.Code().String(), "err", st.Message())
	}
}
