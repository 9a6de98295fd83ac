package telemetry

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ahp-dev/ahpd/flow"
)

// Allower is the allow-list a scrape target must pass: the daemon's TCP
// allow-list (*tcp.AllowList, which `ahpctl tcp allow` manages), so that
// an operator keeps one list of where the daemon may connect. Check
// admits the URL's host and port before any dial, CheckAddr each address
// a name resolves to, at dial time.
type Allower interface {
	Check(host string, port uint16) error
	CheckAddr(host string, addr netip.AddrPort) error
}

// Bounds and defaults of a scrape source.
const (
	// DefaultScrapeMaxBytes is the default cap on a response body (after
	// decompression); MaxScrapeMaxBytes the largest cap one may choose.
	DefaultScrapeMaxBytes = 4 << 20
	MaxScrapeMaxBytes     = 64 << 20
	// DefaultScrapeTimeout is the timeout of a scrape whose interval is
	// longer; a shorter interval is the default timeout itself.
	DefaultScrapeTimeout = 10 * time.Second
	// maxScrapeMatchers bounds --match and --label expressions each.
	maxScrapeMatchers = 32
	// maxScrapeURLBytes bounds the URL.
	maxScrapeURLBytes = 2048
)

// ScrapeConfig configures a Scrape source: a Prometheus text-format
// (or OpenMetrics 1.0) endpoint read every Interval.
type ScrapeConfig struct {
	// URL is http:// or https://HOST[:PORT]/PATH, without credentials.
	URL string
	// Interval between scrapes; default DefaultInterval, at least
	// MinInterval.
	Interval time.Duration
	// Timeout of one scrape (connect, request, the whole body); default
	// the interval, at most DefaultScrapeTimeout; never longer than the
	// interval.
	Timeout time.Duration
	// MaxBytes caps a response body (decompressed); a longer one fails
	// the scrape. Default DefaultScrapeMaxBytes, at most
	// MaxScrapeMaxBytes.
	MaxBytes int64
	// BearerTokenFile, an absolute path, holds a token each request sends
	// as Authorization: Bearer (read at every scrape, so a rotated token
	// is taken up; at most 4 KiB, surrounding space trimmed). Empty: none.
	BearerTokenFile string
	// Match keeps the families whose name one of them matches (anchored
	// RE2); none: every family. At most 32.
	Match []string
	// Labels keeps the series every one of them admits
	// (ParseLabelMatcher). At most 32.
	Labels []string
	// Histograms is what histograms and summaries become; default
	// HistogramQuantiles.
	Histograms HistogramMode
	// Quantiles kept by HistogramQuantiles, each in [0, 1]; default
	// DefaultQuantiles.
	Quantiles []float64
	// MaxSeries bounds the samples of one scrape and the counters kept
	// for rates; default DefaultMaxSeries.
	MaxSeries int
	// Allow must admit the target (required).
	Allow Allower
	// Logger; nil: discard.
	Logger *slog.Logger
}

// FieldError is an invalid field of a config: Field names it as the
// create request does (url, timeout, max_bytes, match[i], label[i],
// histograms, quantiles).
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Validate checks the config; an error is a *FieldError.
func (c ScrapeConfig) Validate() error {
	_, err := c.build()
	return err
}

// scrapeTarget is a checked config.
type scrapeTarget struct {
	url       *url.URL
	host      string
	port      uint16
	interval  time.Duration
	timeout   time.Duration
	maxBytes  int64
	tokenFile string
	adapter   promAdapter
	maxSeries int
}

