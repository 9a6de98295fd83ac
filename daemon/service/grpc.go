package service

// The gRPC adapter of the control plane: one line per RPC over the service
// methods (service*.go), the conversions to and from proto/ahp/v1, and the
// one mapping of service errors to gRPC codes (grpcError). It lives here,
// beside the *Service it adapts; cmd/ahpd starts it through StartControl,
// and daemon/control holds the transport.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/daemon/control"
	"github.com/ahp-dev/ahpd/daemon/events"
	"github.com/ahp-dev/ahpd/daemon/registry"
	"github.com/ahp-dev/ahpd/daemon/session"
	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/internal/limits"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
	"github.com/ahp-dev/ahpd/tcp"
)

// ErrorDomain is the domain of the google.rpc.ErrorInfo that grpcError
// attaches to a channel kind's refusal.
const ErrorDomain = "ahpd"

// ControlOptions configure StartControl.
type ControlOptions struct {
	// Path of the control socket. Empty: control.DefaultPath(StateDir);
	// "none": no control plane.
	Path string
	// HTTPAddr is the address the HTTP listener is bound to (host:port),
	// reported by GetInfo and used in URLs.
	HTTPAddr string
	// MaxWatchers bounds concurrent WatchEvents streams. Default 64.
	MaxWatchers int
	// Listener, when set, is an already listening control socket (socket
	// activation, or an upgrade in place); Path is then ignored.
	Listener *control.Listener
	// Started is when the daemon's process started serving (GetInfo's
	// start_time; an upgrade in place keeps it); zero: now. Upgraded and
	// Upgrades are its last upgrade in place and how many it went through.
	Started  time.Time
	Upgraded time.Time
	Upgrades int64
	// Upgrade starts an upgrade in place to binary ("" the default) and
	// returns the absolute path and the count of upgrades once it is
	// done, or why it was refused (wrapping ErrUpgradeRefused). Nil: the
	// Upgrade call is FAILED_PRECONDITION.
	Upgrade func(binary string) (string, int64, error)
	// Refused returns the last upgrade in place refused since Started, or
	// nil (GetInfo's upgrade_refused). Nil: none is reported.
	Refused func() *UpgradeRefusal
}

// UpgradeRefusal is an upgrade in place that did not happen.
type UpgradeRefusal struct {
	Time   time.Time
	Reason string
	// AfterHandOver: the new binary refused the state itself, after the
	// channels were frozen; the daemon re-executed itself with it.
	AfterHandOver bool
}

// ControlPlane is the running gRPC control server.
type ControlPlane struct {
	srv  *control.Server
	ln   *control.Listener
	done chan struct{} // closed when Serve and the stopper have returned
	stop chan struct{} // closed by Close
	once sync.Once
	err  error
}

// StartControl listens on the control socket and serves the gRPC API until
// ctx is cancelled or Close is called; then it stops gracefully, bounded by
// the shutdown timeout (streams end at once, unary calls may finish). With
// Path "none" it returns nil, nil; a nil *ControlPlane's methods are no-ops.
func (s *Service) StartControl(ctx context.Context, opts ControlOptions) (*ControlPlane, error) {
	if opts.Path == "none" && opts.Listener == nil {
		return nil, nil
	}
	if opts.Path == "" {
		opts.Path = control.DefaultPath(s.cfg.StateDir)
	}
	if opts.MaxWatchers == 0 {
		opts.MaxWatchers = 64
	}
	ln := opts.Listener
	if ln == nil {
		var err error
		if ln, err = control.Listen(opts.Path); err != nil {
			return nil, err
		}
	}
	cs := control.NewServer(control.Options{
		Logger: s.log,
		HealthServices: []string{
			ahpv1.DaemonService_ServiceDesc.ServiceName, ahpv1.ChannelService_ServiceDesc.ServiceName,
			ahpv1.TerminalService_ServiceDesc.ServiceName, ahpv1.TokenService_ServiceDesc.ServiceName,
			ahpv1.LimitsService_ServiceDesc.ServiceName, ahpv1.ViewerService_ServiceDesc.ServiceName,
			ahpv1.TCPService_ServiceDesc.ServiceName, ahpv1.TelemetryService_ServiceDesc.ServiceName,
			ahpv1.RecordingService_ServiceDesc.ServiceName,
		},
	})
	started := opts.Started
	if started.IsZero() {
		started = time.Now()
	}
	g := &grpcServer{s: s, opts: opts, path: ln.Path(), started: started, stopping: cs.Context()}
	g.register(cs.GRPC)
	cp := &ControlPlane{srv: cs, ln: ln, done: make(chan struct{}), stop: make(chan struct{})}
	served := make(chan error, 1)
	go func() { served <- cs.Serve(ln) }()
	go func() {
		defer close(cp.done)
		var err error
		select {
		case <-ctx.Done():
		case <-cp.stop:
		case err = <-served:
			served <- err
		}
		cs.Stop(s.cfg.ShutdownTimeout)
		cp.err = <-served
		_ = ln.Close()
	}()
	s.log.Debug("control socket listening", "path", ln.Path(), "activated", opts.Listener != nil)
	return cp, nil
}

