// Package pty serves one PTY-backed process to many viewers, applying the
// terminal loss policy of PROTOCOL.md §8.
//
// # Data path
//
// One reader goroutine reads the PTY master until EIO. The line discipline
// hands output over at most 4 KiB per read; while more is there, the
// reader reads on, up to 64 KiB, and takes what it read as one piece (a
// flood makes a sixteenth of the items it would read by read; a paced
// flood, see Pacer, takes one read per piece). Each piece passes
// through a filter that removes terminal queries (DA1/DA2, DSR/CPR,
// DECXCPR, DECRQM, DECRQSS, XTVERSION, OSC 4/10/11/12 "?"), remembering
// where each was, holds back a possible query prefix at the end of a piece
// until the next (at most 256 bytes), and turns the rest into valid
// UTF-8 (an incomplete trailing sequence waits for the next piece; invalid
// bytes become U+FFFD). The result is appended, as one immutable item, to a
// stream log shared by every viewer and by the emulator. Only after EIO,
// with every held byte flushed into the log, and after the process is
// reaped is the exit published; a viewer receives terminal/exit once it has
// pulled everything before it. Viewers waiting for output are woken when
// the PTY has nothing more to read at the moment (an echo goes out at once)
// or every 32 KiB, not after every read. Terminals that share a Pacer (the
// daemon's) give typing precedence over floods: see Pacer.
//
// The headless emulator consumes the same log asynchronously in its own
// goroutine. It answers each removed query exactly once, at its point in
// the stream (a CPR reports the cursor as it was there), by queueing the
// reply to the writer goroutine; viewers never see queries, live or in
// snapshots, so no browser ever answers one (coder#3666). The emulator is
// not a viewer: it may pause the reader, but only when it lags more than
// Config.EmulatorBacklog bytes behind.
//
// Each viewer is a cursor into the log. The PTY is never paused by a
// viewer: a viewer that falls more than its allowance (its window plus
// Config.ViewerBacklog) behind the newest output the emulator has applied
// loses its queue, and an item is dropped from the log once the emulator
// has applied it and it is behind every viewer that still has its queue.
// The log is trimmed when output is appended, when the emulator
// has applied more, when a viewer leaves, and when a viewer catches up
// with 64 KiB or more in the log: a quiet terminal keeps no output for
// viewers that no longer need it. None of this walks the viewers
// (cursors.go): with n viewers on a terminal, a pull costs O(1) (and
// O(log n) once per allowance of output it pulls), a Close or a viewer
// that loses its queue O(log n), and a read O(1) plus the viewers it
// wakes (those waiting for output; one whose window is full is pulled
// again by its Sender when credit comes) and those that lose their
// queue. A viewer that has lost its queue, on
// its next pull, gets a snapshot: terminal/reset {rows, cols}, terminal/output that rebuilds the
// emulator state, channel/ready, then live output from exactly the point
// of the stream that state reflects. The snapshot is taken under the
// emulator lock together with the emulator's position, so snapshot plus
// the following live output equals the whole stream, cell for cell. A
// new viewer starts the same way. The emulator may lag the log when the
// snapshot is taken, so a resumed viewer is already behind by that lag
// before its first pull; it is granted that much on top of its allowance
// until it has caught up with the output of that moment (else it would be
// snapshotted again at once, and again). A resnapshot waits until
// snapInterval (250 ms) after the viewer's previous one started, and
// then until the program has written nothing for snapQuiet (50 ms: the
// flood is over, and its end shows at once) or the viewer has been behind
// for snapStale (1 s), whichever comes first: a viewer slower than a
// flood sees its screen once a second and costs one snapshot a second. A
// viewer that keeps up receives every byte in order; memory is bounded by the largest allowance plus
// EmulatorBacklog plus one piece (64 KiB) per terminal, whatever the number
// of viewers (the log; a viewer holds a message buffer only while it may
// send, see below), and Config.MaxViewers caps that number (Attach refuses
// one more with -32004, naming maxViewersPerTerminal). Output items are shared: with several viewers attached, an
// item is escaped once and every viewer copies that form into its message
// (a lone viewer escapes it straight into its message); a pull packs whole items into one
// terminal/output message up to the size the Sender asks for (the
// viewer's maxMessageBytes, or a quarter of a smaller window, and at
// most 128 KiB; UTF-16 size, escaping included) and escapes piecewise
// only the part of an item that a message boundary cuts (never inside a
// UTF-8 sequence). Each
// message text is built in one buffer per viewer, reused by the next pull
// (the flow.Source contract allows it), not copied; an idle viewer hands a
// buffer over 1 KiB, and a viewer whose window is full (flow.Finisher) its
// buffer, to a pool shared by all viewers: a viewer that stops crediting
// holds no message buffer, only its snapshot's text while it is in the
// middle of one (shared with the viewers that took the same snapshot).
//
// Viewers waiting for output are woken when the reader finds the PTY
// empty, or after 32 KiB of a flood. Output that streams (the wake-up
// before delivered 4 KiB or more, less than 2 ms ago) is woken at most
// once per 2 ms instead: the reader then waits for the PTY with a read
// deadline, so a program writing steadily costs each viewer a frame and a
// socket write per 2 ms, not per read, and an echo after a pause still
// goes at once.
//
// Input that the PTY takes at once, with nothing queued before it, is
// written by Input itself; the rest is queued (bounded by
// Config.InputQueue, ErrInputFull beyond) to a writer goroutine that
// writes it, and the query replies, to the PTY in order. Either way done
// is called once the input is written (or discarded).
//
// # Concurrency
//
// Terminal methods and Viewer methods other than Pull are safe for
// concurrent use. Viewer.Pull must be called from one goroutine at a time
// (the connection's owner). The wake hook passed to Attach is called
// without any Terminal lock held and must not block. Terminal.mu guards
// the log, the viewers' cursors, the input queue and the exit state;
// Terminal.emuMu guards the emulator; when both are held, emuMu is taken
// first. Start starts four goroutines (reader, waiter, emulator, writer);
// Close hangs up the process group (SIGHUP, then SIGKILL after
// Config.KillTimeout), reaps it and returns after all four have ended.
// The master is switched to non-blocking mode on the runtime poller so
// that Close can interrupt a read even when a background process still
// holds the PTY open. Exit is reported with a code, or with a signal name
// such as "SIGKILL" ("SIG<n>" for signals without a name).
// Terminal.resizeMu orders the size ioctls and guards the size policy;
// it is taken before Terminal.mu.
//
// # Size with several viewers
//
// The most recently active control viewer's size decides, as tmux's
// window-size latest (size.go): a viewer's first terminal/resize reports
// its size and applies only when no viewer decides yet; typing or a later
// terminal/resize makes a viewer active and its size apply; when the
// deciding viewer leaves, the next most recently active one's applies (none:
// the size stays). View-only viewers never resize. A deciding viewer's
// keystroke costs one atomic load; a change of decider walks the viewers
// that told their size or typed.
//
// # State codec
//
// For an upgrade in place (issue 38: the daemon re-executes itself and
// keeps every terminal), emulator.appendState writes the emulator's whole
// state in a compact binary form (emu_state.go) and decodeEmulatorState
// rebuilds an emulator from it: both screens cell for cell (plain rows as
// their text; wide, erased and combined cells exactly), which lines
// wrapped, the scrollback oldest line first, the active screen, cursor
// and pending wrap, pen, every mode, cursor style, title, OSC 4/10/11/12
// colours, charsets G0–G3 and the shift, tab stops, each screen's scroll
// region and saved cursor, the combining clusters, what REP would repeat,
// and the parser's state in the middle of a sequence (parameters,
// markers, a partial OSC payload). What is not state is not carried and
// is rebuilt: the index of the clusters, a plain row's out-of-date cells,
// the scrollback ring's rotation and the spare room rows slide over. The
// reader goroutine's filter holds state of its own (a held query prefix,
// an incomplete UTF-8 sequence), which filter_state.go encodes. A decoded
// emulator continues exactly as the original would: TestEmulatorState*
// and FuzzEmulatorStateRoundTrip compare every field and the snapshots
// before and after more output. The decoder checks every count and
// length against its bound before it allocates for it (rows and columns
// at most MaxSize, scrollback at most the limit it is given and each
// scrollback line at most MaxSize cells, the title, colours and OSC
// payload at most the 4,099 bytes the emulator collects, at most 65,536
// clusters) and every value against its range (cursor and saved cursors
// on the screen, scroll regions, modes, charsets, colour modes and
// underline styles, parser state and parameters, characters valid and
// not controls, cluster references to existing clusters); a truncated,
// oversized or inconsistent state is refused with an error naming the
// field, and whatever it accepts re-encodes to the same bytes
// (FuzzDecodeEmulatorState). Widths are not checked, so that a binary
// with newer width tables still takes an older state. The format starts
// with its own version number (1): any change to the format bumps it, and
// a decoder refuses a version it does not know. A 50×200 terminal with a
// full 10,000-line scrollback is about 1.2–1.4 MB of state
// (BenchmarkEmulatorState).
//
// # Hand-over
//
// Terminal.Freeze stops a terminal where it stands and returns what the
// next binary needs to carry it on (handover.go): a close-on-exec
// duplicate of the PTY master, the process id, and a state (its own
// version, 1) of the size, the exit status if the process was already
// reaped, the input not yet written, the reader's filter state
// (filter_state.go) and the emulator's. The reader stops at its next read
// (a read deadline in the past, which its own deadlines keep),
// and everything it read is applied to the emulator first; what it did
// not read waits in the PTY, so no output is lost or repeated. The writer
// stops at its next write; a write waiting for room is cut short by a
// write deadline and its rest stays first in the queue. The process is
// neither signalled nor reaped: the waiter waits with waitid(WNOWAIT) and
// reaps only under reapMu while the terminal is not frozen, so a process
// that exits during the hand-over stays a zombie for the adopter. Adopt
// checks the state field by field (TestHandOverStateChecked,
// FuzzHandoverState) and starts the goroutines on it. Viewers do not
// cross: they reconnect and get a snapshot. TestHandOverLosesNoByte hands
// a terminal over 20 times while it prints 50,000 numbered lines and
// finds every line once, in order.
//
// # Recording
//
// A terminal records (issue 42; package record) when Config.Record asks
// it to from the start (or from Adopt), or after StartRecording. The
// emulator goroutine hands each item of the stream log to the
// record.Recorder just before it applies it, with emuMu held (record.go):
// the output recorded is the log's text, exactly what viewers receive
// (queries removed, valid UTF-8), in stream order, stamped with the time
// the reader appended it; a resize item becomes an "r" event. A keyframe
// the Recorder takes (every recordingKeyframeBytes or
// recordingKeyframeInterval, at the start of each file, after a drop) is
// the emulator's screen without the scrollback (appendScreen: the
// snapshot viewers get, less the scrollback) at exactly that point of the
// stream, so a keyframe followed by the events after its offset is the
// screen of any later moment, cell for cell (TestRecordingSeek). The
// Recorder only formats into its bounded queue and returns; its own
// goroutine writes, so neither the emulator nor the reader behind it ever
// waits for the disk (TestRecordingSlowDiskNeverStalls). Input is recorded ("i" events) only in record.OutputInput,
// once Input has accepted it, and with emuMu held, like RecordAudit, so
// that a keyframe they trigger is exact too. A recording ends with a
// marker: when the process has exited and its output is applied ("process
// exited with code N"), at Close, at Freeze ("upgrade in place": the
// adopter starts a new one if its Config.Record says so), or at
// StopRecording. Recording costs the terminal the escaping of its output
// and a write per 96 KiB or more (BenchmarkRecordFlood,
// docs/recording-bench.md).
//
// # Why not github.com/charmbracelet/x/vt v0.1.0
//
// It was evaluated once (benchmarks of the same inputs through both, kept
// until 969736d: git show 969736d:pty/vteval_test.go) and falls short on every
// axis that matters here:
//
//   - Speed: 1.6–2.4 MB/s for `cat` of ordinary text with scrollback on
//     (every scrolled line costs an O(scrollback) slices.Delete once the
//     scrollback is full, and cells are moved one SetCell at a time), and
//     23–42 MB/s for escape-heavy output without scrolling, against a
//     target of ≥ 85% of ~90 MB/s. This package's emulator parses the same
//     inputs at 150–460 MB/s (plain), 118–155 MB/s (escape-heavy) and
//     ~200 MB/s (CJK/emoji), the ranges being a loaded vs a quiet machine
//     (BenchmarkEmulator*; a full-screen scroll is O(1), so `yes`-style
//     output, one scroll per 2 bytes, runs at ~57 MB/s).
//   - State it does not expose: modes (DECCKM, keypad, 2004, mouse,
//     focus, DECAWM, DECOM), the current pen, the scroll region, the saved
//     cursor, and the normal screen while the alternate screen is active
//     are all unexported, so a snapshot could not rebuild them (wrapping
//     would mean a second parser tracking everything anyway).
//   - Widths: it measures grapheme clusters with Unicode 15+ tables (a ZWJ
//     family or "❤️" is 2 cells, a Unicode 14 emoji is 2), while viewers run
//     xterm.js with the Unicode 11 addon, which lays out code points (a ZWJ
//     family is 6 cells, "❤️" 1, U+1FAE0 1). A host model that disagrees
//     with the viewers cannot give cell-exact snapshots or correct CPRs.
//   - Semantics: ED 2 pushes the screen into the scrollback (xterm.js does
//     not), and query replies go to an unbuffered io.Pipe, so any query in
//     the output blocks Write until someone reads the pipe.
//
// The emulator here models xterm.js (screen, scrollback ring, alternate
// screen with per-screen saved cursor and scroll region, pending wrap,
// wide-character repair, charsets, SGR including 256/RGB colours and
// underline styles, the modes above, title, OSC 4/10/11/12 colours, tab
// stops) and serializes a snapshot that rebuilds all of it; tests replay
// random sequences and check the rebuilt state cell for cell.
//
// A screen row holding only printable ASCII in the default pen — most of
// what scrolls by — is kept as bytes (a plain row) until something else
// touches it, and enters the scrollback as bytes: printing `cat` of plain
// text is then a copy of bytes rather than a store of 12-byte cells, about
// 3× faster (BenchmarkEmulatorPlain); CR and LF, which end each line, skip
// the state table. Plain rows are an encoding, not a second model:
// TestPlainRowsMatchCells and FuzzEmulatorPlainRows run every input through
// an emulator without them and without the shortcut (cellsOnly, kept across
// a full reset) and compare cell for cell and snapshot for snapshot, along
// with what a snapshot does not carry: which lines wrapped, what REP
// repeats, the parser's state.
//
// Known limits: resizing truncates or pads lines (xterm.js reflows wrapped
// lines), so after a resize the scrollback of a snapshot can differ from a
// live viewer's; underline colour (SGR 58), the title stack, DECSCA,
// left/right margins and sixel are not modelled; zero-width marks use Go's
// Unicode tables (a mark newer than Unicode 11 is 0 cells here, 1 in
// xterm.js); a combining mark with no preceding character is dropped; and
// three rare states cannot be recreated by any sequence and are
// approximated: a cursor outside the scroll region while origin mode is
// set (reachable through DECRC or a screen switch), a wrap pending on an
// erased last cell of a non-blank line, and two adjacent empty cells with
// non-background attributes at the end of a line.
package pty
