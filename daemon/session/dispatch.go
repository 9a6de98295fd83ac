package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/ahp-dev/ahpd/flow"

	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/daemon/events"
	"github.com/ahp-dev/ahpd/daemon/registry"
	"github.com/ahp-dev/ahpd/internal/wire"
)

// dispatch runs one JSON-RPC request or notification (PROTOCOL.md §2–§7).
func (c *conn) dispatch(req *request) error {
	switch req.Method {
	case "initialize":
		return c.initialize(req)
	case "channels/list":
		return c.channelsList(req)
	case "channels/watch":
		return c.watchChannels(req)
	case "channels/create":
		return c.channelsCreate(req)
	case "channels/check":
		return c.channelsCheck(req)
	case "channels/restart", "channels/close":
		return c.channelsManage(req)
	case "subscribe":
		return c.subscribe(req)
	case "unsubscribe":
		return c.unsubscribe(req)
	case "channel/credit":
		return c.credit(req)
	case "channel/reset":
		return c.clientReset(req)
	case "channel/window":
		return c.clientWindow(req)
	case "recordings/list":
		return c.recordingsList(req)
	case "recordings/read":
		return c.recordingsRead(req)
	case "recordings/index":
		return c.recordingsIndex(req)
	case "recordings/keyframe":
		return c.recordingsKeyframe(req)
	case "ping":
		// The round trip a keystroke's echo sees (PROTOCOL.md §6,
		// "Measuring the round trip"): answered on the control lane.
		if req.isNotification() {
			return nil
		}
		return c.respond(req, struct{}{}, nil)
	}
	return c.kindRequest(req)
}

// decodeParams unmarshals params, answering -32602 on failure.
func decodeParams(req *request, v any) *RPCError {
	if len(req.Params) == 0 {
		return rpcErr(flow.ErrCodeInvalidParams, "params missing")
	}
	if err := json.Unmarshal(req.Params, v); err != nil {
		return rpcErr(flow.ErrCodeInvalidParams, "invalid params: "+err.Error())
	}
	return nil
}