// Path returns the control socket's path.
func (cp *ControlPlane) Path() string {
	if cp == nil {
		return ""
	}
	return cp.ln.Path()
}

// Handover returns a descriptor of the control socket for the binary an
// upgrade in place re-executes (control.Listener.Handover), and whether
// it came from socket activation: Close then leaves the socket file.
func (cp *ControlPlane) Handover() (f *os.File, activated bool, err error) {
	if cp == nil {
		return nil, false, nil
	}
	f, err = cp.ln.Handover()
	return f, cp.ln.Activated(), err
}

// Close stops the control plane (if ctx has not already) and waits until
// it has stopped and the socket is removed.
func (cp *ControlPlane) Close() error {
	if cp == nil {
		return nil
	}
	cp.once.Do(func() { close(cp.stop) })
	<-cp.done
	return cp.err
}

// grpcServer adapts the service methods to the generated interfaces.
type grpcServer struct {
	ahpv1.UnimplementedDaemonServiceServer
	ahpv1.UnimplementedChannelServiceServer
	ahpv1.UnimplementedTerminalServiceServer
	ahpv1.UnimplementedTokenServiceServer
	ahpv1.UnimplementedLimitsServiceServer
	ahpv1.UnimplementedViewerServiceServer
	ahpv1.UnimplementedTCPServiceServer
	ahpv1.UnimplementedTelemetryServiceServer
	ahpv1.UnimplementedRecordingServiceServer

	s        *Service
	opts     ControlOptions
	path     string
	started  time.Time
	stopping context.Context // cancelled when the control plane stops
	watchers atomic.Int64
}

func (g *grpcServer) register(r grpc.ServiceRegistrar) {
	ahpv1.RegisterDaemonServiceServer(r, g)
	ahpv1.RegisterChannelServiceServer(r, g)
	ahpv1.RegisterTerminalServiceServer(r, g)
	ahpv1.RegisterTokenServiceServer(r, g)
	ahpv1.RegisterLimitsServiceServer(r, g)
	ahpv1.RegisterViewerServiceServer(r, g)
	ahpv1.RegisterTCPServiceServer(r, g)
	ahpv1.RegisterTelemetryServiceServer(r, g)
	ahpv1.RegisterRecordingServiceServer(r, g)
}

// reply converts a service result: (nil, status) on error, else (v, nil).
func reply[T any](v T, err error) (T, error) {
	if err != nil {
		var zero T
		return zero, grpcError(err)
	}
	return v, nil
}

// --- DaemonService

func (g *grpcServer) GetInfo(context.Context, *ahpv1.GetInfoRequest) (*ahpv1.GetInfoResponse, error) {
	return g.info(), nil
}

func (g *grpcServer) Upgrade(_ context.Context, req *ahpv1.UpgradeRequest) (*ahpv1.UpgradeResponse, error) {
	if g.opts.Upgrade == nil {
		return nil, status.Error(codes.FailedPrecondition, "this daemon cannot upgrade in place (not run as ahpd)")
	}
	bin, n, err := g.opts.Upgrade(req.GetBinary())
	if err != nil {
		return nil, grpcError(err)
	}
	return &ahpv1.UpgradeResponse{Binary: bin, Upgrades: n}, nil
}

func (g *grpcServer) GetStats(ctx context.Context, _ *ahpv1.GetStatsRequest) (*ahpv1.GetStatsResponse, error) {
	return toStats(g.s.Stats(ctx)), nil
}

