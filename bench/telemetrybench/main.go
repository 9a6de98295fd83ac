// Command telemetrybench measures telemetry channels through a real ahpd
// process and prints one table:
//
//   - ingest: a push producer streaming PublishTelemetry (batches of
//     -batch samples, as fast as the daemon takes them) for -duration with
//     no viewer, with one viewer (reading and crediting as fast as it can)
//     and with -viewers viewers: samples/s ingested, samples/s delivered,
//     samples lost to the viewers' policy (telemetry/dropped), and the
//     daemon's CPU per million samples ingested;
//   - fan-out: a producer paced at -rate samples/s and -viewers viewers,
//     each on its own WebSocket connection, with and without
//     permessage-deflate: samples/s delivered in total, samples lost, the
//     daemon's CPU (% of one core) and the bytes per sample on the wire
//     (the daemon's ahpd_connection_wire_bytes_out_total, after
//     compression and WebSocket framing, over the samples delivered).
//
// The baseline of the same run is the producer alone: the gRPC stream's
// cost without the daemon's fan-out (the "no viewer" row).
//
// Run it with `make bench-telemetry` (which builds bin/ahpd), or:
//
//	go build -o bin/ ./cmd/ahpd && go run ./bench/telemetrybench
//
// The viewers run in this process (ctl/client), so the daemon's CPU is
// its own. Only loopback addresses are used; every phase is bounded by
// -duration.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ahp-dev/ahpd/bench/benchproc"
	"github.com/ahp-dev/ahpd/ctl/client"
	"github.com/ahp-dev/ahpd/internal/cpuprof"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

func main() {
	exit := 0
	defer func() { os.Exit(exit) }()
	ahpd := flag.String("ahpd", "bin/ahpd", "the ahpd `binary`")
	duration := flag.Duration("duration", 5*time.Second, "length of each phase")
	batch := flag.Int("batch", 1000, "samples per PublishTelemetry message (at most 10,000)")
	viewers := flag.Int("viewers", 100, "viewers of the fan-out phase (and of the ingest phase's last row)")
	rate := flag.Int("rate", 1000, "samples/s of the fan-out phase's producer")
	series := flag.Int("series", 8, "distinct series (label values) the producer cycles through")
	only := flag.String("only", "", "run one phase: ingest or fanout")
	profile := flag.String("cpuprofile", "", "write CPU profiles of this process (bench.prof) and of the daemon (ahpd.prof) to `DIR`")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: telemetrybench [flags]\n\nMeasures telemetry channels through a real ahpd (see the package doc).\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *batch < 1 || *batch > 10_000 || *viewers < 1 || *rate < 1 || *series < 1 || *duration <= 0 {
		fmt.Fprintln(os.Stderr, "telemetrybench: -batch must be 1..10000; -viewers, -rate, -series and -duration positive")
		os.Exit(2)
	}
	if *profile != "" {
		os.Setenv("TELEMETRYBENCH_CPUPROFILE", filepath.Join(*profile, "bench.prof"))
		os.Setenv("AHPD_CPUPROFILE", filepath.Join(*profile, "ahpd.prof"))
		defer cpuprof.Start("TELEMETRYBENCH_CPUPROFILE")()
	}
	b := &bench{bin: *ahpd, duration: *duration, batch: *batch, viewers: *viewers, rate: *rate, series: *series}
	if err := b.run(*only); err != nil {
		fmt.Fprintln(os.Stderr, "telemetrybench:", err)
		exit = 1
	}
}

type bench struct {
	bin                          string
	duration                     time.Duration
	batch, viewers, rate, series int
}

// row is one line of the table.
type row struct {
	phase, setup          string
	ingested, delivered   float64 // samples/s
	lost                  int64
	cpu                   time.Duration // the daemon's, over the phase
	elapsed               time.Duration
	samples               int64 // ingested
	wireBytes, deliveredN int64
}