type initializeParams struct {
	ProtocolVersion string  `json:"protocolVersion"`
	Token           *string `json:"token"`
	Capabilities    struct {
		WindowUpdates bool `json:"windowUpdates"`
	} `json:"capabilities"`
	Client struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"client"`
}

func (c *conn) initialize(req *request) error {
	if c.initialized {
		return c.respondOr(req, rpcErr(flow.ErrCodeInvalidRequest, "already initialized"))
	}
	var p initializeParams
	if e := decodeParams(req, &p); e != nil {
		_ = c.respond(req, nil, e)
		return closeWith(websocket.StatusPolicyViolation, "bad initialize")
	}
	if p.ProtocolVersion != "ahp/1" {
		_ = c.respond(req, nil, rpcErr(flow.ErrCodeInvalidParams, "protocolVersion: unsupported "+quoteClient(p.ProtocolVersion)+`, want "ahp/1"`))
		return closeWith(websocket.StatusPolicyViolation, "unsupported protocol version")
	}
	secret := c.bearer
	if p.Token != nil {
		secret = *p.Token
	}
	grant, err := c.srv.tokens.Authenticate(secret)
	if err != nil {
		if n, ok := c.srv.authLog.allow(c.srv.now()); ok {
			// Rate-limited: a client retrying in a loop must not flood
			// the log.
			c.log.Info("authentication failed", "conn", c.id, "remote", c.remote, "err", err, "suppressed", n)
		}
		msg := "unauthorized: unknown, used or revoked token"
		if errors.Is(err, auth.ErrTokenExpired) {
			msg = "unauthorized: token expired"
		}
		_ = c.respond(req, nil, rpcErr(flow.ErrCodeUnauthorized, msg))
		return closeWith(websocket.StatusPolicyViolation, wire.ReasonUnauthorized)
	}
	c.grant = grant
	c.initialized = true
	if c.wire != nil {
		c.srv.pendingSocks.remove(c.wire) // no longer pending (maxPendingConnections)
	}
	var r wire.InitializeResult
	r.ProtocolVersion = "ahp/1"
	r.Server.Name, r.Server.Version, r.Server.Started = "ahpd", c.srv.version, c.srv.started
	r.Capabilities.FlowControl.HostReceiveDefaults = c.limits.HostReceive
	r.Capabilities.FlowControl.Maximums = c.limits.ClientReceiveMaximums
	r.Capabilities.FlowControl.ClientDefaults = c.limits.ClientReceiveDefaults
	r.Capabilities.WindowUpdates = true
	c.windowUpdates = p.Capabilities.WindowUpdates
	r.Limits.MaxIDLength = c.limits.MaxIDLength
	r.Limits.MaxInboundMessageBytes = c.limits.MaxInboundMessageBytes
	r.Limits.MaxSubscriptions = c.limits.MaxSubscriptions
	r.Limits.HeartbeatIntervalMs = c.limits.HeartbeatInterval.Milliseconds()
	r.Access.Role = grant.Role.String()
	r.Access.Channels = grant.Channels
	if grant.SingleUse {
		// A ticket works once; the page needs a credential to reconnect
		// with. It gets one with the same rights, for a day.
		g := grant
		g.SingleUse = false
		g.Parent = grant.ID // revoking the ticket revokes this token too
		g.Expires = c.srv.now().Add(c.srv.cfg.ReconnectTokenTTL())
		r.ReconnectToken, _ = c.srv.tokens.Mint(g)
	}
	c.clientName = Truncate(p.Client.Name, 128)
	p.Client.Version = Truncate(p.Client.Version, 128)
	c.clientVersion = p.Client.Version
	c.srv.events.Publish(events.Event{Kind: "viewer.joined", Viewer: c.id, Detail: c.clientName})
	c.log.Info("viewer initialized", "conn", c.id, "client", c.clientName, "clientVersion", p.Client.Version, "role", grant.Role.String())
	return c.respond(req, r, nil)
}

// channelsCreate creates a terminal running the login shell: the page's
// "New terminal" (docs/protocol-decisions.md, "The first ten minutes"). It
// needs role control over all channels, as subscribe {create} does; a
// program of the viewer's choosing is not on offer (that stays with the
// control plane).
func (c *conn) channelsCreate(req *request) error {
	if c.grant.Role != auth.RoleControl || len(c.grant.Channels) != 0 {
		return c.respondOr(req, rpcErr(flow.ErrCodeForbidden, "forbidden: creating a channel needs role control over all channels"))
	}
	var p struct {
		Type  string `json:"type"`
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	if e := decodeParams(req, &p); e != nil {
		return c.respondOr(req, e)
	}
	if p.Type != "terminal" {
		return c.respondOr(req, rpcErr(flow.ErrCodeInvalidParams, `type: channels/create makes terminals (type "terminal"); TCP channels come from subscribe {create}, telemetry from the control plane`))
	}
	if len(p.ID) > c.limits.MaxIDLength || len(p.Title) > 256 {
		return c.respondOr(req, rpcErr(flow.ErrCodeInvalidParams, "id or title too long"))
	}
	ch, err := c.srv.host.CreateShell(p.ID, p.Title)
	if err != nil {
		return c.respondOr(req, channelErr(err))
	}
	c.log.Info("channel created by a viewer", "conn", c.id, "channel", ch.URI)
	return c.respond(req, map[string]any{"channel": ch.URI}, nil)
}

// channelsCheck answers whether subscribe {create} with the same create
// member would pass the checks made before the channel exists — the
// role (control over all channels), the create member, the kind's own (a
// TCP target against the allow-list) — without creating or dialing
// anything: {} or the error the subscribe would get (-32003 naming a
// target the allow-list refuses). ahpctl forward asks it before it
// listens (docs/protocol-decisions.md, "forward's checks at start").
func (c *conn) channelsCheck(req *request) error {
	var p struct {
		Create json.RawMessage `json:"create"`
	}
	if e := decodeParams(req, &p); e != nil {
		return c.respondOr(req, e)
	}
	if len(p.Create) == 0 {
		return c.respondOr(req, rpcErr(flow.ErrCodeInvalidParams, "create: required (what subscribe {create} would get)"))
	}
	if c.grant.Role != auth.RoleControl || len(c.grant.Channels) != 0 {
		return c.respondOr(req, rpcErr(flow.ErrCodeForbidden, "forbidden: creating a channel needs role control over all channels"))
	}
	var k struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(p.Create, &k); err != nil {
		return c.respondOr(req, rpcErr(flow.ErrCodeInvalidParams, "create: "+err.Error()))
	}
	if err := c.srv.host.CheckCreate(k.Type, p.Create); err != nil {
		return c.respondOr(req, channelErr(err))
	}
	return c.respond(req, map[string]any{}, nil)
}

// channelsManage restarts an exited terminal or closes a channel: the
// page's Restart and Close. Each needs role control over the channel.
func (c *conn) channelsManage(req *request) error {
	var p struct {
		Channel string `json:"channel"`
	}
	if e := decodeParams(req, &p); e != nil {
		return c.respondOr(req, e)
	}
	if e := c.tooLong(subRef{Channel: p.Channel}); e != nil {
		return c.respondOr(req, e)
	}
	if c.grant.Role != auth.RoleControl || !c.grant.Allows(p.Channel) {
		return c.respondOr(req, rpcErr(flow.ErrCodeForbidden, "forbidden: "+strings.TrimPrefix(req.Method, "channels/")+" needs role control over the channel"))
	}
	if _, ok := c.srv.registry.Get(p.Channel); !ok {
		return c.respondOr(req, rpcErr(flow.ErrCodeChannelNotFound, "channel not found: "+quoteClient(p.Channel)))
	}
	if req.Method == "channels/close" {
		// A terminal's hang-up may take its kill timeout: off the run
		// loop. Its viewers get channel/reset channel-closed.
		c.srv.closeSoon(p.Channel)
		c.log.Info("channel closed by a viewer", "conn", c.id, "channel", p.Channel)
		return c.respond(req, map[string]any{}, nil)
	}
	ch, err := c.srv.host.RestartTerminal(p.Channel)
	if err != nil {
		return c.respondOr(req, channelErr(err))
	}
	return c.respond(req, map[string]any{"channel": ch.URI}, nil)
}

func (c *conn) channelsList(req *request) error {
	list := []registry.ChannelInfo{}
	for _, ch := range c.srv.registry.List() {
		if c.grant.Allows(ch.URI) {
			list = append(list, ch.Info())
		}
	}
	return c.respond(req, map[string]any{"channels": list}, nil)
}

type subscribeParams struct {
	Channel     string `json:"channel"`
	FlowControl *struct {
		Receive *flow.ReceiveLimits `json:"receive"`
	} `json:"flowControl"`
	Resume *flow.ResumeRequest `json:"resume"`
	Create json.RawMessage     `json:"create"`
}

func (c *conn) subscribe(req *request) error {
	// Limits changed at run time apply to new subscriptions at once (§10).
	c.limits = c.srv.host.Limits()
	var p subscribeParams
	if e := decodeParams(req, &p); e != nil {
		return c.respondOr(req, e)
	}
	if len(p.Channel) > c.limits.MaxIDLength {
		return c.respondOr(req, rpcErr(flow.ErrCodeInvalidRequest, "channel: longer than maxIdLength"))
	}
	full := func() *RPCError {
		if len(c.subs)+len(c.pending) >= c.limits.MaxSubscriptions {
			return rpcErr(flow.ErrCodeLimitExceeded, fmt.Sprintf("limit exceeded: at most %d subscriptions per connection (maxSubscriptions)", c.limits.MaxSubscriptions))
		}
		return nil
	}
	var (
		ch      *registry.Channel
		created bool
	)
	if p.Create != nil {
		// §8: creating needs role control over all channels.
		if c.grant.Role != auth.RoleControl || len(c.grant.Channels) != 0 {
			return c.respondOr(req, rpcErr(flow.ErrCodeForbidden, "forbidden: creating a channel needs role control over all channels"))
		}
		var k struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(p.Create, &k); err != nil {
			return c.respondOr(req, rpcErr(flow.ErrCodeInvalidParams, "create: "+err.Error()))
		}
		// Everything that can refuse the subscribe comes before the
		// channel exists (a new channel has no overrides): a refused
		// subscribe creates nothing.
		if e := full(); e != nil {
			return c.respondOr(req, e)
		}
		if _, e := c.negotiate(p, c.limits); e != nil {
			return c.respondOr(req, e)
		}
		var err error
		owner := Owner{Token: c.grant.ID, Budget: c.sender.Shared()}
		if c.grant.Admin {
			owner.Token = ""
		}
		if ch, err = c.srv.host.CreateChannel(k.Type, p.Create, owner); err != nil {
			return c.respondOr(req, channelErr(err))
		}
		created = true
	} else {
		// Scope first: a channel outside the credential's scope gets
		// -32003 whether it exists or not, so a scoped token cannot probe
		// for the channels it does not reach (docs/protocol-decisions.md).
		if !c.grant.Allows(p.Channel) {
			return c.respondOr(req, rpcErr(flow.ErrCodeForbidden, "forbidden: the credential does not reach this channel"))
		}
		var ok bool
		if ch, ok = c.srv.registry.Get(p.Channel); !ok {
			if p.Resume != nil {
				// §8: a resume that finds its channel gone (closed, or its
				// retention expired) failed.
				return c.respondOr(req, rpcErr(flow.ErrCodeResumeFailed, "resume failed: channel not found (closed, or its retention expired): "+quoteClient(p.Channel)))
			}
			return c.respondOr(req, rpcErr(flow.ErrCodeChannelNotFound, "channel not found: "+quoteClient(p.Channel)))
		}
		if ch.State() == "closed" {
			return c.respondOr(req, rpcErr(flow.ErrCodeChannelNotFound, "channel not available: "+quoteClient(p.Channel)))
		}
		if e := full(); e != nil {
			return c.respondOr(req, e)
		}
	}
	// The channel's overrides of the flow-control limits, if any.
	chl := c.srv.host.LimitsFor(ch.URI)
	got, e := c.negotiate(p, chl)
	if e != nil {
		if created {
			c.srv.closeSoon(ch.URI)
		}
		return c.respondOr(req, e)
	}
	// The subscription's own state counts before it exists (budgets.go).
	if c.queued.Left() < subscriptionCost {
		if created {
			c.srv.closeSoon(ch.URI)
		}
		return c.respondOr(req, rpcErr(flow.ErrCodeLimitExceeded, "limit exceeded: no memory left for another subscription (maxBufferedBytes, maxBufferedBytesPerToken, maxTotalBufferedBytes)"))
	}
	c.queued.Take(subscriptionCost)
	c.nextSub++
	s := &subscription{id: "s" + strconv.Itoa(c.nextSub), ch: ch, reqID: req.ID, send: got, receive: chl.HostReceive, created: created}
	role := flow.RoleView
	if c.grant.Role == auth.RoleControl {
		role = flow.RoleControl
	}
	// A wake before the subscription is registered is harmless: the run
	// loop handles it after this function returns.
	sub, err := ch.Impl().Attach(flow.AttachRequest{
		Wake: func() { c.wake(s) }, Window: got.WindowBytes, Role: role, Resume: p.Resume,
		Receive: chl.HostReceive, Release: func(pos flow.Position) { c.released(s, pos) },
		Queue: c.queued,
	})
	if err != nil {
		s.ended = true // a wake queued by Attach must not reach the Sender
		c.queued.Give(subscriptionCost)
		if created {
			c.srv.closeSoon(ch.URI)
		}
		return c.respondOr(req, channelErr(err))
	}
	s.sub = sub
	ch.Joined()
	c.pending[s.id] = s
	return c.start(s)
}

// negotiate returns the client's receive limits for a subscribe under
// the limits l (the channel's, with its overrides).
func (c *conn) negotiate(p subscribeParams, l config.Limits) (flow.ReceiveLimits, *RPCError) {
	want := l.ClientReceiveDefaults
	if p.FlowControl != nil && p.FlowControl.Receive != nil {
		want = *p.FlowControl.Receive
	}
	got, err := flow.Negotiate(want, l.ClientReceiveMaximums)
	if err != nil {
		return got, rpcErr(flow.ErrCodeInvalidParams, "flowControl.receive."+err.Error())
	}
	return got, nil
}

// start answers a pending subscribe once its Subscriber is Ready, and
// opens its Stream. Until then it waits, in conn.pending, for a wake-up;
// the run loop goes on meanwhile.
func (c *conn) start(s *subscription) error {
	res, ok, err := s.sub.Ready()
	if err != nil {
		return c.refuse(s, channelErr(err))
	}
	if !ok {
		return nil
	}
	receive := s.receive
	if res.Receiver != nil {
		// A lent Receiver enforces the limits it was made with (and Open
		// resumes it onto a message boundary).
		receive = res.Receiver.Limits()
	}
	st, err := c.sender.Open(flow.StreamConfig{
		Channel:        s.ch.URI,
		SubscriptionID: s.id,
		Source:         s.sub,
		Send:           s.send,
		Receive:        s.receive,
		Receiver:       res.Receiver,
		Journal:        res.Journal,
		Resume:         res.ResumeFrom,
	})
	if errors.Is(err, flow.ErrResume) {
		return c.refuse(s, rpcErr(flow.ErrCodeResumeFailed, "resume failed: "+err.Error()))
	}
	if err != nil {
		return c.refuse(s, rpcErr(flow.ErrCodeInvalidParams, "flowControl.receive: "+err.Error()))
	}
	s.stream, s.receive = st, receive
	delete(c.pending, s.id)
	c.startTuning(s)
	// The response goes to the control lane, which is written before any
	// frame: no frame of s can precede it (§3).
	var result wire.SubscribeResult
	result.SubscriptionID = s.id
	result.FlowControl = wire.FlowControl{ClientReceive: s.send, HostReceive: s.receive}
	result.Initial.Kind = res.Initial
	result.Resume = res.Resume
	if s.created {
		result.Channel = s.ch.URI
	}
	if err := c.queue(encodeResponse(s.reqID, result, nil)); err != nil {
		c.endSub(s)
		return err
	}
	c.subs[s.id] = s
	c.sender.Wake(st)
	c.audit(s, "attach", "")
	c.log.Info("subscribed", "conn", c.id, "sub", s.id, "channel", s.ch.URI, "initial", res.Initial)
	return nil
}

// refuse answers a pending subscribe with an error and drops it (endSub
// closes a channel the subscribe created; the kind gets its lease back).
func (c *conn) refuse(s *subscription, e *RPCError) error {
	c.endSub(s)
	return c.queue(encodeResponse(s.reqID, nil, e))
}

// channelErr is the JSON-RPC error for a channel's refusal.
func channelErr(err error) *RPCError {
	var fe *flow.Error
	if errors.As(err, &fe) {
		return rpcErr(fe.Code, fe.Message)
	}
	return rpcErr(flow.ErrCodeInvalidParams, err.Error())
}

type subRef struct {
	Channel        string `json:"channel"`
	SubscriptionID string `json:"subscriptionId"`
}

// tooLong answers -32600 when a reference's ids exceed maxIdLength, on
// every method that takes one, before anything looks them up (§10).
func (c *conn) tooLong(ref subRef) *RPCError {
	switch {
	case len(ref.SubscriptionID) > c.limits.MaxIDLength:
		return rpcErr(flow.ErrCodeInvalidRequest, "subscriptionId: longer than maxIdLength")
	case len(ref.Channel) > c.limits.MaxIDLength:
		return rpcErr(flow.ErrCodeInvalidRequest, "channel: longer than maxIdLength")
	}
	return nil
}

func (c *conn) lookup(req *request, ref subRef) (*subscription, error) {
	if e := c.tooLong(ref); e != nil {
		return nil, c.respondOr(req, e)
	}
	s := c.subs[ref.SubscriptionID]
	if s == nil || (ref.Channel != "" && ref.Channel != s.ch.URI) {
		return nil, c.respondOr(req, rpcErr(flow.ErrCodeUnknownSubscriber, "unknown subscription: "+quoteClient(ref.SubscriptionID)))
	}
	return s, nil
}

// subOf decodes a request's {channel, subscriptionId} and looks the
// subscription up; when it returns nil, the request has been answered.
func (c *conn) subOf(req *request) (*subscription, error) {
	var p subRef
	if e := decodeParams(req, &p); e != nil {
		return nil, c.respondOr(req, e)
	}
	return c.lookup(req, p)
}

func (c *conn) unsubscribe(req *request) error {
	s, err := c.subOf(req)
	if s == nil {
		return err
	}
	if u, ok := s.sub.(flow.Unsubscriber); ok && !s.ended {
		u.Unsubscribed()
	}
	c.endSub(s)
	c.log.Info("unsubscribed", "conn", c.id, "sub", s.id, "channel", s.ch.URI)
	return c.respond(req, map[string]any{}, nil)
}

func (c *conn) credit(req *request) error {
	var p struct {
		subRef
		ConsumedBytes *int64 `json:"consumedBytes"`
	}
	e := decodeParams(req, &p)
	if long := c.tooLong(p.subRef); long != nil {
		return c.respondOr(req, long)
	}
	if e != nil || p.ConsumedBytes == nil {
		c.stats.droppedNotifications.Add(1)
		if s := c.subs[p.SubscriptionID]; s != nil {
			c.resetSub(s, flow.CodeInvalidCredit, "channel/credit needs an integer consumedBytes")
		}
		return nil
	}
	s := c.subs[p.SubscriptionID]
	c.applyCredit(s, p.Channel != "" && s != nil && p.Channel != s.ch.URI, *p.ConsumedBytes)
	return nil
}

// fastCredit applies a channel/credit notification in the shape every
// client writes (flow.ParseCredit) without encoding/json, as credit
// would; false: b is not in that shape.
func (c *conn) fastCredit(b []byte) bool {
	ch, sub, consumed, ok := flow.ParseCredit(b)
	if !ok || len(ch) > c.limits.MaxIDLength || len(sub) > c.limits.MaxIDLength {
		return false // credit says what is wrong
	}
	s := c.subs[string(sub)]
	c.applyCredit(s, len(ch) > 0 && s != nil && string(ch) != s.ch.URI, consumed)
	return true
}

// applyCredit gives s (nil: no such subscription) the client's credit;
// wrongChannel: the credit named another channel than s's.
func (c *conn) applyCredit(s *subscription, wrongChannel bool, consumed int64) {
	if s == nil || wrongChannel {
		c.stats.droppedNotifications.Add(1)
		return
	}
	if err := c.sender.Credit(s.stream, consumed); err != nil {
		c.resetSub(s, flow.ResetCode(err), err.Error())
	}
}

// clientWindow applies a client's channel/window (PROTOCOL.md §6,
// "Changing a window"): the subscription's host→client window, within the
// bounds subscribe applies. Out of bounds, or without an integer
// windowBytes, it resets the subscription with protocol-error; for an
// unknown subscription it is dropped, as credit is.
func (c *conn) clientWindow(req *request) error {
	var p struct {
		subRef
		WindowBytes *int64 `json:"windowBytes"`
	}
	e := decodeParams(req, &p)
	if long := c.tooLong(p.subRef); long != nil {
		return c.respondOr(req, long)
	}
	s := c.subs[p.SubscriptionID]
	if s == nil || s.stream == nil || (p.Channel != "" && p.Channel != s.ch.URI) {
		c.stats.droppedNotifications.Add(1)
		return nil
	}
	ceiling := c.limits.ClientReceiveMaximums.WindowBytes
	frame := s.stream.Window().Limits().MaximumFrameBytes
	switch {
	case e != nil || p.WindowBytes == nil:
		c.resetSub(s, flow.CodeProtocolError, "channel/window needs an integer windowBytes")
	case *p.WindowBytes < frame || *p.WindowBytes > ceiling:
		c.resetSub(s, flow.CodeProtocolError, fmt.Sprintf("channel/window: windowBytes %d must be between maximumFrameBytes %d and maximums.windowBytes %d", *p.WindowBytes, frame, ceiling))
	default:
		c.sender.SetWindow(s.stream, *p.WindowBytes)
	}
	return nil
}

func (c *conn) clientReset(req *request) error {
	var p subRef
	if e := decodeParams(req, &p); e != nil {
		c.stats.droppedNotifications.Add(1)
		return nil
	}
	if e := c.tooLong(p); e != nil {
		return c.respondOr(req, e)
	}
	if s := c.subs[p.SubscriptionID]; s != nil {
		c.endSub(s)
	}
	return nil
}

// kindRequest passes a request that is not the connection's own to the
// subscriber it names (terminal/resize): kind requests are "kind/verb"
// and carry a subscriptionId.
func (c *conn) kindRequest(req *request) error {
	// A kind request is KIND/NAME for a channel kind (terminal/resize):
	// any other method is not found, whatever its params say (§7), before
	// they are looked at.
	kind, _, ok := strings.Cut(req.Method, "/")
	if !ok || registry.Scheme(kind) == "" {
		return c.respondOr(req, rpcErr(flow.ErrCodeMethodNotFound, "method not found: "+quoteClient(req.Method)))
	}
	s, err := c.subOf(req)
	if s == nil {
		return err
	}
	res, err := s.sub.Request(req.Method, req.Params)
	if err != nil {
		return c.respondOr(req, channelErr(err))
	}
	return c.respond(req, res, nil)
}

// maxQuoted bounds the client input an error message repeats.
const maxQuoted = 64

// quoteClient quotes a client-supplied string for an error message, cut
// to maxQuoted bytes: no error message echoes unbounded client input.
func quoteClient(s string) string {
	if len(s) > maxQuoted {
		return strconv.Quote(Truncate(s, maxQuoted)) + "…"
	}
	return strconv.Quote(s)
}

// Truncate bounds a client-supplied string before it reaches logs and
// events, at a UTF-8 boundary.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
