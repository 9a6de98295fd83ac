// Package metrics is ahpd's Prometheus endpoint (/metrics): the counters
// of the service's Stats per connection and per channel, gauges of
// channels, connections and tokens, per-terminal figures, the daemon's TCP
// totals (service.TCPStats), the recordings store's figures, per-telemetry-channel samples, drops and
// history, and the Go runtime's and the process's figures under the names
// Prometheus' Go client gives them. A scrape reads everything afresh; the
// handler is safe for concurrent use and bounds scrapes in flight.
//
// It writes the text exposition format (version 0.0.4) itself: the Go
// client library and its dependencies cost an idle daemon 0.9 MB of
// resident memory at start, for a format of a few lines per metric
// (docs/benchmarks-memory.md).
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/registry"
	"github.com/ahp-dev/ahpd/daemon/service"
	"github.com/ahp-dev/ahpd/daemon/session"
	"github.com/ahp-dev/ahpd/pty"
	"github.com/ahp-dev/ahpd/pty/record"
	"github.com/ahp-dev/ahpd/telemetry"
)

// Source is what the metrics read: the daemon's service.
type Source interface {
	Stats(ctx context.Context) service.Stats
	ConnectionCount() int
	Registry() *registry.Registry
	Tokens() *auth.Tokens
	TCPStats(ctx context.Context) service.TCPStats
	// RecordingStats are the recordings store's figures (zero without
	// one).
	RecordingStats() record.StoreStats
}

// Options configure Handler.
type Options struct {
	// Version is ahpd_info's version label.
	Version string
	// Public serves /metrics without a token. Default false: a request
	// needs `Authorization: Bearer TOKEN` with the admin token or a minted
	// token that reaches every channel (its channel list is empty).
	Public bool
	// ScrapeTimeout bounds collecting the per-connection counters. Default 5 s.
	ScrapeTimeout time.Duration
	// MemoryReturns, when set, is ahpd_memory_returns_total: the times
	// the daemon gave its free memory back to the system after a load.
	MemoryReturns func() int64
}

