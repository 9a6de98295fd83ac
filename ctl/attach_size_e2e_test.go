package ctl_test

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"

	"github.com/creack/pty"
)

// TestE2EAttachSizePolicy: two `ahpctl attach` of different sizes on one
// shell (docs/protocol-decisions.md, "Terminal size with several
// viewers"). The first attach's size applies; the second, smaller one
// does not shrink the shell by attaching and says it is clipped; once it
// types, its size applies; once it detaches, the first one's again.
func TestE2EAttachSizePolicy(t *testing.T) {
	d := startDaemon(t)
	d.mustCtl("terminal", "create", "--id", "sz", "--env", "PS1=PROMPT> ", "--env", "HOME=/tmp", "--", "/bin/sh")
	attach := func(rows, cols uint16) (*os.File, *ptyScreen, <-chan error, *exec.Cmd) {
		t.Helper()
		cmd := exec.Command(d.ahpctl, "--control", d.control, "attach", "sz")
		f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: rows, Cols: cols})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		screen := newPTYScreen(f)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		return f, screen, done, cmd
	}
	// stty types `stty size` in f and waits for the answer, marked by n so
	// that an earlier answer does not count.
	n := 0
	stty := func(f *os.File, screen *ptyScreen, want, when string) {
		t.Helper()
		n++
		from := len(screen.String())
		if _, err := f.Write([]byte("echo SZ$((" + strconv.Itoa(n) + "*10)) $(stty size)\r")); err != nil {
			t.Fatal(err)
		}
		end := screen.waitFor(t, from, regexp.MustCompile(`SZ`+strconv.Itoa(n*10)+` \d+ \d+`))
		got := regexp.MustCompile(`\d+ \d+$`).FindString(screen.String()[:end])
		if got != want {
			t.Fatalf("%s: stty size = %q, want %q; output:\n%q", when, got, want, screen.String()[from:])
		}
	}

	fa, sa, _, _ := attach(40, 120)
	sa.waitFor(t, 0, regexp.MustCompile(`PROMPT> `))
	stty(fa, sa, "40 120", "the first attach")

	fb, sb, doneB, cmdB := attach(24, 80)
	sb.waitFor(t, 0, regexp.MustCompile(regexp.QuoteMeta(`ahpctl: clipped: the terminal is 120x40, larger than this window (80x24): another viewer used it last; type here or resize this window`)))
	stty(fa, sa, "40 120", "after a second, smaller attach")

	stty(fb, sb, "24 80", "after the smaller attach typed")

	if _, err := fb.Write([]byte{0x1d, 'd'}); err != nil { // Ctrl-] d
		t.Fatal(err)
	}
	if code := attachExit(t, cmdB, doneB, sb); code != 0 {
		t.Fatalf("the second attach: exit %d after Ctrl-] d", code)
	}
	stty(fa, sa, "40 120", "after the smaller attach detached")
}
