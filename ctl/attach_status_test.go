package ctl

import (
	"bytes"
	"strings"
	"testing"
)

// TestStatusLine: on a terminal attach's status line is opened once and
// then rewritten in place (\r, erase line), cut to the terminal's width
// so that it never wraps; elsewhere a line is printed only when what it
// says (its key) changes, not at each attempt.
func TestStatusLine(t *testing.T) {
	var b bytes.Buffer
	l := statusLine{w: &b, tty: true, cols: 30}
	l.show("the daemon shut down; reconnecting…", "")
	l.show("the daemon shut down; reconnecting… 1s", "refused")
	l.show("x", "refused")
	want := "\r\n\x1b[0m[ahpctl: the daemon shut dow…" + "\r\x1b[K[ahpctl: the daemon shut dow…" + "\r\x1b[K[ahpctl: x]"
	if got := b.String(); got != want {
		t.Errorf("on a terminal: %q\nwant %q", got, want)
	}
	for _, line := range strings.Split(b.String(), "\r") {
		if n := len([]rune(strings.TrimPrefix(strings.TrimPrefix(line, "\n\x1b[0m"), "\x1b[K"))); n >= 30 {
			t.Errorf("%q: %d characters on a terminal of 30 columns", line, n)
		}
	}
	l.reset()
	b.Reset()
	l.show("again", "")
	if got := b.String(); got != "\r\n\x1b[0m[ahpctl: again]" {
		t.Errorf("after reset: %q, want the line opened anew", got)
	}

	b.Reset()
	p := statusLine{w: &b}
	p.show("lost; reconnecting…", "")
	p.show("lost; reconnecting… 1s: refused", "refused")
	p.show("lost; reconnecting… 2s: refused", "refused")
	p.show("lost; reconnecting… 5s: timed out", "timed out")
	want = "\r\n[ahpctl: lost; reconnecting…]\r\n\r\n[ahpctl: lost; reconnecting… 1s: refused]\r\n\r\n[ahpctl: lost; reconnecting… 5s: timed out]\r\n"
	if got := b.String(); got != want {
		t.Errorf("not a terminal: %q\nwant %q", got, want)
	}
}