func (g *grpcServer) WatchEvents(req *ahpv1.WatchEventsRequest, stream grpc.ServerStreamingServer[ahpv1.WatchEventsResponse]) error {
	if g.watchers.Add(1) > int64(g.opts.MaxWatchers) {
		g.watchers.Add(-1)
		return grpcError(fmt.Errorf("%w: %d event watchers (the maximum)", ErrTooMany, g.opts.MaxWatchers))
	}
	defer g.watchers.Add(-1)
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	defer context.AfterFunc(g.stopping, cancel)()
	first := req.GetAfterSeq() == 0
	err := g.s.WatchEvents(ctx, EventFilter{Kinds: req.GetKinds(), Channel: req.GetChannel(), After: req.GetAfterSeq()}, func(evs []events.Event, lost int) error {
		res := toEvents(evs, lost)
		if first { // the watch is in place: where a resume would start
			res.LastSeq, first = g.s.Events().Seq(), false
		}
		return stream.Send(res)
	})
	if g.stopping.Err() != nil && stream.Context().Err() == nil {
		return grpcError(ErrShuttingDown)
	}
	return grpcError(err)
}

// --- ChannelService

func (g *grpcServer) ListChannels(ctx context.Context, req *ahpv1.ListChannelsRequest) (*ahpv1.ListChannelsResponse, error) {
	if t := req.GetType(); t != "" && registry.Scheme(t) == "" {
		return nil, grpcError(argErr("type", "unknown type %q (types: terminal, telemetry, tcp)", session.Truncate(t, 64)))
	}
	return &ahpv1.ListChannelsResponse{Channels: mapSlice(g.s.ListChannels(ctx, req.GetType()), toChannel)}, nil
}

func (g *grpcServer) GetChannel(ctx context.Context, req *ahpv1.GetChannelRequest) (*ahpv1.GetChannelResponse, error) {
	d, err := g.s.GetChannel(ctx, req.GetChannel())
	return reply(&ahpv1.GetChannelResponse{Channel: toChannel(d)}, err)
}

func (g *grpcServer) CloseChannel(ctx context.Context, req *ahpv1.CloseChannelRequest) (*ahpv1.CloseChannelResponse, error) {
	exited, err := g.s.CloseChannelWith(ctx, req.GetChannel(), req.GetSignal(), req.GetGrace().AsDuration())
	return reply(&ahpv1.CloseChannelResponse{ExitedBeforeHangup: exited}, err)
}

// --- TerminalService

func (g *grpcServer) CreateTerminal(ctx context.Context, req *ahpv1.CreateTerminalRequest) (*ahpv1.CreateTerminalResponse, error) {
	ch, err := g.s.StartTerminal(ctx, TerminalRequest{
		ID: req.GetId(), Title: req.GetTitle(), Command: req.GetCommand(), Args: req.GetArgs(),
		Env: req.GetEnv(), ClearEnv: req.GetClearEnv(), Cwd: req.GetCwd(),
		Rows: int(req.GetRows()), Cols: int(req.GetCols()), Scrollback: int(req.GetScrollback()), Record: req.GetRecord(),
	})
	if err != nil {
		return nil, grpcError(err)
	}
	return &ahpv1.CreateTerminalResponse{Channel: toChannel(channelDetail(ch))}, nil
}

func (g *grpcServer) ResizeTerminal(ctx context.Context, req *ahpv1.ResizeTerminalRequest) (*ahpv1.ResizeTerminalResponse, error) {
	return reply(&ahpv1.ResizeTerminalResponse{}, g.s.ResizeTerminal(ctx, req.GetChannel(), int(req.GetRows()), int(req.GetCols())))
}

func (g *grpcServer) SetTerminalRecording(ctx context.Context, req *ahpv1.SetTerminalRecordingRequest) (*ahpv1.SetTerminalRecordingResponse, error) {
	st, err := g.s.SetTerminalRecording(ctx, req.GetChannel(), req.GetMode())
	return reply(&ahpv1.SetTerminalRecordingResponse{Recording: toRecordingState(&st)}, err)
}

// --- RecordingService

func (g *grpcServer) ListRecordings(ctx context.Context, req *ahpv1.ListRecordingsRequest) (*ahpv1.ListRecordingsResponse, error) {
	list, next, err := g.s.ListRecordings(ctx, req.GetChannel(), req.GetPageSize(), req.GetPageToken())
	return reply(&ahpv1.ListRecordingsResponse{Recordings: mapSlice(list, toRecording), NextPageToken: next}, err)
}

// readChunk is the most a ReadRecordingResponse carries.
const readChunk = 256 << 10

