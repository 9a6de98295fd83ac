package service

// Terminal recordings (docs/recording.md): starting and stopping them, and
// listing and reading the files of the daemon's record.Store. The
// recording itself is the terminal's (pty.Terminal feeds its
// record.Recorder); the service only asks.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/daemon/events"
	"github.com/ahp-dev/ahpd/daemon/registry"
	"github.com/ahp-dev/ahpd/daemon/session"
	"github.com/ahp-dev/ahpd/pty/record"
)

// ErrRecordingNotFound: no recording has the id (or it was evicted).
var ErrRecordingNotFound = session.ErrRecordingNotFound

// terminalRecorder is what a terminal that records offers
// (pty.Terminal).
type terminalRecorder interface {
	StartRecording(s *record.Store, m record.Mode) (string, error)
	StopRecording(reason string)
	Recording() (id string, m record.Mode)
}

// RecordingState is a terminal's recording: its mode and the id of the
// file being written ("" when Mode is Off).
type RecordingState struct {
	Mode record.Mode
	ID   string
}

// RecordingInfo describes a recording for the control plane.
type RecordingInfo struct {
	record.Info
	URI  string // the terminal's channel URI
	Path string // the .cast file's absolute path
}

// RecordLimits are the record.Limits of config limits l.
func RecordLimits(l config.Limits) record.Limits {
	return record.Limits{MaxBytes: l.RecordingMaxBytes, MaxTotalBytes: l.RecordingsMaxTotalBytes,
		KeyframeBytes: l.RecordingKeyframeBytes, KeyframeInterval: l.RecordingKeyframeInterval}
}

// Recordings returns the daemon's recordings store (nil if it has none).
func (s *Service) Recordings() *record.Store { return s.recordings }

// RecordingStats are the recordings store's figures, for /metrics (zero
// without a store).
func (s *Service) RecordingStats() record.StoreStats {
	if s.recordings == nil {
		return record.StoreStats{}
	}
	return s.recordings.Stats()
}

// parseRecordMode reads a mode of the control API ("" is def).
func parseRecordMode(field, v string, def record.Mode) (record.Mode, error) {
	if v == "" {
		return def, nil
	}
	m, err := record.ParseMode(v)
	if err != nil {
		return record.Off, argErr(field, "want off, output or output+input, got %q", session.Truncate(v, 64))
	}
	return m, nil
}

// defaultRecordMode is the config's record key as a Mode.
func (s *Service) defaultRecordMode() record.Mode {
	m, _ := record.ParseMode(s.cfg.Record) // validated at start
	return m
}

// recordingOf returns a terminal's recording state.
func recordingOf(c *registry.Channel) *RecordingState {
	r, ok := c.Impl().(terminalRecorder)
	if !ok || c.Type != "terminal" {
		return nil
	}
	id, m := r.Recording()
	return &RecordingState{Mode: m, ID: id}
}

// SetTerminalRecording starts (mode Output or OutputInput) or stops (Off)
// recording the terminal with uri. Starting in another mode than the one
// running ends that file and starts a new one.
func (s *Service) SetTerminalRecording(ctx context.Context, uri, mode string) (RecordingState, error) {
	m, err := parseRecordMode("mode", mode, record.Off)
	if err != nil {
		return RecordingState{}, err
	}
	if mode == "" {
		return RecordingState{}, argErr("mode", "required: off, output or output+input")
	}
	ch, ok := s.registry.Get(uri)
	if !ok {
		return RecordingState{}, fmt.Errorf("%w: %s", registry.ErrChannelNotFound, uri)
	}
	r, ok := ch.Impl().(terminalRecorder)
	if !ok || ch.Type != "terminal" {
		return RecordingState{}, fmt.Errorf("%w: %s is not a terminal that records", ErrUnsupported, uri)
	}
	if m == record.Off {
		if _, cur := r.Recording(); cur != record.Off {
			r.StopRecording("stopped by the operator")
			s.announceStop(uri, "stopped by the operator")
		}
		return RecordingState{Mode: record.Off}, nil
	}
	if !running(ch.Impl()) {
		return RecordingState{}, fmt.Errorf("%w: %s", ErrNotRunning, uri)
	}
	before, _ := r.Recording()
	st, err := s.startRecording(uri, r, m)
	if err == nil && st.ID != before {
		// Not from a viewer's run loop (auditAttached asks them all).
		s.auditAttached(uri)
	}
	return st, err
}

