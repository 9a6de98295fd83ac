package termbench

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

func TestMetric(t *testing.T) {
	text := "# HELP x\nfoo_total{a=\"b\"} 3\nfoo 2.5\nfoo_bar 9\n"
	if v, err := Metric(strings.NewReader(text), "foo"); err != nil || v != 2.5 {
		t.Fatalf("Metric foo = %v, %v; want 2.5 (not the labelled or longer names)", v, err)
	}
	if _, err := Metric(strings.NewReader(text), "missing"); err == nil {
		t.Fatal("a missing metric read as found")
	}
}

func TestStatusKiB(t *testing.T) {
	if n, err := StatusKiB(os.Getpid(), "VmRSS"); err != nil || n <= 0 {
		t.Fatalf("VmRSS of this process = %d, %v", n, err)
	}
	if _, err := StatusKiB(os.Getpid(), "NoSuchField"); err == nil {
		t.Fatal("a missing field read as found")
	}
}

func TestMetrics(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		fmt.Fprintln(w, "go_goroutines 7")
	}))
	defer srv.Close()
	body, err := Metrics(t.Context(), srv.URL, "tok")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := Metric(bytes.NewReader(body), "go_goroutines"); err != nil || v != 7 {
		t.Fatalf("go_goroutines = %v, %v; want 7", v, err)
	}
	if _, err := Metrics(t.Context(), srv.URL, "wrong"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("Metrics with a wrong token = %v, want the 401", err)
	}
}
