package metrics

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/registry"
	"github.com/ahp-dev/ahpd/daemon/service"
	"github.com/ahp-dev/ahpd/pty/record"
)

// fakeSource is a Source with fixed figures; Stats waits on block when it
// is set.
type fakeSource struct {
	stats  service.Stats
	reg    *registry.Registry
	tokens *auth.Tokens
	block  chan struct{}
	inside chan struct{} // a Stats call has begun (when block is set)
}

func (f *fakeSource) Stats(ctx context.Context) service.Stats {
	if f.block != nil {
		f.inside <- struct{}{}
		<-f.block
	}
	return f.stats
}
func (f *fakeSource) ConnectionCount() int         { return len(f.stats.Connections) }
func (f *fakeSource) Registry() *registry.Registry { return f.reg }
func (f *fakeSource) Tokens() *auth.Tokens         { return f.tokens }
func (f *fakeSource) TCPStats(ctx context.Context) service.TCPStats {
	return service.TCPStats{Channels: 2, BytesIn: 10, BytesOut: 20}
}
func (f *fakeSource) RecordingStats() record.StoreStats {
	return record.StoreStats{Bytes: 5 << 20, Files: 3, Live: 1, DroppedBytes: 4096, Evictions: 2, AuditDropped: 3}
}
func newFake() *fakeSource {
	return &fakeSource{reg: registry.New(), tokens: auth.NewTokens("ahp_admin")}
}
func scrape(t *testing.T, h http.Handler) (*http.Response, []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	res := rec.Result()
	body, _ := io.ReadAll(res.Body)
	return res, body
}

