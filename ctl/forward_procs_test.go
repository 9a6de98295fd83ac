package ctl

import "testing"

// TestForwardProcs: forward runs on one P unless GOMAXPROCS is set in its
// environment, which then decides.
func TestForwardProcs(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if n := forwardProcs(getenv); n != 1 {
		t.Fatalf("forwardProcs with no GOMAXPROCS = %d, want 1", n)
	}
	env["GOMAXPROCS"] = "4"
	if n := forwardProcs(getenv); n != 0 {
		t.Fatalf("forwardProcs with GOMAXPROCS=4 = %d, want 0 (leave the environment's)", n)
	}
}
