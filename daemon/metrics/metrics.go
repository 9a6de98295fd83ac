// Package metrics is ahpd's Prometheus endpoint (/metrics): the counters
// of the service's Stats per connection and per channel, gauges of
// channels, connections and tokens, per-terminal figures, the daemon's TCP
// totals (service.TCPStats), per-telemetry-channel samples, drops and
// history, and the Go
// runtime and process collectors. A scrape reads everything afresh; the
// handler is safe for concurrent use and bounds scrapes in flight.
package metrics

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/registry"
	"github.com/ahp-dev/ahpd/daemon/service"
	"github.com/ahp-dev/ahpd/daemon/session"
	"github.com/ahp-dev/ahpd/pty"
	"github.com/ahp-dev/ahpd/telemetry"
)

// Source is what the metrics read: the daemon's service.
type Source interface {
	Stats(ctx context.Context) service.Stats
	ConnectionCount() int
	Registry() *registry.Registry
	Tokens() *auth.Tokens
	TCPStats(ctx context.Context) service.TCPStats
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
// connections and tokens, and the Go runtime and process collectors. Mount
// it on the HTTP listener, e.g. mux.Handle("GET /metrics", metrics.Handler(svc, metrics.Options{})).
func Handler(s Source, opts Options) http.Handler {
	if opts.ScrapeTimeout == 0 {
		opts.ScrapeTimeout = 5 * time.Second
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&metricsCollector{s: s, version: opts.Version, timeout: opts.ScrapeTimeout, memoryReturns: opts.MemoryReturns},
	)
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: nil, MaxRequestsInFlight: 4, Timeout: opts.ScrapeTimeout + time.Second})
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

var (
	connLabels = []string{"viewer"}
	chanLabels = []string{"channel", "type"}

	descInfo        = prometheus.NewDesc("ahpd_info", "Build information; the value is 1.", []string{"version"}, nil)
	descConnections = prometheus.NewDesc("ahpd_connections", "Open viewer WebSocket connections.", nil, nil)
	descChannels    = prometheus.NewDesc("ahpd_channels", "Channels in the registry by type and state.", []string{"type", "state"}, nil)
	descTokens      = prometheus.NewDesc("ahpd_tokens", "Live minted tokens (the admin token excluded).", nil, nil)

	descFramesIn    = prometheus.NewDesc("ahpd_connection_frames_in_total", "channel/frame messages received on the connection.", connLabels, nil)
	descBytesIn     = prometheus.NewDesc("ahpd_connection_bytes_in_total", "UTF-8 bytes of the frames received on the connection.", connLabels, nil)
	descMessagesOut = prometheus.NewDesc("ahpd_connection_messages_out_total", "WebSocket messages written to the connection (frames, responses, credit, resets).", connLabels, nil)
	descBytesOut    = prometheus.NewDesc("ahpd_connection_bytes_out_total", "UTF-8 bytes written to the connection, before compression.", connLabels, nil)
	descWireOut     = prometheus.NewDesc("ahpd_connection_wire_bytes_out_total", "Bytes written to the connection's socket (after compression and framing).", connLabels, nil)
	descResets      = prometheus.NewDesc("ahpd_connection_resets_total", "channel/reset sent to the connection.", connLabels, nil)
	descDropped     = prometheus.NewDesc("ahpd_connection_dropped_notifications_total", "Notifications dropped (unknown subscription, malformed).", connLabels, nil)
	descSubs        = prometheus.NewDesc("ahpd_connection_subscriptions", "Live subscriptions of the connection.", connLabels, nil)

	descChanViewers   = prometheus.NewDesc("ahpd_channel_viewers", "Live subscriptions to the channel.", chanLabels, nil)
	descChanSent      = prometheus.NewDesc("ahpd_channel_sent_bytes", "UTF-16 bytes sent on the channel's live subscriptions.", chanLabels, nil)
	descChanConsumed  = prometheus.NewDesc("ahpd_channel_consumed_bytes", "UTF-16 bytes credited on the channel's live subscriptions.", chanLabels, nil)
	descChanDropped   = prometheus.NewDesc("ahpd_channel_dropped_bytes", "Output bytes dropped by the loss policy for the channel's live subscriptions.", chanLabels, nil)
	descChanSnapshots = prometheus.NewDesc("ahpd_channel_snapshots", "Snapshots sent on the channel's live subscriptions.", chanLabels, nil)
	descTermEmuWakes  = prometheus.NewDesc("ahpd_terminal_emulator_wakeups_total", "Wake-ups of the terminal's emulator by its reader: now (output that paused: an echo) or batched (the lazy timer: a flood).", []string{"channel", "when"}, nil)
	descTermPaced     = prometheus.NewDesc("ahpd_terminal_paced_seconds_total", "Time the terminal's output was paced so that typing into another terminal went first (--no-typing-first turns pacing off).", []string{"channel"}, nil)
	descChanStalled   = prometheus.NewDesc("ahpd_channel_stalled_subscriptions", "Live subscriptions of the channel whose window is shut.", chanLabels, nil)

	descTCPChannels = prometheus.NewDesc("ahpd_tcp_channels", "TCP channels in the registry (dialing, open or retained for a resume).", nil, nil)
	descTCPBytes    = prometheus.NewDesc("ahpd_tcp_bytes_total", "Bytes of TCP channels since the daemon started, summed over the live channels and those that ended: in = written to the targets (client→target), out = read from them (target→client).", []string{"direction"}, nil)
	descTCPResumes  = prometheus.NewDesc("ahpd_tcp_resumes_total", "Resumes of TCP channels after a consumer's reconnect since the daemon started, summed over the live channels and those that ended.", nil, nil)

	descTelSamples = prometheus.NewDesc("ahpd_telemetry_samples_total", "Samples the telemetry channel's source published.", []string{"channel"}, nil)
	descTelBatches = prometheus.NewDesc("ahpd_telemetry_batches_total", "Batches (telemetry/samples messages, one seq each) the telemetry channel published.", []string{"channel"}, nil)
	descTelDropped = prometheus.NewDesc("ahpd_telemetry_dropped_samples_total", "Samples the telemetry channel's loss policy dropped for slow viewers (reported to them in telemetry/dropped), summed over its viewers.", []string{"channel"}, nil)
	descTelHistory = prometheus.NewDesc("ahpd_telemetry_history_bytes", "Bytes of the telemetry channel's recent history (a new viewer's replay).", []string{"channel"}, nil)

	descMemReturns = prometheus.NewDesc("ahpd_memory_returns_total", "Times the daemon handed its free memory back to the system (a forced collection, 1 s after a channel or connection ended).", nil, nil)
)

