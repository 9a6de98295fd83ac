package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ahp-dev/ahpd/internal/samples"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// `ahpctl telemetry push URI` (PROTOCOL.md §10): stdin lines, parsed by
// package samples as command sources' are, streamed to PublishTelemetry.
//
// Three goroutines: one reads stdin into chunks (so that a partial batch
// can be sent after --linger without waiting for the next line), the
// action's own parses lines into batches, and one sends them, so that
// parsing and marshalling overlap. A batch goes when it has --batch
// samples, or when stdin has had nothing more for --linger since the
// batch's first sample. A malformed line is reported with its number and
// skipped: samples checks every line with the daemon's rules, so the
// daemon never refuses one and ends the stream.

const (
	defaultPushBatch  = 256
	defaultPushLinger = 10 * time.Millisecond
	maxPushBatch      = 10_000 // the daemon's bound per message
	pushChunkBytes    = 64 << 10
	pushChunks        = 4 // chunks read ahead
	pushQueue         = 8 // batches waiting for the sender
	// pushMaxBytes ends a batch early: a message stays far below gRPC's
	// default 4 MiB limit on what the daemon receives (one sample encodes
	// to at most ~7 KiB).
	pushMaxBytes = 1 << 20
)

const pushHelp = `Each line of stdin is one sample, in either format of command sources:

  name value [label=value ...]     e.g. build_seconds 12.5 target=linux arch="x86 64"
  {"name":"…","value":…,"t":…,"labels":{"k":"v"}}

A label value may be Go-quoted to hold spaces or quotes; blank lines and lines
starting with # are skipped; t is Unix time in milliseconds, and a sample
without t is stamped with the time ahpctl read it. A malformed line is reported
on stderr as "ahpctl: stdin:LINE: what is wrong" and skipped; the later lines
still go. Samples go in messages of at most --batch samples; a partial one is
sent once stdin has had nothing more for --linger, so a slow producer's samples
are not held back. At the end of stdin ahpctl closes the stream and prints a
summary on stderr (samples sent, bad lines).

URI must be a channel created with ahpctl telemetry create --kind push.
Exit status: 0 when every line was good, 1 when any line was bad (the good
ones were sent) or the daemon refused (no such channel, not a push channel,
the channel closed), 2 for bad usage.`

func setupTelemetryPush(fs *flag.FlagSet) action {
	batch := fs.Int("batch", defaultPushBatch, "send at most `N` samples per message (1–10000)")
	linger := fs.Duration("linger", defaultPushLinger, "a partial batch waits up to `DURATION` for more input (0: it goes as soon as stdin has nothing more)")
	quiet := fs.Bool("quiet", false, "print no summary when every line was good")
	return func(ctx context.Context, a *app, args []string) error {
		if *batch < 1 || *batch > maxPushBatch {
			return usagef("telemetry push: --batch must be 1–%d, got %d", maxPushBatch, *batch)
		}
		if *linger < 0 {
			return usagef("telemetry push: --linger must not be negative")
		}
		uri, err := a.channelURIOf(ctx, args[0], "telemetry")
		if err != nil {
			return err
		}
		return a.push(ctx, uri, pushOptions{batch: *batch, linger: *linger, quiet: *quiet})
	}
}

type pushOptions struct {
	batch  int
	linger time.Duration
	quiet  bool
}

// errPushInterrupted ends the input on a signal.
var errPushInterrupted = errors.New("interrupted")

// errPushStopped ends the input when the stream has failed.
var errPushStopped = errors.New("stream ended")

// notPushChannel is the refusal of a channel that takes no samples.
func notPushChannel(ch *ahpv1.Channel, uri string) error {
	switch {
	case ch == nil:
		return fmt.Errorf("telemetry push: %s is not a push telemetry channel (create one with ahpctl telemetry create --kind push)", uri)
	case ch.Type != "telemetry":
		return fmt.Errorf("telemetry push: %s is a %s channel, not a push telemetry channel (create one with ahpctl telemetry create --kind push)", uri, ch.Type)
	}
	return fmt.Errorf("telemetry push: %s is a %s telemetry channel, not a push one: its samples come from its source (create a push channel with ahpctl telemetry create --kind push)", uri, ch.GetTelemetry().GetSource())
}