func (g *grpcServer) ReadRecording(req *ahpv1.ReadRecordingRequest, stream grpc.ServerStreamingServer[ahpv1.ReadRecordingResponse]) error {
	f, _, err := g.s.OpenRecording(stream.Context(), req.GetId())
	if err != nil {
		return grpcError(err)
	}
	defer f.Close()
	size, err := session.RecordingEnd(f)
	if err != nil {
		return grpcError(err)
	}
	off := req.GetOffset()
	if off < 0 || off > size {
		return grpcError(argErr("offset", "must be between 0 and the size, %d", size))
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return grpcError(err)
	}
	buf := make([]byte, readChunk)
	for off < size {
		n, err := io.ReadFull(f, buf[:min(int64(len(buf)), size-off)])
		if n > 0 {
			if serr := stream.Send(&ahpv1.ReadRecordingResponse{Data: buf[:n], Offset: off, Size: size}); serr != nil {
				return serr
			}
			off += int64(n)
		}
		if err != nil {
			return grpcError(fmt.Errorf("read recording %s: %w", req.GetId(), err))
		}
		if g.stopping.Err() != nil {
			return grpcError(ErrShuttingDown)
		}
	}
	return nil
}

// --- TokenService

func (g *grpcServer) CreateToken(ctx context.Context, req *ahpv1.CreateTokenRequest) (*ahpv1.CreateTokenResponse, error) {
	ttl, err := durationArg("ttl", req.GetTtl())
	if err != nil {
		return nil, grpcError(err)
	}
	secret, info, err := g.s.CreateToken(ctx, TokenRequest{Channels: req.GetChannels(), Role: fromRole(req.GetRole(), auth.RoleView), TTL: ttl, SingleUse: req.GetSingleUse()})
	return reply(&ahpv1.CreateTokenResponse{Secret: secret, Token: toToken(info)}, err)
}

func (g *grpcServer) ListTokens(ctx context.Context, _ *ahpv1.ListTokensRequest) (*ahpv1.ListTokensResponse, error) {
	return &ahpv1.ListTokensResponse{Tokens: mapSlice(g.s.ListTokens(ctx), toToken)}, nil
}

func (g *grpcServer) RevokeToken(ctx context.Context, req *ahpv1.RevokeTokenRequest) (*ahpv1.RevokeTokenResponse, error) {
	return reply(&ahpv1.RevokeTokenResponse{}, g.s.RevokeToken(ctx, req.GetId()))
}

func (g *grpcServer) CreateBrowserLink(ctx context.Context, req *ahpv1.CreateBrowserLinkRequest) (*ahpv1.CreateBrowserLinkResponse, error) {
	var ttl time.Duration
	if d := req.GetTtl(); d != nil {
		if err := d.CheckValid(); err != nil {
			return nil, grpcError(argErr("ttl", "%v", err))
		}
		ttl = d.AsDuration()
	}
	l, err := g.s.BrowserLink(ctx, g.baseURL(), LinkRequest{Channel: req.GetChannel(), Role: fromRole(req.GetRole(), auth.RoleControl), Reusable: req.GetReusable(), TTL: ttl})
	return reply(&ahpv1.CreateBrowserLinkResponse{Url: l.URL, ExpireTime: timestamppb.New(l.Expires), TokenId: l.TokenID}, err)
}

// --- LimitsService

func (g *grpcServer) GetLimits(ctx context.Context, req *ahpv1.GetLimitsRequest) (*ahpv1.GetLimitsResponse, error) {
	if ch := req.GetChannel(); ch != "" {
		if _, ok := g.s.Registry().Get(ch); !ok {
			return nil, grpcError(fmt.Errorf("%w: %s", registry.ErrChannelNotFound, ch))
		}
		return &ahpv1.GetLimitsResponse{Effective: toLimits(g.s.LimitsFor(ch)), Defaults: toLimits(config.DefaultLimits()), Overridden: g.s.ChannelOverrides(ctx, ch)}, nil
	}
	return &ahpv1.GetLimitsResponse{Effective: toLimits(g.s.Limits()), Defaults: toLimits(config.DefaultLimits())}, nil
}

func (g *grpcServer) SetLimits(ctx context.Context, req *ahpv1.SetLimitsRequest) (*ahpv1.SetLimitsResponse, error) {
	fields, from, err := fromLimitsRequest(req)
	if err != nil {
		return nil, grpcError(err)
	}
	if ch := req.GetChannel(); ch != "" {
		if len(fields) == 0 {
			return nil, grpcError(argErr("update_mask", "name the limits to override for the channel"))
		}
		now, changed, err := g.s.UpdateChannelLimits(ctx, ch, fields, from, req.GetClear())
		return reply(&ahpv1.SetLimitsResponse{Effective: toLimits(now), Changed: changed}, err)
	}
	if req.GetClear() {
		return nil, grpcError(argErr("clear", "only with channel"))
	}
	now, changed, err := g.s.UpdateLimits(ctx, fields, from)
	return reply(&ahpv1.SetLimitsResponse{Effective: toLimits(now), Changed: changed}, err)
}

