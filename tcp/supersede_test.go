package tcp

import (
	"bytes"
	"slices"
	"testing"

	"github.com/ahp-dev/ahpd/flow"
)

// TestSupersedeWindow: a second connection resumes a channel whose first
// holder has a full window it has not credited, over the flow.Sender of
// each connection, and every new message of either starts within its
// client's window (PROTOCOL.md §5).
//
//   - old-credits: the client released everything it had (the resume says
//     so) and its old connection credits it after the resume superseded
//     it: the old holder's window opens, but it starts nothing new.
//   - new-window-full: the resume released nothing, so the new holder's
//     window is full: channel/ready, a data message (§4), waits for its
//     credit. It was a lifecycle message that started beyond the window
//     (issue 36 item 1: an acceptance test saw a new message start with
//     1,060,752 bytes outstanding ≥ windowBytes 1,048,576).
//
// Then the new holder credits as it receives and gets the rest of the
// stream byte-exact.
func TestSupersedeWindow(t *testing.T) {
	for _, oldCredits := range []bool{true, false} {
		name := map[bool]string{true: "old-credits", false: "new-window-full"}[oldCredits]
		t.Run(name, func(t *testing.T) { testSupersedeWindow(t, oldCredits) })
	}
}

func testSupersedeWindow(t *testing.T, oldCredits bool) {
	data := streamData(512 << 10)
	tg := newTarget(t, data, false)
	c := newChannel(t, tg, Config{})
	limits := flow.ReceiveLimits{WindowBytes: 64 << 10, MaximumFrameBytes: 16 << 10, MaximumMessageBytes: 64 << 10}

	a := attach(t, c, "a", limits, nil)
	drive(t, "the first holder's window to fill", func() bool {
		return a.received-a.credited >= limits.WindowBytes && a.cur == 0 && !a.snd.Pending()
	}, a)
	frames := a.frames

	resume := &flow.ResumeRequest{Token: a.res.Resume.Token, Accepted: a.accepted}
	if oldCredits {
		resume.Released = a.accepted
	}
	b := attach(t, c, "b", limits, resume)
	b.data = slices.Clone(a.data)
	if b.st != nil {
		t.Fatal("the resume took the channel while the first holder still held it")
	}
	if oldCredits {
		// The credit reaches the old connection before it sees that it
		// was superseded.
		a.credit()
		a.pump()
		if a.frames != frames {
			t.Fatalf("the superseded holder was sent %d more frames", a.frames-frames)
		}
	}
	drive(t, "the old holder to be reset and the resume to start", func() bool { return a.closed && b.st != nil }, a, b)
	if a.end == nil || a.end.Code != flow.CodeSuperseded {
		t.Fatalf("old holder ended with %v, want %s", a.end, flow.CodeSuperseded)
	}
	if a.frames != frames {
		t.Fatalf("the superseded holder was sent %d more frames", a.frames-frames)
	}

	drive(t, "the new holder to go idle", func() bool { return !b.snd.Pending() }, b)
	if !oldCredits && b.frames > 0 {
		t.Errorf("new holder resumed with a full window: %d frames before it credited, %q", b.frames, b.violations)
	}
	drive(t, "the rest of the stream", func() bool {
		b.credit()
		return len(b.data) == len(data)
	}, b)
	if len(a.violations)+len(b.violations) > 0 {
		t.Fatalf("window overruns: %q", append(a.violations, b.violations...))
	}
	if got := b.methods[0]; got != "channel/ready" {
		t.Fatalf("the resumed subscription's first message is %s, want channel/ready", got)
	}
	if !bytes.Equal(b.data, data) {
		t.Fatal("the stream's bytes differ from the target's")
	}
	b.close()
}
