package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ahp-dev/ahpd/daemon"
	"github.com/ahp-dev/ahpd/internal/handover"
	"github.com/ahp-dev/ahpd/pty"
	"github.com/ahp-dev/ahpd/tcp"
	"github.com/ahp-dev/ahpd/telemetry"
	"golang.org/x/sys/unix"
)

// frozenTerminal returns the Freeze state of a real terminal (its
// process is hung up when the test ends).
func frozenTerminal(t *testing.T) []byte {
	t.Helper()
	term, err := pty.Start(pty.Config{Command: []string{"/bin/sh", "-c", "echo hello; exec sleep 60"}})
	if err != nil {
		t.Fatal(err)
	}
	fr, err := term.Freeze()
	if err != nil {
		t.Fatal(err)
	}
	// Not adopted: carry it on here and close it, which hangs it up.
	next, err := pty.Adopt(pty.Config{}, fr.Master, fr.Pid, fr.State)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { next.Close() })
	return fr.State
}

// checkState runs ahpd --upgrade-check on a state of the given sections
// (in order) and returns its exit status and output.
func checkState(t *testing.T, body []byte) (int, string) {
	t.Helper()
	f, err := handover.Sealed("test-state", body)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// takeState takes the descriptor: give it one of its own.
	fd, err := dupFD(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(envState, strconv.Itoa(fd))
	var out strings.Builder
	code := Main([]string{"--upgrade-check", "--config", "none"}, &out)
	return code, out.String()
}

func stateOf(t *testing.T, sections ...[2]any) []byte {
	t.Helper()
	var w handover.Writer
	for _, s := range sections {
		var b []byte
		switch v := s[1].(type) {
		case []byte:
			b = v
		default:
			b, _ = json.Marshal(v)
		}
		if err := w.Section(s[0].(string), b); err != nil {
			t.Fatal(err)
		}
	}
	return w.Bytes()
}

// TestUpgradeCheck: ahpd --upgrade-check takes a state it can read (exit
// 0), and refuses, naming why (exit 1), one that is corrupt, truncated,
// of another version, or whose terminal state is damaged.
func TestUpgradeCheck(t *testing.T) {
	d := handedDaemon{Version: daemonVersion, Started: time.Now(), From: "ahpd test", HTTPFD: -1, ControlFD: -1}
	terms := func(ptyVersion int, ids ...string) map[string]any {
		var list []map[string]any
		for _, id := range ids {
			list = append(list, map[string]any{"id": id, "pid": 1, "fd": 3})
		}
		return map[string]any{"version": daemon.ChannelsVersion(), "ptyVersion": ptyVersion, "telemetryVersion": telemetry.HandoverVersion(), "terminals": list}
	}
	with := func(m map[string]any, k string, v any) map[string]any { m[k] = v; return m }
	tcpChannel := with(with(terms(pty.HandoverVersion()), "tcpVersion", tcp.HandoverVersion()), "tcp",
		[]map[string]any{{"id": "x", "params": map[string]any{"type": "tcp", "host": "127.0.0.1", "port": 80}, "fd": 3}})
	good := frozenTerminal(t)
	bad := good[:len(good)-5] // the emulator's state cut short
	newer := d
	newer.Version = daemonVersion + 1
	valid := stateOf(t, [2]any{sectionDaemon, d}, [2]any{daemon.SectionChannels, terms(pty.HandoverVersion(), "a")}, [2]any{"terminal/0", good})
	for _, c := range []struct {
		name  string
		state []byte
		code  int
		want  string
	}{
		{"valid", valid, 0, "takes state version 1"},
		{"no terminals", stateOf(t, [2]any{sectionDaemon, d}), 0, "takes state version 1"},
		{"truncated", valid[:len(valid)-10], 1, "truncated"},
		{"corrupt", append(append([]byte(nil), valid[:len(valid)-1]...), valid[len(valid)-1]^1), 1, "checksum"},
		{"newer daemon state", stateOf(t, [2]any{sectionDaemon, newer}), 1, "daemon state version 2, this ahpd reads version 1"},
		{"newer terminal state", stateOf(t, [2]any{sectionDaemon, d}, [2]any{daemon.SectionChannels, terms(pty.HandoverVersion() + 1)}), 1, "terminal state version 2, this ahpd reads version 1"},
		{"damaged terminal", stateOf(t, [2]any{sectionDaemon, d}, [2]any{daemon.SectionChannels, terms(pty.HandoverVersion(), "b")}, [2]any{"terminal/0", bad}), 1, "terminal b: pty: hand-over state"},
		{"missing terminal", stateOf(t, [2]any{sectionDaemon, d}, [2]any{daemon.SectionChannels, terms(pty.HandoverVersion(), "c")}), 1, "terminal c: no state section"},
		{"no daemon section", stateOf(t, [2]any{daemon.SectionChannels, terms(pty.HandoverVersion())}), 1, "no daemon section"},
		{"channels of version 1 (no TCP)", stateOf(t, [2]any{sectionDaemon, d}, [2]any{daemon.SectionChannels, with(terms(pty.HandoverVersion()), "version", 1)}), 0, "takes state version 1"},
		{"newer channels", stateOf(t, [2]any{sectionDaemon, d}, [2]any{daemon.SectionChannels, with(terms(pty.HandoverVersion()), "version", daemon.ChannelsVersion()+1)}), 1, "channels state version 3, this ahpd reads versions 1–2"},
		{"newer TCP state", stateOf(t, [2]any{sectionDaemon, d}, [2]any{daemon.SectionChannels, with(terms(pty.HandoverVersion()), "tcpVersion", tcp.HandoverVersion()+1)}), 1, "TCP channel state version 2, this ahpd reads version 1"},
		{"damaged TCP channel", stateOf(t, [2]any{sectionDaemon, d}, [2]any{daemon.SectionChannels, tcpChannel}, [2]any{"tcp/0", []byte{1, 0}}), 1, "tcp x: tcp: hand-over state"},
		{"missing TCP channel", stateOf(t, [2]any{sectionDaemon, d}, [2]any{daemon.SectionChannels, tcpChannel}), 1, "tcp x: no state section"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out := checkState(t, c.state)
			if code != c.code || !strings.Contains(out, c.want) {
				t.Fatalf("exit %d, output %q; want %d and %q", code, out, c.code, c.want)
			}
		})
	}
	t.Run("no state", func(t *testing.T) {
		var out strings.Builder
		if code := Main([]string{"--upgrade-check", "--config", "none"}, &out); code != 1 || !strings.Contains(out.String(), "no state") {
			t.Fatalf("exit %d, output %q", code, out.String())
		}
	})
}

// dupFD returns a close-on-exec duplicate of fd.
func dupFD(fd int) (int, error) {
	return unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
}