// --- ViewerService

func (g *grpcServer) ListViewers(ctx context.Context, _ *ahpv1.ListViewersRequest) (*ahpv1.ListViewersResponse, error) {
	return &ahpv1.ListViewersResponse{Viewers: mapSlice(g.s.ListViewers(ctx), toViewer)}, nil
}

func (g *grpcServer) DisconnectViewer(ctx context.Context, req *ahpv1.DisconnectViewerRequest) (*ahpv1.DisconnectViewerResponse, error) {
	return reply(&ahpv1.DisconnectViewerResponse{}, g.s.DisconnectViewer(ctx, req.GetId(), req.GetReason()))
}

// --- TelemetryService

func (g *grpcServer) CreateTelemetry(ctx context.Context, req *ahpv1.CreateTelemetryRequest) (*ahpv1.CreateTelemetryResponse, error) {
	r := TelemetryRequest{Kind: req.GetKind(), ID: req.GetId(), Interval: req.GetInterval().AsDuration(), Terminal: req.GetTerminal(), Command: req.GetCommand(), Policy: req.GetPolicy(),
		URL: req.GetUrl(), Timeout: req.GetTimeout().AsDuration(), MaxBytes: req.GetMaxBytes(), TokenFile: req.GetBearerTokenFile(), Match: req.GetMatch(), Labels: req.GetLabels(),
		Histograms: req.GetHistograms(), Quantiles: req.GetQuantiles()}
	if h := req.GetHistory(); h != nil {
		d := h.AsDuration()
		r.History = &d
	}
	ch, err := g.s.CreateTelemetry(ctx, r)
	if err != nil {
		return nil, grpcError(err)
	}
	return &ahpv1.CreateTelemetryResponse{Channel: toChannel(channelDetail(ch))}, nil
}

// busySamples is the size of a PublishTelemetry message that counts as a
// fast producer (Options.Busy).
const busySamples = 100

func (g *grpcServer) PublishTelemetry(stream ahpv1.TelemetryService_PublishTelemetryServer) error {
	var uri string
	var res ahpv1.PublishTelemetryResponse
	for {
		// Decoded by publishRequest.UnmarshalWire (the control server's
		// codec), not into ahpv1.PublishTelemetryRequest: the same
		// message, without the reflection and maps.
		var req publishRequest
		err := stream.RecvMsg(&req)
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&res)
		}
		if err != nil {
			return err
		}
		res.Messages++
		if err := req.Malformed(res.Messages - 1); err != nil {
			return grpcError(err)
		}
		switch c := req.Channel; {
		case c != "" && uri != "" && c != uri:
			return status.Errorf(codes.InvalidArgument, "message %d: channel %s, but the stream publishes to %s", res.Messages, c, uri)
		case c != "":
			uri = c
		case uri == "":
			return status.Error(codes.InvalidArgument, "the first message must name the channel")
		}
		if len(req.Samples) >= busySamples {
			g.s.busy()
		}
		if err := g.s.PublishTelemetry(uri, req.Samples); err != nil {
			var ae *ArgError
			if errors.As(err, &ae) {
				ae.Field = fmt.Sprintf("messages[%d].%s", res.Messages-1, ae.Field)
			}
			return grpcError(err)
		}
		res.Samples += int64(len(req.Samples))
	}
}

// --- TCPService

func (g *grpcServer) AllowTCP(ctx context.Context, req *ahpv1.AllowTCPRequest) (*ahpv1.AllowTCPResponse, error) {
	c, err := g.s.AllowTCP(ctx, req.GetRule())
	return reply(&ahpv1.AllowTCPResponse{Rule: c.Rule.String(), Added: c.Changed, Persisted: c.Persisted, PersistError: c.PersistError, Hint: c.Hint, ConfigFile: c.ConfigFile, StateFile: c.StateFile}, err)
}

func (g *grpcServer) DenyTCP(ctx context.Context, req *ahpv1.DenyTCPRequest) (*ahpv1.DenyTCPResponse, error) {
	c, err := g.s.DenyTCP(ctx, req.GetRule())
	return reply(&ahpv1.DenyTCPResponse{Rule: c.Rule.String(), Removed: c.Changed, Persisted: c.Persisted, PersistError: c.PersistError, ConfigFile: c.ConfigFile, StateFile: c.StateFile}, err)
}