// startRecording starts recording terminal uri in mode m (see
// SetTerminalRecording).
func (s *Service) startRecording(uri string, r terminalRecorder, m record.Mode) (RecordingState, error) {
	if s.recordings == nil {
		return RecordingState{}, fmt.Errorf("%w: this daemon has no recordings directory", ErrUnsupported)
	}
	if id, cur := r.Recording(); cur == m {
		return RecordingState{Mode: m, ID: id}, nil
	}
	// A recording in another mode ends ("recording mode changed to
	// ..."): announceStart tells watchers it stopped.
	id, err := r.StartRecording(s.recordings, m)
	if err != nil {
		if errors.Is(err, record.ErrClosed) {
			return RecordingState{}, ErrShuttingDown
		}
		return RecordingState{}, fmt.Errorf("record %s: %w", uri, err)
	}
	s.announceStart(uri, id, m)
	return RecordingState{Mode: m, ID: id}, nil
}

// auditAttached records an "attach" audit event in terminal uri's
// recording for each viewer attached to it already: a recording started
// on a running terminal, or continued in a new file, names who was
// watching from its start. It asks every connection's run loop, so it is
// never called from one.
func (s *Service) auditAttached(uri string) {
	ch, ok := s.registry.Get(uri)
	if !ok || s.viewers == nil {
		return
	}
	t, ok := ch.Impl().(terminalAuditor)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, v := range s.viewers.ListViewers(ctx) {
		for _, sub := range v.Subscriptions {
			if sub.Channel != uri {
				continue
			}
			role := v.Role
			if v.Token == "" {
				role = "admin"
			}
			t.RecordAudit(record.Audit{Event: "attach", Viewer: v.ID, Token: v.Token, Role: role, Remote: v.Remote, Detail: "attached before this file began"})
		}
	}
}

// announceStart publishes recording.started for terminal uri's recording
// id, once (and recording.stopped for the one it replaced, if watchers
// were told of it). It reports whether it did, id being new.
func (s *Service) announceStart(uri, id string, m record.Mode) bool {
	s.recMu.Lock()
	defer s.recMu.Unlock()
	old := s.recSeen[uri]
	if old == id {
		return false
	}
	if old != "" {
		reason := s.endReason(old)
		if reason == unknownEnd {
			// Not written yet: a file continued at recordingMaxBytes
			// ends with this marker.
			reason = "continued in " + id
		}
		s.publishStop(uri, old, reason)
	}
	if s.recSeen == nil {
		s.recSeen = map[string]string{}
	}
	s.recSeen[uri] = id
	s.log.Info("recording started", "channel", uri, "recording", id, "mode", m.String())
	s.events.Publish(events.Event{Kind: "recording.started", Channel: uri, Detail: id + " (" + m.String() + ")"})
	return true
}

// announceStop publishes recording.stopped for terminal uri's recording,
// once, with reason ("": the one its file ends with, once its writer has
// written it: until then SyncRecordings tries again each second).
func (s *Service) announceStop(uri, reason string) {
	s.recMu.Lock()
	defer s.recMu.Unlock()
	old := s.recSeen[uri]
	if old == "" {
		return
	}
	if reason == "" && s.recordings != nil {
		if i, err := s.recordings.Info(old); err == nil && i.Live {
			return // stopping: its last marker is not written yet
		}
	}
	delete(s.recSeen, uri)
	s.publishStop(uri, old, reason)
}

// publishStop publishes recording.stopped (recMu held).
func (s *Service) publishStop(uri, id, reason string) {
	if reason == "" {
		reason = s.endReason(id)
	}
	s.log.Info("recording stopped", "channel", uri, "recording", id, "reason", reason)
	s.events.Publish(events.Event{Kind: "recording.stopped", Channel: uri, Detail: id + ": " + reason})
}

// unknownEnd is endReason's answer when the file does not say.
const unknownEnd = "ended"

// endReason reads why recording id ended from its last event, a marker
// "recording stopped: REASON" or "continued in ID".
func (s *Service) endReason(id string) string {
	const unknown = unknownEnd
	if s.recordings == nil {
		return unknown
	}
	f, _, err := s.recordings.Open(id)
	if err != nil {
		return unknown
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return unknown
	}
	start := max(0, size-4096)
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return unknown
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return unknown
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	ev, err := record.ParseEvent(b[bytes.LastIndexByte(b, '\n')+1:])
	if err != nil || ev.Type != "m" {
		return unknown
	}
	if r, ok := strings.CutPrefix(ev.Data, "recording stopped: "); ok {
		return r
	}
	return ev.Data
}

// SyncRecordings publishes recording.started and recording.stopped for
// what the terminals' recordings did on their own since the last call: a
// file continued at recordingMaxBytes, a recording that ended with its
// process or its terminal. The daemon calls it once a second.
func (s *Service) SyncRecordings() {
	live := map[string]bool{}
	for _, ch := range s.registry.List() {
		r, ok := ch.Impl().(terminalRecorder)
		if !ok || ch.Type != "terminal" {
			continue
		}
		live[ch.URI] = true
		if id, m := r.Recording(); m != record.Off {
			if s.announceStart(ch.URI, id, m) {
				s.auditAttached(ch.URI) // a file continued at recordingMaxBytes
			}
		} else {
			s.announceStop(ch.URI, "")
		}
	}
	s.recMu.Lock()
	var gone []string
	for uri := range s.recSeen {
		if !live[uri] {
			gone = append(gone, uri)
		}
	}
	s.recMu.Unlock()
	for _, uri := range gone {
		s.announceStop(uri, "")
	}
}

