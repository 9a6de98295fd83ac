package daemon_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ahp-dev/ahpd/daemon"
	"github.com/ahp-dev/ahpd/daemon/config"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// Telemetry channels over a real daemon: created and fed over the control
// socket (TelemetryService), served over AHP/1 to viewers on separate
// connections.

type telemetryMsg struct {
	Seq     uint64 `json:"seq"`
	FromSeq uint64 `json:"fromSeq"`
	ToSeq   uint64 `json:"toSeq"`
	Count   int64  `json:"count"`
	Samples []struct {
		Name   string            `json:"name"`
		Value  float64           `json:"value"`
		Labels map[string]string `json:"labels"`
	} `json:"samples"`
}

// readTelemetry reads a viewer's messages until total samples are
// accounted for, crediting each; it checks that seqs are contiguous from
// 1 and every sample index is delivered in order or counted in a
// telemetry/dropped in its place. It returns the samples lost and ranges.
func readTelemetry(t *testing.T, name string, c *tcpClient, total int) (lost int64, ranges int) {
	t.Helper()
	r := newTelemetryReader(t, name, c)
	r.until(int64(total))
	if r.next != int64(total) {
		t.Fatalf("%s: accounts for %d samples, want %d", name, r.next, total)
	}
	return r.lost, r.ranges
}

// telemetryReader reads a viewer's messages in steps (until), with the
// checks of readTelemetry, so that a producer can wait for the viewer.
type telemetryReader struct {
	t        *testing.T
	name     string
	c        *tcpClient
	nextSeq  uint64 // the seq the next message must have
	next     int64  // samples accounted for (delivered or dropped)
	credited int64  // c.received at the last credit
	msgs     int
	lost     int64
	ranges   int
}

// newTelemetryReader expects channel/ready and gives the first credit.
func newTelemetryReader(t *testing.T, name string, c *tcpClient) *telemetryReader {
	t.Helper()
	if m := c.expect("channel/ready"); m.Method != "channel/ready" {
		t.Fatal(m)
	}
	c.credit()
	return &telemetryReader{t: t, name: name, c: c, nextSeq: 1, credited: c.received}
}

// until reads messages until n samples are accounted for.
func (r *telemetryReader) until(n int64) {
	t, name, c := r.t, r.name, r.c
	t.Helper()
	for r.next < n {
		if r.msgs++; r.msgs > 100_000 {
			t.Fatalf("%s: no end", name)
		}
		m := c.next()
		// Credit in steps of 64 KiB (below any window here) rather than
		// per message: the test client stays the faster side.
		if c.received-r.credited >= 64<<10 || c.received-r.credited >= 4096 && name == "slow" {
			c.credit()
			r.credited = c.received
		}
		var p telemetryMsg
		if err := json.Unmarshal(m.Params, &p); err != nil {
			t.Fatalf("%s: %s: %v", name, m.Params, err)
		}
		switch m.Method {
		case "telemetry/samples":
			if p.Seq != r.nextSeq {
				t.Fatalf("%s: seq %d, want %d", name, p.Seq, r.nextSeq)
			}
			r.nextSeq++
			for _, s := range p.Samples {
				if int64(s.Value) != r.next || s.Name != "load" || s.Labels["i"] != strconv.FormatInt(r.next%4, 10) {
					t.Fatalf("%s: seq %d: sample %+v, want value %d", name, p.Seq, s, r.next)
				}
				r.next++
			}
		case "telemetry/dropped":
			if p.FromSeq != r.nextSeq || p.ToSeq < p.FromSeq || p.Count <= 0 {
				t.Fatalf("%s: dropped %+v, want fromSeq %d", name, p, r.nextSeq)
			}
			r.nextSeq = p.ToSeq + 1
			r.next += p.Count
			r.lost += p.Count
			r.ranges++
		default:
			t.Fatalf("%s: unexpected %s %s", name, m.Method, m.Params)
		}
	}
}