// Handler returns the Prometheus endpoint: the counters of GetStats
// (per connection and per channel, and their totals), gauges of channels,
// connections and tokens, and the Go runtime's and the process's figures.
// Mount it on the HTTP listener, e.g. mux.Handle("GET /metrics", metrics.Handler(svc, metrics.Options{})).
// At most four scrapes run at once; more get 503.
func Handler(s Source, opts Options) http.Handler {
	if opts.ScrapeTimeout == 0 {
		opts.ScrapeTimeout = 5 * time.Second
	}
	m := &collector{s: s, version: opts.Version, timeout: opts.ScrapeTimeout, memoryReturns: opts.MemoryReturns}
	inFlight := make(chan struct{}, 4)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case inFlight <- struct{}{}:
			defer func() { <-inFlight }()
		default:
			http.Error(w, "too many scrapes in flight", http.StatusServiceUnavailable)
			return
		}
		var e exposition
		m.collect(r.Context(), &e)
		body := e.bytes()
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	})
	if opts.Public {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g, err := s.Tokens().Authenticate(session.BearerToken(r))
		if err != nil || !g.Admin && len(g.Channels) > 0 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="ahpd metrics"`)
			http.Error(w, "metrics need Authorization: Bearer with the admin token or a token for all channels", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// contentType is the text exposition format's.
const contentType = "text/plain; version=0.0.4; charset=utf-8"

var (
	connLabels = []string{"viewer"}
	chanLabels = []string{"channel", "type"}

	descInfo        = newDesc(gauge, "ahpd_info", "Build information; the value is 1.", "version")
	descConnections = newDesc(gauge, "ahpd_connections", "Open viewer WebSocket connections.")
	descChannels    = newDesc(gauge, "ahpd_channels", "Channels in the registry by type and state.", "type", "state")
	descTokens      = newDesc(gauge, "ahpd_tokens", "Live minted tokens (the admin token excluded).")

	descFramesIn    = newDesc(counter, "ahpd_connection_frames_in_total", "channel/frame messages received on the connection.", connLabels...)
	descBytesIn     = newDesc(counter, "ahpd_connection_bytes_in_total", "UTF-8 bytes of the frames received on the connection.", connLabels...)
	descMessagesOut = newDesc(counter, "ahpd_connection_messages_out_total", "WebSocket messages written to the connection (frames, responses, credit, resets).", connLabels...)
	descBytesOut    = newDesc(counter, "ahpd_connection_bytes_out_total", "UTF-8 bytes written to the connection, before compression.", connLabels...)
	descWireOut     = newDesc(counter, "ahpd_connection_wire_bytes_out_total", "Bytes written to the connection's socket (after compression and framing).", connLabels...)
	descResets      = newDesc(counter, "ahpd_connection_resets_total", "channel/reset sent to the connection.", connLabels...)
	descDropped     = newDesc(counter, "ahpd_connection_dropped_notifications_total", "Notifications dropped (unknown subscription, malformed).", connLabels...)
	descSubs        = newDesc(gauge, "ahpd_connection_subscriptions", "Live subscriptions of the connection.", connLabels...)

	descChanViewers   = newDesc(gauge, "ahpd_channel_viewers", "Live subscriptions to the channel.", chanLabels...)
	descChanSent      = newDesc(gauge, "ahpd_channel_sent_bytes", "UTF-16 bytes sent on the channel's live subscriptions.", chanLabels...)
	descChanConsumed  = newDesc(gauge, "ahpd_channel_consumed_bytes", "UTF-16 bytes credited on the channel's live subscriptions.", chanLabels...)
	descChanDropped   = newDesc(gauge, "ahpd_channel_dropped_bytes", "Output bytes dropped by the loss policy for the channel's live subscriptions.", chanLabels...)
	descChanSnapshots = newDesc(gauge, "ahpd_channel_snapshots", "Snapshots sent on the channel's live subscriptions.", chanLabels...)
	descTermEmuWakes  = newDesc(counter, "ahpd_terminal_emulator_wakeups_total", "Wake-ups of the terminal's emulator by its reader: now (output that paused: an echo) or batched (the lazy timer: a flood).", "channel", "when")
	descTermPaced     = newDesc(counter, "ahpd_terminal_paced_seconds_total", "Time the terminal's output was paced so that typing into another terminal went first (--no-typing-first turns pacing off).", "channel")
	descChanStalled   = newDesc(gauge, "ahpd_channel_stalled_subscriptions", "Live subscriptions of the channel whose window is shut.", chanLabels...)

	descTCPChannels = newDesc(gauge, "ahpd_tcp_channels", "TCP channels in the registry (dialing, open or retained for a resume).")
	descTCPBytes    = newDesc(counter, "ahpd_tcp_bytes_total", "Bytes of TCP channels since the daemon started, summed over the live channels and those that ended: in = written to the targets (client→target), out = read from them (target→client).", "direction")
	descTCPResumes  = newDesc(counter, "ahpd_tcp_resumes_total", "Resumes of TCP channels after a consumer's reconnect since the daemon started, summed over the live channels and those that ended.")

	descTelSamples = newDesc(counter, "ahpd_telemetry_samples_total", "Samples the telemetry channel's source published.", "channel")
	descTelBatches = newDesc(counter, "ahpd_telemetry_batches_total", "Batches (telemetry/samples messages, one seq each) the telemetry channel published.", "channel")
	descTelDropped = newDesc(counter, "ahpd_telemetry_dropped_samples_total", "Samples the telemetry channel's loss policy dropped for slow viewers (reported to them in telemetry/dropped), summed over its viewers.", "channel")
	descTelHistory = newDesc(gauge, "ahpd_telemetry_history_bytes", "Bytes of the telemetry channel's recent history (a new viewer's replay).", "channel")
	descTelSeries  = newDesc(gauge, "ahpd_telemetry_series", "Series the telemetry channel counts toward telemetryMaxSeries.", "channel")
	descTelRefused = newDesc(counter, "ahpd_telemetry_refused_samples_total", "Samples of new series the telemetry channel refused: it had telemetryMaxSeries series.", "channel")

	descRecBytes     = newDesc(gauge, "ahpd_recordings_bytes", "Bytes of terminal recordings on disk (.cast and index files), at most recordingsMaxTotalBytes.")
	descRecFiles     = newDesc(gauge, "ahpd_recordings_files", "Terminal recordings on disk (a .cast and its index count once).")
	descRecLive      = newDesc(gauge, "ahpd_recordings_live", "Terminal recordings being written.")
	descRecDropped   = newDesc(counter, "ahpd_recording_dropped_bytes_total", "Output bytes recordings dropped since the daemon started: the disk fell behind (the writer's queue was full) or the directory's cap could not be met.")
	descRecAudit     = newDesc(counter, "ahpd_recording_audit_dropped_total", "Audit events (attach, input, detach, record-on/off) recordings could not write since the daemon started: live recordings alone filled recordingsMaxTotalBytes, or the writer's queue was full. Each recording's index counts its own; the event stream still carried them.")
	descRecEvictions = newDesc(counter, "ahpd_recordings_evictions_total", "Recordings deleted since the daemon started to keep the directory under recordingsMaxTotalBytes (oldest first).")

	descMemReturns = newDesc(counter, "ahpd_memory_returns_total", "Times the daemon handed its free memory back to the system (a forced collection, 1 s after a channel or connection ended).")
)

// collector reads Stats at each scrape. Per-connection series are
// counters (they only grow while the connection lives and vanish with it);
// per-channel sums are gauges, since they drop when a viewer leaves.
type collector struct {
	s             Source
	version       string
	timeout       time.Duration
	memoryReturns func() int64 // nil: no ahpd_memory_returns_total
}

func (m *collector) collect(ctx context.Context, e *exposition) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	st := m.s.Stats(ctx)
	n := func(d *desc, v int64, labels ...string) { e.add(d, float64(v), labels...) }
	n(descInfo, 1, m.version)
	if m.memoryReturns != nil {
		n(descMemReturns, m.memoryReturns())
	}
	n(descConnections, int64(m.s.ConnectionCount()))
	n(descTokens, int64(len(m.s.Tokens().List())))
	states := map[[2]string]int64{}
	for _, c := range m.s.Registry().List() {
		states[[2]string{c.Type, c.State()}]++
		if c.Type == "terminal" {
			var ts pty.Stats
			if t, ok := c.Impl().(*pty.Terminal); ok {
				ts = t.Stats()
			}
			e.add(descTermPaced, ts.Paced.Seconds(), c.URI)
			n(descTermEmuWakes, ts.EmulatorWakesNow, c.URI, "now")
			n(descTermEmuWakes, ts.EmulatorWakesBatched, c.URI, "batched")
		}
		if t, ok := c.Impl().(*telemetry.Channel); ok {
			ts := t.Stats()
			n(descTelSamples, ts.Samples, c.URI)
			n(descTelBatches, ts.Batches, c.URI)
			n(descTelDropped, ts.Dropped, c.URI)
			n(descTelHistory, ts.HistoryBytes, c.URI)
			n(descTelSeries, int64(ts.Series), c.URI)
			n(descTelRefused, ts.SeriesRefused, c.URI)
		}
	}
	for k, v := range states {
		n(descChannels, v, k[0], k[1])
	}
	rs := m.s.RecordingStats()
	n(descRecBytes, rs.Bytes)
	n(descRecFiles, int64(rs.Files))
	n(descRecLive, int64(rs.Live))
	n(descRecDropped, rs.DroppedBytes)
	n(descRecEvictions, rs.Evictions)
	n(descRecAudit, rs.AuditDropped)
	tcp := m.s.TCPStats(ctx)
	n(descTCPChannels, tcp.Channels)
	n(descTCPBytes, tcp.BytesIn, "in")
	n(descTCPBytes, tcp.BytesOut, "out")
	n(descTCPResumes, tcp.Resumes)
	for _, c := range st.Connections {
		n(descFramesIn, c.FramesIn, c.Viewer)
		n(descBytesIn, c.BytesIn, c.Viewer)
		n(descMessagesOut, c.MessagesOut, c.Viewer)
		n(descBytesOut, c.BytesOut, c.Viewer)
		n(descWireOut, c.WireBytesOut, c.Viewer)
		n(descResets, c.Resets, c.Viewer)
		n(descDropped, c.DroppedNotifications, c.Viewer)
		n(descSubs, c.Subscriptions, c.Viewer)
	}
	for _, c := range st.Channels {
		n(descChanViewers, c.Viewers, c.Channel, c.Type)
		n(descChanSent, c.SentBytes, c.Channel, c.Type)
		n(descChanConsumed, c.Consumed, c.Channel, c.Type)
		n(descChanDropped, c.DroppedBytes, c.Channel, c.Type)
		n(descChanSnapshots, c.Snapshots, c.Channel, c.Type)
		n(descChanStalled, c.Stalled, c.Channel, c.Type)
	}
	goRuntime(e)
	process(e)
}
