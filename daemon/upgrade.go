package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/daemon/service"
	"github.com/ahp-dev/ahpd/internal/handover"
	"github.com/ahp-dev/ahpd/pty"
	"github.com/ahp-dev/ahpd/tcp"
	"github.com/ahp-dev/ahpd/telemetry"
)

// An upgrade in place (issue 38, docs/upgrade.md) hands the daemon's
// terminals and telemetry channels to the binary it re-executes:
// HandOverChannels writes them into a handover state (the section
// "channels": a JSON list of what the control plane knows of each, the
// limits and the TCP allow-list in force; then one section "terminal/N"
// per terminal with pty.Frozen's state and "telemetry/N" per telemetry
// channel with its history) and returns the PTY masters and the pipes of
// telemetry command sources, which the execve keeps open under the same
// numbers; AdoptChannels, in the new binary,
// registers them again under the same URIs. TCP channels: upgrade_tcp.go.

// SectionChannels names the list of channels in a handover state.
const SectionChannels = "channels"

// channelsVersion is the version of the "channels" section: 2 added the
// TCP channels. A binary reads its own version and the ones before it
// that it can take whole (version 1 has no TCP channel); an older binary
// refuses a newer state at the check, before anything is given up.
const channelsVersion = 2

// minChannelsVersion is the oldest "channels" section this binary reads.
const minChannelsVersion = 1

// handedChannels is the "channels" section.
type handedChannels struct {
	Version int `json:"version"`
	// PtyVersion and TelemetryVersion are the versions of the terminals'
	// and the telemetry channels' own states (pty.HandoverVersion,
	// telemetry.HandoverVersion): each state starts with its version too,
	// but the check state has no terminal, and a new binary must refuse
	// an upgrade whose states it could not read before any exists.
	PtyVersion       int               `json:"ptyVersion"`
	TelemetryVersion int               `json:"telemetryVersion"`
	Telemetry        []handedTelemetry `json:"telemetry,omitempty"`
	// TCPRules is the TCP allow-list in force (ahpctl tcp allow adds to it
	// at run time, unsaved with --config none).
	TCPRules []string `json:"tcpRules,omitempty"`
	// TCPVersion is the version of the TCP channels' states
	// (tcp.HandoverVersion); TCP their list (upgrade_tcp.go).
	TCPVersion int              `json:"tcpVersion,omitempty"`
	TCP        []handedTCP      `json:"tcp,omitempty"`
	Terminals  []handedTerminal `json:"terminals"`
	// Limits are the daemon's limits in force (ahpctl limits set), by
	// name: a name the new binary does not know is dropped, one it adds
	// keeps its configured value.
	Limits map[string]int64 `json:"limits,omitempty"`
}

// handedTerminal is one terminal of the "channels" section; its state
// is the section "terminal/N".
type handedTerminal struct {
	ID         string    `json:"id"`
	Title      string    `json:"title,omitempty"`
	Created    time.Time `json:"created"`
	Command    []string  `json:"command,omitempty"`
	Env        []string  `json:"env,omitempty"`
	Dir        string    `json:"dir,omitempty"`
	Rows       int       `json:"rows,omitempty"`
	Cols       int       `json:"cols,omitempty"`
	Scrollback int       `json:"scrollback,omitempty"`
	// Record is how the terminal was recorded ("" or off: not): its
	// recording ended at the hand-over, and the next binary starts a new
	// file (docs/recording.md).
	Record string `json:"record,omitempty"`
	Pid    int    `json:"pid"`
	FD     int    `json:"fd"` // the PTY master's descriptor number
	// Overrides are the terminal's own limits (ahpctl limits set
	// --channel), by name.
	Overrides map[string]int64 `json:"overrides,omitempty"`
}

// handedTelemetry is one telemetry channel of the "channels" section; its
// state is the section "telemetry/N".
type handedTelemetry struct {
	ID      string          `json:"id"`
	Created time.Time       `json:"created"`
	Params  json.RawMessage `json:"params"` // what it was created from (telemetry.ParseSpec)
	// FD is the descriptor of a command source's stdout pipe, whose child
	// runs on (telemetry.Frozen.Pipe); 0: none.
	FD int `json:"fd,omitempty"`
}

// limitValues returns l's values of names (all limits when names is nil).
func limitValues(l config.Limits, names []string) map[string]int64 {
	if names == nil {
		for _, f := range config.LimitFields() {
			names = append(names, f.Name)
		}
	}
	m := map[string]int64{}
	for _, n := range names {
		if v, ok := l.LimitValue(n); ok {
			m[n] = v
		}
	}
	return m
}

// applyLimits sets the values of m that l knows, and returns their names.
func applyLimits(l *config.Limits, m map[string]int64) []string {
	var names []string
	for n, v := range m {
		if _, ok := l.LimitValue(n); ok {
			l.SetLimitValue(n, v)
			names = append(names, n)
		}
	}
	return names
}

