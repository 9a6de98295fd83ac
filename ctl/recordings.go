package ctl

// ahpctl recordings list|cat|export and terminal record: the terminal
// recordings of docs/recording.md, over the control plane's
// RecordingService and TerminalService.SetTerminalRecording.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/ahp-dev/ahpd/internal/atomicfile"
	"github.com/ahp-dev/ahpd/internal/units"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
	"github.com/ahp-dev/ahpd/pty/record"
)

// recordFlag is --record[=MODE]: alone it records output; --record=output+input
// records what is typed too.
type recordFlag struct{ mode string }

func (f *recordFlag) String() string   { return f.mode }
func (f *recordFlag) IsBoolFlag() bool { return true }
func (f *recordFlag) Set(v string) error {
	switch v {
	case "true", "output":
		f.mode = "output"
	case "output+input":
		f.mode = "output+input"
	case "false", "off":
		f.mode = "off"
	default:
		return fmt.Errorf("want --record, --record=output or --record=output+input, got %q", v)
	}
	return nil
}

const recordingsHelp = `A recording is an asciicast v2 file (.cast) with an index beside it, in the
daemon's state directory under recordings/ (docs/recording.md). ID is its
file name without .cast: CHANNEL-START, e.g. shell-20261207T150405Z.`

func recordingsCommand() *command {
	return &command{name: "recordings", aliases: []string{"recording", "rec"}, summary: "List, print and export terminal recordings", sub: []*command{
		{name: "list", aliases: []string{"ls"}, args: "[CHANNEL]", summary: "List the recordings, newest first", maxArgs: 1, complete: "channel", setup: setupRecordingsList,
			help:     recordingsHelp + "\n\nCHANNEL (a URI or a terminal's id) keeps only that terminal's recordings; it\nmay have been closed since. The daemon answers in pages of 1000; ahpctl asks\nfor them all, or for the newest N with --limit N.",
			examples: []string{"ahpctl recordings list", "ahpctl recordings list shell", "ahpctl recordings list --limit 20", "ahpctl recordings list -o json"}},
		{name: "cat", args: "ID|FILE", summary: "Print a recording's output", minArgs: 1, maxArgs: 1, complete: "recording", setup: setupRecordingsCat,
			help: recordingsHelp + "\n" + `
Without flags it prints every output event at once, as asciinema cat does: the
bytes the program wrote. With --speed or --idle-limit it replays them in real
time, like asciinema play. FILE is a .cast file on this machine (any path with
a "/" or ending in .cast that exists); otherwise the daemon is asked for ID. A
recording being written is printed up to where it is now.`,
			examples: []string{"ahpctl recordings cat shell-20261207T150405Z", "ahpctl recordings cat --speed 2 --idle-limit 1 shell-20261207T150405Z", "ahpctl recordings cat ./session.cast"}},
		{name: "export", args: "ID", summary: "Write a recording's .cast file, byte for byte", minArgs: 1, maxArgs: 1, complete: "recording", setup: setupRecordingsExport,
			help:     recordingsHelp + "\n\nWithout -o the file goes to standard output. It plays in asciinema\n(asciinema play FILE, asciinema cat FILE). The file is written with mode 0600:\na recording holds whatever the terminal showed.",
			examples: []string{"ahpctl recordings export shell-20261207T150405Z -o session.cast", "ahpctl recordings export shell-20261207T150405Z | asciinema play -"}},
	}}
}

const terminalRecordHelp = `on starts recording the terminal's output (asciicast v2 in the state directory's
recordings/, docs/recording.md); --input records what viewers type too. Input
recording captures passwords typed at prompts: ask for it only when you mean
it. off stops the recording; its file stays until it is evicted. A recording
that runs in another mode ends and a new file starts.`

func setupTerminalRecord(fs *flag.FlagSet) action {
	input := fs.Bool("input", false, "with on: record what is typed too (passwords included)")
	return func(ctx context.Context, a *app, args []string) error {
		mode := ""
		switch args[1] {
		case "on":
			mode = "output"
			if *input {
				mode = "output+input"
			}
		case "off":
			if *input {
				return usagef("terminal record: --input goes with on, not off")
			}
			mode = "off"
		default:
			return usagef("terminal record: want on or off, got %q", args[1])
		}
		c, rctx, cancel, err := a.connect(ctx)
		if err != nil {
			return err
		}
		defer cancel()
		uri, err := a.channelURIOf(ctx, args[0], "terminal")
		if err != nil {
			return err
		}
		res, err := c.terminals.SetTerminalRecording(rctx, &ahpv1.SetTerminalRecordingRequest{Channel: uri, Mode: mode})
		if err != nil {
			return err
		}
		if r := res.GetRecording(); r.GetMode() != "off" {
			fmt.Fprintf(a.stdout, "recording %s (%s): %s\n", uri, r.GetMode(), r.GetId())
		} else {
			fmt.Fprintf(a.stdout, "not recording %s\n", uri)
		}
		return nil
	}
}

