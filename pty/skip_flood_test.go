package pty_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/pty"
)

// TestSkipFloodSnapshots: a `cat` flood of plain lines (the tty adds the
// CRs) long enough for the emulator to skip most of it (skip.go); viewers
// attached during the flood get snapshots, and every viewer, replayed,
// and the host's emulator end equal to the viewer that saw it all.
func TestSkipFloodSnapshots(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 6<<20; i++ {
		fmt.Fprintf(&b, "line %d %s\n", i, strings.Repeat("abcdefghij", i%23))
	}
	file := filepath.Join(t.TempDir(), "lines")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	// Flooding set, as the daemon sets it: the reader then tells floods apart.
	term := start(t, pty.Config{Command: sh("cat " + file + "; sleep 0.2"), Scrollback: 300, Flooding: func() {}})
	first := attach(t, term, 1<<20)
	var late []*viewer
	n := 0
	msFirst := first.untilExitRaw(60*time.Second, func() {
		if n++; n%40 == 0 && len(late) < 4 {
			late = append(late, attach(t, term, 64<<10))
		}
	})
	if len(late) == 0 {
		t.Fatal("no viewer attached during the flood")
	}
	ref := pty.NewEmulator(24, 80, 300)
	replay(ref, msFirst)
	for i, v := range late {
		e := pty.NewEmulator(24, 80, 300)
		replay(e, v.untilExit(30*time.Second))
		if d := pty.Diff(ref, e); len(d) > 0 {
			t.Errorf("viewer %d, attached during the flood, differs from the one that saw it all:\n%s", i, strings.Join(d, "\n"))
		}
	}
	term.WithEmulator(func(e *pty.Emulator) {
		if d := pty.Diff(ref, e); len(d) > 0 {
			t.Errorf("host emulator differs from the viewer that saw it all:\n%s", strings.Join(d, "\n"))
		}
	})
	if s := term.Stats(); s.EmulatorSkipped == 0 {
		t.Errorf("the emulator skipped nothing of a %d-byte flood (stats %+v)", b.Len(), s)
	} else {
		t.Logf("skipped %d of %d bytes", s.EmulatorSkipped, b.Len())
	}
}
