package ctl_test

import (
	"encoding/json"
	"os/exec"
	"regexp"
	"testing"
	"time"
)

// TestE2EAttachWindow: attach subscribes with an 8 MiB receive window
// (not the host's default 1 MiB), --window sets another, and a bad
// --window is a usage error — as the daemon sees the subscription.
func TestE2EAttachWindow(t *testing.T) {
	d := startDaemon(t)
	d.mustCtl("terminal", "create", "--id", "w", "--env", "PS1=PROMPT> ", "--env", "HOME=/tmp", "--", "/bin/sh")
	window := func(args ...string) int64 {
		t.Helper()
		cmd := exec.Command(d.ahpctl, append([]string{"--control", d.control, "attach"}, args...)...)
		f, screen, done := inPTY(t, cmd)
		screen.waitFor(t, 0, regexp.MustCompile(`PROMPT> `))
		var got int64 = -1
		deadline := time.Now().Add(20 * time.Second)
		for got < 0 {
			var viewers []struct {
				Client        string `json:"client"`
				Subscriptions []struct {
					Channel     string `json:"channel"`
					WindowBytes int64  `json:"windowBytes"`
				} `json:"subscriptions"`
			}
			if err := json.Unmarshal([]byte(d.mustCtl("viewers", "list", "-o", "json")), &viewers); err != nil {
				t.Fatal(err)
			}
			for _, v := range viewers {
				if v.Client == "ahpctl attach" && len(v.Subscriptions) == 1 && v.Subscriptions[0].Channel == "ahp-terminal:/w" {
					got = v.Subscriptions[0].WindowBytes
				}
			}
			if got < 0 && time.Now().After(deadline) {
				t.Fatalf("no attach viewer in viewers list: %+v", viewers)
			}
			time.Sleep(50 * time.Millisecond) // polling another process's state
		}
		if _, err := f.Write([]byte{0x1d, 'd'}); err != nil { // Ctrl-] d
			t.Fatal(err)
		}
		if code := attachExit(t, cmd, done, screen); code != 0 {
			t.Fatalf("attach %v: exit %d after Ctrl-] d; output:\n%q", args, code, screen.String())
		}
		return got
	}
	if w := window("w"); w != 8<<20 {
		t.Errorf("attach: window %d, want 8 MiB", w)
	}
	if w := window("--window", "2MiB", "w"); w != 2<<20 {
		t.Errorf("attach --window 2MiB: window %d, want 2 MiB", w)
	}
	if _, errOut, code := d.ctl("attach", "--window", "lots", "w"); code != 2 {
		t.Errorf("attach --window lots: exit %d, stderr %q; want 2", code, errOut)
	}
}
