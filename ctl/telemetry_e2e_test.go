package ctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/ctl/client"
)

// ahpctl telemetry push against the real binaries: lines on stdin reach a
// viewer subscribed over AHP/1, bad lines are reported with their number
// and skipped, and a channel that takes no samples is refused.

// ctlIn runs ahpctl with stdin.
func (d *daemonProc) ctlIn(stdin string, args ...string) (string, string, int) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.ahpctl, append([]string{"--control", d.control}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return stdout.String(), stderr.String(), ee.ExitCode()
	} else if err != nil {
		d.t.Fatalf("ahpctl %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), 0
}

type pushedSample struct {
	T      float64           `json:"t"`
	Name   string            `json:"name"`
	Value  float64           `json:"value"`
	Labels map[string]string `json:"labels"`
}

// telemetryViewer subscribes to uri over AHP/1 with a view token.
type telemetryViewer struct {
	t   *testing.T
	sub *client.Sub
	seq uint64
}

func (d *daemonProc) telemetryViewer(uri string) *telemetryViewer {
	d.t.Helper()
	tok := strings.TrimSpace(d.mustCtl("token", "create", "--channel", uri, "--role", "view", "--ttl", "5m"))
	c, _, err := client.Dial(ctxT(d.t), "ws://"+d.addr+"/v1/ws", client.Options{Token: tok})
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { c.Close() })
	sub, err := c.Subscribe(ctxT(d.t), uri, nil)
	if err != nil {
		d.t.Fatal(err)
	}
	return &telemetryViewer{t: d.t, sub: sub}
}

// next returns the samples of the next telemetry/samples message, or nil
// after within with nothing; channel/ready is skipped, telemetry/dropped
// fails the test.
func (v *telemetryViewer) next(within time.Duration) []pushedSample {
	v.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		m, err := v.sub.Next(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			return nil
		}
		if err != nil {
			v.t.Fatal(err)
		}
		if err := v.sub.Release(ctxT(v.t), m); err != nil {
			v.t.Fatal(err)
		}
		switch m.Method {
		case "channel/ready":
			continue
		case "telemetry/samples":
			var p struct {
				Seq     uint64         `json:"seq"`
				Samples []pushedSample `json:"samples"`
			}
			if err := json.Unmarshal(m.Params, &p); err != nil {
				v.t.Fatal(err)
			}
			if v.seq != 0 && p.Seq != v.seq+1 {
				v.t.Fatalf("seq %d after %d", p.Seq, v.seq)
			}
			v.seq = p.Seq
			return p.Samples
		default:
			v.t.Fatalf("unexpected %s %s", m.Method, m.Params)
		}
	}
}

// collect reads until n samples have come.
func (v *telemetryViewer) collect(n int) []pushedSample {
	v.t.Helper()
	var got []pushedSample
	for len(got) < n {
		s := v.next(20 * time.Second)
		if s == nil {
			v.t.Fatalf("%d samples of %d within 20s", len(got), n)
		}
		got = append(got, s...)
	}
	return got
}