func (b *bench) run(only string) error {
	dir, err := os.MkdirTemp("", "telemetrybench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	d, err := startDaemon(b.bin, dir)
	if err != nil {
		return err
	}
	defer d.Stop()
	fmt.Printf("telemetrybench: %s, phases of %v, batches of %d samples, %d series\n\n", b.bin, b.duration, b.batch, b.series)
	var rows []row
	if only == "" || only == "ingest" {
		for i, n := range []int{0, 1, b.viewers} {
			r, err := b.ingest(d, fmt.Sprintf("ingest%d", i), n)
			if err != nil {
				return err
			}
			rows = append(rows, r)
		}
	}
	if only == "" || only == "fanout" {
		for i, deflate := range []bool{false, true} {
			r, err := b.fanout(d, fmt.Sprintf("fanout%d", i), deflate)
			if err != nil {
				return err
			}
			rows = append(rows, r)
		}
	}
	fmt.Printf("%-8s %-34s %14s %14s %10s %12s %12s\n", "phase", "setup", "ingested/s", "delivered/s", "lost", "daemon CPU", "wire B/smp")
	for _, r := range rows {
		cpu := ""
		if r.phase == "ingest" {
			cpu = fmt.Sprintf("%.2f s/M", r.cpu.Seconds()/(float64(r.samples)/1e6))
		} else {
			cpu = fmt.Sprintf("%.1f %%", 100*r.cpu.Seconds()/r.elapsed.Seconds())
		}
		wire := "-"
		if r.deliveredN > 0 && r.wireBytes > 0 {
			wire = fmt.Sprintf("%.1f", float64(r.wireBytes)/float64(r.deliveredN))
		}
		fmt.Printf("%-8s %-34s %14.0f %14.0f %10d %12s %12s\n", r.phase, r.setup, r.ingested, r.delivered, r.lost, cpu, wire)
	}
	return nil
}

// daemon is a running bin/ahpd.
type daemon struct {
	*benchproc.Daemon
	tel   ahpv1.TelemetryServiceClient
	chans ahpv1.ChannelServiceClient
}

func startDaemon(bin, dir string) (*daemon, error) {
	bd, err := benchproc.StartDaemon(bin, dir, []string{"--config", "none", "--no-default-terminal", "--metrics-public", "--log-level", "warn"}, nil)
	if err != nil {
		return nil, err
	}
	return &daemon{Daemon: bd, tel: ahpv1.NewTelemetryServiceClient(bd.Conn), chans: ahpv1.NewChannelServiceClient(bd.Conn)}, nil
}

// wireBytes sums ahpd_connection_wire_bytes_out_total over the
// connections /metrics lists.
func (d *daemon) wireBytes() (int64, error) {
	res, err := (&http.Client{Timeout: 10 * time.Second}).Get(d.Base() + "/metrics")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var sum float64
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "ahpd_connection_wire_bytes_out_total{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("/metrics: %q: %v", line, err)
		}
		sum += v
	}
	return int64(sum), sc.Err()
}

// create makes a push channel with no history (a viewer counts only what
// is published after it subscribed).
func (d *daemon) create(id string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := d.tel.CreateTelemetry(ctx, &ahpv1.CreateTelemetryRequest{Kind: "push", Id: id, History: durationpb.New(0)})
	if err != nil {
		return "", err
	}
	return res.GetChannel().GetUri(), nil
}

func (d *daemon) close(uri string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = d.chans.CloseChannel(ctx, &ahpv1.CloseChannelRequest{Channel: uri})
}

// viewer reads one subscription, crediting each message, and counts the
// samples delivered and lost.
type viewer struct {
	conn      *client.Conn
	sub       *client.Sub
	delivered atomic.Int64
	lost      atomic.Int64
	err       error
}

func (d *daemon) viewer(ctx context.Context, uri string, deflate bool) (*viewer, error) {
	conn, _, err := client.Dial(ctx, d.WS(), client.Options{Token: d.Token, Deflate: deflate, ClientName: "telemetrybench"})
	if err != nil {
		return nil, err
	}
	sub, err := conn.Subscribe(ctx, uri, nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &viewer{conn: conn, sub: sub}, nil
}

// nameKey starts every sample of a telemetry/samples message.
var nameKey = []byte(`"name":`)

// read counts until ctx is done.
func (v *viewer) read(ctx context.Context) {
	var p struct {
		Count int64 `json:"count"`
	}
	for {
		m, err := v.sub.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				v.err = err
			}
			return
		}
		switch m.Method {
		case "telemetry/samples":
			// Counted, not decoded: the viewers share this process's
			// CPU with the producer.
			v.delivered.Add(int64(bytes.Count(m.Params, nameKey)))
		case "telemetry/dropped":
			p.Count = 0
			if err := json.Unmarshal(m.Params, &p); err != nil {
				v.err = err
				return
			}
			v.lost.Add(p.Count)
		}
		if err := v.sub.Release(ctx, m); err != nil {
			if ctx.Err() == nil {
				v.err = err
			}
			return
		}
	}
}

// viewers subscribes n viewers to uri and starts their readers; stop
// ends them and closes their connections.
func (d *daemon) viewers(uri string, n int, deflate bool) (vs []*viewer, stop func() error, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stop = func() error {
		cancel()
		wg.Wait()
		var errs []error
		for _, v := range vs {
			v.conn.Close()
			errs = append(errs, v.err)
		}
		return errors.Join(errs...)
	}
	for range n {
		dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
		v, err := d.viewer(dctx, uri, deflate)
		dcancel()
		if err != nil {
			stop()
			return nil, nil, err
		}
		vs = append(vs, v)
		wg.Go(func() { v.read(ctx) })
	}
	return vs, stop, nil
}