func (g *grpcServer) ListTCPRules(ctx context.Context, _ *ahpv1.ListTCPRulesRequest) (*ahpv1.ListTCPRulesResponse, error) {
	l := g.s.ListTCPRules(ctx)
	return &ahpv1.ListTCPRulesResponse{Rules: mapSlice(l.Rules, tcp.Rule.String), ConfigFile: l.ConfigFile, StateFile: l.StateFile, Sources: l.Sources}, nil
}

func (g *grpcServer) CreateTCP(ctx context.Context, req *ahpv1.CreateTCPRequest) (*ahpv1.CreateTCPResponse, error) {
	port := int(min(req.GetPort(), 1<<16)) // beyond uint16: refused by CreateTCP
	ch, err := g.s.CreateTCP(ctx, req.GetHost(), port, req.GetId())
	if err != nil {
		return nil, grpcError(err)
	}
	return &ahpv1.CreateTCPResponse{Channel: toChannel(channelDetail(ch))}, nil
}

// grpcError is the one mapping of service errors to gRPC status codes.
// An *ArgError also carries a google.rpc.BadRequest naming the field.
func grpcError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var ae *ArgError
	if errors.As(err, &ae) {
		st := status.New(codes.InvalidArgument, err.Error())
		if d, derr := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: ae.Field, Description: ae.Reason}}}); derr == nil {
			st = d
		}
		return st.Err()
	}
	// A channel kind's refusal (a Creator's, a dial's) carries its
	// JSON-RPC code (PROTOCOL.md §7); the reason in a google.rpc.ErrorInfo
	// lets a client tell a failed dial from an unreachable daemon.
	var fe *flow.Error
	if errors.As(err, &fe) {
		code, reason := codes.Internal, "INTERNAL"
		switch fe.Code {
		case flow.ErrCodeInvalidParams:
			code, reason = codes.InvalidArgument, "INVALID_PARAMS"
		case flow.ErrCodeForbidden:
			code, reason = codes.PermissionDenied, "FORBIDDEN"
		case flow.ErrCodeConnectFailed:
			code, reason = codes.Unavailable, "CONNECT_FAILED"
		case flow.ErrCodeLimitExceeded:
			code, reason = codes.ResourceExhausted, "LIMIT_EXCEEDED"
		case flow.ErrCodeChannelNotFound:
			code, reason = codes.NotFound, "CHANNEL_NOT_FOUND"
		}
		st := status.New(code, fe.Message)
		if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: map[string]string{"jsonrpcCode": strconv.Itoa(fe.Code)}}); derr == nil {
			st = d
		}
		return st.Err()
	}
	code := codes.Internal
	switch {
	case errors.Is(err, registry.ErrBadChannelID):
		code = codes.InvalidArgument
	case errors.Is(err, registry.ErrChannelNotFound), errors.Is(err, session.ErrViewerNotFound), errors.Is(err, ErrTokenNotFound),
		errors.Is(err, ErrTCPRuleNotFound), errors.Is(err, ErrRecordingNotFound):
		code = codes.NotFound
	case errors.Is(err, registry.ErrChannelExists):
		code = codes.AlreadyExists
	case errors.Is(err, auth.ErrUnauthorized), errors.Is(err, auth.ErrTokenExpired):
		code = codes.PermissionDenied
	case errors.Is(err, ErrTooMany):
		code = codes.ResourceExhausted
	case errors.Is(err, ErrUnsupported), errors.Is(err, ErrNotRunning), errors.Is(err, ErrUpgradeRefused):
		code = codes.FailedPrecondition
	case errors.Is(err, ErrShuttingDown):
		code = codes.Unavailable
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	return status.Error(code, err.Error())
}

// --- conversions