// TestTelemetryPushFastAndSlowViewers: samples pushed over gRPC reach a
// fast viewer whole, with seqs 1, 2, …; a viewer on another connection
// that does not credit meanwhile gets telemetry/dropped in place of what
// its queue could not hold, every sample accounted for.
func TestTelemetryPushFastAndSlowViewers(t *testing.T) {
	h := startWith(t, false, nil, nil)
	c := h.control()
	tc := ahpv1.NewTelemetryServiceClient(c.cc)
	res, err := tc.CreateTelemetry(ctxT(t), &ahpv1.CreateTelemetryRequest{Kind: "push", Id: "load", History: durationpb.New(0)})
	if err != nil {
		t.Fatal(err)
	}
	uri := res.GetChannel().GetUri()
	if uri != "ahp-telemetry:/load" || res.GetChannel().GetType() != "telemetry" {
		t.Fatalf("created %+v", res.GetChannel())
	}

	fast := h.tcpClient(adminToken)
	fast.channel = uri
	if r := fast.subscribe(`{"channel":"` + uri + `"}`); fast.sub == "" {
		t.Fatalf("subscribe: %s", r)
	}
	slow := h.tcpClient(adminToken)
	slow.channel = uri
	if r := slow.subscribe(`{"channel":"` + uri + `","flowControl":{"receive":{"windowBytes":8192,"maximumFrameBytes":8192,"maximumMessageBytes":8192}}}`); slow.sub == "" {
		t.Fatalf("subscribe: %s", r)
	}

	const messages, per = 100, 300
	total := messages * per
	// The producer is paced by the fast viewer: each message is sent once
	// the fast viewer has everything before it, so the fast viewer keeps
	// up whatever the machine's load, and any loss it sees is the slow
	// viewer's doing. The slow one does not credit at all meanwhile.
	fastR := newTelemetryReader(t, "fast", fast)
	stream, err := tc.PublishTelemetry(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for m := range messages {
		req := &ahpv1.PublishTelemetryRequest{}
		if m == 0 {
			req.Channel = uri
		}
		for i := range per {
			n := m*per + i
			req.Samples = append(req.Samples, &ahpv1.Sample{Name: "load", Value: float64(n), Labels: map[string]string{"i": strconv.Itoa(n % 4)}})
		}
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		fastR.until(int64((m + 1) * per))
	}
	r, err := stream.CloseAndRecv()
	if err == nil && (r.GetSamples() != int64(total) || r.GetMessages() != messages) {
		err = fmt.Errorf("PublishTelemetry reports %d samples in %d messages", r.GetSamples(), r.GetMessages())
	}
	if err != nil {
		t.Fatal(err)
	}
	if fastR.next != int64(total) || fastR.lost != 0 || fastR.ranges != 0 {
		t.Errorf("fast viewer accounts for %d of %d samples, lost %d in %d ranges", fastR.next, total, fastR.lost, fastR.ranges)
	}
	lost, ranges := readTelemetry(t, "slow", slow, total)
	if lost == 0 || ranges == 0 {
		t.Errorf("slow viewer lost nothing (%d ranges): its queue did not overflow", ranges)
	}
	t.Logf("slow viewer: %d of %d samples lost in %d ranges", lost, total, ranges)

	ch, err := c.channels.GetChannel(ctxT(t), &ahpv1.GetChannelRequest{Channel: uri})
	if err != nil {
		t.Fatal(err)
	}
	if tm := ch.GetChannel().GetTelemetry(); tm.GetSamples() != int64(total) || tm.GetSource() != "push" || tm.GetViewers() != 2 || tm.GetPolicy() != "drop-oldest" {
		t.Errorf("GetChannel: telemetry %+v", tm)
	}

	// /metrics: what the source published and what the slow viewer's
	// policy dropped, exactly.
	body := scrapeMetrics(t, h)
	for _, want := range []string{
		fmt.Sprintf(`ahpd_telemetry_samples_total{channel=%q} %d`, uri, total),
		fmt.Sprintf(`ahpd_telemetry_dropped_samples_total{channel=%q} %d`, uri, lost),
		fmt.Sprintf(`ahpd_telemetry_history_bytes{channel=%q} 0`, uri),
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestTelemetryControlRefusals(t *testing.T) {
	h := startWith(t, false, nil, nil)
	c := h.control()
	tc := ahpv1.NewTelemetryServiceClient(c.cc)
	for _, tt := range []struct {
		req  *ahpv1.CreateTelemetryRequest
		want codes.Code
	}{
		{&ahpv1.CreateTelemetryRequest{Kind: "bogus"}, codes.InvalidArgument},
		{&ahpv1.CreateTelemetryRequest{Kind: "system", Interval: durationpb.New(time.Millisecond)}, codes.InvalidArgument},
		{&ahpv1.CreateTelemetryRequest{Kind: "push", Policy: "keep-all"}, codes.InvalidArgument},
		{&ahpv1.CreateTelemetryRequest{Kind: "push", Interval: durationpb.New(50 * time.Millisecond)}, codes.InvalidArgument},
		{&ahpv1.CreateTelemetryRequest{Kind: "command", Command: []string{"true"}, Interval: durationpb.New(time.Second)}, codes.InvalidArgument},
		{&ahpv1.CreateTelemetryRequest{Kind: "command"}, codes.InvalidArgument},
		{&ahpv1.CreateTelemetryRequest{Kind: "process", Terminal: "ahp-terminal:/nope"}, codes.NotFound},
	} {
		if _, err := tc.CreateTelemetry(ctxT(t), tt.req); status.Code(err) != tt.want {
			t.Errorf("CreateTelemetry(%v) = %v, want %v", tt.req, err, tt.want)
		}
	}
	sys, err := tc.CreateTelemetry(ctxT(t), &ahpv1.CreateTelemetryRequest{Kind: "system", Id: "sys"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tc.CreateTelemetry(ctxT(t), &ahpv1.CreateTelemetryRequest{Kind: "system", Id: "sys"}); status.Code(err) != codes.AlreadyExists {
		t.Errorf("a second sys: %v", err)
	}
	push, err := tc.CreateTelemetry(ctxT(t), &ahpv1.CreateTelemetryRequest{Kind: "push"})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(reqs ...*ahpv1.PublishTelemetryRequest) error {
		stream, err := tc.PublishTelemetry(ctxT(t))
		if err != nil {
			return err
		}
		for _, r := range reqs {
			if err := stream.Send(r); err != nil {
				break // the error comes with CloseAndRecv
			}
		}
		_, err = stream.CloseAndRecv()
		return err
	}
	ok := &ahpv1.Sample{Name: "x", Value: 1}
	for _, tt := range []struct {
		name string
		reqs []*ahpv1.PublishTelemetryRequest
		want codes.Code
	}{
		{"no channel", []*ahpv1.PublishTelemetryRequest{{Samples: []*ahpv1.Sample{ok}}}, codes.InvalidArgument},
		{"not push", []*ahpv1.PublishTelemetryRequest{{Channel: sys.GetChannel().GetUri(), Samples: []*ahpv1.Sample{ok}}}, codes.FailedPrecondition},
		{"unknown", []*ahpv1.PublishTelemetryRequest{{Channel: "ahp-telemetry:/none", Samples: []*ahpv1.Sample{ok}}}, codes.NotFound},
		{"bad name", []*ahpv1.PublishTelemetryRequest{{Channel: push.GetChannel().GetUri(), Samples: []*ahpv1.Sample{ok, {Name: "9x", Value: 1}}}}, codes.InvalidArgument},
		{"ok", []*ahpv1.PublishTelemetryRequest{{Channel: push.GetChannel().GetUri(), Samples: []*ahpv1.Sample{ok}}, {Samples: []*ahpv1.Sample{ok}}}, codes.OK},
	} {
		if err := publish(tt.reqs...); status.Code(err) != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	// A subscribe may not create a telemetry channel (a command source
	// runs a program).
	ws := h.tcpClient(adminToken)
	if r := ws.subscribe(`{"create":{"type":"telemetry","kind":"command","command":["true"]}}`); !contains(r, `-32602`) {
		t.Errorf("subscribe create telemetry: %s", r)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestDaemonFiguresChannel: a "daemon" telemetry channel reports the
// daemon's own figures, and they count its viewer: one connection, one
// subscription, bytes sent.
func TestDaemonFiguresChannel(t *testing.T) {
	h := startWith(t, false, nil, nil)
	tc := ahpv1.NewTelemetryServiceClient(h.control().cc)
	res, err := tc.CreateTelemetry(ctxT(t), &ahpv1.CreateTelemetryRequest{Kind: "daemon", Id: "ahpd", Interval: durationpb.New(20 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"ahpd_connections": true, "ahpd_subscriptions": true, "ahpd_channels": true, "ahpd_queued_bytes": true,
		"ahpd_sent_bytes_per_second": true, "ahpd_received_bytes_per_second": true, "ahpd_wire_sent_bytes_per_second": true,
		"ahpd_dropped_bytes_per_second": true, "ahpd_snapshots_per_second": true, "ahpd_resets_per_second": true}
	watch(t, h, res.GetChannel().GetUri(), 200, "counts the viewer", func(p telemetryMsg) bool {
		got := map[string]float64{}
		for _, s := range p.Samples {
			got[s.Name] = s.Value
		}
		if _, ok := got["ahpd_sent_bytes_per_second"]; !ok {
			return false // the first collection has no rates
		}
		for name := range want {
			if _, ok := got[name]; !ok {
				t.Fatalf("samples %+v lack %s", p.Samples, name)
			}
		}
		for name, v := range got {
			if v < 0 {
				t.Fatalf("%s = %v < 0", name, v)
			}
		}
		// The first samples may predate the subscription; later ones
		// count it: the viewer is sent this very channel's batches.
		return got["ahpd_connections"] >= 1 && got["ahpd_subscriptions"] >= 1 && got["ahpd_sent_bytes_per_second"] > 0 && got["ahpd_channels"] >= 1
	})
}

// TestFastProducerRaisesProcs: a PublishTelemetry message of 100 samples
// or more calls the daemon's Busy hook (two Ps while it streams); a
// trickle of small ones does not.
func TestFastProducerRaisesProcs(t *testing.T) {
	var calls atomic.Int64
	h := startWith(t, false, nil, func(o *daemon.Options) { o.Busy = func() { calls.Add(1) } })
	tc := ahpv1.NewTelemetryServiceClient(h.control().cc)
	res, err := tc.CreateTelemetry(ctxT(t), &ahpv1.CreateTelemetryRequest{Kind: "push", Id: "p"})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := tc.PublishTelemetry(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	send := func(first bool, n int) {
		req := &ahpv1.PublishTelemetryRequest{}
		if first {
			req.Channel = res.GetChannel().GetUri()
		}
		for i := range n {
			req.Samples = append(req.Samples, &ahpv1.Sample{Name: "x", Value: float64(i)})
		}
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	send(true, 99)
	send(false, 10)
	send(false, 100)
	send(false, 1000)
	if r, err := stream.CloseAndRecv(); err != nil || r.GetSamples() != 1209 {
		t.Fatalf("CloseAndRecv: %v, %v", r, err)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("Busy called %d times, want 2 (the messages of 100 and 1,000 samples)", n)
	}
}

// TestPublishSamplesBound: one PublishTelemetry message holds at most
// 10,000 samples; one more refuses it, InvalidArgument naming samples.
func TestPublishSamplesBound(t *testing.T) {
	h := startWith(t, false, nil, nil)
	tc := ahpv1.NewTelemetryServiceClient(h.control().cc)
	res, err := tc.CreateTelemetry(ctxT(t), &ahpv1.CreateTelemetryRequest{Kind: "push", Id: "p"})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{10_000, 10_001} {
		stream, err := tc.PublishTelemetry(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		req := &ahpv1.PublishTelemetryRequest{Channel: res.GetChannel().GetUri()}
		for i := range n {
			req.Samples = append(req.Samples, &ahpv1.Sample{Name: "x", Value: float64(i)})
		}
		if err := stream.Send(req); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		r, err := stream.CloseAndRecv()
		switch {
		case n == 10_000 && (err != nil || r.GetSamples() != int64(n)):
			t.Errorf("a message of %d samples: %v, %v; want all published", n, r, err)
		case n > 10_000 && (status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "10001 samples in one message, more than 10000")):
			t.Errorf("a message of %d samples: %v, want InvalidArgument naming the bound", n, err)
		}
	}
}

// TestProcessTelemetryOfATerminal: a process source on a real terminal
// sees the `sleep` its shell started, with the foreground command.
func TestProcessTelemetryOfATerminal(t *testing.T) {
	h := startWith(t, true, nil, nil)
	c := h.control()
	term, err := c.terminals.CreateTerminal(ctxT(t), &ahpv1.CreateTerminalRequest{Id: "sh", Command: "/bin/sh", Args: []string{"-c", "sleep 30; :"}})
	if err != nil {
		t.Fatal(err)
	}
	tc := ahpv1.NewTelemetryServiceClient(c.cc)
	res, err := tc.CreateTelemetry(ctxT(t), &ahpv1.CreateTelemetryRequest{Kind: "process", Terminal: term.GetChannel().GetUri(), Interval: durationpb.New(20 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if want := "processes of " + term.GetChannel().GetUri(); res.GetChannel().GetTitle() != want {
		t.Errorf("title %q, want %q (the page finds a terminal's process channel by it)", res.GetChannel().GetTitle(), want)
	}
	watch(t, h, res.GetChannel().GetUri(), 500, "shows the terminal's sleep", func(p telemetryMsg) bool {
		var sleeping, count bool
		for _, s := range p.Samples {
			switch {
			case s.Name == "process_command_count" && s.Labels["command"] == "sleep" && s.Value == 1:
				sleeping = true
			case s.Name == "process_count" && s.Value >= 2:
				count = true
			}
		}
		return sleeping && count
	})
}

// watch subscribes a viewer to uri and reads its telemetry/samples,
// crediting each message, until done says so; it fails after limit
// messages, saying what it waited for.
func watch(t *testing.T, h *harness, uri string, limit int, what string, done func(telemetryMsg) bool) {
	t.Helper()
	v := h.tcpClient(adminToken)
	v.channel = uri
	if r := v.subscribe(`{"channel":"` + uri + `"}`); v.sub == "" {
		t.Fatalf("subscribe: %s", r)
	}
	for i := 0; i < limit; i++ {
		m := v.next()
		v.credit()
		if m.Method != "telemetry/samples" {
			continue
		}
		var p telemetryMsg
		if err := json.Unmarshal(m.Params, &p); err != nil {
			t.Fatal(err)
		}
		if done(p) {
			return
		}
	}
	t.Fatalf("no sample %s in %d messages", what, limit)
}

// TestTelemetryNames: a channel created without an id is named from its
// kind and source, numbered when the name is taken, and has a title.
func TestTelemetryNames(t *testing.T) {
	h := startWith(t, true, nil, nil)
	c := h.control()
	if _, err := c.terminals.CreateTerminal(ctxT(t), &ahpv1.CreateTerminalRequest{Id: "shell", Command: "/bin/sh", Args: []string{"-c", "sleep 30"}}); err != nil {
		t.Fatal(err)
	}
	tc := ahpv1.NewTelemetryServiceClient(c.cc)
	for _, tt := range []struct {
		req        *ahpv1.CreateTelemetryRequest
		uri, title string
	}{
		{&ahpv1.CreateTelemetryRequest{Kind: "system"}, "ahp-telemetry:/system", "system of "},
		{&ahpv1.CreateTelemetryRequest{Kind: "system"}, "ahp-telemetry:/system-2", "system of "},
		{&ahpv1.CreateTelemetryRequest{Kind: "process", Terminal: "ahp-terminal:/shell"}, "ahp-telemetry:/process-of-shell", "processes of ahp-terminal:/shell"},
		{&ahpv1.CreateTelemetryRequest{Kind: "command", Command: []string{"/usr/bin/env", "sh", "-c", "sleep 30"}}, "ahp-telemetry:/command-env", "command: /usr/bin/env sh -c sleep 30"},
		{&ahpv1.CreateTelemetryRequest{Kind: "push"}, "ahp-telemetry:/push", "pushed samples"},
		{&ahpv1.CreateTelemetryRequest{Kind: "daemon"}, "ahp-telemetry:/daemon", "ahpd's own figures"},
		{&ahpv1.CreateTelemetryRequest{Kind: "push", Id: "mine"}, "ahp-telemetry:/mine", "pushed samples"},
	} {
		res, err := tc.CreateTelemetry(ctxT(t), tt.req)
		if err != nil {
			t.Fatalf("CreateTelemetry(%v): %v", tt.req, err)
		}
		if ch := res.GetChannel(); ch.GetUri() != tt.uri || !strings.HasPrefix(ch.GetTitle(), tt.title) || ch.GetTitle() == "system of " {
			t.Errorf("CreateTelemetry(%v): %s titled %q, want %s titled %q…", tt.req, ch.GetUri(), ch.GetTitle(), tt.uri, tt.title)
		}
	}
	// The numbering stops at 100 tries: push-2 to push-100 are taken,
	// then the next is refused, saying to give an id.
	push := &ahpv1.CreateTelemetryRequest{Kind: "push"}
	for i := 2; i <= 100; i++ {
		res, err := tc.CreateTelemetry(ctxT(t), push)
		if want := fmt.Sprintf("ahp-telemetry:/push-%d", i); err != nil || res.GetChannel().GetUri() != want {
			t.Fatalf("CreateTelemetry(%v) = %s, %v; want %s", push, res.GetChannel().GetUri(), err, want)
		}
	}
	_, err := tc.CreateTelemetry(ctxT(t), push)
	if status.Code(err) != codes.AlreadyExists || !strings.Contains(err.Error(), "push to push-100 are all taken (give an id)") {
		t.Errorf("CreateTelemetry(%v) with push to push-100 taken = %v, want AlreadyExists saying to give an id", push, err)
	}
}

// TestScrapeOwnMetrics: a scrape channel of the daemon's own /metrics
// (served without a token here), once its address is allowed; refusals
// name what is wrong, and a refused create leaves no channel behind.
func TestScrapeOwnMetrics(t *testing.T) {
	h := startWith(t, false, func(c *config.Config) { c.MetricsPublic = true }, nil)
	c := h.control()
	tc := ahpv1.NewTelemetryServiceClient(c.cc)
	url := "http://" + h.addr + "/metrics"
	for _, tt := range []struct {
		req  *ahpv1.CreateTelemetryRequest
		want codes.Code
		msg  string
	}{
		{&ahpv1.CreateTelemetryRequest{Kind: "scrape"}, codes.InvalidArgument, "url"},
		{&ahpv1.CreateTelemetryRequest{Kind: "scrape", Url: "file:///etc/passwd"}, codes.InvalidArgument, "http"},
		{&ahpv1.CreateTelemetryRequest{Kind: "scrape", Url: url, Labels: []string{"mode"}}, codes.InvalidArgument, "label[0]"},
		{&ahpv1.CreateTelemetryRequest{Kind: "scrape", Url: url, Histograms: "median"}, codes.InvalidArgument, "histograms"},
		{&ahpv1.CreateTelemetryRequest{Kind: "system", Url: url}, codes.InvalidArgument, "only a scrape source"},
		{&ahpv1.CreateTelemetryRequest{Kind: "scrape", Url: url}, codes.PermissionDenied, "ahpctl tcp allow " + h.addr},
	} {
		_, err := tc.CreateTelemetry(ctxT(t), tt.req)
		if status.Code(err) != tt.want || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("CreateTelemetry(%v) = %v, want %v naming %q", tt.req, err, tt.want, tt.msg)
		}
	}
	if _, err := ahpv1.NewTCPServiceClient(c.cc).AllowTCP(ctxT(t), &ahpv1.AllowTCPRequest{Rule: h.addr}); err != nil {
		t.Fatal(err)
	}
	// Allowed, but nothing answers there: refused, and no channel is left.
	if _, err := tc.CreateTelemetry(ctxT(t), &ahpv1.CreateTelemetryRequest{Kind: "scrape", Url: "http://" + h.addr + "/nope", MaxBytes: 64}); status.Code(err) != codes.Unavailable {
		t.Errorf("a scrape whose first scrape fails: %v, want Unavailable", err)
	}
	res, err := tc.CreateTelemetry(ctxT(t), &ahpv1.CreateTelemetryRequest{Kind: "scrape", Url: url, Interval: durationpb.New(50 * time.Millisecond),
		Match: []string{"ahpd_channels|go_goroutines|ahpd_telemetry_samples_total"}})
	if err != nil {
		t.Fatal(err)
	}
	ch := res.GetChannel()
	port := h.addr[strings.LastIndexByte(h.addr, ':')+1:]
	if want := "ahp-telemetry:/scrape-127.0.0.1-" + port; ch.GetUri() != want || ch.GetTitle() != "scrape of "+url {
		t.Errorf("channel %s titled %q, want %s titled %q (the failed create left no name behind)", ch.GetUri(), ch.GetTitle(), want, "scrape of "+url)
	}
	watch(t, h, ch.GetUri(), 500, "of the daemon's own figures", func(p telemetryMsg) bool {
		var up, goroutines, rate bool
		for _, s := range p.Samples {
			switch {
			case s.Name == "scrape_up":
				up = s.Value == 1
			case s.Name == "go_goroutines":
				goroutines = s.Value > 0
			case s.Name == "ahpd_telemetry_samples_per_second" && s.Labels["channel"] == ch.GetUri():
				// Its own samples, counted by /metrics, as a rate.
				rate = s.Value > 0
			case strings.HasSuffix(s.Name, "_total"):
				t.Fatalf("a counter not turned into a rate: %+v", s)
			}
		}
		return up && goroutines && rate
	})
}

// TestScrapeOwnMetricsWithToken: the daemon's own /metrics needs a token;
// a scrape sends the one its bearer token file holds.
func TestScrapeOwnMetricsWithToken(t *testing.T) {
	h := startWith(t, false, nil, nil)
	c := h.control()
	if _, err := ahpv1.NewTCPServiceClient(c.cc).AllowTCP(ctxT(t), &ahpv1.AllowTCPRequest{Rule: h.addr}); err != nil {
		t.Fatal(err)
	}
	tc := ahpv1.NewTelemetryServiceClient(c.cc)
	url := "http://" + h.addr + "/metrics"
	if _, err := tc.CreateTelemetry(ctxT(t), &ahpv1.CreateTelemetryRequest{Kind: "scrape", Url: url}); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "HTTP status 401") {
		t.Errorf("without a token: %v, want Unavailable, HTTP status 401", err)
	}
	file := filepath.Join(t.TempDir(), "admin.token")
	if err := os.WriteFile(file, []byte(adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := tc.CreateTelemetry(ctxT(t), &ahpv1.CreateTelemetryRequest{Kind: "scrape", Url: url, BearerTokenFile: file, Interval: durationpb.New(50 * time.Millisecond), Match: []string{"go_goroutines"}})
	if err != nil {
		t.Fatal(err)
	}
	watch(t, h, res.GetChannel().GetUri(), 500, "of the daemon's goroutines", func(p telemetryMsg) bool {
		for _, s := range p.Samples {
			if s.Name == "go_goroutines" && s.Value > 0 {
				return true
			}
		}
		return false
	})
}
