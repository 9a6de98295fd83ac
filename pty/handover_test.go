package pty

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// allLines returns e's scrollback and screen, a line of text each.
func allLines(e *emulator) []string {
	var out []string
	var scratch []cell
	for i := range e.sb.len() {
		out = append(out, e.lineText(e.sb.at(i).line(&scratch)))
	}
	for y := range e.rows {
		out = append(out, e.lineText(cellsOf(e.cur().lines[y])))
	}
	return out
}

func linesOf(t *Terminal) []string {
	t.emuMu.Lock()
	defer t.emuMu.Unlock()
	return allLines(t.emu)
}

// handOver freezes t and adopts it, as an upgrade does.
func handOver(tb testing.TB, t *Terminal) *Terminal {
	tb.Helper()
	fr, err := t.Freeze()
	if err != nil {
		tb.Fatal(err)
	}
	if err := t.Close(); err != nil {
		tb.Fatal(err) // a no-op: the process is not signalled
	}
	next, err := Adopt(Config{}, fr.Master, fr.Pid, fr.State)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { next.Close() })
	return next
}

func waitExit(tb testing.TB, t *Terminal) ExitStatus {
	tb.Helper()
	select {
	case <-t.Exited():
	case <-time.After(60 * time.Second):
		tb.Fatal("the process did not exit within 60 s (a hang)")
	}
	st, _ := t.Exit()
	return st
}