// recordingURI is the channel URI of a recording's terminal: a file holds
// the channel id, and terminal ids are file-name safe.
func recordingURI(i record.Info) string { return registry.SchemeTerminal + i.Channel }

// Pages of ListRecordings (proto/ahp/v1/recordings.proto): page_size 0
// is DefaultListPage, more than session.MaxListLimit is that; a page
// stops before its recordings pass maxListPageBytes (estimated by
// listEntryBytes), so that it fits in gRPC's default message limit of
// 4 MiB.
const (
	DefaultListPage  = session.DefaultListLimit
	maxListPageBytes = 2 << 20
)

// listEntryBytes is at least the size of r in a ListRecordingsResponse:
// its strings and, for the rest (timestamps, numbers, field tags), 96
// bytes.
func listEntryBytes(r RecordingInfo) int {
	return len(r.ID) + len(r.URI) + len(r.Path) + len(r.Title) + 96
}

// ListRecordings returns a page of the recordings, newest first, and the
// token of the next page ("" after the last): with channel (a terminal
// URI) only that terminal's; at most size (0: DefaultListPage) and at
// most maxListPageBytes of them; after token, the Key of the last
// recording of the previous page ("": from the newest).
func (s *Service) ListRecordings(ctx context.Context, channel string, size int32, token string) ([]RecordingInfo, string, error) {
	switch {
	case size < 0:
		return nil, "", argErr("page_size", "must not be negative, got %d", size)
	case size == 0:
		size = DefaultListPage
	case size > session.MaxListLimit:
		size = session.MaxListLimit
	}
	if token != "" && !session.ValidRecordingCursor(token) {
		return nil, "", argErr("page_token", "not a token of ListRecordings (give the previous page's next_page_token, or leave it empty for the first page)")
	}
	id, err := recordingsChannel(channel)
	if err != nil || s.recordings == nil {
		return nil, "", err
	}
	page, more := s.recordings.Page(id, token, int(size), nil)
	out := make([]RecordingInfo, 0, len(page))
	total := 0
	for _, i := range page {
		r := s.controlRecording(i)
		n := listEntryBytes(r)
		if len(out) > 0 && total+n > maxListPageBytes {
			more = true
			break
		}
		out = append(out, r)
		total += n
	}
	if !more {
		return out, "", nil
	}
	return out, out[len(out)-1].Key, nil
}

// recordingsChannel checks a channel filter of the recordings (a
// terminal URI, or "" for all) and returns the terminal's id.
func recordingsChannel(channel string) (string, error) {
	if channel == "" {
		return "", nil
	}
	if !strings.HasPrefix(channel, registry.SchemeTerminal) {
		return "", argErr("channel", "want a terminal URI (%sID), got %q", registry.SchemeTerminal, session.Truncate(channel, 64))
	}
	id := strings.TrimPrefix(channel, registry.SchemeTerminal)
	if err := registry.ValidID(id); err != nil {
		return "", argErr("channel", "%v", err)
	}
	return id, nil
}

// controlRecording is the control plane's view of i.
func (s *Service) controlRecording(i record.Info) RecordingInfo {
	return RecordingInfo{Info: i, URI: recordingURI(i), Path: filepath.Join(s.recordings.Dir(), i.ID+record.CastSuffix)}
}

// OpenRecording opens a recording's .cast for reading and returns its size
// now (a live recording grows: a read stops there, at a line's end).
func (s *Service) OpenRecording(ctx context.Context, id string) (io.ReadSeekCloser, RecordingInfo, error) {
	if s.recordings == nil {
		return nil, RecordingInfo{}, fmt.Errorf("%w: %q", ErrRecordingNotFound, session.Truncate(id, 128))
	}
	f, info, err := s.recordings.Open(id)
	if errors.Is(err, record.ErrNotFound) {
		return nil, RecordingInfo{}, fmt.Errorf("%w: %q (ahpctl recordings list shows them)", ErrRecordingNotFound, session.Truncate(id, 128))
	}
	if err != nil {
		return nil, RecordingInfo{}, err
	}
	return f, s.controlRecording(info), nil
}

// terminalAuditor is a terminal whose recording takes audit events
// (pty.Terminal).
type terminalAuditor interface {
	RecordAudit(a record.Audit)
}

