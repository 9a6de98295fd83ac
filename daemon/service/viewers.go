package service

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ahp-dev/ahpd/daemon/events"
	"github.com/ahp-dev/ahpd/daemon/session"
	"github.com/ahp-dev/ahpd/internal/wire"
)

// ConnectionCount returns the number of open viewer connections.
func (s *Service) ConnectionCount() int { return s.viewers.ConnectionCount() }

// ListViewers lists the open connections, oldest first (see
// session.Server.ListViewers).
func (s *Service) ListViewers(ctx context.Context) []session.ViewerInfo {
	return s.viewers.ListViewers(ctx)
}

// DisconnectViewer closes the connection id with WebSocket close code 1008
// and reason (at most 123 bytes of UTF-8; empty: "disconnected by
// operator").
func (s *Service) DisconnectViewer(ctx context.Context, id, reason string) error {
	if len(reason) > maxCloseReason || !utf8.ValidString(reason) {
		return argErr("reason", "must be valid UTF-8 of at most %d bytes (a WebSocket close frame), got %d bytes", maxCloseReason, len(reason))
	}
	if reason == "" {
		reason = wire.ReasonKickedFallback
	}
	tokenID, parent, ok := s.viewers.Kick(id, reason)
	if !ok {
		return fmt.Errorf("%w: %s", session.ErrViewerNotFound, id)
	}
	// A viewer that came with a ticket would be back in a moment with its
	// reconnect token: revoke that (and close the connections sharing it).
	var revoked []string
	if parent != "" {
		revoked = s.tokens.RevokeAll(tokenID)
		s.viewers.RecheckTokens()
	}
	s.log.Info("viewer disconnected by operator", "conn", id, "reason", reason, "revoked", revoked)
	return nil
}

// ConnectionCounters are the counters of a connection (see ViewerInfo).
type ConnectionCounters struct {
	FramesIn, BytesIn, MessagesOut, BytesOut int64
	Resets, DroppedNotifications             int64
	Subscriptions                            int64
	WireBytesOut, WireBytesIn                int64 // socket bytes: compressed, framed
}

func (a *ConnectionCounters) add(b ConnectionCounters) {
	a.FramesIn += b.FramesIn
	a.BytesIn += b.BytesIn
	a.MessagesOut += b.MessagesOut
	a.BytesOut += b.BytesOut
	a.Resets += b.Resets
	a.DroppedNotifications += b.DroppedNotifications
	a.Subscriptions += b.Subscriptions
	a.WireBytesOut += b.WireBytesOut
	a.WireBytesIn += b.WireBytesIn
}

// ConnectionStats are the counters of one open connection.
type ConnectionStats struct {
	Viewer string
	ConnectionCounters
}

// ChannelStats sum the counters of a channel's live subscriptions.
type ChannelStats struct {
	Channel, Type string
	Viewers       int64
	SentBytes     int64 // UTF-16
	Consumed      int64 // UTF-16
	DroppedBytes  int64
	Snapshots     int64
	Stalled       int64
}

// Stats are the daemon's traffic counters. Totals sum the open
// connections: a connection's counters leave them when it closes.
type Stats struct {
	Totals      ConnectionCounters
	Connections []ConnectionStats
	Channels    []ChannelStats
}

// Stats collects the counters of the open connections and their channels.
func (s *Service) Stats(ctx context.Context) Stats {
	var st Stats
	byURI := map[string]*ChannelStats{}
	for _, ch := range s.registry.List() {
		st.Channels = append(st.Channels, ChannelStats{Channel: ch.URI, Type: ch.Type})
	}
	for i := range st.Channels {
		byURI[st.Channels[i].Channel] = &st.Channels[i]
	}
	for _, v := range s.ListViewers(ctx) {
		c := ConnectionCounters{
			FramesIn: v.FramesIn, BytesIn: v.BytesIn, MessagesOut: v.FramesOut, BytesOut: v.BytesOut,
			Resets: v.Resets, DroppedNotifications: v.Dropped, Subscriptions: int64(len(v.Subscriptions)),
			WireBytesOut: v.WireBytesOut, WireBytesIn: v.WireBytesIn,
		}
		st.Connections = append(st.Connections, ConnectionStats{Viewer: v.ID, ConnectionCounters: c})
		st.Totals.add(c)
		for _, sub := range v.Subscriptions {
			cs := byURI[sub.Channel]
			if cs == nil {
				continue // closed meanwhile
			}
			cs.Viewers++
			cs.SentBytes += sub.Sent
			cs.Consumed += sub.Consumed
			cs.DroppedBytes += sub.BytesDropped
			cs.Snapshots += sub.Snapshots
			if sub.Stalled {
				cs.Stalled++
			}
		}
	}
	return st
}

// EventFilter selects events for WatchEvents.
type EventFilter struct {
	Kinds   []string // empty: all
	Channel string   // empty: all
	// After resumes a watch after the event of this seq (events.Bus's
	// WatchAfter); 0: the events from now on.
	After uint64
}

func (f EventFilter) match(e events.Event) bool {
	return (len(f.Kinds) == 0 || slices.Contains(f.Kinds, e.Kind)) && (f.Channel == "" || f.Channel == e.Channel)
}

// maxEventKinds bounds EventFilter.Kinds.
const maxEventKinds = 32

// WatchEvents calls send with each batch of events matching f (and the
// count of events lost because the watcher fell behind) until ctx ends or
// send fails. The first call has no events: it is made once the watch is in
// place. It returns ctx's error or send's.
func (s *Service) WatchEvents(ctx context.Context, f EventFilter, send func(evs []events.Event, lost int) error) error {
	if len(f.Kinds) > maxEventKinds {
		return argErr("kinds", "at most %d kinds", maxEventKinds)
	}
	for i, k := range f.Kinds {
		if !slices.Contains(events.Kinds, k) {
			return argErr(fmt.Sprintf("kinds[%d]", i), "unknown kind %q (kinds: %s)", session.Truncate(k, 64), strings.Join(events.Kinds, ", "))
		}
	}
	next, stop := s.Watch()
	if f.After > 0 {
		next, stop = s.events.WatchAfter(f.After)
	}
	defer stop()
	// An empty first batch tells the caller the watch is in place.
	if err := send(nil, 0); err != nil {
		return err
	}
	for {
		evs, lost, ok := next(ctx.Done())
		if !ok {
			return ctx.Err()
		}
		out := evs[:0]
		for _, e := range evs {
			if f.match(e) {
				out = append(out, e)
			}
		}
		if len(out) == 0 && lost == 0 {
			continue
		}
		if err := send(out, lost); err != nil {
			return err
		}
	}
}
