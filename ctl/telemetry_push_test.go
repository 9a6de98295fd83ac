package ctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// fakePushStream records what the pusher sends.
type fakePushStream struct {
	grpc.ClientStreamingClient[ahpv1.PublishTelemetryRequest, ahpv1.PublishTelemetryResponse]
	mu   sync.Mutex
	msgs []*ahpv1.PublishTelemetryRequest
	sig  chan struct{}
}

func (f *fakePushStream) SendMsg(m any) error {
	b, err := pushCodec{}.Marshal(m)
	if err != nil {
		return err
	}
	var req ahpv1.PublishTelemetryRequest
	if err := (pushCodec{}).Unmarshal(b, &req); err != nil {
		return err
	}
	f.mu.Lock()
	f.msgs = append(f.msgs, &req)
	f.mu.Unlock()
	select {
	case f.sig <- struct{}{}:
	default:
	}
	return nil
}

func (f *fakePushStream) sizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n []int
	for _, m := range f.msgs {
		n = append(n, len(m.Samples))
	}
	return n
}

// wait waits until n messages have been sent.
func (f *fakePushStream) wait(t *testing.T, n int, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for len(f.sizes()) < n {
		select {
		case <-f.sig:
		case <-deadline:
			t.Fatalf("%d messages within %v, want %d", len(f.sizes()), within, n)
		}
	}
}

// startPusher runs read and send over stdin; done yields read's error
// once the sender has finished.
func startPusher(ctx context.Context, stdin io.Reader, o pushOptions) (*pusher, *fakePushStream, *bytes.Buffer, <-chan error) {
	var stderr bytes.Buffer
	f := &fakePushStream{sig: make(chan struct{}, 1)}
	p := &pusher{a: &app{stdin: stdin, stderr: &stderr}, o: o, stream: f, stop: make(chan struct{}), queue: make(chan pushBatch, pushQueue)}
	done := make(chan error, 1)
	go func() {
		sent := make(chan struct{})
		go func() { defer close(sent); p.send() }()
		err := p.read(ctx)
		close(p.queue)
		<-sent
		done <- err
	}()
	return p, f, &stderr, done
}

func TestPushBatches(t *testing.T) {
	var in strings.Builder
	for i := range 1001 {
		if i == 500 {
			in.WriteString("oops\n")
			continue
		}
		fmt.Fprintf(&in, "n %d k=v%d\n", i, i%3)
	}
	p, f, stderr, done := startPusher(context.Background(), strings.NewReader(in.String()), pushOptions{batch: 256, linger: time.Hour})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := f.sizes(); !slices.Equal(got, []int{256, 256, 256, 232}) {
		t.Fatalf("messages of %v samples, want 256, 256, 256, 232 (stdin read at once: full batches, the rest at its end)", got)
	}
	want := 0
	for _, m := range f.msgs {
		for _, s := range m.Samples {
			if want == 500 {
				want++
			}
			if s.Name != "n" || s.Value != float64(want) || s.Labels["k"] != fmt.Sprintf("v%d", want%3) || s.T == 0 {
				t.Fatalf("sample %+v, want n %d k=v%d stamped", s, want, want%3)
			}
			want++
		}
	}
	if got := stderr.String(); got != "ahpctl: stdin:501: \"oops\": want \"name value [label=value ...]\", the value is missing\n" || p.bad != 1 || p.lines.Load() != 1001 || p.sent != 1000 || p.messages != 4 {
		t.Fatalf("stderr %q; bad %d, lines %d, sent %d, messages %d", got, p.bad, p.lines.Load(), p.sent, p.messages)
	}
}

// TestPushLinger: with stdin idle, a partial batch goes after --linger;
// lines that arrive together go together.
func TestPushLinger(t *testing.T) {
	r, w := io.Pipe()
	defer w.Close()
	_, f, _, done := startPusher(context.Background(), r, pushOptions{batch: 256, linger: 30 * time.Millisecond})
	start := time.Now()
	io.WriteString(w, "a 1\n")
	f.wait(t, 1, 5*time.Second)
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("a partial batch went after %v, before --linger", d)
	}
	io.WriteString(w, "b 2\nc 3\n")
	f.wait(t, 2, 5*time.Second)
	io.WriteString(w, "partial 9")
	time.Sleep(100 * time.Millisecond)
	if got := f.sizes(); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("messages of %v samples, want 1, then 2 (a line without its newline waits)", got)
	}
	w.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := f.sizes(); !slices.Equal(got, []int{1, 2, 1}) || f.msgs[2].Samples[0].Name != "partial" {
		t.Fatalf("after EOF: messages of %v samples, want the last line too", got)
	}
}

// TestPushEnds: the end of the stream and a signal end reading even while
// stdin stays open; after a signal, what was read is still sent.
func TestPushEnds(t *testing.T) {
	r, w := io.Pipe()
	defer w.Close()
	p, _, _, done := startPusher(context.Background(), r, pushOptions{batch: 256, linger: time.Hour})
	io.WriteString(w, "a 1\n")
	p.halt()
	if err := <-done; !errors.Is(err, errPushStopped) {
		t.Fatalf("read after the stream ended: %v, want errPushStopped", err)
	}

	r2, w2 := io.Pipe()
	defer w2.Close()
	ctx, cancel := context.WithCancel(context.Background())
	p2, f, _, done := startPusher(ctx, r2, pushOptions{batch: 256, linger: time.Hour})
	io.WriteString(w2, "a 1\nb 2\n")
	// Both lines read (and so parsed before the reader looks for more).
	deadline := time.Now().Add(15 * time.Second)
	for p2.lines.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the two lines were not read within 15 s")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, errPushInterrupted) {
		t.Fatalf("read after a signal: %v, want errPushInterrupted", err)
	}
	if got := f.sizes(); !slices.Equal(got, []int{2}) {
		t.Fatalf("after a signal: messages of %v samples, want the 2 read", got)
	}
}