// TestHandOverLosesNoByte: a program prints numbered lines while the
// terminal is frozen and adopted 20 times, at any point of the stream
// (between two batches, in the middle of one, with output waiting in the
// PTY): the emulator of the last one holds every line once, in order,
// and the exit status is the program's.
func TestHandOverLosesNoByte(t *testing.T) {
	const batches, per = 25, 2000
	term, err := Start(Config{
		Command:    []string{"/bin/sh", "-c", "stty -echo; i=0; while read k; do j=0; while [ $j -lt " + strconv.Itoa(per) + " ]; do i=$((i+1)); j=$((j+1)); echo \"L$i\"; done; done; exit 7"},
		Scrollback: batches*per + 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { term.Close() })
	pid := term.Pid()
	for k := range 20 {
		if err := term.Input([]byte("go\n"), nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(k%4) * time.Millisecond)
		term = handOver(t, term)
		if term.Pid() != pid {
			t.Fatalf("adopted pid %d, want %d", term.Pid(), pid)
		}
	}
	for range batches - 20 {
		if err := term.Input([]byte("go\n"), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := term.Input([]byte{4}, nil); err != nil { // ^D: read fails
		t.Fatal(err)
	}
	if st := waitExit(t, term); st != (ExitStatus{Code: 7}) {
		t.Fatalf("exit %+v, want code 7", st)
	}
	waitLine(t, term, "L"+strconv.Itoa(batches*per)) // Exited comes once it is read; the emulator may be behind
	var got []string
	for _, l := range linesOf(term) {
		if strings.HasPrefix(l, "L") {
			got = append(got, l)
		}
	}
	for i, l := range got {
		if want := "L" + strconv.Itoa(i+1); l != want {
			t.Fatalf("line %d of %d is %q, want %q", i, len(got), l, want)
		}
	}
	if len(got) != batches*per {
		t.Fatalf("%d numbered lines, want %d", len(got), batches*per)
	}
}

// TestHandOverPendingInput: input the PTY has not taken yet (the program
// is not reading) goes with the state, a write interrupted in the middle
// included, and the program reads all of it, once, in order.
func TestHandOverPendingInput(t *testing.T) {
	out := filepath.Join(t.TempDir(), "in")
	term, err := Start(Config{Command: []string{"/bin/sh", "-c", "stty raw -echo; echo READY; read x; head -c 65536 > " + out + "; echo DONE"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { term.Close() })
	waitLine(t, term, "READY")
	want := make([]byte, 65536)
	for i := range want {
		want[i] = 'a' + byte(i*7%26)
	}
	// One line for read, then more than the PTY's input buffer holds:
	// the writer waits for room.
	if err := term.Input([]byte("x\n"), nil); err != nil {
		t.Fatal(err)
	}
	var done bool
	if err := term.Input(want, func() { done = true }); err != nil {
		t.Fatal(err)
	}
	fr, err := term.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	if !done {
		t.Fatal("Freeze returned before the input's done was called")
	}
	hs, err := decodeHandover(fr.State)
	if err != nil {
		t.Fatal(err)
	}
	next, err := Adopt(Config{}, fr.Master, fr.Pid, fr.State)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { next.Close() })
	if st := waitExit(t, next); st != (ExitStatus{}) {
		t.Fatalf("exit %+v", st)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the program read %d bytes, not the %d written (first difference at %d); %d were pending at the hand-over",
			len(got), len(want), firstDiff(got, want), len(hs.pending))
	}
	waitLine(t, next, "DONE")
	t.Logf("%d bytes of input were pending at the hand-over", len(hs.pending))
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// waitLine waits until a line of t's emulator is s (leading spaces
// aside: a raw-mode newline does not return the carriage).
func waitLine(tb testing.TB, t *Terminal, s string) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !slices.ContainsFunc(linesOf(t), func(l string) bool { return strings.TrimLeft(l, " ") == s }) {
		if time.Now().After(deadline) {
			tb.Fatalf("no line %q within 30 s: %q", s, linesOf(t))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHandOverExit: a process that exited before the hand-over keeps its
// status; one that exits while frozen is reaped by the adopter, and what
// it wrote meanwhile is read.
func TestHandOverExit(t *testing.T) {
	t.Run("before", func(t *testing.T) {
		term, err := Start(Config{Command: []string{"/bin/sh", "-c", "echo bye; kill -TERM $$"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { term.Close() })
		waitExit(t, term)
		next := handOver(t, term)
		if st := waitExit(t, next); st != (ExitStatus{Signal: "SIGTERM"}) {
			t.Fatalf("exit %+v, want SIGTERM", st)
		}
		waitLine(t, next, "bye")
	})
	t.Run("while frozen", func(t *testing.T) {
		term, err := Start(Config{Command: []string{"/bin/sh", "-c", "echo READY; sleep 0.2; echo late; exit 5"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { term.Close() })
		waitLine(t, term, "READY")
		fr, err := term.Freeze()
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(600 * time.Millisecond) // the process exits meanwhile; nobody reaps it
		if err := syscallKill0(fr.Pid); err != nil {
			t.Fatalf("the exited process is gone before the adopter reaped it: %v", err)
		}
		next, err := Adopt(Config{}, fr.Master, fr.Pid, fr.State)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { next.Close() })
		if st := waitExit(t, next); st != (ExitStatus{Code: 5}) {
			t.Fatalf("exit %+v, want code 5", st)
		}
		waitLine(t, next, "late") // Exited comes once it is read; the emulator may be behind
	})
	t.Run("closed", func(t *testing.T) {
		term, err := Start(Config{Command: []string{"/bin/sh", "-c", "sleep 60"}})
		if err != nil {
			t.Fatal(err)
		}
		term.Close()
		if _, err := term.Freeze(); !errors.Is(err, ErrClosed) {
			t.Fatalf("Freeze after Close: %v, want ErrClosed", err)
		}
	})
}

// TestHandOverStateChecked: a state cut anywhere, with a byte too many, a
// newer version or another pid is refused with an error that says so,
// and the master is closed.
func TestHandOverStateChecked(t *testing.T) {
	term, err := Start(Config{Command: []string{"/bin/sh", "-c", "printf 'A\\033[31mred\\033]0;title\\007'; printf '\\342'; sleep 60"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { term.Close() })
	waitTitle(t, term, "title")
	// Both printfs read (20 bytes): the second one's byte is in the filter.
	deadline := time.Now().Add(30 * time.Second)
	for term.Stats().BytesRead < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("read %d bytes within 30 s, want 20", term.Stats().BytesRead)
		}
		time.Sleep(5 * time.Millisecond)
	}
	fr, err := term.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if fr.Master != nil {
			fr.Master.Close()
		}
	})
	hs, err := decodeHandover(fr.State)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs.filter.u8) != 1 {
		t.Errorf("the filter holds %q, want the first byte of a character", hs.filter.u8)
	}
	for n := range len(fr.State) {
		if _, err := decodeHandover(fr.State[:n]); !errors.Is(err, ErrState) {
			t.Fatalf("state cut at %d of %d: %v, want ErrState", n, len(fr.State), err)
		}
	}
	if _, err := decodeHandover(append(slices.Clone(fr.State), 0)); err == nil || !strings.Contains(err.Error(), "1 bytes after") {
		t.Errorf("a byte too many: %v", err)
	}
	newer := append([]byte{handoverVersion + 1}, fr.State[1:]...)
	if _, err := decodeHandover(newer); err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Errorf("newer version: %v", err)
	}
	m, err := dupCloexec(mustRawConn(t, fr.Master))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Adopt(Config{}, m, fr.Pid+1, fr.State); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("pid %d, the caller names %d", fr.Pid, fr.Pid+1)) {
		t.Errorf("another pid: %v", err)
	}
	if err := m.Close(); err == nil {
		t.Error("Adopt kept the master it refused")
	}
	// The state adopted as is carries on.
	next, err := Adopt(Config{}, fr.Master, fr.Pid, fr.State)
	if err != nil {
		t.Fatal(err)
	}
	fr.Master = nil
	t.Cleanup(func() { next.Close() })
	if next.Title() != "title" {
		t.Errorf("title %q", next.Title())
	}
}

// TestHandOverSameScreen: what a viewer's snapshot shows after a
// hand-over is what it showed before, cell for cell: screens, scrollback,
// modes, pen, title, cursor (a full-screen program with colours, the
// alternate screen, a scroll region and a title).
func TestHandOverSameScreen(t *testing.T) {
	term, err := Start(Config{Command: []string{"/bin/sh", "-c",
		`printf '\033]0;vim-ish\007'; seq 1 200; ` +
			`printf '\033[?1049h\033[2J\033[H\033[1;33;44mheader\033[0m\r\n\033[5;20r\033[10;3H\033(0lqqk\033(B\033[?25l\033[4h'; ` +
			`printf READY; exec cat`}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { term.Close() })
	deadline := time.Now().Add(30 * time.Second)
	snap := func(t *Terminal) string {
		t.emuMu.Lock()
		defer t.emuMu.Unlock()
		return t.emu.snapshot()
	}
	for !strings.Contains(snap(term), "READY") {
		if time.Now().After(deadline) {
			t.Fatal("no READY within 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	before := snap(term)
	next := handOver(t, term)
	if after := snap(next); after != before {
		t.Fatalf("snapshot after the hand-over differs:\nbefore %q\nafter  %q", before, after)
	}
}

func syscallKill0(pid int) error { return syscall.Kill(pid, 0) }

func mustRawConn(tb testing.TB, f *os.File) syscall.RawConn {
	tb.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		tb.Fatal(err)
	}
	return rc
}

func waitTitle(tb testing.TB, t *Terminal, title string) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for t.Title() != title {
		if time.Now().After(deadline) {
			tb.Fatalf("title %q within 30 s, want %q", t.Title(), title)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// handoverSeed is a state as Freeze writes it, of an emulator fed s.
func handoverSeed(s string, flags uint64, exit ExitStatus, pending string) []byte {
	e := newEmulator(5, 20, 10)
	e.write(s)
	hs := &handoverState{pid: 42, flags: flags, exit: exit, bytesRead: int64(len(s)), dir: "/tmp", pending: []byte(pending), filter: &filter{u8: []byte{0xe2}}, emu: e}
	return hs.append(nil)
}

// FuzzHandoverState: any bytes decode to an error or to a state that
// re-encodes to the same bytes; never a panic.
func FuzzHandoverState(f *testing.F) {
	f.Add(handoverSeed("hello\r\nworld", 0, ExitStatus{}, ""))
	f.Add(handoverSeed("\x1b[31mred\x1b]0;t\x07", hfReaped, ExitStatus{Code: 3}, "ls\n"))
	f.Add(handoverSeed("x", hfReaped|hfSignal|hfBroken, ExitStatus{Signal: "SIGKILL"}, ""))
	f.Fuzz(func(t *testing.T, state []byte) {
		hs, err := decodeHandover(state)
		if cerr := CheckState(state); fmt.Sprint(cerr) != fmt.Sprint(err) {
			t.Fatalf("CheckState = %v, Adopt's decode = %v", cerr, err)
		}
		if err != nil {
			if !errors.Is(err, ErrState) {
				t.Fatalf("error %v is not ErrState", err)
			}
			return
		}
		if again := hs.append(nil); !bytes.Equal(again, state) {
			t.Fatalf("state % x re-encodes as % x", state, again)
		}
	})
}
