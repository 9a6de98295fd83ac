package telemetry_test

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ahp-dev/ahpd/telemetry"
)

// The scrape source's conversion of metric families (parsed by expfmt
// from the Prometheus text format) to samples, over two scrapes one
// second apart.

func parseFamilies(t testing.TB, text string) []*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	m, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parse %q: %v", text, err)
	}
	var out []*dto.MetricFamily
	for _, f := range m {
		out = append(out, f)
	}
	return out
}

// sampleString is "name{a=1,b=2} value" (value with %g, 6 digits).
func sampleString(s telemetry.Sample) string {
	var b strings.Builder
	b.WriteString(s.Name)
	if len(s.Labels) > 0 {
		b.WriteByte('{')
		for i, l := range s.Labels {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(l.Name + "=" + l.Value)
		}
		b.WriteByte('}')
	}
	b.WriteString(" " + strconv.FormatFloat(s.Value, 'g', 6, 64))
	return b.String()
}

var t0 = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

type adaptCase struct {
	name          string
	cfg           telemetry.ScrapeConfig
	first, second string
	dt            time.Duration // between the scrapes; 0: 1 s
	want1, want2  []string
	invalid       int // in the second scrape
	beyond        int // in the second scrape
}

var adaptCases = []adaptCase{
	{
		name:  "gauge and untyped as they are",
		first: "# TYPE g gauge\ng{a=\"x\"} 3\nu 7\n", second: "# TYPE g gauge\ng{a=\"x\"} 4.5\nu 8\n",
		want1: []string{"g{a=x} 3", "u 7"}, want2: []string{"g{a=x} 4.5", "u 8"},
	},
	{
		name:  "counter as a per-second rate from the second scrape",
		first: "# TYPE bytes_total counter\nbytes_total{dev=\"lo\"} 1000\n", second: "# TYPE bytes_total counter\nbytes_total{dev=\"lo\"} 5000\n",
		dt:    2 * time.Second,
		want1: nil, want2: []string{"bytes_per_second{dev=lo} 2000"},
	},
	{
		name:  "counter without _total",
		first: "# TYPE reqs counter\nreqs 1\n", second: "# TYPE reqs counter\nreqs 11\n",
		want2: []string{"reqs_per_second 10"},
	},
	{
		name:  "a counter that went back was reset: no negative rate",
		first: "# TYPE c_total counter\nc_total 500\n", second: "# TYPE c_total counter\nc_total 20\n",
		want2: nil,
	},
	{
		name:  "histogram quantiles over the interval",
		first: "# TYPE h histogram\nh_bucket{le=\"0.1\"} 0\nh_bucket{le=\"1\"} 0\nh_bucket{le=\"+Inf\"} 0\nh_sum 0\nh_count 0\n",
		// 100 observations: 50 under 0.1, 40 in (0.1, 1], 10 above 1.
		second: "# TYPE h histogram\nh_bucket{le=\"0.1\"} 50\nh_bucket{le=\"1\"} 90\nh_bucket{le=\"+Inf\"} 100\nh_sum 75\nh_count 100\n",
		want2:  []string{"h{quantile=0.5} 0.1", "h{quantile=0.9} 1", "h{quantile=0.99} 1"},
	},
	{
		name:   "histogram quantile interpolated inside its bucket",
		cfg:    telemetry.ScrapeConfig{Quantiles: []float64{0.25, 0.7}},
		first:  "# TYPE h histogram\nh_bucket{le=\"1\"} 10\nh_bucket{le=\"2\"} 10\nh_bucket{le=\"+Inf\"} 10\nh_sum 5\nh_count 10\n",
		second: "# TYPE h histogram\nh_bucket{le=\"1\"} 30\nh_bucket{le=\"2\"} 50\nh_bucket{le=\"+Inf\"} 50\nh_sum 60\nh_count 50\n",
		// 40 new: 20 in (0,1], 20 in (1,2]. 0.25 → rank 10 → 0.5; 0.7 → rank 28 → 1 + 8/20.
		want2: []string{"h{quantile=0.25} 0.5", "h{quantile=0.7} 1.4"},
	},
	{
		name:   "histogram without observations in the interval gives no quantile",
		first:  "# TYPE h histogram\nh_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} 3\nh_sum 1\nh_count 3\n",
		second: "# TYPE h histogram\nh_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} 3\nh_sum 1\nh_count 3\n",
		want2:  nil,
	},
	{
		name:   "histogram as rates of sum and count",
		cfg:    telemetry.ScrapeConfig{Histograms: telemetry.HistogramRates},
		first:  "# TYPE h_seconds histogram\nh_seconds_bucket{le=\"1\"} 0\nh_seconds_bucket{le=\"+Inf\"} 0\nh_seconds_sum 0\nh_seconds_count 0\n",
		second: "# TYPE h_seconds histogram\nh_seconds_bucket{le=\"1\"} 4\nh_seconds_bucket{le=\"+Inf\"} 4\nh_seconds_sum 2\nh_seconds_count 4\n",
		dt:     4 * time.Second,
		want2:  []string{"h_seconds_sum_per_second 0.5", "h_seconds_count_per_second 1"},
	},
	{
		name:   "summary: the chosen quantiles the target exposes",
		first:  "# TYPE s summary\ns{quantile=\"0.25\"} 1\ns{quantile=\"0.5\"} 2\ns{quantile=\"0.99\"} 9\ns_sum 10\ns_count 4\n",
		second: "# TYPE s summary\ns{quantile=\"0.25\"} 1\ns{quantile=\"0.5\"} 3\ns{quantile=\"0.99\"} 8\ns_sum 20\ns_count 8\n",
		want1:  []string{"s{quantile=0.5} 2", "s{quantile=0.99} 9"},
		want2:  []string{"s{quantile=0.5} 3", "s{quantile=0.99} 8"},
	},
	{
		name:   "summary both ways",
		cfg:    telemetry.ScrapeConfig{Histograms: telemetry.HistogramBoth, Quantiles: []float64{0.5}},
		first:  "# TYPE s summary\ns{quantile=\"0.5\"} 2\ns_sum 10\ns_count 4\n",
		second: "# TYPE s summary\ns{quantile=\"0.5\"} 3\ns_sum 20\ns_count 8\n",
		want1:  []string{"s{quantile=0.5} 2"},
		want2:  []string{"s{quantile=0.5} 3", "s_sum_per_second 10", "s_count_per_second 4"},
	},
	{
		name:  "match keeps families by anchored name",
		cfg:   telemetry.ScrapeConfig{Match: []string{"node_cpu_.*", "up"}},
		first: "node_cpu_x 1\nnode_mem 2\nup 1\nupx 3\n", second: "node_cpu_x 1\nnode_mem 2\nup 1\nupx 3\n",
		want1: []string{"node_cpu_x 1", "up 1"}, want2: []string{"node_cpu_x 1", "up 1"},
	},
	{
		name:   "label matchers: all must admit, a missing label is empty",
		cfg:    telemetry.ScrapeConfig{Labels: []string{"mode!=idle", "cpu=~0|1", "x="}},
		first:  "c{cpu=\"0\",mode=\"idle\"} 1\nc{cpu=\"0\",mode=\"user\"} 2\nc{cpu=\"1\",mode=\"system\"} 3\nc{cpu=\"2\",mode=\"user\"} 4\nc{cpu=\"1\",mode=\"user\",x=\"y\"} 5\n",
		second: "c{cpu=\"0\",mode=\"user\"} 2\n",
		want1:  []string{"c{cpu=0,mode=user} 2", "c{cpu=1,mode=system} 3"}, want2: []string{"c{cpu=0,mode=user} 2"},
	},
	{
		// MaxSeries counts scrape_up and scrape_duration_seconds.
		name:   "series beyond MaxSeries are left out and counted",
		cfg:    telemetry.ScrapeConfig{MaxSeries: 4},
		first:  "a 1\nb 2\nc 3\n",
		second: "a 1\nb 2\nc 3\n",
		want1:  []string{"a 1", "b 2"}, want2: []string{"a 1", "b 2"}, beyond: 1,
	},
	{
		name:   "invalid samples are left out and counted",
		first:  "g NaN\nh +Inf\nok 1\n",
		second: "g NaN\nh 2\nok 1\n",
		want1:  []string{"ok 1"}, want2: []string{"h 2", "ok 1"}, invalid: 1,
	},
}