// metricsCollector reads Stats at each scrape. Per-connection series are
// counters (they only grow while the connection lives and vanish with it);
// per-channel sums are gauges, since they drop when a viewer leaves.
type metricsCollector struct {
	s             Source
	version       string
	timeout       time.Duration
	memoryReturns func() int64 // nil: no ahpd_memory_returns_total
}

func (m *metricsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		descInfo, descConnections, descChannels, descTokens,
		descFramesIn, descBytesIn, descMessagesOut, descBytesOut, descWireOut, descResets, descDropped, descSubs,
		descChanViewers, descChanSent, descChanConsumed, descChanDropped, descChanSnapshots, descChanStalled,
		descTermPaced, descTermEmuWakes, descTCPChannels, descTCPBytes, descTCPResumes,
		descTelSamples, descTelBatches, descTelDropped, descTelHistory, descMemReturns,
	} {
		ch <- d
	}
}

func (m *metricsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), m.timeout)
	defer cancel()
	st := m.s.Stats(ctx)
	gauge := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(descInfo, 1, m.version)
	if m.memoryReturns != nil {
		counter(descMemReturns, m.memoryReturns())
	}
	gauge(descConnections, int64(m.s.ConnectionCount()))
	gauge(descTokens, int64(len(m.s.Tokens().List())))
	states := map[[2]string]int64{}
	for _, c := range m.s.Registry().List() {
		states[[2]string{c.Type, c.State()}]++
		if c.Type == "terminal" {
			var ts pty.Stats
			if t, ok := c.Impl().(*pty.Terminal); ok {
				ts = t.Stats()
			}
			ch <- prometheus.MustNewConstMetric(descTermPaced, prometheus.CounterValue, ts.Paced.Seconds(), c.URI)
			counter(descTermEmuWakes, ts.EmulatorWakesNow, c.URI, "now")
			counter(descTermEmuWakes, ts.EmulatorWakesBatched, c.URI, "batched")
		}
		if t, ok := c.Impl().(*telemetry.Channel); ok {
			ts := t.Stats()
			counter(descTelSamples, ts.Samples, c.URI)
			counter(descTelBatches, ts.Batches, c.URI)
			counter(descTelDropped, ts.Dropped, c.URI)
			gauge(descTelHistory, ts.HistoryBytes, c.URI)
		}
	}
	for k, n := range states {
		gauge(descChannels, n, k[0], k[1])
	}
	tcp := m.s.TCPStats(ctx)
	gauge(descTCPChannels, tcp.Channels)
	counter(descTCPBytes, tcp.BytesIn, "in")
	counter(descTCPBytes, tcp.BytesOut, "out")
	counter(descTCPResumes, tcp.Resumes)
	for _, c := range st.Connections {
		counter(descFramesIn, c.FramesIn, c.Viewer)
		counter(descBytesIn, c.BytesIn, c.Viewer)
		counter(descMessagesOut, c.MessagesOut, c.Viewer)
		counter(descBytesOut, c.BytesOut, c.Viewer)
		counter(descWireOut, c.WireBytesOut, c.Viewer)
		counter(descResets, c.Resets, c.Viewer)
		counter(descDropped, c.DroppedNotifications, c.Viewer)
		gauge(descSubs, c.Subscriptions, c.Viewer)
	}
	for _, c := range st.Channels {
		gauge(descChanViewers, c.Viewers, c.Channel, c.Type)
		gauge(descChanSent, c.SentBytes, c.Channel, c.Type)
		gauge(descChanConsumed, c.Consumed, c.Channel, c.Type)
		gauge(descChanDropped, c.DroppedBytes, c.Channel, c.Type)
		gauge(descChanSnapshots, c.Snapshots, c.Channel, c.Type)
		gauge(descChanStalled, c.Stalled, c.Channel, c.Type)
	}
}
