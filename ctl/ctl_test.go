package ctl

import (
	"bytes"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/internal/units"
)

func TestParseLimitAssignments(t *testing.T) {
	req, err := parseLimitAssignments([]string{"maxOutputStall=2s", "max_buffered_bytes=8MiB", "maxSubscriptions=2", "hostReceive.windowBytes=512KiB", "heartbeatInterval=default"})
	if err != nil {
		t.Fatal(err)
	}
	l := req.Limits
	if l.MaxOutputStall.AsDuration() != 2*time.Second || l.MaxBufferedBytes != 8<<20 || l.MaxSubscriptions != 2 || l.HostReceive.WindowBytes != 512<<10 || l.HeartbeatInterval.AsDuration() != 0 {
		t.Fatalf("limits = %v", l)
	}
	want := []string{"max_output_stall", "max_buffered_bytes", "max_subscriptions", "host_receive.window_bytes", "heartbeat_interval"}
	if !slices.Equal(req.UpdateMask.Paths, want) {
		t.Fatalf("paths = %v, want %v", req.UpdateMask.Paths, want)
	}
	for _, bad := range [][]string{{"nope=1"}, {"maxOutputStall"}, {"maxOutputStall=2"}, {"maxSubscriptions=1k"}, {"maxBufferedBytes=lots"}, {"maxSubscriptions=1", "maxsubscriptions=2"}, {"=1"}} {
		if _, err := parseLimitAssignments(bad); err == nil {
			t.Errorf("parseLimitAssignments(%q) succeeded", bad)
		} else if _, ok := err.(*usageError); !ok {
			t.Errorf("parseLimitAssignments(%q) = %T, want a usage error", bad, err)
		}
	}
}

func TestFormatLimit(t *testing.T) {
	for _, tc := range []struct {
		kind int
		v    int64
		want string
	}{{kindSize, 64 << 20, "64MiB"}, {kindSize, 1500, "1500"}, {kindSize, 0, "0"}, {kindDuration, int64(90 * time.Second), "1m30s"}, {kindCount, 1024, "1024"}} {
		if got := formatLimit(tc.kind, tc.v); got != tc.want {
			t.Errorf("formatLimit(%d, %d) = %q, want %q", tc.kind, tc.v, got, tc.want)
		}
		if tc.kind == kindSize {
			if back, err := units.ParseSize(formatLimit(tc.kind, tc.v)); err != nil || back != tc.v {
				t.Errorf("units.ParseSize(formatLimit(%d)) = %d, %v", tc.v, back, err)
			}
		}
	}
}

func TestDetachKeyAndUTF8(t *testing.T) {
	for _, tc := range []struct {
		reads  []string
		want   string
		detach bool
	}{
		{[]string{"ls\r"}, "ls\r", false},
		{[]string{"a\x1dd"}, "a", true},
		{[]string{"a\x1d", "d"}, "a", true},
		{[]string{"\x1d\x1dx"}, "\x1dx", false},
		{[]string{"\x1dx"}, "\x1dx", false},
		{[]string{"\xc3", "\xa9!"}, "é!", false},
		{[]string{"\xe2\x82", "\xac"}, "€", false},
	} {
		at := &attacher{}
		var got []byte
		detach := false
		for _, r := range tc.reads {
			b, d := at.feed([]byte(r))
			got = append(got, b...)
			if d {
				detach = true
				break
			}
		}
		if string(got) != tc.want || detach != tc.detach {
			t.Errorf("feed(%q) = %q, detach %v; want %q, %v", tc.reads, got, detach, tc.want, tc.detach)
		}
	}
}

func TestParseFlagsInterleaved(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		rawTail bool
		pos     []string
		reason  string
	}{
		{[]string{"c1", "--reason", "x"}, false, []string{"c1"}, "x"},
		{[]string{"--reason", "x", "c1"}, false, []string{"c1"}, "x"},
		{[]string{"--", "--reason"}, false, []string{"--reason"}, ""},
		{[]string{"--reason", "y", "sh", "-c", "--reason"}, true, []string{"sh", "-c", "--reason"}, "y"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		reason := fs.String("reason", "", "")
		pos, err := parseFlags(fs, tc.args, tc.rawTail)
		if err != nil || !slices.Equal(pos, tc.pos) || *reason != tc.reason {
			t.Errorf("parseFlags(%q) = %q, reason %q, %v; want %q, %q", tc.args, pos, *reason, err, tc.pos, tc.reason)
		}
	}
}

func TestUsageAndExitCodes(t *testing.T) {
	run := func(args ...string) (string, string, int) {
		var out, errOut bytes.Buffer
		code := Main(args, strings.NewReader(""), &out, &errOut)
		return out.String(), errOut.String(), code
	}
	for _, tc := range []struct {
		args []string
		code int
		want string // in stdout for 0, stderr otherwise
	}{
		{[]string{"--help"}, 0, "Commands:"},
		{[]string{"help", "limits", "set"}, 0, "maxOutputStall=2s"},
		{[]string{"limits", "set", "--help"}, 0, "Durations use Go syntax"},
		{[]string{"channels"}, 2, "missing subcommand"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate" (see`},
		{[]string{"channels", "list", "-o", "xml"}, 2, "-o must be table, wide, json or yaml"},
		{[]string{"-o", "xml", "channels", "list"}, 2, "-o must be table, wide, json or yaml"},
		{[]string{"-o", "json", "version"}, 2, "takes no -o"},
		{[]string{"chanels", "list"}, 2, `did you mean "channels"?`},
		{[]string{"channels", "lsit"}, 2, `did you mean "list"?`},
		{[]string{"stauts"}, 2, `did you mean "status"?`},
		{[]string{"channels", "list", "--type", "foo"}, 2, "--type must be terminal, telemetry, tcp"},
		{[]string{"events", "--kind", "bogus"}, 2, `unknown --kind "bogus" (kinds: channel.created,`},
		{[]string{"attach", "--detach-keys", "alt-x", "shell"}, 2, "--detach-keys"},
		{[]string{"open", "--all", "ahp-terminal:/x"}, 2, "--all or a URI"},
		{[]string{"viewers", "kick"}, 2, "want ID"},
		{[]string{"--timeout", "0", "status"}, 2, "--timeout"},
		{[]string{"--control", "/nonexistent/ahpd.sock", "status"}, 1, "no control socket at /nonexistent/ahpd.sock"},
		{[]string{"version"}, 0, "ahpctl"},
		// Flags in errors are written as in the help: two dashes (issue 39).
		{[]string{"channels", "list", "--bogus"}, 2, "ahpctl channels list: flag provided but not defined: --bogus (see"},
		{[]string{"--bogus", "status"}, 2, "flag provided but not defined: --bogus (see ahpctl --help)"},
		{[]string{"channels", "list", "--type"}, 2, "flag needs an argument: --type"},
		{[]string{"ls", "-o"}, 2, "flag needs an argument: -o"},
	} {
		out, errOut, code := run(tc.args...)
		text := errOut
		if tc.code == 0 {
			text = out
		}
		if code != tc.code || !strings.Contains(text, tc.want) {
			t.Errorf("ahpctl %q: exit %d, stdout %q, stderr %q; want exit %d with %q", tc.args, code, out, errOut, tc.code, tc.want)
		}
		if code != 0 && strings.Count(errOut, "\n") != 1 && tc.args[0] != "channels" {
			t.Errorf("ahpctl %q: error is not one line: %q", tc.args, errOut)
		}
	}
}
