package pty

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/flow"
)

// TestReplyQueueBound: query replies waiting for the PTY never exceed
// ReplyQueue bytes; the excess is dropped and counted.
func TestReplyQueueBound(t *testing.T) {
	const bound = 2048
	term, err := Start(Config{Command: []string{"/bin/sh", "-c", "stty -icanon -echo; sleep 30"}, ReplyQueue: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	reply := bytes.Repeat([]byte("r"), 1000)
	for i := 0; i < 100; i++ {
		term.queueReply(reply)
		term.mu.Lock()
		q := term.replyBytes
		term.mu.Unlock()
		if q > bound {
			t.Fatalf("%d reply bytes queued, bound %d", q, bound)
		}
	}
	if st := term.Stats(); st.RepliesLost == 0 || st.Replies+st.RepliesLost != 100 {
		t.Fatalf("stats %+v: the PTY cannot take 100 KB of input, some replies must be dropped", st)
	}
}

// TestEmulatorBacklogBound: the reader never lets the emulator lag more
// than EmulatorBacklog (plus one read) behind, and does wait for it.
func TestEmulatorBacklogBound(t *testing.T) {
	const bound = 64 << 10
	term, err := Start(Config{Command: []string{"/bin/sh", "-c", "head -c 5000000 /dev/zero | tr '\\0' a"}, EmulatorBacklog: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	// Stall the emulator: the reader must stop at the bound. How soon the
	// program's output reaches it depends on the machine, so that is
	// waited for (30 s at most); then the lag must stay within one read
	// of the bound for another half second.
	maxLag := func() int64 {
		term.emuMu.Lock()
		defer term.emuMu.Unlock()
		var maxLag int64
		reached := time.Time{}
		for start := time.Now(); ; runtime.Gosched() {
			maxLag = max(maxLag, term.Stats().EmulatorLag)
			if reached.IsZero() && maxLag >= bound {
				reached = time.Now()
			}
			if !reached.IsZero() && time.Since(reached) > 500*time.Millisecond || time.Since(start) > 30*time.Second {
				return maxLag
			}
		}
	}()
	if maxLag < bound || maxLag > bound+readSize {
		t.Fatalf("emulator lag reached %d, want within [%d, %d]", maxLag, bound, bound+readSize)
	}
	select {
	case <-term.exitDone:
	case <-time.After(30 * time.Second):
		t.Fatal("no exit after the emulator resumed")
	}
}

// TestFloodReadInBatches: during a flood the reader appends what several
// reads brought (the line discipline gives at most 4 KiB per read) as one
// item, so the log, the emulator and the viewers handle far fewer items
// than reads; and no byte is lost or added on the way.
//
// How much a read finds depends on how fast the program writes compared
// with the reader, which load changes; so the test makes the PTY full
// before the reader reads on: it stalls the emulator (the reader stops at
// EmulatorBacklog), lets the program write one chunk, waits until the
// program is blocked writing to the full PTY, and lets go. The reader's
// next item must then hold what several reads brought. The program
// writes each chunk only when the test asks for it, so however long the
// test is descheduled between rounds, the flood cannot run out before
// the PTY is full again (it did under make test-stress, when the flood
// was one cat of the whole file).
func TestFloodReadInBatches(t *testing.T) {
	const chunk, backlog, rounds = 1000000, 64 << 10, 5
	dir := t.TempDir()
	file := dir + "/flood"
	if err := os.WriteFile(file, bytes.Repeat([]byte("a"), chunk), 0o600); err != nil {
		t.Fatal(err)
	}
	// Each round: a newline from the test, then one chunk written by a
	// process whose pid the script leaves in DIR/pid.N, for the test to
	// read its system call in /proc.
	script := fmt.Sprintf(`stty raw -echo; printf ready; i=0; while [ $i -lt %d ]; do read x; cat %s & echo $! > %s/pid.$i; wait; i=$((i+1)); done; read x`, rounds, file, dir)
	// A viewer that does not pull keeps every item in the log, for the
	// test to read; its backlog holds the whole flood.
	term, _, _ := liveViewerConfig(t, Config{Command: []string{"/bin/sh", "-c", script},
		EmulatorBacklog: backlog, ViewerBacklog: 2 * rounds * chunk})
	logEndsWith(t, term, "ready", "the ready mark")
	term.mu.Lock()
	seq0, pos0 := term.endSeq, term.endPos
	term.mu.Unlock()
	for r := range rounds {
		// The chunks before this one are in: the program waits for its
		// newline.
		waitFor(t, 60*time.Second, "the chunks before", func() bool {
			term.mu.Lock()
			defer term.mu.Unlock()
			return term.endPos-pos0 >= int64(r)*chunk
		})
		// The emulator stalled (and released whatever happens to the
		// test), the program is let write its chunk.
		seq, pos := func() (uint64, int64) {
			term.emuMu.Lock()
			defer term.emuMu.Unlock()
			if err := term.Input([]byte("\n"), nil); err != nil {
				t.Fatal(err)
			}
			pidFile := fmt.Sprintf("%s/pid.%d", dir, r)
			waitFor(t, 60*time.Second, "the reader to stop at the emulator's backlog and the writer to block on the full PTY", func() bool {
				b, err := os.ReadFile(pidFile)
				if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
					return false
				}
				pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
				if err != nil {
					t.Fatalf("%s: %q", pidFile, b)
				}
				return term.Stats().EmulatorLag > backlog && blockedWriting(t, pid)
			})
			term.mu.Lock()
			defer term.mu.Unlock()
			return term.endSeq, term.endPos
		}()
		if pos-pos0 >= int64(r+1)*chunk {
			t.Fatalf("round %d: the whole chunk was read before the PTY was full", r)
		}
		var n int
		waitFor(t, 60*time.Second, "the reader's next item", func() bool {
			term.mu.Lock()
			defer term.mu.Unlock()
			if term.endSeq <= seq {
				return false
			}
			n = len(term.items[seq-term.firstSeq].text)
			return true
		})
		t.Logf("round %d: the first item after the PTY was full holds %d bytes", r, n)
		if n <= 4<<10 {
			t.Fatalf("round %d: the reader appended %d bytes from a full PTY as one item, want more than one read's 4 KiB", r, n)
		}
	}
	// Every chunk in: the script then waits for a last newline.
	waitFor(t, 60*time.Second, "the whole flood", func() bool {
		term.mu.Lock()
		defer term.mu.Unlock()
		return term.endPos-pos0 >= rounds*chunk
	})
	if err := term.Input([]byte("\n"), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-term.exitDone:
	case <-time.After(60 * time.Second):
		t.Fatal("no exit after the flood")
	}
	term.mu.Lock()
	items, end := term.endSeq-seq0, term.endPos-pos0
	term.mu.Unlock()
	if end != rounds*chunk {
		t.Fatalf("the log took in %d bytes of output, want %d", end, rounds*chunk)
	}
	t.Logf("%d bytes in %d items, %d bytes each on average", end, items, end/int64(items))
}

// blockedWriting reports whether process pid sleeps in write(2) (on
// Linux/amd64, system call 1), read from /proc/pid/stat and /proc/pid/syscall.
func blockedWriting(t *testing.T, pid int) bool {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, os.ErrNotExist) {
		return false // gone: not writing
	}
	if err != nil {
		t.Fatal(err)
	}
	// The state follows the command's closing parenthesis.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) || stat[i+2] != 'S' {
		return false
	}
	sc, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", pid))
	if err != nil {
		t.Skipf("inconclusive: cannot read the writer's system call: %v", err)
	}
	f := strings.Fields(string(sc))
	return len(f) > 2 && f[0] == "1" && f[1] == "0x1"
}

// liveViewer starts command (a /bin/sh script) in a terminal with the
// given viewer backlog, attaches a viewer whose wake hook signals the
// returned channel, and takes its initial snapshot, so that what follows is
// live. Both are closed when the test ends.
func liveViewer(t *testing.T, command string, backlog int) (*Terminal, *Viewer, chan struct{}) {
	t.Helper()
	return liveViewerConfig(t, Config{Command: []string{"/bin/sh", "-c", command}, ViewerBacklog: backlog})
}

// liveViewerConfig is liveViewer for a terminal started with cfg.
func liveViewerConfig(t *testing.T, cfg Config) (*Terminal, *Viewer, chan struct{}) {
	t.Helper()
	term, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { term.Close() })
	wake := make(chan struct{}, 1)
	v := term.AttachWindow(func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}, 0)
	t.Cleanup(v.Close)
	for {
		m, ok := v.Pull(true, 1<<20)
		if ok && messageText(t, m) == readyMsg {
			return term, v, wake
		}
		if !ok {
			<-wake
		}
	}
}