func (a *app) push(ctx context.Context, uri string, o pushOptions) error {
	c, err := a.clients()
	if err != nil {
		return err
	}
	// Check the channel before reading stdin: a wrong URI fails at once.
	rctx, cancel := a.rpc(ctx)
	got, err := c.channels.GetChannel(rctx, &ahpv1.GetChannelRequest{Channel: uri})
	cancel()
	if err != nil {
		return err
	}
	if ch := got.GetChannel(); ch.GetType() != "telemetry" || ch.GetTelemetry().GetSource() != "push" {
		return notPushChannel(ch, uri)
	}

	// The stream outlives a signal: what was read is still sent.
	sctx, cancelStream := context.WithCancel(context.Background())
	defer cancelStream()
	stream, err := c.telemetry.PublishTelemetry(sctx, grpc.ForceCodec(pushCodec{}))
	if err != nil {
		return err
	}
	p := &pusher{a: a, uri: uri, o: o, stream: stream, stop: make(chan struct{}), queue: make(chan pushBatch, pushQueue), start: time.Now()}
	// The daemon checks the channel at the first message; its verdict,
	// or its reply at the end, comes back through RecvMsg.
	if err := stream.Send(&ahpv1.PublishTelemetryRequest{Channel: uri}); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	var res ahpv1.PublishTelemetryResponse
	replied := make(chan error, 1)
	go func() {
		err := stream.RecvMsg(&res)
		p.halt()
		replied <- err
	}()
	senderDone := make(chan struct{})
	go func() {
		defer close(senderDone)
		p.send()
	}()

	readErr := p.read(ctx)
	close(p.queue)
	// Wait for the sender; after a signal, not longer than --timeout.
	select {
	case <-senderDone:
	case <-ctx.Done():
		select {
		case <-senderDone:
		case <-time.After(a.timeout):
			cancelStream()
			<-senderDone
		}
	}
	var streamErr error
	if p.sendErr == nil || errors.Is(p.sendErr, io.EOF) {
		_ = stream.CloseSend()
	}
	select {
	case streamErr = <-replied:
	case <-time.After(a.timeout):
		cancelStream()
		streamErr = <-replied
		if status.Code(streamErr) == codes.Canceled {
			streamErr = fmt.Errorf("ahpd did not confirm the samples within %v (--timeout)", a.timeout)
		}
	}
	if streamErr == nil && p.sendErr != nil && !errors.Is(p.sendErr, io.EOF) {
		streamErr = p.sendErr
	}
	return p.finish(ctx, c, readErr, streamErr, &res)
}

// pushBatch is the samples of one PublishTelemetryRequest, encoded
// (appendSample).
type pushBatch struct {
	b []byte
	n int
}

// pusher is one telemetry push.
type pusher struct {
	a      *app
	uri    string
	o      pushOptions
	stream ahpv1.TelemetryService_PublishTelemetryClient
	start  time.Time

	stop     chan struct{} // closed when the stream has ended
	stopOnce sync.Once

	// The parser's (read's goroutine):
	cur        pushBatch
	firstAt    time.Time // when cur got its first sample
	queue      chan pushBatch
	batchBytes int          // capacity of a new batch's buffer
	lines      atomic.Int64 // lines read (atomic: a test waits on it)
	bad        int64

	// The sender's, read after it has finished:
	sent     int64
	messages int64
	sendErr  error
}

func (p *pusher) halt() { p.stopOnce.Do(func() { close(p.stop) }) }

// read parses stdin into batches until its end, a signal or the end of
// the stream.
func (p *pusher) read(ctx context.Context) error {
	in := &chunkReader{ch: make(chan stdinChunk, pushChunks), free: make(chan []byte, pushChunks+1), stop: p.stop, done: ctx.Done(), pending: p.pending, flush: p.flush}
	readerStop := make(chan struct{})
	defer close(readerStop)
	go readChunks(p.a.stdin, in.ch, in.free, readerStop)
	lr := samples.NewLineReader(in)
	for {
		line, n, err := lr.Next()
		if err == io.EOF {
			return p.flush()
		}
		if err != nil && err != samples.ErrLineTooLong {
			if !errors.Is(err, errPushStopped) {
				_ = p.flush()
			}
			return err
		}
		p.lines.Add(1)
		var s samples.Sample
		ok := false
		if err == nil {
			s, ok, err = samples.ParseLine(line, in.now)
		}
		if err != nil {
			p.bad++
			fmt.Fprintf(p.a.stderr, "ahpctl: stdin:%d: %s\n", n, oneLine(err.Error()))
			continue
		}
		if !ok {
			continue
		}
		if p.cur.n == 0 {
			p.cur.b = make([]byte, 0, p.batchBytes)
			p.firstAt = time.Now()
		}
		p.cur.b = appendSample(p.cur.b, &s)
		p.cur.n++
		if p.cur.n == p.o.batch || len(p.cur.b) >= pushMaxBytes {
			if err := p.flush(); err != nil {
				return err
			}
		}
	}
}

// pending reports whether a batch waits, and until when it may wait for
// more input.
func (p *pusher) pending() (time.Time, bool) {
	return p.firstAt.Add(p.o.linger), p.cur.n > 0
}

// flush hands the batch to the sender.
func (p *pusher) flush() error {
	if p.cur.n == 0 {
		return nil
	}
	select {
	case p.queue <- p.cur:
	case <-p.stop:
		return errPushStopped
	}
	// The next batch of this many samples will likely need as much.
	p.batchBytes = min(max(p.batchBytes, cap(p.cur.b)*p.o.batch/p.cur.n), pushMaxBytes+8<<10)
	p.cur = pushBatch{}
	return nil
}

