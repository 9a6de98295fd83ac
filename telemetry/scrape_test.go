package telemetry_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/telemetry"
)

// The scrape source against HTTP servers on 127.0.0.1: the allow-list,
// the timeout, the cap on the body, redirects, and a real exporter
// (Debian's prometheus-node-exporter).

// allowFunc is an Allower: admit says whether host:port (as requested, or
// as dialed) may be reached.
type allowFunc func(host string, port uint16) bool

func (f allowFunc) Check(host string, port uint16) error {
	if f(host, port) {
		return nil
	}
	return fmt.Errorf("not allowed: tcp target %s", net.JoinHostPort(host, strconv.Itoa(int(port))))
}

func (f allowFunc) CheckAddr(host string, ap netip.AddrPort) error {
	if f(ap.Addr().String(), ap.Port()) {
		return nil
	}
	return fmt.Errorf("not allowed: tcp target %s resolved to %s", host, ap)
}

var allowAll = allowFunc(func(string, uint16) bool { return true })

// collector is a Publisher that keeps what it is given.
type collector struct {
	mu      sync.Mutex
	batches [][]telemetry.Sample
	more    chan struct{} // a token per Publish, dropped when full
}

func newCollector() *collector { return &collector{more: make(chan struct{}, 1)} }

func (c *collector) Publish(s []telemetry.Sample) error {
	c.mu.Lock()
	c.batches = append(c.batches, s)
	c.mu.Unlock()
	select {
	case c.more <- struct{}{}:
	default:
	}
	return nil
}

func (c *collector) snapshot() [][]telemetry.Sample {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]telemetry.Sample(nil), c.batches...)
}

// waitFor waits until ok holds for the batches so far, within d.
func (c *collector) waitFor(t *testing.T, d time.Duration, what string, ok func([][]telemetry.Sample) bool) [][]telemetry.Sample {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		b := c.snapshot()
		if ok(b) {
			return b
		}
		select {
		case <-c.more:
		case <-deadline.C:
			t.Fatalf("no %s within %v; %d scrapes", what, d, len(b))
		}
	}
}

// runScrape runs src until the test ends.
func runScrape(t *testing.T, src *telemetry.Scrape, p telemetry.Publisher) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := src.Run(ctx, p); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func findSample(batch []telemetry.Sample, name string, labels ...string) (telemetry.Sample, bool) {
	for _, s := range batch {
		if s.Name != name || len(s.Labels) != len(labels)/2 {
			continue
		}
		match := true
		for i, l := range s.Labels {
			match = match && l.Name == labels[2*i] && l.Value == labels[2*i+1]
		}
		if match {
			return s, true
		}
	}
	return telemetry.Sample{}, false
}

func newScrape(t *testing.T, cfg telemetry.ScrapeConfig) *telemetry.Scrape {
	t.Helper()
	if cfg.Allow == nil {
		cfg.Allow = allowAll
	}
	s, err := telemetry.NewScrape(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// firstErr creates a channel with the scrape source and returns the
// error of its first scrape, then closes the channel.
func firstErr(t *testing.T, cfg telemetry.ScrapeConfig) (detail string, err error) {
	t.Helper()
	src := newScrape(t, cfg)
	c, err := telemetry.New(telemetry.Config{Source: "scrape"}, src)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = src.WaitFirst(ctx)
	return c.Describe().Detail, err
}

func TestScrapeRefusedByAllowList(t *testing.T) {
	only := allowFunc(func(host string, port uint16) bool { return host == "localhost" && port == 9100 })
	_, err := telemetry.NewScrape(telemetry.ScrapeConfig{URL: "http://127.0.0.1:9100/metrics", Allow: only})
	var fe *flow.Error
	if !errors.As(err, &fe) || fe.Code != flow.ErrCodeForbidden || !strings.Contains(fe.Message, "127.0.0.1:9100") {
		t.Fatalf("NewScrape outside the allow-list = %v, want a -32003 naming the target", err)
	}
	// A name the list admits is refused at dial time unless its
	// addresses are admitted too.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "up 1") }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	byName := allowFunc(func(host string, p uint16) bool { return host == "localhost" && int(p) == port })
	_, err = firstErr(t, telemetry.ScrapeConfig{URL: fmt.Sprintf("http://localhost:%d/metrics", port), Allow: byName})
	if err == nil || !strings.Contains(err.Error(), "resolved to") {
		t.Fatalf("a name whose address is not admitted: %v, want the dial refused", err)
	}
}

func TestScrapeTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	start := time.Now()
	detail, err := firstErr(t, telemetry.ScrapeConfig{URL: srv.URL + "/metrics", Interval: time.Second, Timeout: 100 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "timed out after 100ms") {
		t.Fatalf("first scrape of a target that never answers: %v, want timed out after 100ms", err)
	}
	if fe, ok := errors.AsType[*flow.Error](err); !ok || fe.Code != flow.ErrCodeConnectFailed {
		t.Errorf("error %v: want a -32008", err)
	}
	if !strings.Contains(detail, "last scrape failed: timed out") {
		t.Errorf("Describe().Detail = %q, want the last failure", detail)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the timeout of 100ms took %v", d)
	}
}

func TestScrapeBodyCap(t *testing.T) {
	body := strings.Repeat("# padding comment line\n", 100) + "up 1\n" // 2.3 KB
	for _, chunked := range []bool{false, true} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !chunked {
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			}
			io.WriteString(w, body[:len(body)/2])
			w.(http.Flusher).Flush()
			io.WriteString(w, body[len(body)/2:])
		}))
		_, err := firstErr(t, telemetry.ScrapeConfig{URL: srv.URL, MaxBytes: 1024})
		if !errors.Is(err, telemetry.ErrScrapeTooLarge) && (err == nil || !strings.Contains(err.Error(), telemetry.ErrScrapeTooLarge.Error())) {
			t.Errorf("chunked %v: a %d-byte body with a 1 KiB cap: %v, want refused", chunked, len(body), err)
		}
		_, err = firstErr(t, telemetry.ScrapeConfig{URL: srv.URL, MaxBytes: int64(len(body))})
		if err != nil {
			t.Errorf("chunked %v: a body of exactly the cap: %v", chunked, err)
		}
		srv.Close()
	}
}