// recordingView is a recording in ahpctl's JSON and YAML output.
type recordingView struct {
	ID       string     `json:"id"`
	Channel  string     `json:"channel"`
	Started  time.Time  `json:"started"`
	Ended    *time.Time `json:"ended"`
	Live     bool       `json:"live"`
	Bytes    int64      `json:"bytes"`
	Duration float64    `json:"duration"` // seconds
	Rows     int32      `json:"rows"`
	Cols     int32      `json:"cols"`
	Title    string     `json:"title,omitempty"`
	Input    bool       `json:"input"`
	Path     string     `json:"path"`
}

func toRecordingView(r *ahpv1.Recording) recordingView {
	v := recordingView{ID: r.GetId(), Channel: r.GetChannel(), Started: r.GetStartTime().AsTime(), Live: r.GetLive(), Bytes: r.GetBytes(),
		Duration: r.GetDuration().AsDuration().Seconds(), Rows: r.GetRows(), Cols: r.GetCols(), Title: r.GetTitle(), Input: r.GetInput(), Path: r.GetPath()}
	if e := r.GetEndTime(); e != nil {
		t := e.AsTime()
		v.Ended = &t
	}
	return v
}

// recordingChannel is CHANNEL as a URI: a terminal's id stands for
// ahp-terminal:/ID (the terminal may be closed, so it is not looked up).
func recordingChannel(s string) string {
	if isShortName(s) {
		return "ahp-terminal:/" + s
	}
	return s
}

// maxListBytes bounds a ListRecordings answer ahpctl takes. A daemon
// answers pages of at most about 2 MiB; a daemon from before pages
// answers all at once, about 175 bytes a recording, so some 380,000
// recordings.
const maxListBytes = 64 << 20

// maxListPages bounds the pages ahpctl asks for: 65,536 pages of 1000.
const maxListPages = 1 << 16

// listPage asks for one page of ListRecordings.
type listPage func(ctx context.Context, req *ahpv1.ListRecordingsRequest) (*ahpv1.ListRecordingsResponse, error)

// listRecordings follows the pages of ListRecordings from the first,
// asking with req's channel, and returns their recordings, newest first:
// all of them, or the first limit (> 0). A daemon that gives a page token
// it gave before, or more than maxListPages pages, is an error, not a
// loop.
func listRecordings(ctx context.Context, list listPage, req *ahpv1.ListRecordingsRequest, limit int) ([]*ahpv1.Recording, error) {
	var out []*ahpv1.Recording
	seen := map[string]bool{}
	for pages := 0; ; pages++ {
		if pages == maxListPages {
			return nil, fmt.Errorf("recordings list: more than %d pages; stopped", maxListPages)
		}
		req.PageSize = 0 // the daemon's default, 1000
		if limit > 0 {
			req.PageSize = int32(min(limit-len(out), 1000))
		}
		res, err := list(ctx, req)
		if err != nil {
			return nil, err
		}
		out = append(out, res.GetRecordings()...)
		if limit > 0 && len(out) >= limit {
			return out[:limit], nil
		}
		next := res.GetNextPageToken()
		if next == "" {
			return out, nil
		}
		if seen[next] {
			return nil, fmt.Errorf("recordings list: the daemon gave page token %.64q twice; stopped", next)
		}
		seen[next] = true
		req.PageToken = next
	}
}

