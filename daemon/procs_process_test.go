package daemon_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/bench/termbench"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// testProcsFollowProducers: the ahpd binary runs on one P, also while a
// terminal floods; on two while a telemetry producer pushes fast, and on one
// again once it stops, as /metrics shows (go_sched_gomaxprocs_threads); with
// GOMAXPROCS in its environment it keeps that number throughout.
func testProcsFollowProducers(t *testing.T, bin string) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: ahpd stays on one P")
	}
	t.Run("Scaled", func(t *testing.T) {
		d := startMetricsDaemon(t, bin, "", "--log-level", "debug") // the plan is logged at debug
		if strings.Contains(d.p.stderr.String(), "Go scheduler: GOMAXPROCS 1 (less than two CPUs available)") {
			t.Skip("one CPU's worth of quota: ahpd stays on one P")
		}
		if !strings.Contains(d.p.stderr.String(), "Go scheduler: GOMAXPROCS 1, raised to 2 while a telemetry producer pushes fast") {
			t.Fatalf("no scheduler plan in the log:\n%s", d.p.stderr.String())
		}
		d.await(t, 1, "at start")
		d.flood(t)
		d.stays(t, 1, "while a terminal floods")
		d.closeFlood(t)
		stop := d.pushFast(t)
		d.await(t, 2, "while a producer pushes fast")
		stop()
		d.await(t, 1, "after the producer stopped")
	})
	t.Run("FromEnvironment", func(t *testing.T) {
		d := startMetricsDaemon(t, bin, "GOMAXPROCS=1", "--log-level", "debug")
		if want := `Go scheduler: GOMAXPROCS from the environment" gomaxprocs=1`; !strings.Contains(d.p.stderr.String(), want) {
			t.Fatalf("the log lacks %q:\n%s", want, d.p.stderr.String())
		}
		stop := d.pushFast(t)
		defer stop()
		d.stays(t, 1, "GOMAXPROCS=1 in the environment, a producer pushing fast")
	})
}

type metricsDaemon struct {
	dir    string // holds state/ and the control socket
	p      *daemonProc
	base   string
	terms  ahpv1.TerminalServiceClient
	chans  ahpv1.ChannelServiceClient
	tele   ahpv1.TelemetryServiceClient
	tokens ahpv1.TokenServiceClient
	limits ahpv1.LimitsServiceClient
	uri    string
}

func startMetricsDaemon(t *testing.T, bin, env string, args ...string) *metricsDaemon {
	return startMetricsDaemonNofile(t, bin, env, 0, args...)
}

