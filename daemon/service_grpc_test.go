package daemon_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/daemon/metrics"
	"github.com/ahp-dev/ahpd/daemon/registry"
	"github.com/ahp-dev/ahpd/daemon/service"
	"github.com/ahp-dev/ahpd/flow"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// These tests drive the control plane over a real unix socket in
// t.TempDir() against a running daemon (fake terminals).

type ctl struct {
	cp        *service.ControlPlane
	cc        *grpc.ClientConn
	daemon    ahpv1.DaemonServiceClient
	channels  ahpv1.ChannelServiceClient
	terminals ahpv1.TerminalServiceClient
	tokens    ahpv1.TokenServiceClient
	limits    ahpv1.LimitsServiceClient
	viewers   ahpv1.ViewerServiceClient
}

func (h *harness) control() *ctl {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	path := filepath.Join(h.t.TempDir(), "ctl.sock")
	cp, err := h.srv.StartControl(ctx, service.ControlOptions{Path: path, HTTPAddr: h.addr})
	if err != nil {
		cancel()
		h.t.Fatal(err)
	}
	cc, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		cc.Close()
		cancel()
		if err := cp.Close(); err != nil {
			h.t.Errorf("control plane: %v", err)
		}
	})
	return &ctl{
		cp: cp, cc: cc,
		daemon:    ahpv1.NewDaemonServiceClient(cc),
		channels:  ahpv1.NewChannelServiceClient(cc),
		terminals: ahpv1.NewTerminalServiceClient(cc),
		tokens:    ahpv1.NewTokenServiceClient(cc),
		limits:    ahpv1.NewLimitsServiceClient(cc),
		viewers:   ahpv1.NewViewerServiceClient(cc),
	}
}

func wantCode(t *testing.T, err error, code codes.Code, contains string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code || !strings.Contains(st.Message(), contains) {
		t.Fatalf("err = %v (code %v), want code %v with %q", err, st.Code(), code, contains)
	}
}

// badField returns the field named by an INVALID_ARGUMENT's BadRequest.
func badField(err error) string {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.FieldViolations) > 0 {
			return br.FieldViolations[0].Field
		}
	}
	return ""
}

func TestControlSocketMode(t *testing.T) {
	h := start(t, false, nil)
	c := h.control()
	fi, err := os.Stat(c.cp.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode = %v, want socket 0660", fi.Mode())
	}
}