func TestScrapeAdapter(t *testing.T) {
	for _, tc := range adaptCases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.URL = "http://127.0.0.1:1/metrics"
			a, err := telemetry.NewAdapter(cfg)
			if err != nil {
				t.Fatal(err)
			}
			dt := tc.dt
			if dt == 0 {
				dt = time.Second
			}
			out1, _, _ := a.Adapt(parseFamilies(t, tc.first), t0)
			out2, invalid, beyond := a.Adapt(parseFamilies(t, tc.second), t0.Add(dt))
			for i, c := range []struct {
				out  []telemetry.Sample
				want []string
			}{{out1, tc.want1}, {out2, tc.want2}} {
				var got []string
				for _, s := range c.out {
					got = append(got, sampleString(s))
				}
				if !slices.Equal(got, c.want) {
					t.Errorf("scrape %d: samples\n  %q\nwant\n  %q", i+1, got, c.want)
				}
			}
			if invalid != tc.invalid || beyond != tc.beyond {
				t.Errorf("second scrape: invalid, beyond = %d, %d; want %d, %d", invalid, beyond, tc.invalid, tc.beyond)
			}
			if want := telemetry.UnixMilli(t0.Add(dt).Unix(), int64(t0.Add(dt).Nanosecond())); len(out2) > 0 && out2[0].T != want {
				t.Errorf("second scrape: T = %v, want %v (the scrape's time)", out2[0].T, want)
			}
		})
	}
}

