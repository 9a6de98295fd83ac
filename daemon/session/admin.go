package session

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/ahp-dev/ahpd/flow"
)

// ViewerStats are a subscriber's counters: BytesDropped by the loss
// policy, Snapshots sent (the initial one included), bytes Queued for
// it and not yet pulled.
type ViewerStats = flow.SubscriberStats

// SubscriptionInfo describes one subscription of a viewer connection.
type SubscriptionInfo struct {
	ID          string
	Channel     string
	Sent        int64 // host→client bytes reserved (UTF-16)
	Consumed    int64 // host→client bytes credited by the client
	Outstanding int64
	Window      int64
	Stalled     bool // the window is shut
	ViewerStats
}

// ViewerInfo describes one viewer connection.
type ViewerInfo struct {
	ID            string
	Remote        string
	Client        string
	ClientVersion string
	Role          string
	Token         string // the id of the token it authenticated with ("" for the admin token)
	TokenParent   string // for a reconnect token: the ticket it was derived from
	Opened        time.Time
	Initialized   bool
	FramesIn      int64
	FramesOut     int64
	BytesIn       int64
	BytesOut      int64
	Resets        int64
	Dropped       int64 // notifications for unknown subscriptions
	WireBytesOut  int64 // bytes written to the socket (compressed, framed)
	WireBytesIn   int64 // bytes read from the socket
	Subscriptions []SubscriptionInfo
}

// ErrViewerNotFound is returned for an unknown connection id.
var ErrViewerNotFound = errors.New("viewer not found")

// inspect asks the connection's run loop for its state.
func (c *conn) inspect(ctx context.Context) (ViewerInfo, bool) {
	reply := make(chan ViewerInfo, 1)
	select {
	case c.queries <- reply:
	case <-ctx.Done():
		return ViewerInfo{}, false
	}
	select {
	case v := <-reply:
		return v, true
	case <-ctx.Done():
		return ViewerInfo{}, false
	}
}

// info builds ViewerInfo; run loop only.
func (c *conn) info() ViewerInfo {
	v := ViewerInfo{
		ID: c.id, Remote: c.remote, Client: c.clientName, ClientVersion: c.clientVersion, Role: c.grant.Role.String(), Opened: c.opened,
		Initialized: c.initialized, Token: c.grant.ID, TokenParent: c.grant.Parent,
		FramesIn: c.stats.framesIn.Load(), FramesOut: c.stats.framesOut.Load(),
		BytesIn: c.stats.bytesIn.Load(), BytesOut: c.stats.bytesOut.Load(),
		Resets: c.stats.resets.Load(), Dropped: c.stats.droppedNotifications.Load(),
	}
	if c.wire != nil {
		v.WireBytesOut, v.WireBytesIn = c.wire.Written(), c.wire.in.Load()
	}
	for _, s := range c.subs {
		w := s.stream.Window()
		si := SubscriptionInfo{
			ID: s.id, Channel: s.ch.URI, Sent: w.Sent(), Consumed: w.Consumed(), Outstanding: w.Outstanding(),
			Window: w.Limits().WindowBytes, Stalled: w.Outstanding() >= w.Limits().WindowBytes,
		}
		si.ViewerStats = s.sub.Stats()
		v.Subscriptions = append(v.Subscriptions, si)
	}
	sort.Slice(v.Subscriptions, func(i, j int) bool { return v.Subscriptions[i].ID < v.Subscriptions[j].ID })
	return v
}
