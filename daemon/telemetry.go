package daemon

import (
	"context"
	"time"

	"github.com/ahp-dev/ahpd/telemetry"
)

// daemonFiguresTimeout bounds one collection of the daemon's figures
// (each connection's run loop answers for itself).
const daemonFiguresTimeout = time.Second

// daemonFigures is the "daemon" telemetry source's callback: ahpd's own
// figures, summed over its connections and subscriptions.
func (s *Server) daemonFigures(now time.Time) []telemetry.Sample {
	ctx, cancel := context.WithTimeout(context.Background(), daemonFiguresTimeout)
	defer cancel()
	var subs, bytesOut, wireOut, bytesIn, resets, dropped, snapshots, queued int64
	vs := s.sess.ListViewers(ctx)
	for _, v := range vs {
		bytesOut += v.BytesOut
		bytesIn += v.BytesIn
		wireOut += v.WireBytesOut
		resets += v.Resets
		for _, sub := range v.Subscriptions {
			subs++
			dropped += sub.BytesDropped
			snapshots += sub.Snapshots
			queued += sub.Queued
		}
	}
	t := telemetry.UnixMilli(now.Unix(), int64(now.Nanosecond()))
	sample := func(name string, v int64) telemetry.Sample {
		return telemetry.Sample{T: t, Name: name, Value: float64(v)}
	}
	return []telemetry.Sample{
		sample("ahpd_connections", int64(len(vs))),
		sample("ahpd_subscriptions", subs),
		sample("ahpd_channels", int64(len(s.Registry().List()))),
		sample("ahpd_sent_bytes", bytesOut),
		sample("ahpd_received_bytes", bytesIn),
		sample("ahpd_wire_sent_bytes", wireOut),
		sample("ahpd_dropped_bytes", dropped),
		sample("ahpd_queued_bytes", queued),
		sample("ahpd_snapshots", snapshots),
		sample("ahpd_resets", resets),
	}
}