// TestScrapeCounterResetRestarts: after a reset the rate starts again at
// the next scrape, from the new value.
func TestScrapeCounterResetRestarts(t *testing.T) {
	a, err := telemetry.NewAdapter(telemetry.ScrapeConfig{URL: "http://127.0.0.1:1/"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, v := range []int{100, 300, 10, 40} {
		out, _, _ := a.Adapt(parseFamilies(t, "# TYPE c_total counter\nc_total "+strconv.Itoa(v)+"\n"), t0.Add(time.Duration(i)*time.Second))
		for _, s := range out {
			got = append(got, strconv.Itoa(i)+": "+sampleString(s))
		}
	}
	if want := []string{"1: c_per_second 200", "3: c_per_second 30"}; !slices.Equal(got, want) {
		t.Errorf("rates %q, want %q", got, want)
	}
}

func TestBucketQuantile(t *testing.T) {
	inf := math.Inf(1)
	for _, c := range []struct {
		q      float64
		bounds []float64
		cum    []float64
		want   float64
	}{
		{0.5, []float64{1, 2, inf}, []float64{0, 10, 10}, 1.5},
		{0.5, []float64{1, 2, inf}, []float64{10, 10, 10}, 0.5},
		{1, []float64{1, 2, inf}, []float64{0, 0, 10}, 2}, // all in +Inf: the highest finite bound
		{0.5, []float64{-1, 2, inf}, []float64{10, 10, 10}, -1},
		{0, []float64{1, 2, inf}, []float64{0, 10, 10}, 1},
	} {
		if got := telemetry.BucketQuantile(c.q, c.bounds, c.cum); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("BucketQuantile(%v, %v, %v) = %v, want %v", c.q, c.bounds, c.cum, got, c.want)
		}
	}
}

func TestScrapeConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg   telemetry.ScrapeConfig
		field string
	}{
		{telemetry.ScrapeConfig{}, "url"},
		{telemetry.ScrapeConfig{URL: "ftp://h/x"}, "url"},
		{telemetry.ScrapeConfig{URL: "http://u:p@h/x"}, "url"},
		{telemetry.ScrapeConfig{URL: "http:///x"}, "url"},
		{telemetry.ScrapeConfig{URL: "http://h:0/x"}, "url"},
		{telemetry.ScrapeConfig{URL: "http://h/x", Interval: time.Millisecond}, "interval"},
		{telemetry.ScrapeConfig{URL: "http://h/x", Interval: time.Second, Timeout: 2 * time.Second}, "timeout"},
		{telemetry.ScrapeConfig{URL: "http://h/x", MaxBytes: -1}, "max_bytes"},
		{telemetry.ScrapeConfig{URL: "http://h/x", MaxBytes: telemetry.MaxScrapeMaxBytes + 1}, "max_bytes"},
		{telemetry.ScrapeConfig{URL: "http://h/x", Histograms: "median"}, "histograms"},
		{telemetry.ScrapeConfig{URL: "http://h/x", Quantiles: []float64{1.5}}, "quantiles"},
		{telemetry.ScrapeConfig{URL: "http://h/x", Match: []string{"a", "("}}, "match[1]"},
		{telemetry.ScrapeConfig{URL: "http://h/x", Labels: []string{"=x"}}, "label[0]"},
		{telemetry.ScrapeConfig{URL: "http://h/x", Labels: []string{"a~b"}}, "label[0]"},
		{telemetry.ScrapeConfig{URL: "http://h/x", Labels: []string{"a=~("}}, "label[0]"},
		{telemetry.ScrapeConfig{URL: "http://h/x", Labels: []string{"1a=b"}}, "label[0]"},
		{telemetry.ScrapeConfig{URL: "http://127.0.0.1/x", BearerTokenFile: "token"}, "bearer_token_file"},
		{telemetry.ScrapeConfig{URL: "http://example.com/x", BearerTokenFile: "/token"}, "bearer_token_file"},
		{telemetry.ScrapeConfig{URL: "https://example.com/x", BearerTokenFile: "/token"}, ""},
		{telemetry.ScrapeConfig{URL: "http://localhost:9100/x", BearerTokenFile: "/token"}, ""},
		{telemetry.ScrapeConfig{URL: "http://[::1]:9100/x", BearerTokenFile: "/token"}, ""},
		{telemetry.ScrapeConfig{URL: "https://[::1]:9100/metrics", Labels: []string{"a=", "b!=c", "c=~d.*", "d!~e"}}, ""},
		// The bounds: a URL of 2048 bytes, 32 quantiles, expressions and
		// label matchers each, an expression or matcher of 1024 bytes.
		{telemetry.ScrapeConfig{URL: "http://h/" + strings.Repeat("x", 2048-9)}, ""},
		{telemetry.ScrapeConfig{URL: "http://h/" + strings.Repeat("x", 2049-9)}, "url"},
		{telemetry.ScrapeConfig{URL: "http://h/x", Quantiles: slices.Repeat([]float64{0.5}, 32)}, ""},
		{telemetry.ScrapeConfig{URL: "http://h/x", Quantiles: slices.Repeat([]float64{0.5}, 33)}, "quantiles"},
		{telemetry.ScrapeConfig{URL: "http://h/x", Match: slices.Repeat([]string{"a"}, 32)}, ""},
		{telemetry.ScrapeConfig{URL: "http://h/x", Match: slices.Repeat([]string{"a"}, 33)}, "match"},
		{telemetry.ScrapeConfig{URL: "http://h/x", Labels: slices.Repeat([]string{"a=b"}, 32)}, ""},
		{telemetry.ScrapeConfig{URL: "http://h/x", Labels: slices.Repeat([]string{"a=b"}, 33)}, "label"},
		{telemetry.ScrapeConfig{URL: "http://h/x", Match: []string{strings.Repeat("a", 1024)}}, ""},
		{telemetry.ScrapeConfig{URL: "http://h/x", Match: []string{strings.Repeat("a", 1025)}}, "match[0]"},
		{telemetry.ScrapeConfig{URL: "http://h/x", Labels: []string{"a=" + strings.Repeat("b", 1022)}}, ""},
		{telemetry.ScrapeConfig{URL: "http://h/x", Labels: []string{"a=" + strings.Repeat("b", 1023)}}, "label[0]"},
	} {
		err := c.cfg.Validate()
		var field string
		if fe, ok := err.(*telemetry.FieldError); ok {
			field = fe.Field
		} else if err != nil {
			t.Errorf("Validate(%+v) = %v, not a *FieldError", c.cfg, err)
		}
		if field != c.field {
			t.Errorf("Validate(%+v) = %v; want an error of field %q", c.cfg, err, c.field)
		}
	}
}

