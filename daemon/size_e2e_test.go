package daemon_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/ctl/client"
)

// TestResizePolicyTwoViewers: two WebSocket viewers of different sizes on
// one shell (docs/protocol-decisions.md, "Terminal size with several
// viewers"). The shell's `stty size` shows what the PTY is: the first
// viewer's size; still that after a second, smaller viewer connects and
// tells its own; the second's once it types; the first's again once the
// second has left.
func TestResizePolicyTwoViewers(t *testing.T) {
	h := start(t, true, nil)
	ch, err := h.srv.CreateTerminal(shellSpec("size"))
	if err != nil {
		t.Fatal(err)
	}
	resize := func(c *client.Conn, v *viewer, rows, cols int) {
		t.Helper()
		if err := c.Call(ctxT(t), "terminal/resize", map[string]any{"subscriptionId": v.sub.ID, "rows": rows, "cols": cols}, nil); err != nil {
			t.Fatalf("terminal/resize %dx%d: %v", rows, cols, err)
		}
	}
	// sttySize types `stty size` in v and waits for the shell's answer,
	// marked so that output of an earlier command (the other viewer's)
	// does not count: the echo shows "$((n+1))", the answer n+1.
	n := 0
	sttySize := func(v *viewer, want, when string) {
		t.Helper()
		n++
		mark := "SIZE" + strconvItoa(n) + " "
		v.send("echo SIZE$((" + strconvItoa(n-1) + "+1)) $(stty size)\r")
		v.until(10*time.Second, func(o string) bool {
			i := strings.Index(o, mark)
			return i >= 0 && strings.Contains(o[i:], "\r\n")
		})
		o := v.out.String()
		o = o[strings.LastIndex(o, mark)+len(mark):]
		if got, _, _ := strings.Cut(o, "\r\n"); got != want {
			t.Fatalf("%s: stty size printed %q, want %q", when, got, want)
		}
	}
	ready := func(v *viewer) {
		v.until(10*time.Second, func(o string) bool { return strings.Contains(o, "PROMPT> ") })
	}

	ca, a := h.subscribe(adminToken, ch.URI, nil)
	ready(a)
	resize(ca, a, 40, 120) // the page and attach tell their size once subscribed
	sttySize(a, "40 120", "the first viewer")

	cb, b := h.subscribe(adminToken, ch.URI, nil)
	ready(b)
	resize(cb, b, 28, 87) // a 700×450 tab
	sttySize(a, "40 120", "after a second, smaller viewer connected")

	sttySize(b, "28 87", "after the smaller viewer typed")

	cb.Close()
	sttySize(a, "40 120", "after the smaller viewer left")
}