// startMetricsDaemonNofile is startMetricsDaemon with the daemon's limit on
// open descriptors (RLIMIT_NOFILE, soft and hard) set to nofile, unless 0.
func startMetricsDaemonNofile(t *testing.T, bin, env string, nofile int, args ...string) *metricsDaemon {
	dir := t.TempDir()
	ns := newNotifySocket(t, dir)
	argv := append([]string{filepath.Join(bin, "ahpd"), "--config", "none", "--listen", "127.0.0.1:0", "--metrics-public",
		"--no-default-terminal", "--state-dir", filepath.Join(dir, "state"), "--control", filepath.Join(dir, "c.sock")}, args...)
	if nofile > 0 {
		// exec keeps the pid: the test's handle is ahpd's.
		argv = append([]string{"/bin/sh", "-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, nofile)}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(baseEnv(dir), "NOTIFY_SOCKET="+ns.path)
	if env != "" {
		cmd.Env = append(cmd.Env, env)
	}
	p := startDaemon(t, cmd)
	t.Cleanup(func() {
		select {
		case <-p.done:
			return // the test stopped it, and checked how
		default:
		}
		if code := p.stop(t, syscall.SIGTERM); code != 0 {
			t.Errorf("exit status after SIGTERM = %d, want 0", code)
		}
	})
	msg, _ := ns.await(t, "READY=1", 30*time.Second)
	base, control := readyAddrs(t, msg)
	cc := grpcConn(t, control)
	return &metricsDaemon{dir: dir, p: p, base: base, terms: ahpv1.NewTerminalServiceClient(cc), chans: ahpv1.NewChannelServiceClient(cc),
		tele: ahpv1.NewTelemetryServiceClient(cc), tokens: ahpv1.NewTokenServiceClient(cc), limits: ahpv1.NewLimitsServiceClient(cc)}
}

// shell creates terminal id running script with /bin/sh and returns its
// URI.
func (d *metricsDaemon) shell(ctx context.Context, t *testing.T, id, script string) string {
	t.Helper()
	r, err := d.terms.CreateTerminal(ctx, &ahpv1.CreateTerminalRequest{Id: id, Command: "/bin/sh", Args: []string{"-c", script}})
	if err != nil {
		t.Fatal(err)
	}
	return r.GetChannel().GetUri()
}

func (d *metricsDaemon) flood(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := d.terms.CreateTerminal(ctx, &ahpv1.CreateTerminalRequest{Id: "flood", Command: "/bin/sh", Args: []string{"-c", "exec yes"}})
	if err != nil {
		t.Fatal(err)
	}
	d.uri = r.GetChannel().GetUri()
}

func (d *metricsDaemon) closeFlood(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d.chans.CloseChannel(ctx, &ahpv1.CloseChannelRequest{Channel: d.uri}); err != nil {
		t.Fatal(err)
	}
}

// pushFast creates a push telemetry channel and publishes messages of 100
// samples (the daemon's threshold for a fast producer) every 20 ms until
// the returned stop, which waits for the publisher and checks what it did.
func (d *metricsDaemon) pushFast(t *testing.T) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	res, err := d.tele.CreateTelemetry(ctx, &ahpv1.CreateTelemetryRequest{Kind: "push", Id: "fast"})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	stream, err := d.tele.PublishTelemetry(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	quit := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		sent := int64(0)
		for first := true; ; first = false {
			req := &ahpv1.PublishTelemetryRequest{}
			if first {
				req.Channel = res.GetChannel().GetUri()
			}
			for i := range 100 {
				req.Samples = append(req.Samples, &ahpv1.Sample{Name: "x", Value: float64(i)})
			}
			if err := stream.Send(req); err != nil {
				done <- err
				return
			}
			sent += 100
			select {
			case <-quit:
				r, err := stream.CloseAndRecv()
				if err == nil && r.GetSamples() != sent {
					err = fmt.Errorf("the daemon took %d samples of %d", r.GetSamples(), sent)
				}
				done <- err
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	var perr error
	end := func() {
		once.Do(func() {
			close(quit)
			perr = <-done
			cancel()
		})
	}
	t.Cleanup(end) // a test that fails first still stops the publisher
	return func() {
		t.Helper()
		if end(); perr != nil {
			t.Fatalf("publishing: %v", perr)
		}
	}
}

// stays checks, over a second, that go_sched_gomaxprocs_threads stays want
// (the daemon raises its Ps within milliseconds when it does).
func (d *metricsDaemon) stays(t *testing.T, want int, when string) {
	t.Helper()
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if n := d.gomaxprocs(t); n != want {
			t.Fatalf("%s: go_sched_gomaxprocs_threads %d, want %d", when, n, want)
		}
	}
}

// testDaemonTelemetryFlag: --daemon-telemetry creates ahp-telemetry:/ahpd
// at start, and its source publishes (as /metrics counts).
func testDaemonTelemetryFlag(t *testing.T, bin string) {
	d := startMetricsDaemon(t, bin, "", "--daemon-telemetry")
	ch, err := d.chans.GetChannel(ctxT(t), &ahpv1.GetChannelRequest{Channel: "ahp-telemetry:/ahpd"})
	if err != nil {
		t.Fatal(err)
	}
	if tm := ch.GetChannel().GetTelemetry(); tm.GetSource() != "daemon" {
		t.Fatalf("ahp-telemetry:/ahpd: %+v, want a daemon source", ch.GetChannel())
	}
	deadline := time.Now().Add(10 * time.Second)
	for d.metric(t, `ahpd_telemetry_samples_total{channel="ahp-telemetry:/ahpd"}`) < 10 {
		if time.Now().After(deadline) {
			t.Fatal("the daemon source published fewer than 10 samples in 10 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// gomaxprocs reads go_sched_gomaxprocs_threads from /metrics.
func (d *metricsDaemon) gomaxprocs(t *testing.T) int {
	t.Helper()
	return int(d.metric(t, "go_sched_gomaxprocs_threads"))
}

// metric reads one unlabelled metric from /metrics.
func (d *metricsDaemon) metric(t *testing.T, name string) float64 {
	t.Helper()
	return d.metrics(t, name)[name]
}

// metrics reads the named metrics from one scrape of /metrics.
func (d *metricsDaemon) metrics(t *testing.T, names ...string) map[string]float64 {
	t.Helper()
	res, err := (&http.Client{Timeout: 10 * time.Second}).Get(d.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]float64, len(names))
	for _, name := range names {
		if m[name], err = termbench.Metric(bytes.NewReader(body), name); err != nil {
			t.Fatalf("/metrics (%s): %v", res.Status, err)
		}
	}
	return m
}

// await polls /metrics until go_sched_gomaxprocs_threads is want.
func (d *metricsDaemon) await(t *testing.T, want int, when string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := d.gomaxprocs(t)
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: go_sched_gomaxprocs_threads %d, want %d", when, n, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// adminToken reads the daemon's admin token from its state dir.
func (d *metricsDaemon) adminToken(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.dir, "state", "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