func toSessionRecording(i record.Info) session.RecordingInfo {
	return session.RecordingInfo{ID: i.ID, Key: i.Key, Channel: recordingURI(i), Started: i.Started, Ended: i.Ended, Live: i.Live, Bytes: i.Bytes,
		Duration: i.Duration, Rows: i.Rows, Cols: i.Cols, Title: i.Title, Input: i.Input}
}

// notFound maps the store's not-found to the session's.
func notFound(err error) error {
	if errors.Is(err, record.ErrNotFound) && !errors.Is(err, session.ErrRecordingNotFound) {
		return fmt.Errorf("%w: %w", session.ErrRecordingNotFound, err)
	}
	return err
}

// RecordingsPage is a page of the recordings for the session
// (session.Host): of a terminal URI ("" all), newest first, older than
// the cursor after, those whose URI keep allows (nil: all).
func (s *Service) RecordingsPage(channel, after string, n int, keep func(uri string) bool) ([]session.RecordingInfo, bool) {
	id, err := recordingsChannel(channel)
	if err != nil || s.recordings == nil {
		return nil, false
	}
	var filter func(record.Info) bool // nil: every recording
	if keep != nil {
		filter = func(i record.Info) bool { return keep(recordingURI(i)) }
	}
	page, more := s.recordings.Page(id, after, n, filter)
	out := make([]session.RecordingInfo, len(page))
	for k, i := range page {
		out[k] = toSessionRecording(i)
	}
	return out, more
}

// RecordingsInfo describes one recording (session.Host).
func (s *Service) RecordingsInfo(id string) (session.RecordingInfo, error) {
	if s.recordings == nil {
		return session.RecordingInfo{}, session.ErrRecordingNotFound
	}
	i, err := s.recordings.Info(id)
	if err != nil {
		return session.RecordingInfo{}, notFound(err)
	}
	return toSessionRecording(i), nil
}

// RecordingsOpen opens a recording's .cast (session.Host).
func (s *Service) RecordingsOpen(id string) (io.ReadSeekCloser, session.RecordingInfo, error) {
	f, i, err := s.OpenRecording(context.Background(), id)
	if err != nil {
		return nil, session.RecordingInfo{}, notFound(err)
	}
	return f, toSessionRecording(i.Info), nil
}

// RecordingsIndex returns a recording's index without screens
// (session.Host).
func (s *Service) RecordingsIndex(id string) (session.RecordingIndex, error) {
	if s.recordings == nil {
		return session.RecordingIndex{}, session.ErrRecordingNotFound
	}
	idx, err := s.recordings.Index(id)
	if err != nil {
		return session.RecordingIndex{}, notFound(err)
	}
	out := session.RecordingIndex{Keyframes: make([]session.RecordingKeyframe, 0, len(idx.Keyframes)), Audit: make([]session.Audit, 0, len(idx.Audit)), Dropped: idx.Dropped, DroppedAudit: idx.DroppedAudit}
	for _, k := range idx.Keyframes {
		out.Keyframes = append(out.Keyframes, session.RecordingKeyframe{Time: k.Time, Offset: k.Offset, Rows: k.Rows, Cols: k.Cols, Bytes: k.Bytes})
	}
	for _, a := range idx.Audit {
		out.Audit = append(out.Audit, session.Audit(a))
	}
	return out, nil
}

// RecordingsKeyframe returns keyframe n of a recording with its screen
// (session.Host).
func (s *Service) RecordingsKeyframe(id string, n int) (session.RecordingKeyframe, error) {
	if s.recordings == nil {
		return session.RecordingKeyframe{}, session.ErrRecordingNotFound
	}
	k, err := s.recordings.Keyframe(id, n)
	if err != nil {
		return session.RecordingKeyframe{}, notFound(err)
	}
	return session.RecordingKeyframe{Time: k.Time, Offset: k.Offset, Rows: k.Rows, Cols: k.Cols, Screen: k.Screen, Bytes: len(k.Screen)}, nil
}

// RecordAudit adds a to the recording of the terminal channel and returns
// its id; "" when the terminal does not record (session.Host).
func (s *Service) RecordAudit(channel string, a session.Audit) string {
	ch, ok := s.registry.Get(channel)
	if !ok || ch.Type != "terminal" {
		return ""
	}
	r, ok := ch.Impl().(terminalRecorder)
	if !ok {
		return ""
	}
	id, m := r.Recording()
	if m == record.Off {
		return ""
	}
	if t, ok := ch.Impl().(terminalAuditor); ok {
		t.RecordAudit(record.Audit(a))
	}
	return id
}

// RecordingOf returns the id of the recording the terminal channel writes
// now, "" when it does not record (session.Host).
func (s *Service) RecordingOf(channel string) string {
	ch, ok := s.registry.Get(channel)
	if !ok || ch.Type != "terminal" {
		return ""
	}
	if st := recordingOf(ch); st != nil && st.Mode != record.Off {
		return st.ID
	}
	return ""
}
