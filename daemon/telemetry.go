package daemon

import (
	"context"
	"time"

	"github.com/ahp-dev/ahpd/telemetry"
)

// daemonFiguresTimeout bounds one collection of the daemon's figures
// (each connection's run loop answers for itself).
const daemonFiguresTimeout = time.Second

// The viewer counters the daemon's figures turn into per-second rates, in
// the order of viewerTotals.
var daemonRates = [...]string{
	"ahpd_sent_bytes_per_second",
	"ahpd_received_bytes_per_second",
	"ahpd_wire_sent_bytes_per_second",
	"ahpd_dropped_bytes_per_second",
	"ahpd_snapshots_per_second",
	"ahpd_resets_per_second",
}

// viewerTotals are one connection's counters since it opened.
type viewerTotals [len(daemonRates)]int64

// daemonFigures returns a "daemon" telemetry source's callback (one per
// channel: it keeps the previous collection's counters): ahpd's own
// figures, summed over its connections and subscriptions. Counts now are
// gauges (connections, subscriptions, channels, queued bytes); what
// connections count since they opened is a rate per second over the
// interval: the increase of each connection still open, and all of one
// that opened since, so a connection that closes never makes a rate go
// negative. The first collection has no rates.
func (s *Server) daemonFigures() func(now time.Time) []telemetry.Sample {
	// Owned by the source's goroutine, the only caller.
	var prevAt time.Time
	prev := map[string]viewerTotals{}
	return func(now time.Time) []telemetry.Sample {
		ctx, cancel := context.WithTimeout(context.Background(), daemonFiguresTimeout)
		defer cancel()
		var subs, queued int64
		vs := s.sess.ListViewers(ctx)
		cur := make(map[string]viewerTotals, len(vs))
		var inc viewerTotals
		for _, v := range vs {
			tot := viewerTotals{v.BytesOut, v.BytesIn, v.WireBytesOut, 0, 0, v.Resets}
			for _, sub := range v.Subscriptions {
				subs++
				tot[3] += sub.BytesDropped
				tot[4] += sub.Snapshots
				queued += sub.Queued
			}
			cur[v.ID] = tot
			p := prev[v.ID] // zero for a connection opened since
			for i := range tot {
				inc[i] += max(tot[i]-p[i], 0)
			}
		}
		t := telemetry.UnixMilli(now.Unix(), int64(now.Nanosecond()))
		sample := func(name string, v float64) telemetry.Sample {
			return telemetry.Sample{T: t, Name: name, Value: v}
		}
		out := []telemetry.Sample{
			sample("ahpd_connections", float64(len(vs))),
			sample("ahpd_subscriptions", float64(subs)),
			sample("ahpd_channels", float64(len(s.Registry().List()))),
			sample("ahpd_queued_bytes", float64(queued)),
		}
		if dt := now.Sub(prevAt).Seconds(); !prevAt.IsZero() && dt > 0 {
			for i, name := range daemonRates {
				out = append(out, sample(name, float64(inc[i])/dt))
			}
		}
		prev, prevAt = cur, now
		return out
	}
}