// send streams the batches until the queue closes or the stream fails.
func (p *pusher) send() {
	for b := range p.queue {
		if p.sendErr != nil {
			continue
		}
		if err := p.stream.SendMsg(&encodedRequest{b.b}); err != nil {
			p.sendErr = err
			p.halt()
			continue
		}
		p.sent += int64(b.n)
		p.messages++
	}
}

// finish reports the outcome: the summary on stderr, or the error.
func (p *pusher) finish(ctx context.Context, c *clients, readErr, streamErr error, res *ahpv1.PublishTelemetryResponse) error {
	elapsed := time.Since(p.start)
	if streamErr != nil {
		if st, ok := status.FromError(streamErr); ok && st.Code() == codes.FailedPrecondition && strings.Contains(st.Message(), "not a push telemetry channel") {
			var ch *ahpv1.Channel
			rctx, cancel := p.a.rpc(context.WithoutCancel(ctx))
			if got, err := c.channels.GetChannel(rctx, &ahpv1.GetChannelRequest{Channel: p.uri}); err == nil {
				ch = got.Channel
			}
			cancel()
			return notPushChannel(ch, p.uri)
		}
		if p.sent > 0 {
			fmt.Fprintf(p.a.stderr, "ahpctl: telemetry push: the stream to %s ended after %s had been sent\n", p.uri, plural(p.sent, "sample"))
		}
		return streamErr
	}
	summary := fmt.Sprintf("telemetry push: %s sent to %s in %s, %d bad lines of %d (%s",
		plural(res.Samples, "sample"), p.uri, plural(p.messages, "message"), p.bad, p.lines.Load(), elapsed.Round(time.Millisecond))
	if secs := elapsed.Seconds(); res.Samples >= 10_000 && secs > 0 {
		summary += fmt.Sprintf(", %.0f samples/s", float64(res.Samples)/secs)
	}
	summary += ")"
	switch {
	case readErr != nil && errors.Is(readErr, errPushInterrupted):
		return fmt.Errorf("%s; interrupted before the end of stdin", summary)
	case readErr != nil:
		return fmt.Errorf("%s; reading stdin: %v", summary, readErr)
	case p.bad > 0:
		return errors.New(summary)
	case !p.o.quiet:
		fmt.Fprintln(p.a.stderr, "ahpctl: "+summary)
	}
	return nil
}

func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// stdinChunk is one read of stdin.
type stdinChunk struct {
	buf []byte
	at  float64 // when it was read, Unix ms
	err error
}

// readChunks reads r into buffers from free (or new ones) until an error
// or stop.
func readChunks(r io.Reader, out chan<- stdinChunk, free chan []byte, stop <-chan struct{}) {
	for {
		var buf []byte
		select {
		case buf = <-free:
		default:
			buf = make([]byte, pushChunkBytes)
		}
		n, err := r.Read(buf[:cap(buf)])
		now := time.Now()
		select {
		case out <- stdinChunk{buf: buf[:n], at: samples.UnixMilli(now.Unix(), int64(now.Nanosecond())), err: err}:
		case <-stop:
			return
		}
		if err != nil {
			return
		}
	}
}

// chunkReader is stdin as the reader goroutine delivers it. When it would
// wait for input while a batch is pending, it waits until the batch's
// deadline and then flushes it.
type chunkReader struct {
	ch   chan stdinChunk
	free chan []byte
	stop <-chan struct{} // the stream ended
	done <-chan struct{} // a signal

	pending func() (time.Time, bool)
	flush   func() error

	cur, buf []byte
	err      error
	now      float64 // when the data handed out last was read
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if r.buf != nil {
			select {
			case r.free <- r.buf[:0]:
			default:
			}
			r.buf = nil
		}
		if r.err != nil {
			return 0, r.err
		}
		c, err := r.next()
		if err != nil {
			return 0, err
		}
		r.buf, r.cur, r.err = c.buf, c.buf, c.err
		if len(c.buf) > 0 {
			r.now = c.at
		}
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

func (r *chunkReader) next() (stdinChunk, error) {
	select {
	case c := <-r.ch:
		return c, nil
	default:
	}
	if deadline, ok := r.pending(); ok {
		if wait := time.Until(deadline); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case c := <-r.ch:
				t.Stop()
				return c, nil
			case <-t.C:
			case <-r.stop:
				t.Stop()
				return stdinChunk{}, errPushStopped
			case <-r.done:
				t.Stop()
				return stdinChunk{}, errPushInterrupted
			}
		}
		if err := r.flush(); err != nil {
			return stdinChunk{}, err
		}
	}
	select {
	case c := <-r.ch:
		return c, nil
	case <-r.stop:
		return stdinChunk{}, errPushStopped
	case <-r.done:
		return stdinChunk{}, errPushInterrupted
	}
}