func TestControlHealthReflectionInfo(t *testing.T) {
	h := start(t, false, nil)
	c := h.control()
	ctx := ctxT(t)
	for _, svc := range []string{"", "ahp.v1.DaemonService", "ahp.v1.LimitsService"} {
		res, err := healthpb.NewHealthClient(c.cc).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || res.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health %q = %v, %v; want SERVING", svc, res, err)
		}
	}
	rs, err := reflectpb.NewServerReflectionClient(c.cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Send(&reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	rr, err := rs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range rr.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	_ = rs.CloseSend()
	for _, want := range []string{"ahp.v1.DaemonService", "ahp.v1.ChannelService", "ahp.v1.TerminalService", "ahp.v1.TokenService", "ahp.v1.LimitsService", "ahp.v1.ViewerService", "grpc.health.v1.Health"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, missing %s", names, want)
		}
	}
	info, err := c.daemon.GetInfo(ctx, &ahpv1.GetInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.ListenAddress != h.addr || info.WebsocketUrl != h.url || info.ControlSocket != c.cp.Path() || info.Pid != int64(os.Getpid()) || info.WebsocketCompression != "none" {
		t.Fatalf("GetInfo = %v", info)
	}
}

func TestControlTerminalsAndChannels(t *testing.T) {
	h := start(t, false, nil)
	c := h.control()
	ctx := ctxT(t)
	res, err := c.terminals.CreateTerminal(ctx, &ahpv1.CreateTerminalRequest{Id: "work", Title: "Work", Rows: 30, Cols: 100, Env: []string{"A=1"}, Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Channel.Uri != "ahp-terminal:/work" || res.Channel.Type != "terminal" || res.Channel.State != "running" || res.Channel.Title != "Work" {
		t.Fatalf("CreateTerminal = %v", res.Channel)
	}
	_, err = c.terminals.CreateTerminal(ctx, &ahpv1.CreateTerminalRequest{Id: "work"})
	wantCode(t, err, codes.AlreadyExists, "ahp-terminal:/work")
	auto, err := c.terminals.CreateTerminal(ctx, &ahpv1.CreateTerminalRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		req   *ahpv1.CreateTerminalRequest
		field string
	}{
		{&ahpv1.CreateTerminalRequest{Id: "bad id"}, "id"},
		{&ahpv1.CreateTerminalRequest{Rows: 5000}, "rows"},
		{&ahpv1.CreateTerminalRequest{Cols: -1}, "cols"},
		{&ahpv1.CreateTerminalRequest{Scrollback: -2}, "scrollback"},
		{&ahpv1.CreateTerminalRequest{Cwd: "relative"}, "cwd"},
		{&ahpv1.CreateTerminalRequest{Cwd: "/nonexistent-dir-of-ahpd-tests"}, "cwd"},
		{&ahpv1.CreateTerminalRequest{Command: "no-such-program-of-ahpd-tests"}, "command"},
		{&ahpv1.CreateTerminalRequest{Args: []string{"-l"}}, "args"},
		{&ahpv1.CreateTerminalRequest{Env: []string{"A=1", "novalue"}}, "env[1]"},
		{&ahpv1.CreateTerminalRequest{Title: strings.Repeat("x", 300)}, "title"},
	} {
		_, err := c.terminals.CreateTerminal(ctx, tc.req)
		wantCode(t, err, codes.InvalidArgument, tc.field)
		if got := badField(err); got != tc.field {
			t.Errorf("CreateTerminal(%v): field = %q, want %q", tc.req, got, tc.field)
		}
	}

	list, err := c.channels.ListChannels(ctx, &ahpv1.ListChannelsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Channels) != 2 || list.Channels[0].Uri != "ahp-terminal:/work" || list.Channels[1].Uri != auto.Channel.Uri {
		t.Fatalf("ListChannels = %v", list.Channels)
	}
	if l, _ := c.channels.ListChannels(ctx, &ahpv1.ListChannelsRequest{Type: "tcp"}); len(l.Channels) != 0 {
		t.Fatalf("ListChannels(tcp) = %v, want none", l.Channels)
	}
	got, err := c.channels.GetChannel(ctx, &ahpv1.GetChannelRequest{Channel: "ahp-terminal:/work"})
	if err != nil || got.Channel.Id != "work" {
		t.Fatalf("GetChannel = %v, %v", got, err)
	}
	_, err = c.channels.GetChannel(ctx, &ahpv1.GetChannelRequest{Channel: "ahp-terminal:/nope"})
	wantCode(t, err, codes.NotFound, "ahp-terminal:/nope")

	if _, err := c.terminals.ResizeTerminal(ctx, &ahpv1.ResizeTerminalRequest{Channel: "ahp-terminal:/work", Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	h.termMu.Lock()
	ft := h.terms[0]
	h.termMu.Unlock()
	ft.mu.Lock()
	rows, cols := ft.rows, ft.cols
	ft.mu.Unlock()
	if rows != 40 || cols != 120 {
		t.Fatalf("terminal size = %dx%d, want 40x120", rows, cols)
	}
	_, err = c.terminals.ResizeTerminal(ctx, &ahpv1.ResizeTerminalRequest{Channel: "ahp-terminal:/work", Rows: 0, Cols: 10})
	wantCode(t, err, codes.InvalidArgument, "rows")
	_, err = c.terminals.ResizeTerminal(ctx, &ahpv1.ResizeTerminalRequest{Channel: "ahp-terminal:/gone", Rows: 10, Cols: 10})
	wantCode(t, err, codes.NotFound, "gone")

	// The fake terminal has no process to signal.
	_, err = c.channels.CloseChannel(ctx, &ahpv1.CloseChannelRequest{Channel: "ahp-terminal:/work", Signal: "TERM"})
	wantCode(t, err, codes.FailedPrecondition, "signals")
	_, err = c.channels.CloseChannel(ctx, &ahpv1.CloseChannelRequest{Channel: "ahp-terminal:/work", Signal: "NOPE"})
	wantCode(t, err, codes.InvalidArgument, "signal")
	if _, err := c.channels.CloseChannel(ctx, &ahpv1.CloseChannelRequest{Channel: "ahp-terminal:/work"}); err != nil {
		t.Fatal(err)
	}
	_, err = c.channels.CloseChannel(ctx, &ahpv1.CloseChannelRequest{Channel: "ahp-terminal:/work"})
	wantCode(t, err, codes.NotFound, "work")
	if ft.State() != flow.StateClosed {
		t.Fatal("CloseChannel did not close the terminal")
	}
}

func TestControlTokens(t *testing.T) {
	h := start(t, false, nil)
	c := h.control()
	ctx := ctxT(t)
	ch, _ := h.term("t1")
	h.term("t2")

	view, err := c.tokens.CreateToken(ctx, &ahpv1.CreateTokenRequest{Channels: []string{ch.URI}, Role: ahpv1.Role_ROLE_VIEW, Ttl: durationpb.New(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(view.Secret, "ahp_") || view.Token.Role != ahpv1.Role_ROLE_VIEW || !slices.Equal(view.Token.Channels, []string{ch.URI}) {
		t.Fatalf("CreateToken = %v", view)
	}
	if exp := time.Until(view.Token.ExpireTime.AsTime()); exp < 59*time.Minute || exp > time.Hour {
		t.Fatalf("token expires in %v, want 1h", exp)
	}
	conn, res, err := client.Dial(ctx, h.url, client.Options{Token: view.Secret})
	if err != nil {
		t.Fatal(err)
	}
	if res.Access.Role != "view" {
		t.Fatalf("role = %q, want view", res.Access.Role)
	}
	var list struct {
		Channels []registry.ChannelInfo `json:"channels"`
	}
	if err := conn.Call(ctx, "channels/list", map[string]any{}, &list); err != nil || len(list.Channels) != 1 {
		t.Fatalf("channels/list with a scoped token = %v, %v; want only %s", list, err, ch.URI)
	}
	conn.Close()

	ticket, err := c.tokens.CreateToken(ctx, &ahpv1.CreateTokenRequest{SingleUse: true, Role: ahpv1.Role_ROLE_CONTROL})
	if err != nil {
		t.Fatal(err)
	}
	if exp := time.Until(ticket.Token.ExpireTime.AsTime()); exp > 10*time.Minute {
		t.Fatalf("ticket expires in %v, want the 10 min ticket TTL", exp)
	}
	conn, res, err = client.Dial(ctx, h.url, client.Options{Token: ticket.Secret})
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if res.ReconnectToken == "" {
		t.Fatal("a ticket's initialize result has no reconnectToken")
	}
	if _, _, err := client.Dial(ctx, h.url, client.Options{Token: ticket.Secret}); rpcCode(err) != flow.ErrCodeUnauthorized {
		t.Fatalf("second use of a ticket: err = %v, want unauthorized", err)
	}

	tl, err := c.tokens.ListTokens(ctx, &ahpv1.ListTokensRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, tok := range tl.Tokens {
		ids = append(ids, tok.Id)
	}
	if !slices.Contains(ids, view.Token.Id) || slices.Contains(ids, ticket.Token.Id) {
		t.Fatalf("ListTokens ids = %v, want %s and not the used ticket %s", ids, view.Token.Id, ticket.Token.Id)
	}
	if _, err := c.tokens.RevokeToken(ctx, &ahpv1.RevokeTokenRequest{Id: view.Token.Id}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := client.Dial(ctx, h.url, client.Options{Token: view.Secret}); rpcCode(err) != flow.ErrCodeUnauthorized {
		t.Fatalf("revoked token: err = %v, want unauthorized", err)
	}
	_, err = c.tokens.RevokeToken(ctx, &ahpv1.RevokeTokenRequest{Id: view.Token.Id})
	wantCode(t, err, codes.NotFound, view.Token.Id)

	for _, tc := range []struct {
		req   *ahpv1.CreateTokenRequest
		field string
	}{
		{&ahpv1.CreateTokenRequest{Channels: []string{"ahp-terminal:/ok", "http://x"}}, "channels[1]"},
		{&ahpv1.CreateTokenRequest{Ttl: durationpb.New(-time.Second)}, "ttl"},
		{&ahpv1.CreateTokenRequest{Ttl: durationpb.New(400 * 24 * time.Hour)}, "ttl"},
		{&ahpv1.CreateTokenRequest{Role: ahpv1.Role(7)}, "role"},
	} {
		_, err := c.tokens.CreateToken(ctx, tc.req)
		wantCode(t, err, codes.InvalidArgument, tc.field)
	}

	link, err := c.tokens.CreateBrowserLink(ctx, &ahpv1.CreateBrowserLinkRequest{Channel: ch.URI})
	if err != nil {
		t.Fatal(err)
	}
	base, frag, _ := strings.Cut(link.Url, "#")
	q, err := url.ParseQuery(frag)
	if base != "http://"+h.addr+"/" || err != nil || !strings.HasPrefix(q.Get("ticket"), "ahp_") || q.Get("channel") != ch.URI {
		t.Fatalf("CreateBrowserLink = %s", link.Url)
	}
	_, err = c.tokens.CreateBrowserLink(ctx, &ahpv1.CreateBrowserLinkRequest{Channel: "ahp-terminal:/nope"})
	wantCode(t, err, codes.NotFound, "nope")
	_, err = c.tokens.CreateBrowserLink(ctx, &ahpv1.CreateBrowserLinkRequest{Channel: ch.URI, Ttl: durationpb.New(time.Hour)})
	wantCode(t, err, codes.InvalidArgument, "ttl")
}

// TestControlShareLinks: a reusable link works in several tabs at once
// (each initialize succeeds), within its channel and role, until it is
// revoked; a link without a channel reaches every channel.
func TestControlShareLinks(t *testing.T) {
	h := start(t, false, nil)
	c := h.control()
	ctx := ctxT(t)
	ch, err := h.srv.CreateTerminal(service.TerminalSpec{ID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.srv.CreateTerminal(service.TerminalSpec{ID: "b"}); err != nil {
		t.Fatal(err)
	}
	link, err := c.tokens.CreateBrowserLink(ctx, &ahpv1.CreateBrowserLinkRequest{Channel: ch.URI, Role: ahpv1.Role_ROLE_VIEW, Reusable: true, Ttl: durationpb.New(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	_, frag, _ := strings.Cut(link.Url, "#")
	q, _ := url.ParseQuery(frag)
	tok := q.Get("token")
	if !strings.HasPrefix(tok, "ahp_") || q.Get("channel") != ch.URI || q.Has("ticket") || link.TokenId == "" {
		t.Fatalf("reusable link %s (token id %q)", link.Url, link.TokenId)
	}
	if d := time.Until(link.ExpireTime.AsTime()); d < 59*time.Minute || d > time.Hour {
		t.Fatalf("expires in %v, want 1h", d)
	}
	list := func(tok string) []string {
		t.Helper()
		conn, res, err := client.Dial(ctx, h.url, client.Options{Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if res.Access.Role != "view" {
			t.Fatalf("role %q, want view", res.Access.Role)
		}
		return listedChannels(t, conn)
	}
	// A first tab stays open while a second opens the same link.
	first, _, err := client.Dial(ctx, h.url, client.Options{Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if got := list(tok); !slices.Equal(got, []string{ch.URI}) {
		t.Fatalf("share link lists %v", got)
	}
	if _, err := c.tokens.RevokeToken(ctx, &ahpv1.RevokeTokenRequest{Id: link.TokenId}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := client.Dial(ctx, h.url, client.Options{Token: tok}); rpcCode(err) != flow.ErrCodeUnauthorized {
		t.Fatalf("revoked share link: %v, want unauthorized", err)
	}

	all, err := c.tokens.CreateBrowserLink(ctx, &ahpv1.CreateBrowserLinkRequest{Role: ahpv1.Role_ROLE_VIEW, Reusable: true})
	if err != nil {
		t.Fatal(err)
	}
	_, frag, _ = strings.Cut(all.Url, "#")
	q, _ = url.ParseQuery(frag)
	if q.Has("channel") {
		t.Fatalf("all-channel link %s names a channel", all.Url)
	}
	if got := list(q.Get("token")); !slices.Equal(got, []string{"ahp-terminal:/a", "ahp-terminal:/b"}) {
		t.Fatalf("all-channel link lists %v", got)
	}
}

func TestControlLimitsGetSet(t *testing.T) {
	h := start(t, false, nil)
	c := h.control()
	ctx := ctxT(t)
	got, err := c.limits.GetLimits(ctx, &ahpv1.GetLimitsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Effective.MaxSubscriptions != 1024 || got.Defaults.MaxOutputStall.AsDuration() != time.Minute || got.Effective.HostReceive.WindowBytes != 256<<10 {
		t.Fatalf("GetLimits = %v", got)
	}
	set, err := c.limits.SetLimits(ctx, &ahpv1.SetLimitsRequest{
		Limits:     &ahpv1.Limits{MaxOutputStall: durationpb.New(2 * time.Second), MaxBufferedBytes: 8 << 20, ClientReceiveDefaults: &ahpv1.ReceiveLimits{WindowBytes: 128 << 10}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"max_output_stall", "max_buffered_bytes", "client_receive_defaults.window_bytes"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"maxBufferedBytes", "maxOutputStall", "clientReceiveDefaults.windowBytes"}; !slices.Equal(set.Changed, want) {
		t.Fatalf("changed = %v, want %v", set.Changed, want)
	}
	l := h.srv.Limits()
	if l.MaxOutputStall != 2*time.Second || l.MaxBufferedBytes != 8<<20 || l.ClientReceiveDefaults.WindowBytes != 128<<10 || l.ClientReceiveDefaults.MaximumFrameBytes != 64<<10 || l.MaxSubscriptions != 1024 {
		t.Fatalf("limits after SetLimits = %+v", l)
	}
	_, err = c.limits.SetLimits(ctx, &ahpv1.SetLimitsRequest{Limits: &ahpv1.Limits{}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"max_nonsense"}}})
	wantCode(t, err, codes.InvalidArgument, "max_nonsense")
	// A zero value restores the default.
	if _, err := c.limits.SetLimits(ctx, &ahpv1.SetLimitsRequest{Limits: &ahpv1.Limits{}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"max_output_stall"}}}); err != nil {
		t.Fatal(err)
	}
	if got := h.srv.Limits().MaxOutputStall; got != time.Minute {
		t.Fatalf("maxOutputStall after setting 0 = %v, want the default 1m", got)
	}
}

func TestControlLimitValidation(t *testing.T) {
	h := start(t, false, nil)
	c := h.control()
	ctx := ctxT(t)
	before := h.srv.Limits()
	recv := func(w, f, m int64) *ahpv1.ReceiveLimits {
		return &ahpv1.ReceiveLimits{WindowBytes: w, MaximumFrameBytes: f, MaximumMessageBytes: m}
	}
	for _, tc := range []struct {
		path  string
		l     *ahpv1.Limits
		field string
	}{
		{"max_buffered_bytes", &ahpv1.Limits{MaxBufferedBytes: 1000}, "maxBufferedBytes"},
		{"max_output_stall", &ahpv1.Limits{MaxOutputStall: durationpb.New(time.Millisecond)}, "maxOutputStall"},
		{"max_subscriptions", &ahpv1.Limits{MaxSubscriptions: -1}, "maxSubscriptions"},
		{"max_id_length", &ahpv1.Limits{MaxIdLength: 8}, "maxIdLength"},
		{"max_inbound_message_bytes", &ahpv1.Limits{MaxInboundMessageBytes: 100}, "maxInboundMessageBytes"},
		{"heartbeat_interval", &ahpv1.Limits{HeartbeatInterval: durationpb.New(-time.Second)}, "heartbeatInterval"},
		{"initialize_timeout", &ahpv1.Limits{InitializeTimeout: durationpb.New(time.Microsecond)}, "initializeTimeout"},
		{"terminal_viewer_backlog", &ahpv1.Limits{TerminalViewerBacklog: 1024}, "terminalViewerBacklog"},
		{"client_receive_defaults.window_bytes", &ahpv1.Limits{ClientReceiveDefaults: recv(1000, 0, 0)}, "clientReceiveDefaults.windowBytes"},
		{"client_receive_defaults.maximum_frame_bytes", &ahpv1.Limits{ClientReceiveDefaults: recv(0, 100, 0)}, "clientReceiveDefaults.maximumFrameBytes"},
		{"client_receive_defaults.maximum_message_bytes", &ahpv1.Limits{ClientReceiveDefaults: recv(0, 0, 2000)}, "clientReceiveDefaults.maximumMessageBytes"},
		{"client_receive_maximums.window_bytes", &ahpv1.Limits{ClientReceiveMaximums: recv(-5, 0, 0)}, "clientReceiveMaximums.windowBytes"},
		{"client_receive_maximums.maximum_frame_bytes", &ahpv1.Limits{ClientReceiveMaximums: recv(0, 1000, 0)}, "clientReceiveMaximums.maximumFrameBytes"},
		{"client_receive_maximums.maximum_message_bytes", &ahpv1.Limits{ClientReceiveMaximums: recv(0, 0, 1<<60)}, "clientReceiveMaximums.maximumMessageBytes"},
		{"host_receive.window_bytes", &ahpv1.Limits{HostReceive: recv(4096, 0, 0)}, "hostReceive.windowBytes"},
		{"host_receive.maximum_frame_bytes", &ahpv1.Limits{HostReceive: recv(0, 512, 0)}, "hostReceive.maximumFrameBytes"},
		{"host_receive", &ahpv1.Limits{HostReceive: recv(8<<20, 4<<20, 8<<20)}, "hostReceive.maximumFrameBytes"},
		{"host_receive.maximum_message_bytes", &ahpv1.Limits{HostReceive: recv(0, 0, 1024)}, "hostReceive.maximumMessageBytes"},
	} {
		_, err := c.limits.SetLimits(ctx, &ahpv1.SetLimitsRequest{Limits: tc.l, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{tc.path}}})
		wantCode(t, err, codes.InvalidArgument, tc.field)
		if got := badField(err); got != tc.field {
			t.Errorf("SetLimits(%s): field = %q, want %q (%v)", tc.path, got, tc.field, err)
		}
		if h.srv.Limits() != before {
			t.Fatalf("SetLimits(%s) failed but changed the limits", tc.path)
		}
	}
}

func TestControlLimitChangeAppliesToNewSubscriptions(t *testing.T) {
	h := start(t, false, nil)
	c := h.control()
	ctx := ctxT(t)
	ch, _ := h.term("t1")
	_, err := c.limits.SetLimits(ctx, &ahpv1.SetLimitsRequest{
		Limits:     &ahpv1.Limits{MaxSubscriptions: 1, ClientReceiveDefaults: &ahpv1.ReceiveLimits{WindowBytes: 96 << 10, MaximumFrameBytes: 4096, MaximumMessageBytes: 96 << 10}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"max_subscriptions", "client_receive_defaults"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	conn := h.dial(adminToken)
	sub, err := conn.Subscribe(ctx, ch.URI, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := (flow.ReceiveLimits{WindowBytes: 96 << 10, MaximumFrameBytes: 4096, MaximumMessageBytes: 96 << 10}); sub.Flow.ClientReceive != want {
		t.Fatalf("clientReceive = %+v, want the new defaults %+v", sub.Flow.ClientReceive, want)
	}
	if _, err := conn.Subscribe(ctx, ch.URI, nil); rpcCode(err) != flow.ErrCodeLimitExceeded {
		t.Fatalf("second subscription with maxSubscriptions=1: err = %v, want %d", err, flow.ErrCodeLimitExceeded)
	}
}

func TestControlViewersStatsAndKick(t *testing.T) {
	h := start(t, false, nil)
	c := h.control()
	ctx := ctxT(t)
	ch, ft := h.term("t1")
	conn, v := h.subscribe(adminToken, ch.URI, nil)
	for range 2 { // reset, ready
		if _, err := v.next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ft.Emit("hello")
	if _, err := v.next(ctx); err != nil {
		t.Fatal(err)
	}
	vw := c.waitViewers(t, 1)[0]
	if vw.Client != "ahpctl" || vw.Role != ahpv1.Role_ROLE_CONTROL || !vw.Initialized || len(vw.Subscriptions) != 1 || vw.Subscriptions[0].Channel != ch.URI || vw.Subscriptions[0].SentBytes == 0 || vw.MessagesOut == 0 {
		t.Fatalf("viewer = %v", vw)
	}
	// GetStats lists connections as ListViewers does: polled too.
	var stats *ahpv1.GetStatsResponse
	var err error
	for deadline := time.Now().Add(closeWithin); ; time.Sleep(20 * time.Millisecond) {
		if stats, err = c.daemon.GetStats(ctx, &ahpv1.GetStatsRequest{}); err != nil {
			t.Fatal(err)
		}
		if len(stats.Connections) == 1 || time.Now().After(deadline) {
			break
		}
	}
	if len(stats.Connections) != 1 || stats.Connections[0].Viewer != vw.Id || stats.Totals.BytesOut == 0 || len(stats.Channels) != 1 || stats.Channels[0].Viewers != 1 || stats.Channels[0].SentBytes == 0 {
		t.Fatalf("GetStats = %v", stats)
	}

	_, err = c.viewers.DisconnectViewer(ctx, &ahpv1.DisconnectViewerRequest{Id: "c999"})
	wantCode(t, err, codes.NotFound, "c999")
	_, err = c.viewers.DisconnectViewer(ctx, &ahpv1.DisconnectViewerRequest{Id: vw.Id, Reason: strings.Repeat("r", 124)})
	wantCode(t, err, codes.InvalidArgument, "reason")
	if _, err := c.viewers.DisconnectViewer(ctx, &ahpv1.DisconnectViewerRequest{Id: vw.Id, Reason: "maintenance window"}); err != nil {
		t.Fatal(err)
	}
	if code := waitClose(t, conn); code != websocket.StatusPolicyViolation {
		t.Fatalf("close code = %d, want 1008", code)
	}
	var ce websocket.CloseError
	if !errors.As(conn.Err(), &ce) || ce.Reason != "maintenance window" {
		t.Fatalf("close = %v, want reason %q", conn.Err(), "maintenance window")
	}
	// A closing connection never holds up the list.
	if _, err := c.viewers.ListViewers(ctx, &ahpv1.ListViewersRequest{}); err != nil {
		t.Fatal(err)
	}
}

func TestControlWatchEvents(t *testing.T) {
	h := start(t, false, nil)
	c := h.control()
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	stream, err := c.daemon.WatchEvents(ctx, &ahpv1.WatchEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	filtered, err := c.daemon.WatchEvents(ctx, &ahpv1.WatchEventsRequest{Kinds: []string{"limits.changed"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []grpc.ServerStreamingClient[ahpv1.WatchEventsResponse]{stream, filtered} {
		if r, err := s.Recv(); err != nil || len(r.Events) != 0 {
			t.Fatalf("first WatchEvents response = %v, %v; want an empty one", r, err)
		}
	}
	if _, err := c.terminals.CreateTerminal(ctx, &ahpv1.CreateTerminalRequest{}); err != nil {
		t.Fatal(err)
	}
	first := waitEvent(t, stream, "channel.created")
	if first.Kind != "channel.created" || !strings.HasPrefix(first.Channel, "ahp-terminal:/") || first.Detail != "terminal" {
		t.Fatalf("event = %v, want channel.created", first)
	}
	conn := h.dial(adminToken)
	waitEvent(t, stream, "viewer.joined")
	vw := c.waitViewers(t, 1)[0]
	if _, err := c.viewers.DisconnectViewer(ctx, &ahpv1.DisconnectViewerRequest{Id: vw.Id, Reason: "bye"}); err != nil {
		t.Fatal(err)
	}
	if e := waitEvent(t, stream, "viewer.kicked"); e.Detail != "bye" {
		t.Fatalf("viewer.kicked detail = %q, want bye", e.Detail)
	}
	waitClose(t, conn)
	waitEvent(t, stream, "viewer.left")
	if _, err := c.limits.SetLimits(ctx, &ahpv1.SetLimitsRequest{Limits: &ahpv1.Limits{MaxSubscriptions: 7}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"max_subscriptions"}}}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, stream, "limits.changed")
	for {
		r, err := filtered.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Events) > 0 {
			if r.Events[0].Kind != "limits.changed" {
				t.Fatalf("filtered stream got %v", r.Events[0])
			}
			break
		}
	}
}

// waitViewers polls ListViewers until it lists n viewers, for at most
// closeWithin: one list leaves out a connection whose run loop did not
// answer within viewerQueryTimeout (500 ms), which load can cause.
func (c *ctl) waitViewers(t *testing.T, n int) []*ahpv1.Viewer {
	t.Helper()
	ctx := ctxT(t)
	deadline := time.Now().Add(closeWithin)
	for {
		list, err := c.viewers.ListViewers(ctx, &ahpv1.ListViewersRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Viewers) == n {
			return list.Viewers
		}
		if time.Now().After(deadline) {
			t.Fatalf("ListViewers = %v after %v, want %d viewers", list.Viewers, closeWithin, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitEvent(t *testing.T, s grpc.ServerStreamingClient[ahpv1.WatchEventsResponse], kind string) *ahpv1.Event {
	t.Helper()
	for {
		r, err := s.Recv()
		if err != nil {
			t.Fatalf("waiting for %s: %v", kind, err)
		}
		for _, e := range r.Events {
			if e.Kind == kind {
				return e
			}
		}
	}
}

func TestControlStopEndsStreamsAndRemovesSocket(t *testing.T) {
	h := start(t, false, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	path := filepath.Join(t.TempDir(), "ctl.sock")
	cp, err := h.srv.StartControl(ctx, service.ControlOptions{Path: path, HTTPAddr: h.addr})
	if err != nil {
		t.Fatal(err)
	}
	// A second daemon on the same path is refused.
	if cp2, err := h.srv.StartControl(ctx, service.ControlOptions{Path: path, HTTPAddr: h.addr}); err == nil {
		cp2.Close()
		t.Fatal("a second control plane on the same path started")
	}
	cc, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	stream, err := ahpv1.NewDaemonServiceClient(cc).WatchEvents(ctxT(t), &ahpv1.WatchEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ahpv1.NewDaemonServiceClient(cc).GetInfo(ctxT(t), &ahpv1.GetInfoRequest{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cancel()
	if err := cp.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 30*time.Second { // a hang, not a busy machine
		t.Fatalf("stop took %v with an open stream", d)
	}
	for {
		_, err := stream.Recv()
		if err == nil {
			continue // the empty first response
		}
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("stream after stop: err = %v, want UNAVAILABLE", err)
		}
		break
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket after stop: %v, want removed", err)
	}
	if cp, err := h.srv.StartControl(context.Background(), service.ControlOptions{Path: "none"}); cp != nil || err != nil {
		t.Fatalf(`StartControl("none") = %v, %v; want nil, nil`, cp, err)
	}
}

func TestMetricsEndpoint(t *testing.T) {
	h := start(t, false, nil)
	ctx := ctxT(t)
	ch, _ := h.term("t1")
	conn := h.dial(adminToken)
	if _, err := conn.Subscribe(ctx, ch.URI, nil); err != nil {
		t.Fatal(err)
	}
	scoped, _, _ := h.srv.CreateToken(context.Background(), service.TokenRequest{Channels: []string{ch.URI}})
	all, _, _ := h.srv.CreateToken(context.Background(), service.TokenRequest{})
	guarded := httptest.NewServer(metrics.Handler(h.srv.Service, metrics.Options{}))
	defer guarded.Close()
	public := httptest.NewServer(metrics.Handler(h.srv.Service, metrics.Options{Public: true}))
	defer public.Close()
	get := func(url, token string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	for _, tc := range []struct {
		url, token string
		want       int
	}{
		{guarded.URL, "", 401},
		{guarded.URL, "ahp_wrong", 401},
		{guarded.URL, scoped, 401},
		{guarded.URL, all, 200},
		{guarded.URL, adminToken, 200},
		{public.URL, "", 200},
	} {
		code, body := get(tc.url, tc.token)
		if code != tc.want {
			t.Fatalf("GET /metrics (token %.8q) = %d, want %d", tc.token, code, tc.want)
		}
		if code == 200 {
			for _, want := range []string{"ahpd_connections 1", `ahpd_channels{state="running",type="terminal"} 1`, `ahpd_channel_viewers{channel="ahp-terminal:/t1",type="terminal"} 1`, `ahpd_terminal_paced_seconds_total{channel="ahp-terminal:/t1"} 0`, `ahpd_terminal_emulator_wakeups_total{channel="ahp-terminal:/t1",when="now"} 0`, "ahpd_connection_bytes_out_total{viewer=", "go_goroutines"} {
				if !strings.Contains(body, want) {
					t.Fatalf("metrics lack %q:\n%s", want, body)
				}
			}
		}
	}
}

func TestControlPerChannelLimits(t *testing.T) {
	h := start(t, false, nil)
	a, _ := h.term("a")
	b, _ := h.term("b")
	cl := h.control()
	ctx := ctxT(t)
	mask := func(paths ...string) *fieldmaskpb.FieldMask { return &fieldmaskpb.FieldMask{Paths: paths} }
	// Only per-subscription limits may be overridden.
	_, err := cl.limits.SetLimits(ctx, &ahpv1.SetLimitsRequest{Channel: a.URI, Limits: &ahpv1.Limits{MaxSubscriptions: 3}, UpdateMask: mask("max_subscriptions")})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "maxSubscriptions") {
		t.Fatalf("per-channel maxSubscriptions: %v, want InvalidArgument naming it", err)
	}
	if _, err := cl.limits.SetLimits(ctx, &ahpv1.SetLimitsRequest{Channel: "ahp-terminal:/nope", Limits: &ahpv1.Limits{ClientReceiveMaximums: &ahpv1.ReceiveLimits{WindowBytes: 4096}}, UpdateMask: mask("client_receive_maximums.window_bytes")}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown channel: %v, want NotFound", err)
	}
	res, err := cl.limits.SetLimits(ctx, &ahpv1.SetLimitsRequest{Channel: a.URI, Limits: &ahpv1.Limits{ClientReceiveMaximums: &ahpv1.ReceiveLimits{WindowBytes: 2 << 20}}, UpdateMask: mask("client_receive_maximums.window_bytes")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Effective.ClientReceiveMaximums.WindowBytes != 2<<20 {
		t.Fatalf("effective = %v", res.Effective.ClientReceiveMaximums)
	}
	// New subscriptions of a are capped; b is not.
	c := h.dial(adminToken)
	big := &flow.ReceiveLimits{WindowBytes: 8 << 20, MaximumFrameBytes: 64 << 10, MaximumMessageBytes: 1 << 20}
	sa, err := c.Subscribe(ctx, a.URI, big)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.Subscribe(ctx, b.URI, big)
	if err != nil {
		t.Fatal(err)
	}
	if sa.Flow.ClientReceive.WindowBytes != 2<<20 || sb.Flow.ClientReceive.WindowBytes != 8<<20 {
		t.Fatalf("windows = %d (a), %d (b); want 2 MiB and %d", sa.Flow.ClientReceive.WindowBytes, sb.Flow.ClientReceive.WindowBytes, 8<<20)
	}
	got, err := cl.limits.GetLimits(ctx, &ahpv1.GetLimitsRequest{Channel: a.URI})
	if err != nil || len(got.Overridden) != 1 || got.Overridden[0] != "clientReceiveMaximums.windowBytes" {
		t.Fatalf("GetLimits(a) overridden = %v, %v", got.GetOverridden(), err)
	}
	// Clearing restores the daemon's value.
	if _, err := cl.limits.SetLimits(ctx, &ahpv1.SetLimitsRequest{Channel: a.URI, Clear: true, Limits: &ahpv1.Limits{}, UpdateMask: mask("client_receive_maximums.window_bytes")}); err != nil {
		t.Fatal(err)
	}
	sa2, err := c.Subscribe(ctx, a.URI, big)
	if err != nil {
		t.Fatal(err)
	}
	if sa2.Flow.ClientReceive.WindowBytes != 8<<20 {
		t.Fatalf("after clear: window %d, want %d", sa2.Flow.ClientReceive.WindowBytes, 8<<20)
	}
}

// TestChannelExitAndDetails: a terminal whose program exits shows its
// exit code in GetChannel and channels/list, with its command and when it
// was created.
func TestChannelExitAndDetails(t *testing.T) {
	h := start(t, true, nil)
	c := h.control()
	ctx := ctxT(t)
	before := time.Now()
	dir := t.TempDir()
	if _, err := c.terminals.CreateTerminal(ctx, &ahpv1.CreateTerminalRequest{Id: "three", Command: "/bin/sh", Args: []string{"-c", "exit 3"}, Cwd: dir}); err != nil {
		t.Fatal(err)
	}
	var ch *ahpv1.Channel
	for deadline := time.Now().Add(10 * time.Second); ; {
		got, err := c.channels.GetChannel(ctx, &ahpv1.GetChannelRequest{Channel: "ahp-terminal:/three"})
		if err != nil {
			t.Fatal(err)
		}
		if ch = got.Channel; ch.State == "exited" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %s after 10 s", ch.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ch.Exit == nil || ch.Exit.Code != 3 || ch.Exit.Signal != "" || !slices.Equal(ch.Command, []string{"/bin/sh", "-c", "exit 3"}) || ch.Cwd != dir {
		t.Fatalf("GetChannel = exit %v, command %q, cwd %q (want %s)", ch.Exit, ch.Command, ch.Cwd, dir)
	}
	if ct := ch.CreateTime.AsTime(); ct.Before(before.Add(-time.Second)) || ct.After(time.Now()) {
		t.Fatalf("create_time %v, want about %v", ct, before)
	}
	conn, _, err := client.Dial(ctx, h.url, client.Options{Token: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var list struct {
		Channels []registry.ChannelInfo `json:"channels"`
	}
	if err := conn.Call(ctx, "channels/list", map[string]any{}, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Channels) != 1 || list.Channels[0].Exit == nil || list.Channels[0].Exit.Code == nil || *list.Channels[0].Exit.Code != 3 {
		t.Fatalf("channels/list = %+v", list.Channels)
	}
}

// TestControlRefusesUnknownKindsAndTypes: WatchEvents with an unknown
// kind and ListChannels with an unknown type are refused at once (a
// watcher of a kind that never comes would wait forever).
func TestControlRefusesUnknownKindsAndTypes(t *testing.T) {
	h := start(t, false, nil)
	c := h.control()
	ctx := ctxT(t)
	_, err := c.channels.ListChannels(ctx, &ahpv1.ListChannelsRequest{Type: "foo"})
	wantCode(t, err, codes.InvalidArgument, "type")
	stream, err := ahpv1.NewDaemonServiceClient(c.cc).WatchEvents(ctx, &ahpv1.WatchEventsRequest{Kinds: []string{"channel.created", "bogus"}})
	if err == nil {
		_, err = stream.Recv()
	}
	wantCode(t, err, codes.InvalidArgument, "kinds[1]")
}

// TestControlTokenListOrderAndParent: ListTokens lists in creation order
// (tok-9 before tok-10) with each token's creation time, and a page's
// reconnect token names the ticket it came from.
func TestControlTokenListOrderAndParent(t *testing.T) {
	h := start(t, false, nil)
	c := h.control()
	ctx := ctxT(t)
	var ticket string
	for i := range 11 {
		r, err := c.tokens.CreateToken(ctx, &ahpv1.CreateTokenRequest{SingleUse: i == 0})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			ticket = r.Token.Id
			conn, _, err := client.Dial(ctx, h.url, client.Options{Token: r.Secret})
			if err != nil {
				t.Fatal(err)
			}
			conn.Close()
		}
	}
	l, err := c.tokens.ListTokens(ctx, &ahpv1.ListTokensRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	var parent string
	for i, tok := range l.Tokens {
		ids = append(ids, tok.Id)
		if tok.CreateTime == nil || i > 0 && tok.CreateTime.AsTime().Before(l.Tokens[i-1].CreateTime.AsTime()) {
			t.Fatalf("token %s: create_time %v out of order", tok.Id, tok.CreateTime)
		}
		if tok.ParentId != "" {
			parent = tok.ParentId
		}
	}
	if i9, i10 := slices.Index(ids, "tok-9"), slices.Index(ids, "tok-10"); i9 < 0 || i10 < 0 || i9 > i10 {
		t.Fatalf("ListTokens ids %v, want tok-9 before tok-10", ids)
	}
	if parent != ticket {
		t.Fatalf("the reconnect token's parent_id = %q, want the ticket %s", parent, ticket)
	}
}