func TestE2ETelemetryPush(t *testing.T) {
	d := startDaemon(t)
	uri := strings.TrimSpace(d.mustCtl("telemetry", "create", "--kind", "push", "--id", "build"))
	if uri != "ahp-telemetry:/build" {
		t.Fatalf("telemetry create printed %q", uri)
	}
	viewer := d.telemetryViewer(uri)

	// N lines, every 97th bad in a rotating way, some JSON, some with
	// labels, a comment and a blank line that are skipped.
	const n = 5000
	var in strings.Builder
	var want []pushedSample
	var badLines []int
	before := float64(time.Now().UnixMilli())
	for i := 1; i <= n; i++ {
		switch {
		case i%97 == 0:
			in.WriteString([]string{"bad_line", "9bad 1", "x one", `{"name":"x"}`, "x 1 a=1 a=2"}[i/97%5] + "\n")
			badLines = append(badLines, i)
		case i%500 == 0:
			in.WriteString("# a comment\n")
		case i%501 == 0:
			in.WriteString("\n")
		case i%3 == 0:
			fmt.Fprintf(&in, "{\"t\":%d,\"name\":\"json_n\",\"value\":%d,\"labels\":{\"k\":\"v %d\"}}\n", 1712000000000+i, i, i%7)
			want = append(want, pushedSample{T: float64(1712000000000 + i), Name: "json_n", Value: float64(i), Labels: map[string]string{"k": fmt.Sprintf("v %d", i%7)}})
		case i%3 == 1:
			fmt.Fprintf(&in, "text_n %d.5 host=h%d role=\"build box\"\n", i, i%5)
			want = append(want, pushedSample{Name: "text_n", Value: float64(i) + 0.5, Labels: map[string]string{"host": fmt.Sprintf("h%d", i%5), "role": "build box"}})
		default:
			fmt.Fprintf(&in, "plain %d\n", -i)
			want = append(want, pushedSample{Name: "plain", Value: float64(-i)})
		}
	}
	out, errOut, code := d.ctlIn(in.String(), "telemetry", "push", uri)
	after := float64(time.Now().UnixMilli())
	if code != 1 || out != "" {
		t.Fatalf("push with bad lines: exit %d, stdout %q; want 1 and nothing", code, out)
	}
	lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	if len(lines) != len(badLines)+1 {
		t.Fatalf("stderr has %d lines, want %d bad lines and a summary:\n%s", len(lines), len(badLines), errOut)
	}
	for i, l := range badLines {
		if !strings.HasPrefix(lines[i], fmt.Sprintf("ahpctl: stdin:%d: ", l)) {
			t.Errorf("stderr line %d = %q, want the report of line %d", i+1, lines[i], l)
		}
	}
	summary := fmt.Sprintf("ahpctl: telemetry push: %d samples sent to %s in ", len(want), uri)
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, summary) || !strings.Contains(last, fmt.Sprintf(", %d bad lines of %d ", len(badLines), n)) {
		t.Errorf("summary %q, want %q… with %d bad lines of %d", last, summary, len(badLines), n)
	}

	// The viewer gets exactly the good samples, in order; a sample
	// without t is stamped when ahpctl read it.
	got := viewer.collect(len(want))
	if len(got) != len(want) {
		t.Fatalf("viewer got %d samples, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if w.T == 0 {
			if g.T < before || g.T > after {
				t.Fatalf("sample %d: t %v, want the time of the push (%v–%v)", i, g.T, before, after)
			}
			w.T = g.T
		}
		if len(w.Labels) == 0 {
			w.Labels = nil
		}
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("sample %d = %+v, want %+v", i, g, w)
		}
	}
	if extra := viewer.next(300 * time.Millisecond); extra != nil {
		t.Fatalf("more samples than pushed: %+v", extra)
	}

	// All good: exit 0, the summary alone; --quiet: nothing at all.
	if out, errOut, code := d.ctlIn("a 1\nb 2 x=y\n", "telemetry", "push", uri); code != 0 || out != "" || !regexp.MustCompile(`^ahpctl: telemetry push: 2 samples sent to ahp-telemetry:/build in 1 message, 0 bad lines of 2 \(.*\)\n$`).MatchString(errOut) {
		t.Fatalf("good push: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, errOut, code := d.ctlIn("c 3\n", "telemetry", "push", "--quiet", uri); code != 0 || errOut != "" {
		t.Fatalf("push --quiet: exit %d, stderr %q", code, errOut)
	}
	if s := viewer.collect(3); len(s) != 3 || s[0].Name != "a" || s[1].Labels["x"] != "y" || s[2].Name != "c" {
		t.Fatalf("viewer after the good pushes: %+v", s)
	}

	// channels list shows the channel's figures.
	var list []struct {
		Channel   string `json:"channel"`
		Type      string `json:"type"`
		Viewers   int64  `json:"viewers"`
		Telemetry *struct {
			Source  string `json:"source"`
			Policy  string `json:"policy"`
			Samples int64  `json:"samples"`
		} `json:"telemetry"`
	}
	if err := json.Unmarshal([]byte(d.mustCtl("channels", "list", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Type != "telemetry" || list[0].Viewers != 1 || list[0].Telemetry == nil ||
		list[0].Telemetry.Source != "push" || list[0].Telemetry.Policy != "drop-oldest" || list[0].Telemetry.Samples != int64(len(want)+3) {
		t.Fatalf("channels list -o json = %+v (telemetry %+v)", list, list[0].Telemetry)
	}
	table := d.mustCtl("channels", "get", uri)
	if !regexp.MustCompile(`(?m)^channel: +` + regexp.QuoteMeta(uri) + `\n(.*\n)*source: +push\npolicy: +drop-oldest\nsamples: +` + fmt.Sprint(len(want)+3) + `\nnext seq: +\d+\nviewers: +1\n`).MatchString(table) {
		t.Fatalf("channels get table:\n%s", table)
	}
}

func TestE2ETelemetryPushRefused(t *testing.T) {
	d := startDaemon(t)
	d.mustCtl("telemetry", "create", "--kind", "system", "--id", "sys", "--interval", "1s")
	d.mustCtl("terminal", "create", "--id", "sh", "--", "/bin/sh")
	for _, tc := range []struct {
		uri, want string
	}{
		{"ahp-telemetry:/sys", "ahpctl: telemetry push: ahp-telemetry:/sys is a system telemetry channel, not a push one"},
		{"ahp-terminal:/sh", "ahpctl: telemetry push: ahp-terminal:/sh is a terminal channel, not a push telemetry channel"},
		{"ahp-telemetry:/nope", "ahpctl: channel not found: ahp-telemetry:/nope"},
	} {
		out, errOut, code := d.ctlIn("a 1\n", "telemetry", "push", tc.uri)
		if code != 1 || out != "" || !strings.HasPrefix(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("push to %s: exit %d, stdout %q, stderr %q; want 1 and one line %q…", tc.uri, code, out, errOut, tc.want)
		}
	}
	for _, args := range [][]string{{"telemetry", "push"}, {"telemetry", "push", "--batch", "0", "ahp-telemetry:/x"}, {"telemetry", "push", "--batch", "10001", "ahp-telemetry:/x"}, {"telemetry", "push", "--linger", "-1s", "ahp-telemetry:/x"}} {
		if _, errOut, code := d.ctlIn("", args...); code != 2 {
			t.Errorf("ahpctl %s: exit %d (%q), want 2", strings.Join(args, " "), code, errOut)
		}
	}
	if out, _, code := d.ctlIn("", "telemetry", "push", "--help"); code != 0 || !strings.Contains(out, "stdin:LINE") || !strings.Contains(out, "Examples:") {
		t.Errorf("telemetry push --help: exit %d:\n%s", code, out)
	}
}

// TestE2ETelemetryPushLinger: a producer that writes a line now and then
// has each sample sent after at most --linger, not when stdin ends.
func TestE2ETelemetryPushLinger(t *testing.T) {
	d := startDaemon(t)
	uri := strings.TrimSpace(d.mustCtl("telemetry", "create", "--kind", "push", "--id", "slow"))
	viewer := d.telemetryViewer(uri)
	cmd := exec.Command(d.ahpctl, "--control", d.control, "telemetry", "push", "--linger", "20ms", uri)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		fmt.Fprintf(stdin, "tick %d\n", i)
		s := viewer.next(10 * time.Second)
		if len(s) != 1 || s[0].Name != "tick" || s[0].Value != float64(i) {
			t.Fatalf("after line %d the viewer got %+v while stdin is open", i+1, s)
		}
	}
	fmt.Fprintf(stdin, "no_newline 7")
	if s := viewer.next(300 * time.Millisecond); len(s) != 0 {
		t.Fatalf("a partial line was sent: %+v", s)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("push: %v: %s", err, stderr.String())
	}
	if s := viewer.next(10 * time.Second); len(s) != 1 || s[0].Name != "no_newline" {
		t.Fatalf("the last line without a newline: %+v", s)
	}
	if !strings.Contains(stderr.String(), "4 samples sent") {
		t.Fatalf("stderr %q", stderr.String())
	}
}

// TestE2ETelemetryPushChannelClosed: a channel closed under a running
// push ends it at the next batch with the daemon's reason, exit 1, even
// though stdin stays open.
func TestE2ETelemetryPushChannelClosed(t *testing.T) {
	d := startDaemon(t)
	uri := strings.TrimSpace(d.mustCtl("telemetry", "create", "--kind", "push", "--id", "gone"))
	viewer := d.telemetryViewer(uri)
	cmd := exec.Command(d.ahpctl, "--control", d.control, "telemetry", "push", uri)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(stdin, "before 1")
	if s := viewer.next(10 * time.Second); len(s) != 1 {
		t.Fatalf("viewer got %+v", s)
	}
	d.mustCtl("channels", "close", uri)
	fmt.Fprintln(stdin, "after 2")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("push after close: %v, want exit 1", err)
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatal("push did not end after its channel closed")
	}
	if !regexp.MustCompile(`^ahpctl: telemetry push: the stream to `+uri+` ended after [12] samples? had been sent\n`).MatchString(stderr.String()) || !strings.Contains(stderr.String(), "ahpctl: channel not found: "+uri+"\n") {
		t.Fatalf("stderr %q", stderr.String())
	}
}

// TestE2ETelemetryPushBigSamples: --batch 10000 of samples near the 2 KiB
// bound would pass gRPC's 4 MiB message limit; batches end early.
func TestE2ETelemetryPushBigSamples(t *testing.T) {
	d := startDaemon(t)
	uri := strings.TrimSpace(d.mustCtl("telemetry", "create", "--kind", "push", "--id", "big", "--history", "0"))
	var line strings.Builder
	line.WriteString("big_sample 1")
	for i := range 12 {
		fmt.Fprintf(&line, " l%02d=%s", i, strings.Repeat("v", 60))
	}
	const n = 6000 // 5 MB of protobuf
	in := strings.Repeat(line.String()+"\n", n)
	_, errOut, code := d.ctlIn(in, "telemetry", "push", "--batch", "10000", uri)
	if code != 0 || !strings.HasPrefix(errOut, fmt.Sprintf("ahpctl: telemetry push: %d samples sent to %s in ", n, uri)) || strings.Contains(errOut, " in 1 message,") {
		t.Fatalf("push: exit %d, stderr %q; want every sample in more than one message", code, errOut)
	}
}
