package daemon_test

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/ahp-dev/ahpd/daemon/auth"
	"github.com/ahp-dev/ahpd/daemon/config"
	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// readAll streams a recording from offset over ReadRecording.
func readAll(t *testing.T, rc ahpv1.RecordingServiceClient, id string, off int64) ([]byte, error) {
	t.Helper()
	stream, err := rc.ReadRecording(ctxT(t), &ahpv1.ReadRecordingRequest{Id: id, Offset: off})
	if err != nil {
		return nil, err
	}
	var b []byte
	for {
		res, err := stream.Recv()
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if res.Offset != off+int64(len(b)) || len(res.Data) > 256<<10 {
			t.Fatalf("chunk at %d of %d bytes, want at %d and at most 256 KiB", res.Offset, len(res.Data), off+int64(len(b)))
		}
		b = append(b, res.Data...)
	}
}

// waitCast polls the recording's file until it holds want (the recorder
// writes from its own goroutine).
func waitCast(t *testing.T, path, want string) []byte {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if bytes.Contains(b, []byte(want)) {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held %q: %q", path, want, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRecordingControlPlane: over the gRPC socket, with real PTYs: the
// config's record makes a terminal recorded from its start; a running
// terminal is switched on, to another mode (a new file) and off;
// ReadRecording returns the file's bytes exactly, of a live recording up
// to its last complete line; bad modes and ids get the right codes.
func TestRecordingControlPlane(t *testing.T) {
	h := start(t, true, func(c *config.Config) { c.Record = "output" })
	next, stopWatch := h.srv.Events().Watch()
	defer stopWatch()
	cp := h.control()
	rc := ahpv1.NewRecordingServiceClient(cp.cc)
	ctx := ctxT(t)

	res, err := cp.terminals.CreateTerminal(ctx, &ahpv1.CreateTerminalRequest{Id: "def", Command: "/bin/sh", Args: []string{"-c", "echo from-the-start; exec cat"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Channel.Recording; r.GetMode() != "output" || !strings.HasPrefix(r.GetId(), "def-") {
		t.Fatalf("a terminal under record = output: recording %v", r)
	}
	list, err := rc.ListRecordings(ctx, &ahpv1.ListRecordingsRequest{Channel: "ahp-terminal:/def"})
	if err != nil || len(list.Recordings) != 1 || !list.Recordings[0].Live || list.Recordings[0].Channel != "ahp-terminal:/def" {
		t.Fatalf("ListRecordings = %v, %v", list, err)
	}
	path := list.Recordings[0].Path
	waitCast(t, path, "from-the-start")
	// Live: the read stops after the last complete line, and is the
	// file's bytes up to there.
	got, err := readAll(t, rc, res.Channel.Recording.Id, 0)
	if err != nil {
		t.Fatal(err)
	}
	file, _ := os.ReadFile(path)
	if len(got) == 0 || !bytes.HasPrefix(file, got) || got[len(got)-1] != '\n' {
		t.Fatalf("live read of %d bytes: not the file's first complete lines (%d bytes)", len(got), len(file))
	}
	part, err := readAll(t, rc, res.Channel.Recording.Id, 10)
	if err != nil || !bytes.Equal(part, got[10:]) {
		t.Fatalf("read from 10: %d bytes, %v", len(part), err)
	}

	// off, a terminal created with record off, then on, then on with input.
	off, err := cp.terminals.CreateTerminal(ctx, &ahpv1.CreateTerminalRequest{Id: "off", Command: "cat", Record: "off"})
	if err != nil || off.Channel.Recording.GetMode() != "off" {
		t.Fatalf("record off: %v, %v", off, err)
	}
	on, err := cp.terminals.SetTerminalRecording(ctx, &ahpv1.SetTerminalRecordingRequest{Channel: "ahp-terminal:/off", Mode: "output"})
	if err != nil || on.Recording.Mode != "output" || !strings.HasPrefix(on.Recording.Id, "off-") {
		t.Fatalf("record on: %v, %v", on, err)
	}
	again, err := cp.terminals.SetTerminalRecording(ctx, &ahpv1.SetTerminalRecordingRequest{Channel: "ahp-terminal:/off", Mode: "output"})
	if err != nil || again.Recording.Id != on.Recording.Id {
		t.Fatalf("record on twice: %v, %v; want the same file %s", again, err, on.Recording.Id)
	}
	in, err := cp.terminals.SetTerminalRecording(ctx, &ahpv1.SetTerminalRecordingRequest{Channel: "ahp-terminal:/off", Mode: "output+input"})
	if err != nil || in.Recording.Mode != "output+input" || in.Recording.Id == on.Recording.Id {
		t.Fatalf("record with input: %v, %v; want a new file", in, err)
	}
	ch, err := cp.channels.GetChannel(ctx, &ahpv1.GetChannelRequest{Channel: "ahp-terminal:/off"})
	if err != nil || ch.Channel.Recording.GetId() != in.Recording.Id {
		t.Fatalf("GetChannel: recording %v, %v", ch.GetChannel().GetRecording(), err)
	}
	if _, err := cp.terminals.SetTerminalRecording(ctx, &ahpv1.SetTerminalRecordingRequest{Channel: "ahp-terminal:/off", Mode: "off"}); err != nil {
		t.Fatal(err)
	}
	l, _ := rc.ListRecordings(ctx, &ahpv1.ListRecordingsRequest{Channel: "ahp-terminal:/off"})
	if len(l.GetRecordings()) != 2 || l.Recordings[0].Id != in.Recording.Id || l.Recordings[0].Live || !l.Recordings[0].Input || l.Recordings[0].EndTime == nil {
		t.Fatalf("after off: %v, want two ended files, the input one first", l)
	}
	// An ended recording reads whole, byte for byte.
	got, err = readAll(t, rc, in.Recording.Id, 0)
	file, _ = os.ReadFile(l.Recordings[0].Path)
	if err != nil || !bytes.Equal(got, file) || !bytes.HasSuffix(file, []byte("\n")) {
		t.Fatalf("read of an ended recording: %d bytes, the file %d, %v", len(got), len(file), err)
	}

	// A recording that ends with its process is announced too.
	if _, err := cp.terminals.CreateTerminal(ctx, &ahpv1.CreateTerminalRequest{Id: "bye", Command: "/bin/sh", Args: []string{"-c", "echo bye"}}); err != nil {
		t.Fatal(err)
	}
	var got2 []string
	want := []string{
		"recording.started def", "recording.started off", "recording.stopped off: recording mode changed to output+input",
		"recording.started off", "recording.stopped off: stopped by the operator", "recording.started bye", "recording.stopped bye: process exited with code 0",
	}
	done := make(chan struct{})
	timer := time.AfterFunc(10*time.Second, func() { close(done) })
	defer timer.Stop()
	for len(got2) < len(want) {
		evs, _, ok := next(done)
		if !ok {
			t.Fatalf("recording events %q, want %q", got2, want)
		}
		for _, e := range evs {
			if strings.HasPrefix(e.Kind, "recording.") {
				id, reason, _ := strings.Cut(e.Detail, ": ")
				ch := strings.TrimPrefix(e.Channel, "ahp-terminal:/")
				if !strings.HasPrefix(id, ch+"-") {
					t.Errorf("event %+v: detail does not start with the recording's id", e)
				}
				if e.Kind == "recording.started" {
					got2 = append(got2, e.Kind+" "+ch)
				} else {
					got2 = append(got2, e.Kind+" "+ch+": "+reason)
				}
			}
		}
	}
	if strings.Join(got2, "\n") != strings.Join(want, "\n") {
		t.Errorf("recording events:\n%s\nwant:\n%s", strings.Join(got2, "\n"), strings.Join(want, "\n"))
	}

	for _, tc := range []struct {
		err  error
		code codes.Code
		msg  string
	}{
		{func() error {
			_, err := cp.terminals.CreateTerminal(ctx, &ahpv1.CreateTerminalRequest{Command: "cat", Record: "everything"})
			return err
		}(), codes.InvalidArgument, "record: want off, output or output+input"},
		{func() error {
			_, err := cp.terminals.SetTerminalRecording(ctx, &ahpv1.SetTerminalRecordingRequest{Channel: "ahp-terminal:/off"})
			return err
		}(), codes.InvalidArgument, "mode"},
		{func() error {
			_, err := cp.terminals.SetTerminalRecording(ctx, &ahpv1.SetTerminalRecordingRequest{Channel: "ahp-terminal:/nope", Mode: "output"})
			return err
		}(), codes.NotFound, "nope"},
		{func() error { _, err := readAll(t, rc, "off-20991231T000000Z", 0); return err }(), codes.NotFound, "recording not found"},
		{func() error { _, err := readAll(t, rc, in.Recording.Id, int64(len(file))+1); return err }(), codes.InvalidArgument, "offset"},
		{func() error {
			_, err := rc.ListRecordings(ctx, &ahpv1.ListRecordingsRequest{Channel: "ahp-tcp:/1"})
			return err
		}(), codes.InvalidArgument, "terminal URI"},
	} {
		wantCode(t, tc.err, tc.code, tc.msg)
	}
}

// TestRecordingsRetention: the directory's cap holds at start (a daemon
// started with a lower recordingsMaxTotalBytes evicts the oldest) and
// when the limit is lowered at run time (ahpctl limits set).
func TestRecordingsRetention(t *testing.T) {
	dir := t.TempDir()
	h1, stop, err := startServer(dir, false, nil, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	h1.t = t
	var ids []string
	size := map[string]int64{}
	for i := range 4 {
		// Oldest first (ids order by start time, then -2, -3).
		info := fakeRecording(t, h1, "r"+itoa(i), 12000, "s")
		ids = append(ids, info.ID)
		size[info.ID] = info.Bytes + info.IndexBytes
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// held checks that h keeps the newest recordings that fit in max,
	// and evicted the others, oldest first.
	held := func(h *harness, max int64, when string) {
		t.Helper()
		var got []string
		for _, i := range h.srv.Recordings().List("") {
			got = append(got, i.ID)
		}
		var want []string
		var sum int64
		for k := len(ids) - 1; k >= 0 && sum+size[ids[k]] <= max; k-- {
			want = append(want, ids[k])
			sum += size[ids[k]]
		}
		if strings.Join(got, ",") != strings.Join(want, ",") || len(want) == 0 || len(want) == len(ids) {
			t.Fatalf("%s (cap %d, sizes %v): %v, want %v", when, max, size, got, want)
		}
		if st := h.srv.Recordings().Stats(); st.Bytes > max {
			t.Fatalf("%s: %d bytes on disk, over the cap %d", when, st.Bytes, max)
		}
	}
	const first = 2 << 20
	h2, stop2, err := startServer(dir, false, func(c *config.Config) {
		c.Limits = config.DefaultLimits()
		c.Limits.RecordingsMaxTotalBytes = first
		c.Limits.RecordingMaxBytes = 64 << 10
	}, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	h2.t = t
	t.Cleanup(func() {
		if err := stop2(); err != nil {
			t.Error(err)
		}
	})
	held(h2, first, "at start")
	cp := h2.control()
	l := h2.srv.Limits()
	l.RecordingsMaxTotalBytes = size[ids[3]] + size[ids[2]] - 1
	if err := h2.srv.SetLimits(l); err != nil {
		t.Fatal(err)
	}
	held(h2, l.RecordingsMaxTotalBytes, "after lowering the cap")
	// A cap below recordingMaxBytes is refused, naming the field.
	_, err = cp.limits.SetLimits(ctxT(t), &ahpv1.SetLimitsRequest{Limits: &ahpv1.Limits{RecordingsMaxTotalBytes: 1 << 20, RecordingMaxBytes: 2 << 20},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"recordings_max_total_bytes", "recording_max_bytes"}}})
	wantCode(t, err, codes.InvalidArgument, "recordingsMaxTotalBytes")
}

// TestRecordingNamesViewersAlreadyAttached: a recording started on a
// terminal that viewers watch names them in its audit from its start,
// with their token ids and roles.
func TestRecordingNamesViewersAlreadyAttached(t *testing.T) {
	h := start(t, true, nil)
	cp := h.control()
	ctx := ctxT(t)
	if _, err := cp.terminals.CreateTerminal(ctx, &ahpv1.CreateTerminalRequest{Id: "w", Command: "cat"}); err != nil {
		t.Fatal(err)
	}
	view, _ := h.srv.Tokens().Mint(auth.Grant{Channels: []string{"ahp-terminal:/w"}, Role: auth.RoleView})
	c := h.dial(view)
	if _, err := c.Subscribe(ctx, "ahp-terminal:/w", nil); err != nil {
		t.Fatal(err)
	}
	res, err := cp.terminals.SetTerminalRecording(ctx, &ahpv1.SetTerminalRecordingRequest{Channel: "ahp-terminal:/w", Mode: "output"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.terminals.SetTerminalRecording(ctx, &ahpv1.SetTerminalRecordingRequest{Channel: "ahp-terminal:/w", Mode: "off"}); err != nil {
		t.Fatal(err)
	}
	idx, err := h.srv.Recordings().Index(res.Recording.Id)
	if err != nil {
		t.Fatal(err)
	}
	tokens := h.srv.Tokens().List()
	var attached []string
	for _, a := range idx.Audit {
		if a.Event == "attach" {
			attached = append(attached, a.Token+" "+a.Role+" "+a.Detail)
		}
	}
	if len(tokens) != 1 || len(attached) != 1 || attached[0] != tokens[0].ID+" view attached before this file began" {
		t.Fatalf("attach events %q, want the view token's (%v)", attached, tokens)
	}
}