func TestScrapeNoRedirectsNoProxy(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "up 1") }))
	defer target.Close()
	srv := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusFound))
	defer srv.Close()
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	_, err := firstErr(t, telemetry.ScrapeConfig{URL: srv.URL})
	if err == nil || !strings.Contains(err.Error(), "HTTP status 302") {
		t.Errorf("a redirect: %v, want HTTP status 302 (not followed)", err)
	}
	if _, err := firstErr(t, telemetry.ScrapeConfig{URL: target.URL}); err != nil {
		t.Errorf("with HTTP_PROXY set: %v (the environment's proxy must not be used)", err)
	}
}

// TestScrapeGoesOn: a failed scrape publishes scrape_up 0 and the source
// goes on; the next good one publishes scrape_up 1 and the samples.
func TestScrapeGoesOn(t *testing.T) {
	var mu sync.Mutex
	fail := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "# TYPE temp gauge\ntemp 21.5")
	}))
	defer srv.Close()
	src := newScrape(t, telemetry.ScrapeConfig{URL: srv.URL, Interval: 20 * time.Millisecond})
	c := newCollector()
	runScrape(t, src, c)
	c.waitFor(t, 30*time.Second, "failed scrape", func(b [][]telemetry.Sample) bool {
		if len(b) == 0 {
			return false
		}
		up, _ := findSample(b[0], "scrape_up")
		_, dur := findSample(b[0], "scrape_duration_seconds")
		return up.Value == 0 && dur
	})
	if st := src.Status(); !strings.Contains(st, "HTTP status 503") {
		t.Errorf("Status() = %q, want the 503", st)
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	c.waitFor(t, 30*time.Second, "good scrape", func(b [][]telemetry.Sample) bool {
		last := b[len(b)-1]
		up, _ := findSample(last, "scrape_up")
		temp, ok := findSample(last, "temp")
		return up.Value == 1 && ok && temp.Value == 21.5
	})
	if st := src.Status(); st != "" {
		t.Errorf("Status() after a good scrape = %q, want empty", st)
	}
}

// nodeExporter is Debian's prometheus-node-exporter.
const nodeExporter = "/usr/bin/prometheus-node-exporter"

// startNodeExporter runs node-exporter on 127.0.0.1 with only the
// meminfo and textfile collectors, reading .prom files from dir; it
// returns the metrics URL. The process is stopped and waited for when
// the test ends.
func startNodeExporter(t *testing.T, dir string) string {
	t.Helper()
	if _, err := os.Stat(nodeExporter); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing but CI=true: .ci/run installs prometheus-node-exporter", nodeExporter)
		}
		t.Skipf("SKIPPED: no %s (apt-get install prometheus-node-exporter); the scrape source is not tested against a real exporter", nodeExporter)
	}
	for attempt := range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		cmd := exec.Command(nodeExporter, "--web.listen-address="+addr, "--collector.disable-defaults",
			"--collector.meminfo", "--collector.textfile", "--collector.textfile.directory="+dir, "--log.level=warn")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		var logs strings.Builder
		go func() { // ends when the process closes stderr
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				logs.WriteString(sc.Text() + "\n")
			}
			exited <- cmd.Wait()
		}()
		url := "http://" + addr + "/metrics"
		probe := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		up := false
	wait:
		for range 200 { // 10 s
			if r, err := probe.Get(url); err == nil {
				r.Body.Close()
				up = true
				break
			}
			select {
			case err := <-exited:
				exited <- err
				break wait
			case <-time.After(50 * time.Millisecond):
			}
		}
		if up {
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-exited
			})
			return url
		}
		_ = cmd.Process.Kill()
		<-exited
		t.Logf("node-exporter on %s (attempt %d) did not come up:\n%s", addr, attempt+1, logs.String())
	}
	t.Fatal("node-exporter did not start")
	return ""
}