// checkChannelsVersion reports whether this binary reads a "channels"
// section of version v.
func checkChannelsVersion(v int) error {
	if v < minChannelsVersion || v > channelsVersion {
		return fmt.Errorf("channels state version %d, this ahpd reads versions %d–%d", v, minChannelsVersion, channelsVersion)
	}
	return nil
}

// ChannelsVersion is the version of the "channels" section this binary
// writes.
func ChannelsVersion() int { return channelsVersion }

// HandOverChannels freezes every terminal of the registry (pty.Freeze:
// the processes keep running, their output waits in the PTYs), every
// telemetry channel (telemetry.Freeze: its history and seq are kept; a
// command source's child runs on, its stdout pipe handed over; other
// sources stop) and every TCP channel (tcp.Freeze: its socket, journal
// and positions) and writes them into w; it returns the PTY masters, the
// pipes and the sockets, close-on-exec (the caller clears it for the execve). Call
// it after the viewers are gone (Serve returned). A channel that fails to
// freeze is logged and left out (it was closed).
func (s *Server) HandOverChannels(w *handover.Writer) ([]*os.File, error) {
	list := handedChannels{Version: channelsVersion, PtyVersion: pty.HandoverVersion(), TelemetryVersion: telemetry.HandoverVersion(),
		Limits: limitValues(s.Limits(), nil)}
	rules, _ := s.TCPRules(context.Background())
	for _, r := range rules {
		list.TCPRules = append(list.TCPRules, r.String())
	}
	var files []*os.File
	for _, ch := range s.Registry().List() {
		if tc, ok := ch.Impl().(*telemetry.Channel); ok {
			params, _ := ch.Spec.(json.RawMessage)
			fr := tc.Freeze()
			ht := handedTelemetry{ID: ch.ID, Created: ch.Created, Params: params}
			if fr.Pipe != nil {
				ht.FD = int(fr.Pipe.Fd())
				files = append(files, fr.Pipe)
			}
			list.Telemetry = append(list.Telemetry, ht)
			if err := w.Section("telemetry/"+strconv.Itoa(len(list.Telemetry)-1), fr.State); err != nil {
				return files, err
			}
			continue
		}
		if tc, ok := ch.Impl().(*tcp.Channel); ok {
			if f := s.handOverTCP(w, ch, tc, &list); f != nil {
				files = append(files, f)
			}
			continue
		}
		t, ok := ch.Impl().(*pty.Terminal)
		if !ok {
			continue
		}
		spec, _ := ch.Spec.(service.TerminalSpec)
		fr, err := t.Freeze()
		if err != nil {
			s.log.Error("upgrade: terminal not handed over", "channel", ch.URI, "err", err)
			continue
		}
		ht := handedTerminal{
			ID: ch.ID, Title: ch.Label, Created: ch.Created, Command: spec.Command, Env: spec.Env, Dir: spec.Dir,
			Rows: spec.Rows, Cols: spec.Cols, Scrollback: spec.Scrollback, Pid: fr.Pid, FD: int(fr.Master.Fd()),
			Record: s.recorded[ch.URI],
		}
		if names := s.ChannelOverrides(context.Background(), ch.URI); len(names) > 0 {
			ht.Overrides = limitValues(s.LimitsFor(ch.URI), names)
		}
		list.Terminals = append(list.Terminals, ht)
		if err := w.Section("terminal/"+strconv.Itoa(len(list.Terminals)-1), fr.State); err != nil {
			return files, err
		}
		files = append(files, fr.Master)
	}
	b, err := json.Marshal(list)
	if err != nil {
		return files, err
	}
	return files, w.Section(SectionChannels, b)
}

// CheckState checks a handover state's channels as AdoptChannels would
// read them, without adopting anything (ahpd --upgrade-check): the
// section's versions, each terminal's state field by field and each
// telemetry channel's history and spec. An error names the first channel
// that is wrong.
func CheckState(st *handover.State) error {
	list, err := readChannels(st)
	if err != nil {
		return err
	}
	for i, ht := range list.Terminals {
		state, ok := st.Section("terminal/" + strconv.Itoa(i))
		if !ok {
			return fmt.Errorf("upgrade: terminal %s: no state section", ht.ID)
		}
		if err := pty.CheckState(state); err != nil {
			return fmt.Errorf("upgrade: terminal %s: %w", ht.ID, err)
		}
	}
	for i, ht := range list.Telemetry {
		state, ok := st.Section("telemetry/" + strconv.Itoa(i))
		if !ok {
			return fmt.Errorf("upgrade: telemetry %s: no state section", ht.ID)
		}
		if err := telemetry.CheckState(state); err != nil {
			return fmt.Errorf("upgrade: telemetry %s: %w", ht.ID, err)
		}
		if ht.FD != 0 && ht.FD < 3 {
			return fmt.Errorf("upgrade: telemetry %s: descriptor %d", ht.ID, ht.FD)
		}
		if _, err := telemetry.ParseSpec(ht.Params); err != nil {
			return fmt.Errorf("upgrade: telemetry %s: %w", ht.ID, err)
		}
	}
	return checkTCP(st, list)
}