func (c ScrapeConfig) build() (scrapeTarget, error) {
	bad := func(field, format string, args ...any) (scrapeTarget, error) {
		return scrapeTarget{}, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	var t scrapeTarget
	if c.URL == "" {
		return bad("url", "a scrape source needs the URL of a metrics endpoint, e.g. http://127.0.0.1:9100/metrics")
	}
	if len(c.URL) > maxScrapeURLBytes {
		return bad("url", "%d bytes, more than %d", len(c.URL), maxScrapeURLBytes)
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return bad("url", "%v", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("url", "%q: want http:// or https://", c.URL)
	case u.User != nil:
		return bad("url", "credentials in the URL are not supported")
	case u.Hostname() == "":
		return bad("url", "%q has no host", c.URL)
	}
	u.Fragment, u.RawFragment = "", ""
	t.url, t.host = u, u.Hostname()
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return bad("url", "port %q: must be 1–65535", port)
	}
	t.port = uint16(p)

	if t.interval, err = CheckInterval(c.Interval); err != nil {
		return bad("interval", "%v", err)
	}
	t.timeout = c.Timeout
	switch {
	case t.timeout == 0:
		t.timeout = min(t.interval, DefaultScrapeTimeout)
	case t.timeout < time.Millisecond:
		return bad("timeout", "%v: must be at least 1ms", t.timeout)
	case t.timeout > t.interval:
		return bad("timeout", "%v: longer than the interval %v (scrapes do not overlap)", t.timeout, t.interval)
	}
	t.maxBytes = c.MaxBytes
	switch {
	case t.maxBytes == 0:
		t.maxBytes = DefaultScrapeMaxBytes
	case t.maxBytes < 0 || t.maxBytes > MaxScrapeMaxBytes:
		return bad("max_bytes", "%d: must be 1 to %d", t.maxBytes, MaxScrapeMaxBytes)
	}
	if t.tokenFile = c.BearerTokenFile; t.tokenFile != "" {
		if !filepath.IsAbs(t.tokenFile) || len(t.tokenFile) > 4096 {
			return bad("bearer_token_file", "%q: want an absolute path", t.tokenFile)
		}
		if u.Scheme == "http" && !loopbackHost(t.host) {
			return bad("bearer_token_file", "a token is sent in clear over http:// only to a loopback host (127.0.0.0/8, ::1, localhost); use https://")
		}
	}
	t.maxSeries = c.MaxSeries
	if t.maxSeries <= 0 {
		t.maxSeries = DefaultMaxSeries
	}
	// scrape_up and scrape_duration_seconds come first and count too.
	a := promAdapter{mode: c.Histograms, quantiles: c.Quantiles, maxSeries: max(t.maxSeries-scrapeOwnSeries, 1)}
	if a.mode == "" {
		a.mode = HistogramQuantiles
	}
	if a.mode != HistogramQuantiles && a.mode != HistogramRates && a.mode != HistogramBoth {
		return bad("histograms", "%q: want quantiles, rates or both", c.Histograms)
	}
	if len(a.quantiles) == 0 {
		a.quantiles = DefaultQuantiles
	}
	if len(a.quantiles) > maxScrapeMatchers {
		return bad("quantiles", "%d quantiles, more than %d", len(a.quantiles), maxScrapeMatchers)
	}
	for _, q := range a.quantiles {
		if !(q >= 0 && q <= 1) {
			return bad("quantiles", "%v: must be in [0, 1]", q)
		}
	}
	if len(c.Match) > maxScrapeMatchers {
		return bad("match", "%d expressions, more than %d", len(c.Match), maxScrapeMatchers)
	}
	for i, m := range c.Match {
		re, err := compileMatch(m)
		if err != nil {
			return bad(fmt.Sprintf("match[%d]", i), "%v", err)
		}
		a.match = append(a.match, re)
	}
	if len(c.Labels) > maxScrapeMatchers {
		return bad("label", "%d matchers, more than %d", len(c.Labels), maxScrapeMatchers)
	}
	for i, l := range c.Labels {
		m, err := ParseLabelMatcher(l)
		if err != nil {
			return bad(fmt.Sprintf("label[%d]", i), "%v", err)
		}
		a.labels = append(a.labels, m)
	}
	t.adapter = a
	return t, nil
}

// Scrape is a source that reads a Prometheus metrics endpoint every
// interval (docs/protocol-decisions.md, "Scrape sources"): gauges as
// they are, counters as per-second rates (NAME_per_second, NAME's _total
// left off), histograms and summaries by ScrapeConfig.Histograms. Each
// scrape also gives scrape_up (1, or 0 when it failed) and
// scrape_duration_seconds. A scrape costs at most the timeout; a failed
// one is logged (at most once a minute) and reported by Status, and the
// source goes on.
//
// The connection passes the allow-list twice: the URL's host and port
// before any dial, every address dialed (a name's, resolved then). No
// proxy from the environment is used and redirects are not followed.
type Scrape struct {
	t      scrapeTarget
	allow  Allower
	log    *slog.Logger
	client *http.Client
	tr     *http.Transport

	first     chan struct{} // closed after the first scrape
	firstOnce sync.Once

	mu        sync.Mutex // guards what follows
	firstErr  error
	lastErr   error
	failures  int64
	scrapes   int64
	lastLogAt time.Time
}

// NewScrape checks the config and that the allow-list admits the
// target: a target it does not is a *flow.Error -32003 naming the rule
// to add.
func NewScrape(cfg ScrapeConfig) (*Scrape, error) {
	if cfg.Allow == nil {
		return nil, errors.New("scrape source: ScrapeConfig.Allow is required")
	}
	t, err := cfg.build()
	if err != nil {
		return nil, &flow.Error{Code: flow.ErrCodeInvalidParams, Message: "create." + err.Error()}
	}
	if err := cfg.Allow.Check(t.host, t.port); err != nil {
		return nil, &flow.Error{Code: flow.ErrCodeForbidden, Message: "scrape " + t.url.Redacted() + ": " + err.Error()}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Scrape{t: t, allow: cfg.Allow, log: log, first: make(chan struct{})}
	s.tr = &http.Transport{
		Proxy:                  nil, // never the environment's: the allow-list names where ahpd connects
		DialContext:            s.dial,
		MaxIdleConns:           1,
		MaxIdleConnsPerHost:    1,
		IdleConnTimeout:        2*t.interval + time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		TLSHandshakeTimeout:    t.timeout,
		ForceAttemptHTTP2:      false,
	}
	s.client = &http.Client{
		Transport: s.tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	return s, nil
}

// dial connects to addr (the URL's host:port) through the allow-list.
func (s *Scrape) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port := s.t.host, s.t.port
	var addrs []netip.AddrPort
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.AddrPort{netip.AddrPortFrom(a.Unmap(), port)}
	} else {
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("cannot resolve %s: %w", host, err)
		}
		for _, ip := range ips {
			addrs = append(addrs, netip.AddrPortFrom(ip.Unmap(), port))
		}
	}
	var d net.Dialer
	var firstErr error
	for _, ap := range addrs {
		if err := s.allow.CheckAddr(host, ap); err != nil {
			firstErr = cmp.Or(firstErr, err) // the first refusal
			continue
		}
		c, err := d.DialContext(ctx, "tcp", ap.String())
		if err == nil {
			return c, nil
		}
		firstErr = err
		if ctx.Err() != nil {
			break
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("%s: no address", host)
	}
	return nil, firstErr
}

// ErrScrapeTooLarge is wrapped by the error of a response body over the
// cap.
var ErrScrapeTooLarge = errors.New("response body larger than the cap")

// scrapeAccept asks for the Prometheus text format, which every exporter
// serves and whose parser is the one fuzzed with our conversion; a target
// that answers with the delimited protobuf format anyway is decoded too.
// (Text 0.0.4 also makes newer exporters escape UTF-8 names into the
// legacy ones that PROTOCOL.md §8 allows.)
const scrapeAccept = `text/plain;version=0.0.4;q=1,*/*;q=0.1`

// fetch does one scrape: the families the target exposes.
func (s *Scrape) fetch(ctx context.Context) ([]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, s.t.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.t.url.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", scrapeAccept)
	if s.t.tokenFile != "" {
		tok, err := readToken(s.t.tokenFile)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	req.Header.Set("User-Agent", "ahpd-scrape")
	req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", strconv.FormatFloat(s.t.timeout.Seconds(), 'f', -1, 64))
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, s.reason(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("HTTP status %s", resp.Status)
	}
	if resp.ContentLength > s.t.maxBytes {
		return nil, fmt.Errorf("%w: Content-Length %d, more than %d bytes (--max-bytes)", ErrScrapeTooLarge, resp.ContentLength, s.t.maxBytes)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, s.t.maxBytes+1))
	if err != nil {
		return nil, s.reason(ctx, err)
	}
	if int64(len(body)) > s.t.maxBytes {
		return nil, fmt.Errorf("%w: more than %d bytes (--max-bytes)", ErrScrapeTooLarge, s.t.maxBytes)
	}
	fams, err := decodeFamilies(body, expfmt.ResponseFormat(resp.Header))
	if err != nil {
		return nil, fmt.Errorf("parsing the response: %w", err)
	}
	return fams, nil
}

// maxTokenBytes bounds a bearer token file.
const maxTokenBytes = 4 << 10

// readToken reads a bearer token file; the error names the file, never
// its content.
func readToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("bearer token file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenBytes+1))
	if err != nil {
		return "", fmt.Errorf("bearer token file %s: %w", path, err)
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case len(b) > maxTokenBytes:
		return "", fmt.Errorf("bearer token file %s: more than %d bytes", path, maxTokenBytes)
	case tok == "" || strings.ContainsAny(tok, "\r\n"):
		return "", fmt.Errorf("bearer token file %s: want one non-empty line", path)
	}
	return tok, nil
}

// loopbackHost reports whether host is a loopback address or localhost.
func loopbackHost(host string) bool {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap().IsLoopback()
	}
	return strings.EqualFold(strings.TrimSuffix(host, "."), "localhost")
}