// FuzzScrapeAdapter: any two scrapes a parser accepts convert without a
// panic into valid samples (every one passes Normalize, is finite, and
// rates are not negative), at most MaxSeries of them, and the values
// kept for rates stay within MaxSeries.
func FuzzScrapeAdapter(f *testing.F) {
	for _, c := range adaptCases {
		f.Add([]byte(c.first), []byte(c.second), uint8(0))
		f.Add([]byte(c.second), []byte(c.first), uint8(1))
	}
	f.Add([]byte("# TYPE h histogram\nh_bucket{le=\"1\"} 5\nh_bucket{le=\"+Inf\"} 3\nh_count 3\n"), []byte("# TYPE h histogram\nh_bucket{le=\"1\"} 9\nh_bucket{le=\"+Inf\"} 9\nh_count 9\n"), uint8(2))
	f.Fuzz(func(t *testing.T, first, second []byte, mode uint8) {
		p := expfmt.NewTextParser(model.LegacyValidation)
		f1, err1 := p.TextToMetricFamilies(strings.NewReader(string(first)))
		f2, err2 := p.TextToMetricFamilies(strings.NewReader(string(second)))
		if err1 != nil || err2 != nil {
			return
		}
		modes := []telemetry.HistogramMode{telemetry.HistogramQuantiles, telemetry.HistogramRates, telemetry.HistogramBoth}
		const maxSeries = 50
		a, err := telemetry.NewAdapter(telemetry.ScrapeConfig{URL: "http://127.0.0.1:1/", MaxSeries: maxSeries, Histograms: modes[int(mode)%3]})
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range []map[string]*dto.MetricFamily{f1, f2} {
			var fams []*dto.MetricFamily
			for _, f := range m {
				fams = append(fams, f)
			}
			out, _, _ := a.Adapt(fams, t0.Add(time.Duration(i)*time.Second))
			if len(out) > maxSeries {
				t.Fatalf("scrape %d: %d samples, more than MaxSeries %d", i, len(out), maxSeries)
			}
			if a.Remembered() > maxSeries {
				t.Fatalf("scrape %d: %d values kept, more than MaxSeries %d", i, a.Remembered(), maxSeries)
			}
			for _, s := range out {
				c := s
				c.Labels = slices.Clone(s.Labels)
				if err := c.Normalize(); err != nil {
					t.Fatalf("scrape %d: invalid sample %+v: %v", i, s, err)
				}
				if math.IsNaN(s.Value) || math.IsInf(s.Value, 0) {
					t.Fatalf("scrape %d: %s is not finite", i, sampleString(s))
				}
				if strings.HasSuffix(s.Name, "_per_second") && s.Value < 0 {
					t.Fatalf("scrape %d: negative rate %s", i, sampleString(s))
				}
			}
		}
	})
}