// TestExposition: a scrape is valid text exposition as Prometheus parses
// it, with every family typed and described, the daemon's figures, the Go
// runtime's and the process's under Prometheus' Go client's names, and
// label values that need escaping carried through intact.
func TestExposition(t *testing.T) {
	f := newFake()
	odd := "viewer \"quoted\" \\ back\nslash"
	f.stats.Connections = []service.ConnectionStats{{Viewer: odd, ConnectionCounters: service.ConnectionCounters{FramesIn: 3, BytesOut: 1 << 40}}}
	res, body := scrape(t, Handler(f, Options{Version: "v1.2.3", Public: true, MemoryReturns: func() int64 { return 7 }}))
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/plain; version=0.0.4; charset=utf-8" {
		t.Fatalf("status %d, Content-Type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("not valid text exposition: %v\n%s", err, body)
	}
	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		fam := fams[name]
		if fam == nil {
			t.Fatalf("no %s in\n%s", name, body)
		}
	next:
		for _, m := range fam.Metric {
			for _, l := range m.Label {
				if labels[l.GetName()] != l.GetValue() {
					continue next
				}
			}
			switch fam.GetType() {
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue()
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue()
			case dto.MetricType_SUMMARY:
				return float64(m.GetSummary().GetSampleCount())
			}
		}
		t.Fatalf("no %s%v in\n%s", name, labels, body)
		return 0
	}
	for name, fam := range fams {
		if fam.GetHelp() == "" {
			t.Errorf("%s has no HELP", name)
		}
	}
	checks := []struct {
		name   string
		labels map[string]string
		typ    dto.MetricType
		want   float64
	}{
		{"ahpd_info", map[string]string{"version": "v1.2.3"}, dto.MetricType_GAUGE, 1},
		{"ahpd_memory_returns_total", nil, dto.MetricType_COUNTER, 7},
		{"ahpd_connections", nil, dto.MetricType_GAUGE, 1},
		{"ahpd_connection_frames_in_total", map[string]string{"viewer": odd}, dto.MetricType_COUNTER, 3},
		{"ahpd_connection_bytes_out_total", map[string]string{"viewer": odd}, dto.MetricType_COUNTER, 1 << 40},
		{"ahpd_tcp_bytes_total", map[string]string{"direction": "out"}, dto.MetricType_COUNTER, 20},
		{"ahpd_tcp_channels", nil, dto.MetricType_GAUGE, 2},
		{"ahpd_recordings_bytes", nil, dto.MetricType_GAUGE, 5 << 20},
		{"ahpd_recordings_files", nil, dto.MetricType_GAUGE, 3},
		{"ahpd_recordings_live", nil, dto.MetricType_GAUGE, 1},
		{"ahpd_recording_dropped_bytes_total", nil, dto.MetricType_COUNTER, 4096},
		{"ahpd_recordings_evictions_total", nil, dto.MetricType_COUNTER, 2},
		{"ahpd_recording_audit_dropped_total", nil, dto.MetricType_COUNTER, 3},
		{"go_sched_gomaxprocs_threads", nil, dto.MetricType_GAUGE, float64(runtime.GOMAXPROCS(0))},
		{"go_info", map[string]string{"version": runtime.Version()}, dto.MetricType_GAUGE, 1},
	}
	for _, c := range checks {
		if got := value(c.name, c.labels); got != c.want || fams[c.name].GetType() != c.typ {
			t.Errorf("%s%v = %v (%v), want %v (%v)", c.name, c.labels, got, fams[c.name].GetType(), c.want, c.typ)
		}
	}
	for _, name := range []string{"go_goroutines", "go_threads", "go_memstats_heap_alloc_bytes", "go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes", "go_memstats_alloc_bytes_total",
		"process_resident_memory_bytes", "process_virtual_memory_bytes", "process_open_fds", "process_max_fds", "process_cpu_seconds_total", "process_start_time_seconds",
		"process_network_receive_bytes_total", "process_network_transmit_bytes_total"} { // the scrape came over loopback
		if v := value(name, nil); v <= 0 {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	if gc := fams["go_gc_duration_seconds"]; gc.GetType() != dto.MetricType_SUMMARY || len(gc.Metric) != 1 || len(gc.Metric[0].GetSummary().GetQuantile()) != 5 {
		t.Errorf("go_gc_duration_seconds: %v, want a summary with 5 quantiles", gc)
	}
	if start := value("process_start_time_seconds", nil); time.Since(time.Unix(int64(start), 0)) > time.Hour {
		t.Errorf("process_start_time_seconds %v is not this process's start", start)
	}
}

// TestScrapesInFlight: at most four scrapes run at once; a fifth is
// refused with 503 rather than queued.
func TestScrapesInFlight(t *testing.T) {
	f := newFake()
	f.block, f.inside = make(chan struct{}), make(chan struct{}, 4)
	h := Handler(f, Options{Public: true})
	var wg sync.WaitGroup
	codes := make(chan int, 4)
	for range 4 {
		wg.Go(func() {
			res, _ := scrape(t, h)
			codes <- res.StatusCode
		})
	}
	for range 4 {
		<-f.inside
	}
	if res, _ := scrape(t, h); res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a fifth scrape: %d, want 503", res.StatusCode)
	}
	close(f.block)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Errorf("a scrape in flight ended %d, want 200", c)
		}
	}
}

func TestParseStatm(t *testing.T) {
	for _, tc := range []struct {
		in        string
		size, res uint64
		ok        bool
	}{
		{"4526 1234 567 89 0 1011 0\n", 4526, 1234, true},
		{"1 2", 1, 2, true},
		{"", 0, 0, false},
		{"12", 0, 0, false},
		{"x 2 3", 0, 0, false},
		{"-1 2 3", 0, 0, false},
		{"18446744073709551615 1", 0, 0, false},
	} {
		size, res, ok := parseStatm(tc.in)
		if size != tc.size || res != tc.res || ok != tc.ok {
			t.Errorf("parseStatm(%q) = %d, %d, %v; want %d, %d, %v", tc.in, size, res, ok, tc.size, tc.res, tc.ok)
		}
	}
}

func FuzzParseStatm(f *testing.F) {
	for _, s := range []string{"4526 1234 567 89 0 1011 0\n", "1 2", "", "x y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		size, res, ok := parseStatm(s)
		if !ok && (size != 0 || res != 0) {
			t.Fatalf("parseStatm(%q) = %d, %d, false", s, size, res)
		}
	})
}
