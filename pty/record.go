package pty

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/ahp-dev/ahpd/pty/record"
)

// A terminal's recording (issue 42; package record). The emulator
// goroutine hands each item to the Recorder just before it applies it,
// with emuMu held: the output recorded is the stream log's text, exactly
// what viewers receive (queries removed, valid UTF-8), in stream order,
// and a keyframe the Recorder asks for (Snapshot, called from within its
// methods, emuMu still held) is the screen after every event recorded
// before it. The Recorder never waits for the disk, so the emulator, and
// the reader behind it, never wait for a recording. Input and audit
// events take emuMu too, so that a keyframe they trigger is exact.

// StartRecording starts recording the terminal into s with mode m
// (record.Output or record.OutputInput) and returns the recording's id
// (Config.Channel names it; the header's title is the command line).
// If the terminal records already with mode m, it returns that
// recording's id; with another mode, that recording is stopped first.
// record.Off stops the recording.
func (t *Terminal) StartRecording(s *record.Store, m record.Mode) (string, error) {
	if m == record.Off {
		t.StopRecording("recording switched off")
		return "", nil
	}
	if s == nil {
		return "", fmt.Errorf("pty: StartRecording: no store")
	}
	t.emuMu.Lock()
	if t.rec != nil && t.recMode == m && t.rec.Live() {
		id := t.rec.ID()
		t.emuMu.Unlock()
		return id, nil
	}
	t.emuMu.Unlock()
	t.StopRecording("recording mode changed to " + m.String())

	t.emuMu.Lock()
	defer t.emuMu.Unlock()
	select {
	case <-t.closing:
		return "", ErrClosed
	default:
	}
	t.mu.Lock()
	exited := t.exited
	t.mu.Unlock()
	if exited {
		return "", ErrExited
	}
	if t.rec != nil && t.rec.Live() { // a concurrent StartRecording won
		if t.recMode == m {
			return t.rec.ID(), nil
		}
		return "", fmt.Errorf("pty: StartRecording: recording started meanwhile with mode %v", t.recMode)
	}
	rec, err := s.Start(record.Params{
		Channel:  t.cfg.Channel,
		Rows:     t.emu.rows,
		Cols:     t.emu.cols,
		Title:    strings.Join(t.cfg.Command, " "),
		Term:     t.cfg.Term,
		Mode:     m,
		Snapshot: t.recordScreen,
	})
	if err != nil {
		return "", fmt.Errorf("pty: StartRecording: %w", err)
	}
	t.rec, t.recMode = rec, m
	t.lastRec, t.lastRecMode = rec, m
	if m == record.OutputInput {
		t.recIn.Store(rec)
	}
	return rec.ID(), nil
}

// StopRecording stops the recording, if any, with a marker "recording
// stopped: reason", and returns once it is written and closed.
func (t *Terminal) StopRecording(reason string) {
	t.emuMu.Lock()
	rec := t.rec
	t.rec, t.recMode = nil, record.Off
	t.recIn.Store(nil)
	t.emuMu.Unlock()
	if rec != nil {
		rec.Stop(reason)
	}
}

// Recording returns the id of the file being recorded into and the mode
// ("", record.Off when not recording). The id changes when a file
// reaches its size cap and the recording continues in a new one.
func (t *Terminal) Recording() (string, record.Mode) {
	t.emuMu.Lock()
	defer t.emuMu.Unlock()
	if t.rec == nil || !t.rec.Live() { // the store's Close stops it
		return "", record.Off
	}
	return t.rec.ID(), t.recMode
}

// LastRecording returns the terminal's latest recording, live or ended
// (id "" when it never recorded): a terminal that started recorded and
// whose process exited at once has ended its recording before anyone
// asked for Recording.
func (t *Terminal) LastRecording() (id string, m record.Mode, live bool) {
	t.emuMu.Lock()
	defer t.emuMu.Unlock()
	if t.lastRec == nil {
		return "", record.Off, false
	}
	return t.lastRec.ID(), t.lastRecMode, t.lastRec.Live()
}

// RecordAudit adds an audit event to the recording's index; it does
// nothing when the terminal is not recording.
func (t *Terminal) RecordAudit(a record.Audit) {
	t.emuMu.Lock()
	defer t.emuMu.Unlock()
	if t.rec != nil {
		t.rec.Audit(a)
	}
}

// recordFromStart starts the recording Config.Record asks for (Start,
// Adopt).
func (t *Terminal) recordFromStart() {
	if t.cfg.Record == record.Off || t.cfg.Recordings == nil {
		return
	}
	if _, err := t.StartRecording(t.cfg.Recordings, t.cfg.Record); err != nil {
		t.log.Warn("terminal: recording did not start", "pid", t.pid, "err", err)
	}
}

// recordScreen is the Recorder's Snapshot (emuMu held): the screen
// without the scrollback.
func (t *Terminal) recordScreen() (rows, cols int, screen string) {
	b := t.emu.appendScreen(nil)
	return t.emu.rows, t.emu.cols, unsafe.String(unsafe.SliceData(b), len(b))
}

// recordLocked records an item before the emulator applies it (emuMu
// held).
func (t *Terminal) recordLocked(it *item) {
	at := epoch.Add(time.Duration(it.at))
	switch {
	case it.resize:
		t.rec.Resize(at, it.rows, it.cols)
	case it.text != "":
		t.rec.Output(at, it.text)
	}
}

// recordInput records input the terminal accepted.
func (t *Terminal) recordInput(data []byte) {
	t.emuMu.Lock()
	if t.rec != nil {
		t.rec.RecordInput(time.Now(), data)
	}
	t.emuMu.Unlock()
}

// recordExit stops the recording once the process has exited and the
// emulator has applied all its output (the emulator goroutine, idle).
func (t *Terminal) recordExit() {
	select {
	case <-t.exitDone:
	default:
		return
	}
	t.emuMu.Lock()
	rec := t.rec
	t.rec, t.recMode = nil, record.Off
	t.recIn.Store(nil)
	t.emuMu.Unlock()
	if rec == nil {
		return
	}
	rec.Stop(t.endReason(""))
}

// endReason is why a recording ends: the process's exit once it has
// exited, else def.
func (t *Terminal) endReason(def string) string {
	st, ok := t.Exit()
	switch {
	case !ok:
		return def
	case st.Signal != "":
		return "process killed by " + st.Signal
	}
	return "process exited with code " + strconv.Itoa(st.Code)
}