func setupRecordingsList(fs *flag.FlagSet) action {
	o := outputFlag(fs)
	limit := fs.Int("limit", 0, "list the newest `N` recordings only (default 0: all)")
	return func(ctx context.Context, a *app, args []string) error {
		if err := checkOutput(*o); err != nil {
			return err
		}
		if *limit < 0 {
			return usagef("recordings list: --limit must not be negative, got %d", *limit)
		}
		req := &ahpv1.ListRecordingsRequest{}
		if len(args) == 1 {
			req.Channel = recordingChannel(args[0])
		}
		c, err := a.clients()
		if err != nil {
			return err
		}
		recs, err := listRecordings(ctx, func(ctx context.Context, req *ahpv1.ListRecordingsRequest) (*ahpv1.ListRecordingsResponse, error) {
			rctx, cancel := a.rpc(ctx) // --timeout for each page
			defer cancel()
			return c.recordings.ListRecordings(rctx, req, grpc.MaxCallRecvMsgSize(maxListBytes))
		}, req, *limit)
		if err != nil {
			return err
		}
		views := make([]recordingView, 0, len(recs))
		for _, r := range recs {
			views = append(views, toRecordingView(r))
		}
		if structured(*o) {
			return a.printAs(*o, views)
		}
		if len(views) == 0 {
			fmt.Fprintln(a.stderr, "no recordings")
			return nil
		}
		header := []string{"ID", "CHANNEL", "STARTED", "DURATION", "SIZE", "RECORDS", "STATE"}
		if *o == "wide" {
			header = append(header, "SIZE(cells)", "PATH")
		}
		tw := a.table(header...)
		for _, v := range views {
			records, state := "output", "ended"
			if v.Input {
				records = "output+input"
			}
			if v.Live {
				state = "live"
			}
			dur := time.Duration(v.Duration * float64(time.Second)).Round(time.Second)
			row := []string{v.ID, v.Channel, v.Started.Local().Format("2006-01-02 15:04:05"), dur.String(), units.FormatSizeShort(v.Bytes), records, state}
			if *o == "wide" {
				row[4] = strconv.FormatInt(v.Bytes, 10) // exact in the wide table
				row = append(row, fmt.Sprintf("%dx%d", v.Cols, v.Rows), v.Path)
			}
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		return tw.Flush()
	}
}

// isCastFile reports whether arg names a .cast file on this machine
// rather than a recording id.
func isCastFile(arg string) bool {
	if !strings.Contains(arg, "/") && !strings.HasSuffix(arg, ".cast") {
		return false
	}
	fi, err := os.Stat(arg)
	return err == nil && fi.Mode().IsRegular()
}

// openRecording returns the .cast stream of arg: a local file, or the
// daemon's recording of that id. The caller closes it.
func (a *app) openRecording(ctx context.Context, arg string) (io.ReadCloser, error) {
	if isCastFile(arg) {
		return os.Open(arg)
	}
	if strings.Contains(arg, "/") {
		return nil, usagef("%s: no such file (an ID has no \"/\"; see ahpctl recordings list)", arg)
	}
	c, err := a.clients()
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	stream, err := c.recordings.ReadRecording(sctx, &ahpv1.ReadRecordingRequest{Id: strings.TrimSuffix(arg, ".cast")})
	if err != nil {
		cancel()
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() { // ends when the stream does, or when the reader closes the pipe
		defer cancel()
		for {
			res, err := stream.Recv()
			if err == io.EOF {
				pw.Close()
				return
			}
			if err != nil {
				pw.CloseWithError(err)
				return
			}
			if _, err := pw.Write(res.GetData()); err != nil {
				return
			}
		}
	}()
	return readCloser{pr, func() error { cancel(); return pr.Close() }}, nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

func setupRecordingsCat(fs *flag.FlagSet) action {
	speed := fs.Float64("speed", 0, "replay in real time at this `factor` (2 is twice as fast)")
	idle := fs.Duration("idle-limit", 0, "replay in real time, shortening pauses longer than this `duration` to it (e.g. 1s)")
	return func(ctx context.Context, a *app, args []string) error {
		if *speed < 0 || math.IsInf(*speed, 0) || math.IsNaN(*speed) {
			return usagef("recordings cat: --speed must be a positive factor, got %v", *speed)
		}
		if *idle < 0 {
			return usagef("recordings cat: --idle-limit must not be negative, got %v", *idle)
		}
		r, err := a.openRecording(ctx, args[0])
		if err != nil {
			return err
		}
		defer r.Close()
		p := replay{speed: *speed, idle: *idle, sleep: sleepCtx}
		return p.run(ctx, r, a.stdout)
	}
}

// replay prints a recording's output events: at once, or in real time
// when speed or idle is set.
type replay struct {
	speed float64       // 0: 1 when idle is set, else no waiting
	idle  time.Duration // pauses longer are shortened to it; 0: none
	sleep func(ctx context.Context, d time.Duration) error
}

func (p replay) run(ctx context.Context, r io.Reader, w io.Writer) error {
	cr, err := record.NewReader(r)
	if err != nil {
		return err
	}
	cr.Complete = true // a file, or a recording's whole lines: a last line without "\n" is an event
	timed := p.speed > 0 || p.idle > 0
	speed := p.speed
	if speed == 0 {
		speed = 1
	}
	var last float64
	for {
		ev, err := cr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if ev.Type != "o" {
			continue
		}
		if timed {
			gap := time.Duration((ev.Time - last) * float64(time.Second))
			last = max(last, ev.Time)
			if p.idle > 0 && gap > p.idle {
				gap = p.idle
			}
			if gap > 0 {
				if err := p.sleep(ctx, time.Duration(float64(gap)/speed)); err != nil {
					return err
				}
			}
		}
		if _, err := io.WriteString(w, ev.Data); err != nil {
			return err
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func setupRecordingsExport(fs *flag.FlagSet) action {
	out := fs.String("o", "", "write to `FILE` (default: standard output)")
	force := fs.Bool("force", false, "replace FILE if it exists")
	return func(ctx context.Context, a *app, args []string) error {
		if a.output != "" {
			// The global -o (ahpctl -o json ...) is a listing format, not
			// a file name.
			return usagef("recordings export: the global -o %s is a listing format; write -o FILE after export", a.output)
		}
		if strings.Contains(args[0], "/") {
			return usagef("recordings export: want a recording ID (see ahpctl recordings list), got the path %q", args[0])
		}
		if *out != "" && !*force {
			if _, err := os.Lstat(*out); err == nil {
				return usagef("recordings export: %s exists (--force replaces it)", *out)
			}
		}
		r, err := a.openRecording(ctx, args[0])
		if err != nil {
			return err
		}
		defer r.Close()
		if *out == "" {
			_, err := io.Copy(a.stdout, r)
			return err
		}
		if err := atomicfile.WriteFrom(*out, r); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		return nil
	}
}
