package ctl_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestE2ETelemetryScrape: ahpctl telemetry create --kind scrape against
// the real binaries and HTTP servers on 127.0.0.1. A URL outside the TCP
// allow-list, a target that times out and a body over the cap are
// refused with a message naming what to do and exit status 1, bad flags
// with 2; an allowed target and the daemon's own /metrics become
// channels named from their source, whose viewers get the samples.
func TestE2ETelemetryScrape(t *testing.T) {
	d := startDaemonWith(t, []string{"--metrics-public"}, nil)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer slow.Close()
	defer close(release)
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("# a comment line of padding\n", 100)+"up 1\n")
	}))
	defer big.Close()
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "# TYPE room_temperature_celsius gauge\nroom_temperature_celsius{room=\"lab\"} 21.5\nroom_temperature_celsius{room=\"hall\"} 18\n")
	}))
	defer good.Close()
	hostPort := func(s *httptest.Server) string { return strings.TrimPrefix(s.URL, "http://") }

	// Bad usage: exit 2, before or from the daemon.
	for _, args := range [][]string{
		{"--kind", "scrape"},
		{"--kind", "scrape", "--url", good.URL, "--label", "room"},
		{"--kind", "scrape", "--url", good.URL, "--quantiles", "0.5,high"},
		{"--kind", "scrape", "--url", good.URL, "--histograms", "median"},
		{"--kind", "scrape", "--url", good.URL, "--interval", "1s", "--scrape-timeout", "2s"},
		{"--kind", "system", "--url", good.URL},
	} {
		if _, errOut, code := d.ctl(append([]string{"telemetry", "create"}, args...)...); code != 2 {
			t.Errorf("telemetry create %s: exit %d (%s), want 2", strings.Join(args, " "), code, errOut)
		}
	}

	// Outside the allow-list: refused, naming the rule to add.
	_, errOut, code := d.ctl("telemetry", "create", "--kind", "scrape", "--url", good.URL+"/metrics")
	if want := "ahpctl tcp allow " + hostPort(good); code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("a URL outside the allow-list: exit %d, %q; want 1 and %q", code, errOut, want)
	}
	for _, s := range []*httptest.Server{slow, big, good} {
		d.mustCtl("tcp", "allow", hostPort(s))
	}
	_, errOut, code = d.ctl("telemetry", "create", "--kind", "scrape", "--url", slow.URL+"/metrics", "--scrape-timeout", "200ms")
	if want := "scrape " + slow.URL + "/metrics: timed out after 200ms"; code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("a target that never answers: exit %d, %q; want 1 and %q", code, errOut, want)
	}
	_, errOut, code = d.ctl("telemetry", "create", "--kind", "scrape", "--url", big.URL, "--max-bytes", "1KiB")
	if want := "response body larger than the cap: more than 1024 bytes"; code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("a body over the cap: exit %d, %q; want 1 and %q", code, errOut, want)
	}
	if out := d.mustCtl("channels", "list", "--type", "telemetry"); strings.Contains(out, "scrape") {
		t.Errorf("refused creates left channels:\n%s", out)
	}

	uri := strings.TrimSpace(d.mustCtl("telemetry", "create", "--kind", "scrape", "--url", good.URL+"/metrics", "--interval", "100ms", "--label", "room=lab"))
	if want := "ahp-telemetry:/scrape-" + strings.ReplaceAll(hostPort(good), ":", "-"); uri != want {
		t.Errorf("created %q, want %q", uri, want)
	}
	if out := d.mustCtl("channels", "list"); !strings.Contains(out, "scrape of "+good.URL+"/metrics") {
		t.Errorf("channels list lacks the title:\n%s", out)
	}
	v := d.telemetryViewer(uri)
	var temp, up bool
	for range 50 {
		for _, s := range v.next(20 * time.Second) {
			switch {
			case s.Name == "room_temperature_celsius" && s.Labels["room"] == "lab" && s.Value == 21.5:
				temp = true
			case s.Name == "room_temperature_celsius":
				t.Fatalf("--label room=lab let %+v through", s)
			case s.Name == "scrape_up" && s.Value == 1:
				up = true
			}
		}
		if temp && up {
			break
		}
	}
	if !temp || !up {
		t.Fatalf("samples: room_temperature_celsius{room=lab} 21.5 %v, scrape_up 1 %v", temp, up)
	}

	// The target goes away: the channel goes on, and says why it has
	// nothing new.
	good.Close()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		out := d.mustCtl("channels", "list", "--type", "telemetry")
		if strings.Contains(out, "last scrape failed: connection refused") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("channels list does not say the scrape fails:\n%s", out)
		}
	}

	// The daemon's own /metrics: counters as rates.
	d.mustCtl("tcp", "allow", d.addr)
	own := strings.TrimSpace(d.mustCtl("telemetry", "create", "--kind", "scrape", "--id", "self", "--url", fmt.Sprintf("http://%s/metrics", d.addr),
		"--interval", "100ms", "--match", "ahpd_telemetry_samples_total|go_goroutines"))
	v = d.telemetryViewer(own)
	var rate, gauge bool
	for range 50 {
		for _, s := range v.next(20 * time.Second) {
			switch s.Name {
			case "ahpd_telemetry_samples_per_second":
				rate = rate || s.Labels["channel"] == uri && s.Value > 0
			case "go_goroutines":
				gauge = s.Value > 0
			case "ahpd_telemetry_samples_total":
				t.Fatalf("a counter as it is: %+v", s)
			}
		}
		if rate && gauge {
			break
		}
	}
	if !rate || !gauge {
		t.Fatalf("own /metrics: the other scrape channel's samples per second %v, go_goroutines %v", rate, gauge)
	}
}

// TestE2EUpgradeScrape: a scrape channel goes through an upgrade in place:
// same URI and title, and a viewer that reconnects gets fresh scrapes with
// a counter's rate again (the new binary starts the source anew).
func TestE2EUpgradeScrape(t *testing.T) {
	d := startDaemon(t)
	var mu sync.Mutex
	n := 0
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n += 100
		v := n
		mu.Unlock()
		fmt.Fprintf(w, "# TYPE hits_total counter\nhits_total %d\n", v)
	}))
	defer target.Close()
	d.mustCtl("tcp", "allow", strings.TrimPrefix(target.URL, "http://"))
	uri := strings.TrimSpace(d.mustCtl("telemetry", "create", "--kind", "scrape", "--url", target.URL, "--interval", "50ms"))
	rateSeen := func() {
		t.Helper()
		v := d.telemetryViewer(uri)
		for range 100 {
			for _, s := range v.next(20 * time.Second) {
				if s.Name == "hits_per_second" && s.Value > 0 {
					return
				}
			}
		}
		t.Fatal("no hits_per_second > 0 in 100 batches")
	}
	rateSeen()
	d.upgrade(1)
	if out := d.mustCtl("channels", "list"); !strings.Contains(out, uri) || !strings.Contains(out, "scrape of "+target.URL) {
		t.Fatalf("after the upgrade, channels list:\n%s", out)
	}
	rateSeen()
}