// producer streams batches into uri: as fast as the stream takes them
// (rate 0) or paced to rate samples/s, until ctx is done. It returns the
// samples the daemon acknowledged.
func (b *bench) producer(ctx context.Context, d *daemon, uri string, rate int) (int64, error) {
	stream, err := d.tel.PublishTelemetry(context.WithoutCancel(ctx))
	if err != nil {
		return 0, err
	}
	n := b.batch
	if rate > 0 {
		n = max(1, min(b.batch, rate/100)) // ≥ 100 messages/s: a smooth rate
	}
	labels := make([]map[string]string, b.series)
	for i := range labels {
		labels[i] = map[string]string{"cpu": strconv.Itoa(i)}
	}
	req := &ahpv1.PublishTelemetryRequest{Channel: uri, Samples: make([]*ahpv1.Sample, n)}
	for i := range req.Samples {
		req.Samples[i] = &ahpv1.Sample{Name: "node_cpu_seconds_total", Labels: labels[i%b.series]}
	}
	start := time.Now()
	var sent int64
	for ctx.Err() == nil {
		if rate > 0 {
			due := start.Add(time.Duration(float64(sent) / float64(rate) * float64(time.Second)))
			if wait := time.Until(due); wait > 0 {
				select {
				case <-ctx.Done():
					continue
				case <-time.After(wait):
				}
			}
		}
		now := float64(time.Now().UnixMicro()) / 1000
		for i, s := range req.Samples {
			s.T, s.Value = now, float64(sent)+float64(i)*0.25
		}
		if err := stream.Send(req); err != nil {
			_, err = stream.CloseAndRecv()
			return sent, fmt.Errorf("PublishTelemetry: %w", err)
		}
		req.Channel = ""
		sent += int64(n)
	}
	res, err := stream.CloseAndRecv()
	if err != nil {
		return sent, fmt.Errorf("PublishTelemetry: %w", err)
	}
	return res.GetSamples(), nil
}

// settle waits (bounded) until the viewers have received every sample
// published or had it reported lost.
func settle(vs []*viewer, total int64) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		done := true
		for _, v := range vs {
			if v.delivered.Load()+v.lost.Load() < total {
				done = false
			}
		}
		if done {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func sums(vs []*viewer) (delivered, lost int64) {
	for _, v := range vs {
		delivered += v.delivered.Load()
		lost += v.lost.Load()
	}
	return
}

func (b *bench) ingest(d *daemon, id string, nviewers int) (row, error) {
	uri, err := d.create(id)
	if err != nil {
		return row{}, err
	}
	defer d.close(uri)
	vs, stop, err := d.viewers(uri, nviewers, false)
	if err != nil {
		return row{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.duration)
	defer cancel()
	cpu0, t0 := d.CPU(), time.Now()
	total, err := b.producer(ctx, d, uri, 0)
	elapsed, cpu := time.Since(t0), d.CPU()-cpu0
	if err == nil {
		settle(vs, total)
	}
	delivered, lost := sums(vs)
	if serr := stop(); err == nil {
		err = serr
	}
	if err != nil {
		return row{}, err
	}
	setup := "push, no viewer (baseline)"
	if nviewers > 0 {
		setup = fmt.Sprintf("push, %d viewer(s), fast as they go", nviewers)
	}
	return row{phase: "ingest", setup: setup, ingested: float64(total) / elapsed.Seconds(),
		delivered: float64(delivered) / elapsed.Seconds(), lost: lost, cpu: cpu, elapsed: elapsed, samples: total}, nil
}

func (b *bench) fanout(d *daemon, id string, deflate bool) (row, error) {
	uri, err := d.create(id)
	if err != nil {
		return row{}, err
	}
	defer d.close(uri)
	vs, stop, err := d.viewers(uri, b.viewers, deflate)
	if err != nil {
		return row{}, err
	}
	w0, err := d.wireBytes()
	if err != nil {
		stop()
		return row{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.duration)
	defer cancel()
	cpu0, t0 := d.CPU(), time.Now()
	total, err := b.producer(ctx, d, uri, b.rate)
	if err == nil {
		settle(vs, total)
	}
	elapsed, cpu := time.Since(t0), d.CPU()-cpu0
	w1, werr := d.wireBytes()
	delivered, lost := sums(vs)
	if serr := stop(); err == nil {
		err = errors.Join(werr, serr)
	}
	if err != nil {
		return row{}, err
	}
	comp := "no compression"
	if deflate {
		comp = "permessage-deflate"
	}
	return row{phase: "fanout", setup: fmt.Sprintf("%d viewers × %d/s, %s", b.viewers, b.rate, comp),
		ingested: float64(total) / elapsed.Seconds(), delivered: float64(delivered) / elapsed.Seconds(), lost: lost,
		cpu: cpu, elapsed: elapsed, samples: total, wireBytes: w1 - w0, deliveredN: delivered}, nil
}
