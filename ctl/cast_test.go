package ctl

import (
	"bytes"
	"context"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/pty/record"
)

const castHead = `{"version":2,"width":80,"height":24,"timestamp":1765119845,"env":{"TERM":"xterm-256color"}}` + "\n"

var castCases = []struct {
	name, in string
	out      string // what cat prints
	err      string // a substring of the error; "" none
}{
	{"output", castHead + `[0.000100, "o", "hi\r\n"]` + "\n" + `[0.5, "o", "\u001b[1mé😀\u001b[0m"]` + "\n", "hi\r\n\x1b[1mé😀\x1b[0m", ""},
	{"other events skipped", castHead + `[0.1, "i", "secret\r"]` + "\n" + `[0.2, "r", "100x30"]` + "\n" + `[0.3, "m", "dropped 10 bytes"]` + "\n" + `[0.4, "o", "x"]` + "\n", "x", ""},
	{"no final newline", castHead + `[0.1, "o", "a"]`, "a", ""},
	{"blank lines", castHead + "\n" + `[0.1, "o", "a"]` + "\n\n", "a", ""},
	{"header only", castHead, "", ""},
	{"empty", "", "", "an empty file"},
	{"version 1", `{"version":1,"width":80,"height":24}` + "\n", "", "version 1"},
	{"not json", "hello\n", "", "line 1: record: bad format: header is not a JSON object"},
	{"bad event", castHead + `{"o":1}` + "\n", "", "line 2 (offset 92): record: bad format: event is not a JSON array"},
	{"negative time", castHead + `[-1, "o", "a"]` + "\n", "", "line 2 (offset 92): record: bad format: event time -1"},
	{"code not a string", castHead + `[1, 2, "a"]` + "\n", "", "line 2 (offset 92): record: bad format: event type 2"},
	{"data not a string", castHead + `[1, "o", 3]` + "\n", "", "line 2 (offset 92): record: bad format: event data"},
	{"two events then garbage", castHead + `[1, "o", "a"]` + "\n" + `[2, "o"]` + "\n", "a", "line 3"},
}

func TestCastCat(t *testing.T) {
	for _, tc := range castCases {
		var out bytes.Buffer
		err := replay{}.run(context.Background(), strings.NewReader(tc.in), &out)
		if out.String() != tc.out {
			t.Errorf("%s: cat printed %q, want %q", tc.name, out.String(), tc.out)
		}
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: cat = %v, want no error", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: cat = %v, want an error with %q", tc.name, err, tc.err)
		}
	}
}

// TestCastLineBound: a line past record.MaxReadLine is refused, not buffered.
func TestCastLineBound(t *testing.T) {
	long := castHead + `[1, "o", "` + strings.Repeat("a", record.MaxReadLine) + `"]` + "\n"
	err := replay{}.run(context.Background(), strings.NewReader(long), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("cat of a %d-byte line = %v, want longer than %d bytes", len(long), err, record.MaxReadLine)
	}
	ok := castHead + `[1, "o", "` + strings.Repeat("a", record.MaxReadLine-20) + `"]` + "\n"
	var out bytes.Buffer
	if err := (replay{}).run(context.Background(), strings.NewReader(ok), &out); err != nil || out.Len() != record.MaxReadLine-20 {
		t.Fatalf("cat of a line under the bound = %d bytes, %v", out.Len(), err)
	}
}

// TestReplayTiming: --speed divides the pauses, --idle-limit caps them,
// and only output events are waited for (no clock: the sleeps are
// recorded).
func TestReplayTiming(t *testing.T) {
	in := castHead + `[1.0, "o", "a"]` + "\n" + `[1.5, "i", "k"]` + "\n" + `[4.0, "o", "b"]` + "\n" + `[4.25, "o", "c"]` + "\n"
	for _, tc := range []struct {
		speed float64
		idle  time.Duration
		want  []time.Duration
	}{
		{1, 0, []time.Duration{time.Second, 3 * time.Second, 250 * time.Millisecond}},
		{2, 0, []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond, 125 * time.Millisecond}},
		{0, time.Second, []time.Duration{time.Second, time.Second, 250 * time.Millisecond}},
		{4, 2 * time.Second, []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, 62500 * time.Microsecond}},
	} {
		var slept []time.Duration
		p := replay{speed: tc.speed, idle: tc.idle, sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }}
		var out bytes.Buffer
		if err := p.run(context.Background(), strings.NewReader(in), &out); err != nil || out.String() != "abc" {
			t.Fatalf("speed %v idle %v: printed %q, %v", tc.speed, tc.idle, out.String(), err)
		}
		if !slices.Equal(slept, tc.want) {
			t.Errorf("speed %v idle %v: slept %v, want %v", tc.speed, tc.idle, slept, tc.want)
		}
	}
}

func TestRecordFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
		err  bool
	}{
		{nil, "", false},
		{[]string{"--record"}, "output", false},
		{[]string{"--record=output"}, "output", false},
		{[]string{"--record=output+input"}, "output+input", false},
		{[]string{"--record=off"}, "off", false},
		{[]string{"--record=input"}, "", true},
	} {
		fs := flag.NewFlagSet("", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var f recordFlag
		fs.Var(&f, "record", "")
		err := fs.Parse(tc.args)
		if (err != nil) != tc.err || f.mode != tc.want {
			t.Errorf("%q: mode %q, err %v; want %q, error %v", tc.args, f.mode, err, tc.want, tc.err)
		}
	}
}

// FuzzCastReader: any input ends in output or an error, never a panic or
// a hang, and a header-only prefix never errors.
func FuzzCastReader(f *testing.F) {
	for _, tc := range castCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var out bytes.Buffer
		_ = replay{}.run(context.Background(), bytes.NewReader(b), &out)
		if out.Len() > len(b)*3 { // an invalid byte becomes U+FFFD, 3 bytes; escapes shrink
			t.Fatalf("printed %d bytes from %d", out.Len(), len(b))
		}
	})
}