// writeProm replaces dir/test.prom atomically (the textfile collector
// must never read half a file).
func writeProm(t *testing.T, dir, text string) {
	t.Helper()
	tmp := filepath.Join(dir, ".test.prom.tmp")
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "test.prom")); err != nil {
		t.Fatal(err)
	}
}

// TestScrapeNodeExporter scrapes a real node-exporter: a gauge of the
// host's (MemTotal, from /proc/meminfo) has its value, a gauge of the
// textfile collector too, and a counter the test makes count 1 MiB comes
// out as per-second rates whose integral over the scrapes' times is
// 1 MiB, however the scrapes were spread.
func TestScrapeNodeExporter(t *testing.T) {
	dir := t.TempDir()
	const counted = 1 << 20
	prom := func(v int) string {
		return "# HELP ahp_test_bytes_total Bytes the test counted.\n# TYPE ahp_test_bytes_total counter\nahp_test_bytes_total " + strconv.Itoa(v) +
			"\n# HELP ahp_test_temperature_celsius A gauge the test set.\n# TYPE ahp_test_temperature_celsius gauge\nahp_test_temperature_celsius 21.5\n"
	}
	writeProm(t, dir, prom(0))
	url := startNodeExporter(t, dir)

	src := newScrape(t, telemetry.ScrapeConfig{URL: url, Interval: 50 * time.Millisecond, Timeout: 50 * time.Millisecond,
		Match: []string{"ahp_test_.*", "node_memory_MemTotal_bytes"}})
	c := newCollector()
	runScrape(t, src, c)

	memTotal := memTotalBytes(t)
	c.waitFor(t, 30*time.Second, "good scrape with the gauges", func(b [][]telemetry.Sample) bool {
		for _, batch := range b {
			mem, ok1 := findSample(batch, "node_memory_MemTotal_bytes")
			temp, ok2 := findSample(batch, "ahp_test_temperature_celsius")
			if ok1 && ok2 {
				if mem.Value != memTotal || temp.Value != 21.5 {
					t.Fatalf("node_memory_MemTotal_bytes %v (want %v from /proc/meminfo), ahp_test_temperature_celsius %v (want 21.5)", mem.Value, memTotal, temp.Value)
				}
				return true
			}
		}
		return false
	})
	// Count 1 MiB, then wait for a few good scrapes beyond the one that
	// saw it.
	writeProm(t, dir, prom(counted))
	b := c.waitFor(t, 60*time.Second, "rate of the counted bytes", func(b [][]telemetry.Sample) bool {
		seen := -1
		for i, batch := range b {
			if s, ok := findSample(batch, "ahp_test_bytes_per_second"); ok && s.Value > 0 && seen < 0 {
				seen = i
			}
		}
		return seen >= 0 && len(b)-seen > 3
	})
	// Σ rate × (its scrape's time − the previous good scrape's time).
	integral, prevT := 0.0, 0.0
	for _, batch := range b {
		up, _ := findSample(batch, "scrape_up")
		if up.Value != 1 {
			continue
		}
		if s, ok := findSample(batch, "ahp_test_bytes_per_second"); ok {
			if s.Value < 0 {
				t.Fatalf("negative rate %v", s.Value)
			}
			integral += s.Value * (s.T - prevT) / 1000
		}
		prevT = up.T
	}
	// Sample.T, float milliseconds near 1.8e12, resolves about 0.5 µs:
	// at 20 MB/s over 50 ms that is some bytes.
	if math.Abs(integral-counted) > counted*1e-4 {
		t.Errorf("Σ rate·Δt = %.3f bytes, want %d", integral, counted)
	}
}

// memTotalBytes is /proc/meminfo's MemTotal in bytes.
func memTotalBytes(t *testing.T) float64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Skip("no /proc/meminfo")
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb * 1024
		}
	}
	t.Fatal("no MemTotal in /proc/meminfo")
	return 0
}

