package termbench

import (
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