// decodeFamilies parses a scraped body in format (text when unknown).
func decodeFamilies(body []byte, format expfmt.Format) ([]*dto.MetricFamily, error) {
	if format.FormatType() != expfmt.TypeProtoDelim {
		p := expfmt.NewTextParser(model.LegacyValidation)
		m, err := p.TextToMetricFamilies(bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		fams := make([]*dto.MetricFamily, 0, len(m))
		for _, f := range m {
			fams = append(fams, f)
		}
		return fams, nil
	}
	dec := expfmt.NewDecoder(bytes.NewReader(body), format)
	var fams []*dto.MetricFamily
	for {
		f := new(dto.MetricFamily)
		err := dec.Decode(f)
		if errors.Is(err, io.EOF) {
			return fams, nil
		}
		if err != nil {
			return nil, err
		}
		fams = append(fams, f)
	}
}

// reason says why a request failed, in words an operator acts on.
func (s *Scrape) reason(ctx context.Context, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("timed out after %v (--scrape-timeout)", s.t.timeout)
	case errors.Is(err, syscall.ECONNREFUSED):
		return errors.New("connection refused")
	}
	var fe *flow.Error
	if errors.As(err, &fe) {
		return fe
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// scrapeOwnSeries is the number of series a scrape adds of its own.
const scrapeOwnSeries = 2

// scrapeOnce scrapes and converts; it returns the samples, stamped at
// the end of the scrape: scrape_up and scrape_duration_seconds first (so
// that a target with more series than the channel admits never crowds
// them out), then the target's, at most MaxSeries less those two.
func (s *Scrape) scrapeOnce(ctx context.Context) ([]Sample, error) {
	start := time.Now()
	fams, err := s.fetch(ctx)
	end := time.Now()
	up := 0.0
	if err == nil {
		up = 1
	}
	t := nowMilli(end)
	out := []Sample{{T: t, Name: "scrape_up", Value: up}, {T: t, Name: "scrape_duration_seconds", Value: end.Sub(start).Seconds()}}
	var st adaptStats
	if err == nil {
		var got []Sample
		got, st = s.t.adapter.adapt(fams, end)
		out = append(out, got...)
	}
	if st.Beyond > 0 || st.Invalid > 0 {
		s.log.Debug("scrape: samples left out", "beyond_max_series", st.Beyond, "invalid", st.Invalid)
	}
	return out, err
}

// Run implements Source: a scrape at once, then one every interval (a
// scrape longer than the interval skips the ticks it overran).
func (s *Scrape) Run(ctx context.Context, p Publisher) error {
	defer s.tr.CloseIdleConnections()
	defer s.firstDone(context.Canceled) // if Run ends before its first scrape
	tk := time.NewTicker(s.t.interval)
	defer tk.Stop()
	for {
		samples, err := s.scrapeOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		s.record(err)
		if perr := p.Publish(samples); perr != nil {
			return perr
		}
		s.firstDone(err)
		select {
		case <-ctx.Done():
			return nil
		case <-tk.C:
		}
	}
}

func (s *Scrape) firstDone(err error) {
	s.firstOnce.Do(func() {
		s.mu.Lock()
		s.firstErr = err
		s.mu.Unlock()
		close(s.first)
	})
}

// record counts a scrape and logs a failure, at most once a minute.
func (s *Scrape) record(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scrapes++
	if err == nil {
		s.lastErr = nil
		return
	}
	s.failures++
	s.lastErr = err
	if now := time.Now(); now.Sub(s.lastLogAt) >= time.Minute {
		s.lastLogAt = now
		s.log.Info("scrape failed", "url", s.t.url.Redacted(), "err", err, "failures", s.failures)
	}
}

// WaitFirst waits for the first scrape (or ctx) and returns its error,
// a *flow.Error -32008 naming the URL: what the control plane answers a
// create with.
func (s *Scrape) WaitFirst(ctx context.Context) error {
	select {
	case <-s.first:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	err := s.firstErr
	s.mu.Unlock()
	if err == nil {
		return nil
	}
	var fe *flow.Error
	if errors.As(err, &fe) {
		return fe
	}
	return &flow.Error{Code: flow.ErrCodeConnectFailed, Message: "scrape " + s.t.url.Redacted() + ": " + err.Error()}
}

// Status says how the last scrape went when it failed ("" when it did
// not): the channel's Describe adds it to its detail.
func (s *Scrape) Status() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastErr == nil {
		return ""
	}
	return fmt.Sprintf("last scrape failed: %v (%d of %d failed)", s.lastErr, s.failures, s.scrapes)
}

// URL is the target, as scraped.
func (s *Scrape) URL() string { return s.t.url.Redacted() }