// TestScrapeProtobuf: a target that answers in the delimited protobuf
// format (though asked for text) is decoded too.
func TestScrapeProtobuf(t *testing.T) {
	fams := parseFamilies(t, "# TYPE temp gauge\ntemp{room=\"lab\"} 21.5\n# TYPE c_total counter\nc_total 7\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Accept"); !strings.HasPrefix(a, "text/plain;version=0.0.4") {
			t.Errorf("Accept %q, want the text format first", a)
		}
		format := expfmt.NewFormat(expfmt.TypeProtoDelim)
		w.Header().Set("Content-Type", string(format))
		enc := expfmt.NewEncoder(w, format)
		for _, f := range fams {
			if err := enc.Encode(f); err != nil {
				t.Error(err)
			}
		}
	}))
	defer srv.Close()
	src := newScrape(t, telemetry.ScrapeConfig{URL: srv.URL, Interval: 20 * time.Millisecond})
	c := newCollector()
	runScrape(t, src, c)
	c.waitFor(t, 30*time.Second, "the gauge and the counter's rate", func(b [][]telemetry.Sample) bool {
		if len(b) == 0 {
			return false
		}
		last := b[len(b)-1]
		temp, ok1 := findSample(last, "temp", "room", "lab")
		rate, ok2 := findSample(last, "c_per_second")
		return ok1 && temp.Value == 21.5 && ok2 && rate.Value == 0
	})
}

// TestScrapeMaxSeries: a target with more series than the channel admits
// gives MaxSeries of them, scrape_up and scrape_duration_seconds among
// them, and the channel refuses none.
func TestScrapeMaxSeries(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 100 {
			fmt.Fprintf(w, "g{i=\"%d\"} %d\n", i, i)
		}
	}))
	defer srv.Close()
	const maxSeries = 10
	src := newScrape(t, telemetry.ScrapeConfig{URL: srv.URL, Interval: 20 * time.Millisecond, MaxSeries: maxSeries})
	c, err := telemetry.New(telemetry.Config{Source: "scrape", MaxSeries: maxSeries}, src)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := src.WaitFirst(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); c.Stats().Batches < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("3 batches not published within 30s: %+v", c.Stats())
		}
	}
	if st := c.Stats(); st.Series != maxSeries || st.SeriesRefused != 0 {
		t.Errorf("series %d, refused %d; want %d and 0", st.Series, st.SeriesRefused, maxSeries)
	}
	v := attach(t, c, func() {})
	defer v.Close()
	var up bool
	for _, m := range pullAll(t, v) {
		for _, s := range m.Params.Samples {
			up = up || s.Name == "scrape_up" && s.Value == 1
		}
	}
	if !up {
		t.Error("no scrape_up 1 in the history")
	}
}

// TestScrapeBearerToken: the token file's line goes as Authorization:
// Bearer, read at each scrape (a rotated token is taken up); a file that
// cannot be read fails the scrape naming the file, not the token.
func TestScrapeBearerToken(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer s3cret-2" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		fmt.Fprintln(w, "up_there 1")
	}))
	defer srv.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	_, err := firstErr(t, telemetry.ScrapeConfig{URL: srv.URL, BearerTokenFile: file})
	if err == nil || !strings.Contains(err.Error(), "bearer token file: open "+file) {
		t.Errorf("a missing token file: %v", err)
	}
	// The file is read up to its bound, 4 KiB.
	for _, tc := range []struct {
		size int
		want string
	}{
		{4096, "HTTP status 401"},
		{4097, "bearer token file " + file + ": more than 4096 bytes"},
	} {
		if err := os.WriteFile(file, []byte(strings.Repeat("t", tc.size)), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = firstErr(t, telemetry.ScrapeConfig{URL: srv.URL, BearerTokenFile: file})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "ttt") {
			t.Errorf("a token file of %d bytes: %v, want %q without the token", tc.size, err, tc.want)
		}
	}
	mu.Lock()
	seen = seen[:0]
	mu.Unlock()
	if err := os.WriteFile(file, []byte("s3cret-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = firstErr(t, telemetry.ScrapeConfig{URL: srv.URL, BearerTokenFile: file})
	if err == nil || !strings.Contains(err.Error(), "HTTP status 401") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a wrong token: %v, want HTTP status 401 without the token", err)
	}
	src := newScrape(t, telemetry.ScrapeConfig{URL: srv.URL, BearerTokenFile: file, Interval: 20 * time.Millisecond})
	c := newCollector()
	runScrape(t, src, c)
	if err := os.WriteFile(file+".new", []byte("  s3cret-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".new", file); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, 30*time.Second, "a scrape with the rotated token", func(b [][]telemetry.Sample) bool {
		for _, batch := range b {
			if s, ok := findSample(batch, "up_there"); ok && s.Value == 1 {
				return true
			}
		}
		return false
	})
	mu.Lock()
	defer mu.Unlock()
	if seen[0] != "Bearer s3cret-1" {
		t.Errorf("first Authorization %q", seen[0])
	}
}
