package ctl_test

import (
	"encoding/json"
	"net"
	"regexp"
	"strings"
	"testing"

	"github.com/ahp-dev/ahpd/ctl/client"
)

// The small frictions of issue 39, each as ahpctl shows it against a real
// daemon: what it prints, and its exit status.

func TestE2ELimitsSizeUnitsAndOneKey(t *testing.T) {
	d := startDaemonWith(t, []string{"--config", "none"}, nil)
	// SI and IEC units: 8MB is 8,000,000 bytes, 8MiB 8,388,608.
	if out, errOut, code := d.ctl("limits", "set", "maxBufferedBytes=8MB"); code != 0 || out != "maxBufferedBytes=8000000 (was 64MiB)\n" {
		t.Fatalf("limits set maxBufferedBytes=8MB: exit %d, %q, %q", code, out, errOut)
	}
	if out := d.mustCtl("limits", "set", "maxBufferedBytes=8MiB"); out != "maxBufferedBytes=8MiB (was 8000000)\n" {
		t.Fatalf("limits set maxBufferedBytes=8MiB printed %q", out)
	}
	// limits get KEY shows that key alone.
	out := d.mustCtl("limits", "get", "maxBufferedBytes")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !regexp.MustCompile(`^KEY +VALUE +DEFAULT$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^maxBufferedBytes +8MiB +64MiB$`).MatchString(lines[1]) {
		t.Fatalf("limits get maxBufferedBytes:\n%s", out)
	}
	var v struct{ Key, Value, Default string }
	if err := json.Unmarshal([]byte(d.mustCtl("limits", "get", "max_buffered_bytes", "-o", "json")), &v); err != nil || v.Key != "maxBufferedBytes" || v.Value != "8MiB" || v.Default != "64MiB" {
		t.Fatalf("limits get -o json: %+v, %v", v, err)
	}
	if _, errOut, code := d.ctl("limits", "get", "maxBuferedBytes"); code != 2 || !strings.Contains(errOut, `unknown key "maxBuferedBytes" (did you mean maxBufferedBytes?)`) {
		t.Fatalf("limits get of a typo: exit %d, %q", code, errOut)
	}
	if _, errOut, code := d.ctl("limits", "set", "maxOutputStal=2s"); code != 2 || !strings.Contains(errOut, "(did you mean maxOutputStall?)") {
		t.Fatalf("limits set of a typo: exit %d, %q", code, errOut)
	}
	if _, errOut, code := d.ctl("limits", "set", "maxBufferedBytes=8M"); code != 2 || !strings.Contains(errOut, "KiB, MiB, GiB") || !strings.Contains(errOut, "KB, MB, GB") {
		t.Fatalf("limits set 8M: exit %d, %q; want the rule", code, errOut)
	}
}