// waitFor polls cond until it holds; the test fails after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", timeout, what)
		}
	}
}

// logEndsWith waits until the terminal's log ends with s; the test fails
// after 30 s.
func logEndsWith(t *testing.T, term *Terminal, s, what string) {
	t.Helper()
	waitFor(t, 30*time.Second, what, func() bool {
		term.mu.Lock()
		defer term.mu.Unlock()
		return len(term.items) > 0 && strings.HasSuffix(term.items[len(term.items)-1].text, s)
	})
}

// pullUntil pulls from v, waiting on wake between pulls, until a message
// contains s; the test fails after 10 s.
func pullUntil(t *testing.T, v *Viewer, wake chan struct{}, s, what string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if m, ok := v.Pull(true, 1<<20); ok {
			if strings.Contains(messageText(t, m), s) {
				return
			}
			continue
		}
		select {
		case <-wake:
		case <-deadline:
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// TestViewerIdleBuffers: a viewer that sent large messages keeps no
// message buffer larger than idleBuf once it has nothing to send.
func TestViewerIdleBuffers(t *testing.T) {
	term, v, wake := liveViewer(t, "stty raw -echo; read x; head -c 3000000 /dev/zero | tr '\\0' a; read y", 8<<20)
	if err := term.Input([]byte("\n"), nil); err != nil {
		t.Fatal(err)
	}
	// Let the output pile up, so that messages are large.
	waitFor(t, 20*time.Second, "the 3 MB to be read", func() bool { return term.Stats().BytesRead >= 3000000 })
	largest, got := 0, 0
	deadline := time.After(20 * time.Second)
	for got < 3000000 {
		m, ok := v.Pull(true, 1<<20)
		if !ok {
			select {
			case <-wake:
			case <-deadline:
				t.Fatalf("got %d of 3000000 bytes", got)
			}
			continue
		}
		if text := messageText(t, m); strings.HasPrefix(text, outPrefix) {
			got += strings.Count(text[len(outPrefix):len(text)-len(outSuffix)], "a")
		}
		largest = max(largest, cap(v.buf))
	}
	if largest <= idleBuf {
		t.Fatalf("the largest message buffer was %d bytes; the test needs messages above %d", largest, idleBuf)
	}
	if _, ok := v.Pull(true, 1<<20); ok {
		t.Fatal("more output than the command wrote")
	}
	if cap(v.buf) > idleBuf {
		t.Fatalf("idle viewer keeps a %d-byte buffer (bound %d)", cap(v.buf), idleBuf)
	}
}

// TestSnapshotPacing: a viewer slower than a flood is resnapshotted about
// once per snapStale while the flood lasts, never twice within
// snapInterval, and not after every pull.
func TestSnapshotPacing(t *testing.T) {
	// Lines of 20 characters (the emulator is fast on them even under the
	// race detector: a viewer is behind only on output it has applied) and
	// a short scrollback (a snapshot fits in one pull, so that without
	// pacing the viewer would be resnapshotted at nearly every pull).
	term, v, _ := liveViewerConfig(t, Config{
		Command:       []string{"/bin/sh", "-c", "read x; exec yes 01234567890123456789"},
		ViewerBacklog: 64 << 10,
		Scrollback:    100,
	})
	if err := term.Input([]byte("\n"), nil); err != nil {
		t.Fatal(err)
	}
	// Pull up to 16 KiB every 10 ms: far slower than the flood. At least
	// 2.5 s, and on until the second snapshot (up to 15 s): a busy machine
	// may start `yes` late or hold this loop back, which moves the first
	// loss, and so the snapshots, later than on an idle one.
	const span, most = 2500 * time.Millisecond, 15 * time.Second
	start := time.Now()
	term.mu.Lock()
	from := term.endPos
	term.mu.Unlock()
	var resets []time.Time
	for d := time.Duration(0); d < span || (len(resets) < 2 && d < most); d = time.Since(start) {
		for range 4 {
			m, ok := v.Pull(true, 4<<10)
			if !ok {
				break
			}
			if strings.Contains(messageText(t, m), `"method":"terminal/reset"`) {
				// When the snapshot was taken (Pull sets it), not when this
				// loop got to look: a descheduled test would shorten gaps.
				resets = append(resets, v.lastSnap)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(start)
	term.mu.Lock()
	produced, quiet := term.endPos-from, v.quietSnaps
	term.mu.Unlock()
	for i := 1; i < len(resets); i++ {
		if d := resets[i].Sub(resets[i-1]); d < snapInterval {
			t.Fatalf("snapshots %v apart, want at least %v", d, snapInterval)
		}
	}
	// A busy machine holds `yes` or the reader back now and then, and a
	// pause of snapQuiet gives the viewer its snapshot at once, as it
	// should (the end of a flood shows at once): those are counted apart
	// (quietSnaps). The rest follow snapStale: one per second of flood,
	// and one more for the first.
	if stale, most := len(resets)-int(quiet), int(took/snapStale)+1; stale > most {
		t.Fatalf("%d snapshots in %v of a flood, %d of them after a pause: %d by the stale rule, want at most %d (one per %v)",
			len(resets), took, quiet, stale, most, snapStale)
	}
	if len(resets) < 2 {
		// The viewer pulls at most 1.6 MB/s; a flood slower than that
		// (the machine could not run `yes` faster) does not leave it
		// behind, and there is nothing to pace.
		if rate := float64(produced) / took.Seconds(); rate < 2*1.6e6 {
			t.Skipf("inconclusive: the flood wrote %.1f MB/s, the viewer pulls up to 1.6 MB/s; %d snapshots", rate/1e6, len(resets))
		}
		t.Fatalf("%d snapshots in %v of a flood the viewer cannot follow (%d bytes written), want one per %v", len(resets), took, produced, snapStale)
	}
}

// TestSnapshotAfterFlood: a viewer that lost its queue in a burst gets
// its snapshot once the terminal has been quiet for snapQuiet, not
// snapStale after it fell behind: the end of a flood shows at once.
func TestSnapshotAfterFlood(t *testing.T) {
	term, v, wake := liveViewer(t, "stty raw -echo; read x; head -c 2000000 /dev/zero | tr '\\0' a; read y", 64<<10)
	time.Sleep(snapInterval) // snapInterval since the first snapshot holds nothing back
	burst(t, term)
	lost, quiet, snapped := snapshotTimes(t, term, v, wake)
	if d := time.Duration(snapped - quiet); d < snapQuiet {
		t.Fatalf("snapshot %v after the last output, want at least %v (the terminal was still writing)", d, snapQuiet)
	}
	skipIfStaleFirst(t, lost, quiet)
	if d := time.Duration(snapped - lost); d >= snapStale {
		t.Fatalf("snapshot %v after the viewer lost its queue, want it once the terminal was quiet for %v (%v after its last output)", d, snapQuiet, time.Duration(snapped-quiet))
	}
}

// TestSnapshotAfterPTYClosed: a program that closes the terminal without
// exiting ends its output as surely as one that stops writing: a viewer
// that lost its queue gets its snapshot snapQuiet after the reader found
// the PTY closed, not snapStale after it fell behind. (The reader drains
// what the program wrote before closing and then finds the PTY closed,
// not empty.)
func TestSnapshotAfterPTYClosed(t *testing.T) {
	term, v, wake := liveViewer(t, "stty raw -echo; read x; head -c 2000000 /dev/zero | tr '\\0' a; exec >&- 2>&- <&-; sleep 30", 64<<10)
	time.Sleep(snapInterval) // snapInterval since the first snapshot holds nothing back
	burst(t, term)
	select {
	case <-term.readerDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the reader did not see the PTY closed")
	}
	lost, quiet, snapped := snapshotTimes(t, term, v, wake)
	skipIfStaleFirst(t, lost, quiet)
	if d := time.Duration(snapped - lost); d >= snapStale {
		t.Fatalf("snapshot %v after the viewer lost its queue, want it once the PTY was closed for %v (%v after that)", d, snapQuiet, time.Duration(snapped-quiet))
	}
}

// skipIfStaleFirst skips a test of the quiet rule as inconclusive when the
// burst went on so long after the viewer lost its queue that the stale
// rule was due first: the burst takes ~0.1 s, but a busy machine can
// stretch it past snapStale.
func skipIfStaleFirst(t *testing.T, lost, quiet int64) {
	t.Helper()
	if time.Duration(quiet-lost)+snapQuiet >= snapStale {
		t.Skipf("inconclusive: the burst went on %v after the viewer lost its queue (snapStale %v)", time.Duration(quiet-lost), snapStale)
	}
}

// snapshotTimes pulls v's snapshot (pullSnapshot) and returns when the
// viewer lost its queue, since when the terminal was quiet and when the
// snapshot was taken (monoNow clock); the first two must be set.
func snapshotTimes(t *testing.T, term *Terminal, v *Viewer, wake chan struct{}) (lost, quiet, snapped int64) {
	t.Helper()
	pullSnapshot(t, v, wake)
	term.mu.Lock()
	lost = v.lostAt
	term.mu.Unlock()
	quiet = term.quietSince.Load()
	snapped = int64(v.lastSnap.Sub(epoch))
	if lost == 0 || quiet == 0 {
		t.Fatalf("the viewer lost its queue at %d, the terminal quiet since %d: want both", lost, quiet)
	}
	return lost, quiet, snapped
}

// pullSnapshot pulls v, waiting on wake, until its next message, which
// must start a snapshot (terminal/reset).
func pullSnapshot(t *testing.T, v *Viewer, wake chan struct{}) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		m, ok := v.Pull(true, 1<<20)
		if ok {
			if text := messageText(t, m); !strings.Contains(text, `"method":"terminal/reset"`) {
				t.Fatalf("a viewer 2 MB behind got %.60q, want terminal/reset", text)
			}
			return
		}
		select {
		case <-wake:
		case <-deadline:
			t.Fatal("the snapshot never came")
		}
	}
}

// burst releases the 2 MB burst of the terminal's `read x; head -c 2000000`
// and returns once it has been read and has ended, so that nothing more
// wakes the viewer.
func burst(t *testing.T, term *Terminal) {
	t.Helper()
	if err := term.Input([]byte("\n"), nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the 2 MB burst to be read", func() bool { return term.Stats().BytesRead >= 2000000 })
	time.Sleep(20 * time.Millisecond)
}

// TestEchoWakesEmulatorAtOnce: output that pauses (a typist's echo) is
// applied by the emulator at once, without arming its lazy timer: a timer
// armed, even if stopped again, wakes the daemon when it would fire, a
// second wake-up per keystroke. And the emulator still gets all of it.
func TestEchoWakesEmulatorAtOnce(t *testing.T) {
	term, v, wake := liveViewer(t, "stty raw -echo; printf ready; exec cat", 64<<10)
	const keys = 20
	pullUntil(t, v, wake, "ready", "the ready mark") // stty has run: no echo from the tty
	// Whatever woke the emulator for the prompt is over: a lazy wake-up
	// that fires late (a busy machine) counts as the latest wake-up.
	waitFor(t, 10*time.Second, "the emulator to apply the prompt", func() bool {
		term.mu.Lock()
		defer term.mu.Unlock()
		return term.emuDonePos == term.endPos && !term.emuArmed.Load()
	})
	time.Sleep(3 * emuLazy) // a typist: the first key comes a while after the prompt
	lazies := term.Stats().EmulatorWakesBatched
	for i := range keys {
		if err := term.Input([]byte{'a' + byte(i)}, nil); err != nil {
			t.Fatal(err)
		}
		pullUntil(t, v, wake, string(rune('a'+i)), fmt.Sprintf("the echo of keystroke %d", i))
		time.Sleep(3 * emuLazy)
	}
	if n := term.Stats().EmulatorWakesBatched - lazies; n != 0 {
		t.Fatalf("the emulator's lazy timer was armed %d times for %d echoed keystrokes, want never", n, keys)
	}
	term.emuMu.Lock()
	row := term.emu.lineText(cellsOf(term.emu.cur().lines[0]))
	term.emuMu.Unlock()
	if want := "readyabcdefghijklmnopqrst"; row != want {
		t.Fatalf("the emulator's first row is %q, want %q", row, want)
	}
}

// TestSmallWritesBatched: a program that writes many small pieces faster
// than emuLazy (a shell loop of echos; the reader keeps up and keeps
// finding the PTY empty) has the reader wake the emulator at once at most
// once per emuLazy, not once per piece: the rest waits for the timer.
// (Under the race detector the emulator rarely catches up between two
// pieces, so the case seldom arises; `make test` runs this test without it
// too.)
func TestSmallWritesBatched(t *testing.T) {
	term, _, _ := liveViewerConfig(t, Config{
		Command:       []string{"/bin/sh", "-c", "stty raw -echo; read x; i=0; while [ $i -lt 20000 ]; do echo line $i; i=$((i+1)); done; printf END; exec sleep 30"},
		ViewerBacklog: 64 << 20,
	})
	soons := term.Stats().EmulatorWakesNow
	start := time.Now()
	if err := term.Input([]byte("\n"), nil); err != nil {
		t.Fatal(err)
	}
	logEndsWith(t, term, "END", "the end of the loop's output")
	elapsed := time.Since(start)
	n := term.Stats().EmulatorWakesNow - soons
	if limit := int64(elapsed/emuLazy) + 1; n > limit {
		t.Fatalf("the reader woke the emulator at once %d times in %v of small writes, want at most %d", n, elapsed, limit)
	}
}

// TestResizeReachesEmulator: a resize that no output follows (the program
// ignores SIGWINCH) still reaches the emulator, so that its screen has the
// terminal's size.
func TestResizeReachesEmulator(t *testing.T) {
	term, _, _ := liveViewer(t, "trap '' WINCH; stty raw -echo; printf ready; exec sleep 30", 64<<10)
	waitFor(t, 10*time.Second, "the emulator to apply the terminal's output", func() bool {
		term.mu.Lock()
		defer term.mu.Unlock()
		return term.endPos > 0 && term.emuDonePos == term.endPos // and wait for more
	})
	time.Sleep(20 * time.Millisecond)
	if err := term.Resize(30, 100); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the emulator to take the resize to 30x100", func() bool {
		term.emuMu.Lock()
		defer term.emuMu.Unlock()
		return term.emu.rows == 30 && term.emu.cols == 100
	})
}

// TestDeferredSnapshotWakes: a snapshot deferred by snapInterval comes
// when the interval ends, woken by its timer, even when no more output
// arrives to wake the viewer.
func TestDeferredSnapshotWakes(t *testing.T) {
	term, v, wake := liveViewer(t, "stty raw -echo; read x; head -c 2000000 /dev/zero | tr '\\0' a; read y", 64<<10)
	first := v.lastSnap
	burst(t, term)
	pullSnapshot(t, v, wake)
	if d := v.lastSnap.Sub(first); d < snapInterval {
		t.Fatalf("resnapshotted %v after the last snapshot, want at least %v", d, snapInterval)
	}
}

// TestCloseStopsSnapshotTimer: a viewer closed while its deferred
// snapshot is pending is not woken by the timer afterwards.
func TestCloseStopsSnapshotTimer(t *testing.T) {
	term, v, wake := liveViewer(t, "stty raw -echo; read x; head -c 2000000 /dev/zero | tr '\\0' a; read y", 64<<10)
	burst(t, term)
	deadline := time.After(10 * time.Second)
	for {
		term.mu.Lock()
		v.lastSnap = time.Now() // the next snapshot is due in snapInterval
		term.mu.Unlock()
		if m, ok := v.Pull(true, 1<<20); ok {
			t.Fatalf("a viewer 2 MB behind, just snapshotted, got %.60q; want nothing until the deferred snapshot", messageText(t, m))
		}
		term.mu.Lock()
		armed := !v.live // behind, and Pull gave nothing: it deferred the snapshot
		term.mu.Unlock()
		if armed {
			break
		}
		select {
		case <-wake: // caught up with the backlog's wake-ups first
		case <-deadline:
			t.Fatal("the viewer never deferred a snapshot")
		}
	}
	v.Close()
	select {
	case <-wake:
	default:
	}
	select {
	case <-wake:
		t.Fatal("a closed viewer was woken by its snapshot timer")
	case <-time.After(snapInterval + 200*time.Millisecond):
	}
}

// TestCloseWaitsForSnapshotTimer: Close returns only after a snapshot
// timer's callback that had already fired has returned, and re-arming a
// fired, a pending and a stopped timer calls wake once per firing
// (internal/afterfunc counts the calls).
func TestCloseWaitsForSnapshotTimer(t *testing.T) {
	term, v, _ := liveViewer(t, "sleep 30", 64<<10)
	calls := make(chan struct{}, 8)
	entered, release := make(chan struct{}), make(chan struct{})
	var n atomic.Int32
	v.wake = func() {
		calls <- struct{}{}
		if n.Add(1) == 2 { // the second timer to fire blocks
			close(entered)
			<-release
		}
	}
	arm := func(d time.Duration) {
		term.mu.Lock()
		v.snapTimer.Reset(d) // as Pull does
		term.mu.Unlock()
	}
	arm(time.Millisecond) // a new timer; it fires
	<-calls
	arm(time.Hour) // a fired timer re-armed
	arm(time.Hour) // a pending one re-armed: still one callback
	term.mu.Lock()
	stopped := v.snapTimer.Stop()
	term.mu.Unlock()
	if !stopped {
		t.Fatal("the re-armed timer was not pending")
	}
	arm(time.Millisecond) // a stopped timer re-armed; its callback blocks
	<-entered
	closed := make(chan struct{})
	go func() { v.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while the snapshot timer's callback was running")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return after the callback did")
	}
	if n := len(calls); n != 1 {
		t.Fatalf("%d more callbacks ran than timers fired", n-1)
	}
}

// TestMessagePoolBound: an idle viewer gives up a large message buffer,
// and the shared pool never keeps one above maxPooledBuf.
func TestMessagePoolBound(t *testing.T) {
	term, v, _ := liveViewer(t, "sleep 30", 64<<10)
	for _, size := range []int{maxPooledBuf + 1, 2 * idleBuf} {
		v.buf = make([]byte, 10, size)
		term.mu.Lock()
		v.wait() // releases term.mu
		if v.buf != nil {
			t.Fatalf("an idle viewer kept a %d-byte buffer", size)
		}
	}
	for {
		b := msgBufs.Get()
		if b == nil {
			break
		}
		if cap(b) > maxPooledBuf || cap(b) <= idleBuf || len(b) != 0 {
			t.Fatalf("the pool held a buffer of length %d, capacity %d (want empty, %d < capacity <= %d)", len(b), cap(b), idleBuf, maxPooledBuf)
		}
	}
}

// TestEscapedEnvelope: the envelope of an escaped terminal/output message
// is the text one escaped, so its frames carry the same message.
func TestEscapedEnvelope(t *testing.T) {
	for _, c := range [][2]string{{outPrefix, escOutPrefix}, {outSuffix, escOutSuffix}} {
		if got := string(flow.AppendEscaped(nil, c[0])); got != c[1] {
			t.Errorf("AppendEscaped(%q) = %q, the constant says %q", c[0], got, c[1])
		}
	}
}

// TestAppendWhole: an item is appended whole, escaped, only when its
// UTF-16 size fits; one that does not leaves b as it was, also when it
// was escaped in place before its size was known.
func TestAppendWhole(t *testing.T) {
	for _, tc := range []struct {
		name  string
		s     string
		ascii bool
		room  int64
		ok    bool
	}{
		{"plain ASCII that fits", strings.Repeat("a", 100), false, 200, true},
		{"plain ASCII one byte too large", strings.Repeat("a", 100), false, 199, false},
		{"escapes that fit", strings.Repeat("\x1b", 10), false, 120, true},
		{"escapes found too large after escaping", strings.Repeat("\x1b", 100), false, 300, false},
		{"CJK measured first, fits", strings.Repeat("漢", 100), false, 250, true},
		{"CJK measured first, too large", strings.Repeat("漢", 100), false, 199, false},
		{"ASCII escaped twice, fits", strings.Repeat("a\"\\\r\n\x1b", 10), true, 300, true},
		{"ASCII escaped twice, too large after escaping", strings.Repeat("a\"\\\r\n\x1b", 10), true, 299, false},
		{"ASCII escaped twice, measured first, too large", strings.Repeat("ab\x1b", 100), true, 599, false},
	} {
		prefix := []byte("prefix")
		b, n16, ok := appendWhole(append([]byte(nil), prefix...), tc.s, tc.ascii, tc.room)
		want := string(prefix)
		if tc.ok {
			esc := flow.AppendEscaped(nil, tc.s)
			if tc.ascii {
				esc = flow.AppendEscaped(nil, string(esc))
			}
			want += string(esc)
		}
		if ok != tc.ok || string(b) != want {
			t.Errorf("%s: appendWhole = %.40q, ok %v; want %.40q, ok %v", tc.name, b, ok, want, tc.ok)
		}
		if ok && n16 != flow.EscapedLen(tc.s) {
			t.Errorf("%s: n16 = %d, want %d", tc.name, n16, flow.EscapedLen(tc.s))
		}
	}
}

// TestSharedItemEscapedOnce: with several viewers attached, an item is
// escaped once and each viewer's message copies that form, for ASCII and
// other text; a lone viewer escapes it into its message and shares
// nothing. The test changes each item's text after the first build: a
// viewer that escaped the item again would send the changed text.
func TestSharedItemEscapedOnce(t *testing.T) {
	for _, text := range []string{"plain \"quoted\" \\ \x1b[1mbold\x1b[0m\r\n", "漢字 \"q\" \x1b[0m\r\n"} {
		ascii := isASCII([]byte(text))
		build := func(it *item, shared bool) string {
			b, size, seq, off, _, escaped := (&Viewer{}).buildOutput(nil, []*item{it}, 0, 0, 0, 1<<20, shared)
			if seq != 1 || off != 0 || escaped != ascii {
				t.Fatalf("%q: seq %d, off %d, escaped %v: the item was not packed whole", text, seq, off, escaped)
			}
			m := flow.Message{Text: string(b), Size: size}
			if escaped {
				m = flow.Message{Escaped: string(b), Size: size}
			}
			return messageText(t, m)
		}
		want := outPrefix + string(flow.AppendEscaped(nil, text)) + outSuffix

		it := &item{text: text, ascii: ascii}
		if got := build(it, true); got != want {
			t.Fatalf("%q, shared: message %q, want %q", text, got, want)
		}
		if it.esc == "" {
			t.Fatalf("%q: the first of several viewers did not share the item's escaped form", text)
		}
		it.text = strings.Repeat("x", len(text))
		for i := range 2 {
			if got := build(it, true); got != want {
				t.Fatalf("%q: viewer %d escaped the item again instead of copying it: %q", text, i+2, got)
			}
		}

		lone := &item{text: text, ascii: ascii}
		if got := build(lone, false); got != want {
			t.Fatalf("%q, lone viewer: message %q, want %q", text, got, want)
		}
		if lone.esc != "" {
			t.Fatalf("%q: a lone viewer made a shared copy nobody reads", text)
		}
	}
}

// TestMessageAfterPartialItem: a message that starts with the rest of an
// item (the one before ran out of room in it) goes on with the items
// after it, for ASCII and other text: large items made of a flood's
// reads must not leave a small message of each one's tail between two
// large ones. The messages together hold the items' text, in order.
func TestMessageAfterPartialItem(t *testing.T) {
	for _, unit := range []string{"ab\r\n", "漢字\r\n"} {
		ascii := isASCII([]byte(unit))
		refs := []*item{
			{text: strings.Repeat(unit, 3000), ascii: ascii},
			{text: strings.Repeat(unit, 10), ascii: ascii},
			{text: strings.Repeat(unit, 10), ascii: ascii},
		}
		var all string
		for _, it := range refs {
			all += it.text
		}
		const max = 16 << 10
		var got strings.Builder
		var sizes []int64
		seq, off, pos := uint64(0), 0, int64(0)
		for seq < uint64(len(refs)) {
			b, size, nseq, noff, npos, escaped := (&Viewer{}).buildOutput(nil, refs[seq:], seq, off, pos, max, false)
			if nseq == seq && noff == off {
				t.Fatalf("%q: no progress at item %d, offset %d", unit, seq, off)
			}
			m := flow.Message{Text: string(b), Size: size}
			if escaped {
				m = flow.Message{Escaped: string(b), Size: size}
			}
			_, data := messageData(t, m)
			got.WriteString(data)
			sizes = append(sizes, size)
			seq, off, pos = nseq, noff, npos
		}
		if got.String() != all || pos != int64(len(all)) {
			t.Fatalf("%q: the messages hold %d bytes (position %d), want the items' %d in order", unit, got.Len(), pos, len(all))
		}
		// The first item fills some messages and leaves a rest, which the
		// last message carries with the two small items.
		last := sizes[len(sizes)-1]
		if len(sizes) < 2 || last < 2*flow.EscapedLen(refs[1].text) {
			t.Fatalf("%q: message sizes %v: the last one does not carry the small items after the rest of the first", unit, sizes)
		}
		for i, s := range sizes[:len(sizes)-1] {
			if s < max/2 {
				t.Fatalf("%q: message %d of %d is %d bytes of %d: a small message between large ones (%v)", unit, i, len(sizes), s, max, sizes)
			}
		}
	}
}

// TestSteadyOutputWakesLazily: a program that writes steadily, 4 KiB
// pieces with pauses well under wakeLazy (the test binary as
// steadyWriter, SteadyWriterEnv), wakes a
// viewer at most about once per wakeLazy or wakeBatch, not once per piece,
// and the viewer still gets every byte. A wake-up per piece costs each
// viewer a frame and a socket write per piece.
func TestSteadyOutputWakesLazily(t *testing.T) {
	const pieces = 500
	term, v, wake := liveViewerConfig(t, Config{
		Command:       []string{os.Args[0]},
		Env:           append(os.Environ(), SteadyWriterEnv+"="+strconv.Itoa(pieces)),
		ViewerBacklog: 64 << 20,
	})
	start := time.Now()
	if err := term.Input([]byte("\n"), nil); err != nil {
		t.Fatal(err)
	}
	var got, wakes int
	deadline := time.After(60 * time.Second)
	for got < pieces<<12 {
		if m, ok := v.Pull(true, 1<<20); ok {
			if method, data := messageData(t, m); method == "terminal/output" {
				got += strings.Count(data, "a")
			}
			continue
		}
		select {
		case <-wake:
			wakes++
		case <-deadline:
			t.Fatalf("gave up with %d of %d bytes", got, pieces<<12)
		}
	}
	elapsed := time.Since(start)
	limit := int(elapsed/wakeLazy) + pieces<<12/wakeBatch + 10
	t.Logf("%d bytes in %v, %d wake-ups (at most %d)", got, elapsed, wakes, limit)
	if got != pieces<<12 {
		t.Fatalf("the viewer got %d bytes of output, want %d", got, pieces<<12)
	}
	if wakes > limit {
		t.Fatalf("%d wake-ups for %d pieces in %v, want at most %d: one per wakeLazy or wakeBatch", wakes, pieces, elapsed, limit)
	}
}

// TestMessageSizeBound: a viewer that may take messages of 16 MiB (the
// largest maximumMessageBytes a client may ask for) gets its snapshot of
// a full scrollback, and output far behind, in messages of at most
// maxOutputMessage, every byte of the output still there.
func TestMessageSizeBound(t *testing.T) {
	const lines = 20000 // over the 10,000 lines of scrollback: a full one
	term, v, wake := liveViewer(t, fmt.Sprintf("read x; seq %d; printf END; exec sleep 30", lines), 64<<20)
	if err := term.Input([]byte("\n"), nil); err != nil {
		t.Fatal(err)
	}
	logEndsWith(t, term, "END", "the end of the output")
	pull := func(what string) (text string, messages int) {
		t.Helper()
		var all strings.Builder
		for !strings.Contains(all.String(), "END") {
			m, ok := v.Pull(true, 16<<20)
			if !ok {
				select {
				case <-wake:
				case <-time.After(10 * time.Second):
					t.Fatalf("%s: gave up after %d messages", what, messages)
				}
				continue
			}
			messages++
			if m.Size > maxOutputMessage {
				t.Fatalf("%s: a message of %d UTF-16 bytes, want at most %d", what, m.Size, maxOutputMessage)
			}
			// The data, not the JSON texts: a line a message boundary
			// cuts is whole again.
			_, data := messageData(t, m)
			all.WriteString(data)
		}
		return all.String(), messages
	}
	// The live viewer is far behind: the whole output is waiting for it.
	out, n := pull("output")
	if !strings.Contains(out, fmt.Sprint(lines)) || !strings.Contains(out, "\r\n1\r\n2\r\n") {
		t.Fatalf("the output messages lack the first or the last line")
	}
	t.Logf("output in %d messages", n)
	// A new viewer starts with a snapshot: screen and scrollback.
	snap := term.AttachWindow(func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}, 0)
	defer snap.Close()
	v = snap
	text, n := pull("snapshot")
	if !strings.Contains(text, fmt.Sprint(lines-9000)) {
		t.Fatalf("the snapshot lacks line %d of the scrollback", lines-9000)
	}
	t.Logf("snapshot in %d messages", n)
}