// EmptyChannels writes a "channels" section without channels (the
// check state ahpd runs a new binary on before it freezes anything: the
// versions it would write).
func EmptyChannels(w *handover.Writer) error {
	b, err := json.Marshal(handedChannels{Version: channelsVersion, PtyVersion: pty.HandoverVersion(), TelemetryVersion: telemetry.HandoverVersion(), TCPVersion: tcp.HandoverVersion()})
	if err != nil {
		return err
	}
	return w.Section(SectionChannels, b)
}

// readChannels reads and checks the "channels" section (absent: none).
func readChannels(st *handover.State) (handedChannels, error) {
	var list handedChannels
	b, ok := st.Section(SectionChannels)
	if !ok {
		return list, nil
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return list, fmt.Errorf("upgrade: channels: %w", err)
	}
	if err := checkChannelsVersion(list.Version); err != nil {
		return list, fmt.Errorf("upgrade: %w", err)
	}
	if list.PtyVersion != pty.HandoverVersion() {
		return list, fmt.Errorf("upgrade: terminal state version %d, this ahpd reads version %d", list.PtyVersion, pty.HandoverVersion())
	}
	if !telemetry.ReadsVersion(list.TelemetryVersion) {
		return list, fmt.Errorf("upgrade: telemetry state version %d, this ahpd reads version %d", list.TelemetryVersion, telemetry.HandoverVersion())
	}
	if err := checkTCPVersion(list); err != nil {
		return list, err
	}
	return list, nil
}

// AdoptChannels puts the limits and the TCP allow-list of a handover state
// in force and registers its channels again: terminals with pty.Adopt on
// the descriptors the execve kept, telemetry channels with their history.
// A terminal whose state is refused has its process hung up and its
// master closed; the others are adopted. It returns how many channels
// were adopted, and what went wrong with the others.
func (s *Server) AdoptChannels(st *handover.State) (int, error) {
	list, err := readChannels(st)
	if err != nil {
		return 0, err
	}
	var errs []error
	if len(list.Limits) > 0 {
		l := s.Limits()
		applyLimits(&l, list.Limits)
		if _, _, err := s.UpdateLimits(context.Background(), nil, l); err != nil {
			errs = append(errs, fmt.Errorf("limits: %w", err))
		}
	}
	if list.TCPRules != nil {
		var rules []tcp.Rule
		for _, r := range list.TCPRules {
			rule, err := tcp.ParseRule(r)
			if err != nil {
				errs = append(errs, fmt.Errorf("tcp rule: %w", err))
				continue
			}
			rules = append(rules, rule)
		}
		s.RestoreTCPRules(rules)
	}
	n := 0
	for i, ht := range list.Terminals {
		state, _ := st.Section("terminal/" + strconv.Itoa(i))
		err := s.adoptTerminal(ht, state)
		if err != nil {
			errs = append(errs, fmt.Errorf("terminal %s: %w", ht.ID, err))
			continue
		}
		n++
	}
	for i, ht := range list.Telemetry {
		state, _ := st.Section("telemetry/" + strconv.Itoa(i))
		fr := &telemetry.Frozen{State: state}
		if ht.FD >= 3 {
			fr.Pipe = os.NewFile(uintptr(ht.FD), "telemetry-pipe")
		}
		c, err := telemetryChannel(ht.Params, s.daemonFigures, s.Limits().TelemetryMaxSeries, s.TCPAllowList(), s.log, fr)
		if err == nil {
			_, err = s.AdoptChannel("telemetry", ht.ID, ht.Params, c, ht.Created) // closed if refused
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("telemetry %s: %w", ht.ID, err))
			continue
		}
		n++
	}
	adopted, err := s.adoptTCP(st, list)
	n += adopted
	errs = append(errs, err)
	return n, errors.Join(errs...)
}

func (s *Server) adoptTerminal(ht handedTerminal, state []byte) error {
	if ht.FD < 3 || ht.Pid <= 0 {
		return fmt.Errorf("descriptor %d, pid %d", ht.FD, ht.Pid)
	}
	master := os.NewFile(uintptr(ht.FD), "/dev/ptmx")
	t, err := s.adopt(ht, master, state)
	if err != nil {
		// Not ours to run any more: hang it up as Close would.
		_ = syscall.Kill(-ht.Pid, syscall.SIGHUP)
		return err
	}
	spec := service.TerminalSpec{ID: ht.ID, Title: ht.Title, Command: ht.Command, Env: ht.Env, Dir: ht.Dir, Rows: ht.Rows, Cols: ht.Cols, Scrollback: ht.Scrollback, Record: ht.Record}
	ch, err := s.AdoptTerminal(spec, t, ht.Created)
	if err != nil || len(ht.Overrides) == 0 {
		return err
	}
	var l config.Limits
	names := applyLimits(&l, ht.Overrides)
	if _, _, err := s.UpdateChannelLimits(context.Background(), ch.URI, names, l, false); err != nil {
		return fmt.Errorf("its limits: %w", err)
	}
	return nil
}