func mapSlice[T, U any](in []T, f func(T) U) []U {
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

// baseURL is the page's URL for links: publicUrl when set, else the
// listener's address with an unspecified host replaced by loopback
// (config.Config.BaseURL).
func (g *grpcServer) baseURL() string { return g.s.Config().BaseURL(g.opts.HTTPAddr) }

// websocketURL is /v1/ws on the listener itself, which local clients
// (ahpctl attach through the control socket) dial: ws:// or wss://, under
// publicUrl's path prefix.
func (g *grpcServer) websocketURL() string {
	u := g.s.Config().LocalBaseURL(g.opts.HTTPAddr) + "v1/ws"
	if rest, ok := strings.CutPrefix(u, "https://"); ok {
		return "wss://" + rest
	}
	return "ws://" + strings.TrimPrefix(u, "http://")
}

func (g *grpcServer) info() *ahpv1.GetInfoResponse {
	cfg := g.s.Config()
	stateDir, _ := filepath.Abs(cfg.StateDir)
	r := &ahpv1.GetInfoResponse{
		Version:              g.s.version,
		ListenAddress:        g.opts.HTTPAddr,
		WebsocketUrl:         g.websocketURL(),
		BaseUrl:              g.baseURL(),
		ControlSocket:        g.path,
		StateDir:             stateDir,
		Pid:                  int64(os.Getpid()),
		StartTime:            timestamppb.New(g.started),
		WebsocketCompression: cfg.WebsocketCompression,
		TicketTtl:            durationpb.New(cfg.TicketTTL),
		Channels:             int64(len(g.s.Registry().List())),
		Connections:          int64(g.s.ConnectionCount()),
		Upgrades:             g.opts.Upgrades,
	}
	if !g.opts.Upgraded.IsZero() {
		r.UpgradeTime = timestamppb.New(g.opts.Upgraded)
	}
	if g.opts.Refused != nil {
		if u := g.opts.Refused(); u != nil {
			r.UpgradeRefused = &ahpv1.UpgradeRefusal{Time: timestamppb.New(u.Time), Reason: u.Reason, AfterHandOver: u.AfterHandOver}
		}
	}
	return r
}

func toChannel(d ChannelDetail) *ahpv1.Channel {
	p := &ahpv1.Channel{
		Uri: d.Channel, Id: d.ID, Type: d.Type, Title: d.Title, State: d.State, Viewers: d.Viewers,
		Rows: int32(d.Rows), Cols: int32(d.Cols), Pid: int64(d.Pid), CreateTime: timestamppb.New(d.Created), Command: d.Command, Cwd: d.Cwd,
	}
	if e := d.Exit; e != nil {
		p.Exit = &ahpv1.ChannelExit{Signal: e.Signal}
		if e.Code != nil {
			p.Exit.Code = int32(*e.Code)
		}
	}
	if t := d.TCP; t != nil {
		p.Tcp = &ahpv1.TCPChannel{Target: t.Target, Remote: t.Remote, BytesIn: t.BytesIn, BytesOut: t.BytesOut, Resumes: t.Resumes, Consumer: t.Consumer, Phase: t.Phase}
	}
	if t := d.Telemetry; t != nil {
		p.Telemetry = &ahpv1.TelemetryChannel{Source: t.Source, Policy: t.Policy, Seq: int64(t.Seq), Samples: t.Samples, Viewers: int32(t.Viewers), Status: t.Status}
	}
	p.Recording = toRecordingState(d.Recording)
	return p
}

func toRecordingState(r *RecordingState) *ahpv1.RecordingState {
	if r == nil {
		return nil
	}
	return &ahpv1.RecordingState{Mode: r.Mode.String(), Id: r.ID}
}

func toRecording(r RecordingInfo) *ahpv1.Recording {
	p := &ahpv1.Recording{Id: r.ID, Channel: r.URI, StartTime: timestamppb.New(r.Started), Live: r.Live, Bytes: r.Bytes,
		Duration: durationpb.New(time.Duration(r.Duration * float64(time.Second))), Rows: int32(r.Rows), Cols: int32(r.Cols),
		Title: r.Title, Input: r.Input, Path: r.Path}
	if !r.Live && !r.Ended.IsZero() {
		p.EndTime = timestamppb.New(r.Ended)
	}
	return p
}

func toRole(r auth.Role) ahpv1.Role {
	if r == auth.RoleControl {
		return ahpv1.Role_ROLE_CONTROL
	}
	return ahpv1.Role_ROLE_VIEW
}

func fromRole(r ahpv1.Role, def auth.Role) auth.Role {
	switch r {
	case ahpv1.Role_ROLE_VIEW:
		return auth.RoleView
	case ahpv1.Role_ROLE_CONTROL:
		return auth.RoleControl
	case ahpv1.Role_ROLE_UNSPECIFIED:
		return def
	}
	return auth.Role(-1) // refused by validation
}

func toToken(t auth.TokenInfo) *ahpv1.Token {
	p := &ahpv1.Token{Id: t.ID, Channels: t.Grant.Channels, Role: toRole(t.Grant.Role), SingleUse: t.Grant.SingleUse, ParentId: t.Grant.Parent}
	if !t.Created.IsZero() {
		p.CreateTime = timestamppb.New(t.Created)
	}
	if !t.Grant.Expires.IsZero() {
		p.ExpireTime = timestamppb.New(t.Grant.Expires)
	}
	return p
}

func durationArg(field string, d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	if err := d.CheckValid(); err != nil {
		return 0, argErr(field, "%v", err)
	}
	return d.AsDuration(), nil
}

func toLimits(l config.Limits) *ahpv1.Limits {
	p := &ahpv1.Limits{}
	for _, f := range limits.All() {
		v, _ := l.LimitValue(f.Name)
		limits.Set(p, f, v)
	}
	return p
}

// protoLimitPaths maps update_mask paths (proto names) to limit names.
var protoLimitPaths = func() map[string]string {
	m := map[string]string{}
	for _, f := range limits.All() {
		m[limits.ProtoPath(f.Name)] = f.Name
	}
	for _, g := range limits.Groups {
		m[limits.ProtoPath(g)] = g
	}
	return m
}()

func fromLimitsRequest(req *ahpv1.SetLimitsRequest) ([]string, config.Limits, error) {
	var fields []string
	for _, p := range req.GetUpdateMask().GetPaths() {
		name, ok := protoLimitPaths[p]
		if !ok {
			return nil, config.Limits{}, argErr("updateMask", "unknown field %q", p)
		}
		fields = append(fields, name)
	}
	p := req.GetLimits()
	if p == nil {
		p = &ahpv1.Limits{}
	}
	var l config.Limits
	for _, f := range limits.All() {
		v, err := limits.Get(p, f)
		if err != nil {
			return nil, config.Limits{}, argErr(f.Name, "%v", err)
		}
		l.SetLimitValue(f.Name, v)
	}
	return fields, l, nil
}

func toViewer(v session.ViewerInfo) *ahpv1.Viewer {
	p := &ahpv1.Viewer{
		Id: v.ID, RemoteAddress: v.Remote, Client: v.Client, ClientVersion: v.ClientVersion, OpenTime: timestamppb.New(v.Opened), Initialized: v.Initialized,
		FramesIn: v.FramesIn, BytesIn: v.BytesIn, MessagesOut: v.FramesOut, BytesOut: v.BytesOut,
		Resets: v.Resets, DroppedNotifications: v.Dropped, TokenId: v.Token, TokenParentId: v.TokenParent,
	}
	if v.Initialized {
		p.Role = ahpv1.Role_ROLE_VIEW
		if v.Role == auth.RoleControl.String() {
			p.Role = ahpv1.Role_ROLE_CONTROL
		}
	}
	for _, s := range v.Subscriptions {
		p.Subscriptions = append(p.Subscriptions, &ahpv1.Subscription{
			Id: s.ID, Channel: s.Channel, SentBytes: s.Sent, ConsumedBytes: s.Consumed, OutstandingBytes: s.Outstanding,
			WindowBytes: s.Window, Stalled: s.Stalled, DroppedBytes: s.BytesDropped, Snapshots: s.Snapshots, QueuedBytes: s.Queued,
		})
	}
	return p
}

func toCounters(c ConnectionCounters) *ahpv1.ConnectionCounters {
	return &ahpv1.ConnectionCounters{
		FramesIn: c.FramesIn, BytesIn: c.BytesIn, MessagesOut: c.MessagesOut, BytesOut: c.BytesOut,
		Resets: c.Resets, DroppedNotifications: c.DroppedNotifications, Subscriptions: c.Subscriptions,
		WireBytesOut: c.WireBytesOut, WireBytesIn: c.WireBytesIn,
	}
}

func toStats(st Stats) *ahpv1.GetStatsResponse {
	p := &ahpv1.GetStatsResponse{Totals: toCounters(st.Totals)}
	for _, c := range st.Connections {
		p.Connections = append(p.Connections, &ahpv1.ConnectionStats{Viewer: c.Viewer, Counters: toCounters(c.ConnectionCounters)})
	}
	for _, c := range st.Channels {
		p.Channels = append(p.Channels, &ahpv1.ChannelStats{
			Channel: c.Channel, Type: c.Type, Viewers: c.Viewers, SentBytes: c.SentBytes, ConsumedBytes: c.Consumed,
			DroppedBytes: c.DroppedBytes, Snapshots: c.Snapshots, Stalled: c.Stalled,
		})
	}
	return p
}

func toEvents(evs []events.Event, lost int) *ahpv1.WatchEventsResponse {
	p := &ahpv1.WatchEventsResponse{Lost: int64(lost)}
	for _, e := range evs {
		p.Events = append(p.Events, &ahpv1.Event{Seq: e.Seq, Time: timestamppb.New(e.Time), Kind: e.Kind, Channel: e.Channel, Viewer: e.Viewer, Detail: e.Detail})
	}
	return p
}