func TestE2EResizeSizeMessages(t *testing.T) {
	d := startDaemonWith(t, []string{"--config", "none"}, nil)
	d.mustCtl("terminal", "create", "--id", "t", "--", "/bin/sh")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--cols", "0", "--rows", "0"}, "--cols must be at least 1, got 0"},
		{[]string{"--cols", "80", "--rows", "-3"}, "--rows must be at least 1, got -3"},
		{[]string{"--rows", "24"}, "--cols is required"},
	} {
		_, errOut, code := d.ctl(append([]string{"terminal", "resize", "t"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("terminal resize %v: exit %d, %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
	d.mustCtl("terminal", "resize", "t", "--cols", "133", "--rows", "51")
	// Sizes read columns×rows.
	if out := d.mustCtl("ls"); !regexp.MustCompile(`(?m)^ahp-terminal:/t .* 133x51 `).MatchString(out) {
		t.Fatalf("ls after resize:\n%s", out)
	}
}

func TestE2EShortNameOfAType(t *testing.T) {
	d := startDaemonWith(t, []string{"--config", "none"}, nil)
	d.mustCtl("terminal", "create", "--id", "shell", "--", "/bin/sh")
	_, errOut, code := d.ctlIn("x 1\n", "telemetry", "push", "nosuch")
	if code != 1 || !strings.Contains(errOut, "ahp-telemetry:/nosuch") || strings.Contains(errOut, "ahp-terminal:") {
		t.Fatalf("telemetry push nosuch: exit %d, %q; want the telemetry URI", code, errOut)
	}
	// A terminal's ID is not a telemetry channel.
	if _, errOut, code := d.ctlIn("x 1\n", "telemetry", "push", "shell"); code != 1 || !strings.Contains(errOut, `no telemetry channel has the ID "shell"`) {
		t.Fatalf("telemetry push shell: exit %d, %q", code, errOut)
	}
	d.mustCtl("telemetry", "create", "--kind", "push", "--id", "shell")
	if _, errOut, code := d.ctlIn("x 1\n", "telemetry", "push", "shell"); code != 0 {
		t.Fatalf("telemetry push shell (a terminal and a telemetry channel with that ID): exit %d, %q", code, errOut)
	}
}

func TestE2EKickSaysWhatItDid(t *testing.T) {
	d := startDaemonWith(t, []string{"--config", "none"}, nil)
	tok := strings.TrimSpace(d.mustCtl("token", "create", "--role", "view"))
	c, _, err := client.Dial(ctxT(t), "ws://"+d.addr+"/v1/ws", client.Options{Token: tok, ClientName: "kick-me"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var viewers []struct {
		ID     string `json:"id"`
		Client string `json:"client"`
		Remote string `json:"remoteAddress"`
	}
	if err := json.Unmarshal([]byte(d.mustCtl("viewers", "list", "-o", "json")), &viewers); err != nil || len(viewers) != 1 {
		t.Fatalf("viewers list: %+v, %v", viewers, err)
	}
	id := viewers[0].ID
	out := d.mustCtl("viewers", "kick", id, "--reason", "maintenance")
	if want := "kicked viewer " + id + " (kick-me from " + viewers[0].Remote + `): closed with 1008 "maintenance"` + "\n"; out != want {
		t.Fatalf("viewers kick printed %q, want %q", out, want)
	}
	if _, errOut, code := d.ctl("viewers", "kick", id); code != 1 || !strings.Contains(errOut, id) {
		t.Fatalf("kick again: exit %d, %q", code, errOut)
	}
}

func TestE2EListTCPColumns(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	d := startDaemonWith(t, []string{"--config", "none"}, nil)
	d.mustCtl("terminal", "create", "--id", "sh", "--", "/bin/sh")
	d.mustCtl("tcp", "allow", ln.Addr().String())
	d.mustCtl("tcp", "create", "--id", "web", ln.Addr().String())
	out := d.mustCtl("ls", "--type", "tcp")
	header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
	for _, col := range []string{"TARGET", "STATE", "BYTES", "IN", "OUT"} {
		if !strings.Contains(strings.Join(header, " "), col) {
			t.Errorf("ls --type tcp header lacks %s: %v", col, header)
		}
	}
	for _, col := range []string{"SIZE", "PID", "TITLE"} {
		if strings.Contains(strings.Join(header, " "), col) {
			t.Errorf("ls --type tcp has the terminal column %s:\n%s", col, out)
		}
	}
	if !regexp.MustCompile(`(?m)^ahp-tcp:/web +`+regexp.QuoteMeta(ln.Addr().String())+` `).MatchString(out) || strings.Contains(out, "ahp-terminal:/sh") {
		t.Fatalf("ls --type tcp:\n%s", out)
	}
	// The whole list keeps the terminal's columns and adds the TCP table.
	if all := d.mustCtl("ls"); !strings.Contains(all, "SIZE") || !strings.Contains(all, "TARGET") {
		t.Fatalf("ls:\n%s", all)
	}
}
