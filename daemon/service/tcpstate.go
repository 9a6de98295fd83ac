package service

// The TCP rules a daemon adds at run time (`ahpctl tcp allow`) are its own
// state, kept in its state directory beside tokens.json, never in a config
// file: a config file is the operator's, and a per-user one is read by
// every later daemon of that user (docs/protocol-decisions.md, "TCP
// targets"). The file is written whole to a temporary file in the same
// directory (mode 0600), synced and renamed over the old one, so a reader
// sees the old file or the new, never a part.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/internal/atomicfile"
	"github.com/ahp-dev/ahpd/tcp"
)

const (
	// TCPStateFileName is the file in the state directory holding the
	// rules added at run time.
	TCPStateFileName  = "tcp-allow.json"
	tcpStateVersion   = 1
	maxTCPStateBytes  = 1 << 20
	tcpStateFileTitle = "TCP rules file"
)

// tcpStateFile is the file's contents.
type tcpStateFile struct {
	Version int      `json:"version"`
	Rules   []string `json:"rules"`
}

// loadTCPState reads the rules of the state file at path: none when it is
// absent. A file that is not ours to trust (a symlink, not a regular file,
// another owner, access by group or others) or does not parse is an
// error, and its rules are not used.
func loadTCPState(path string) ([]tcp.Rule, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil
	case errors.Is(err, syscall.ELOOP):
		return nil, fmt.Errorf("%s %s: is a symlink; not trusting it (remove it)", tcpStateFileTitle, path)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", tcpStateFileTitle, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tcpStateFileTitle, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s %s: not a regular file; not trusting it (remove it)", tcpStateFileTitle, path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("%s %s: owned by uid %d, not by this user; not trusting it (remove it)", tcpStateFileTitle, path, st.Uid)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%s %s: mode %v lets group or others in; not trusting it (chmod 600 %s)", tcpStateFileTitle, path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTCPStateBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", tcpStateFileTitle, path, err)
	}
	if len(b) > maxTCPStateBytes {
		return nil, fmt.Errorf("%s %s: larger than %d bytes", tcpStateFileTitle, path, maxTCPStateBytes)
	}
	rules, err := decodeTCPState(b)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", tcpStateFileTitle, path, err)
	}
	return rules, nil
}

// decodeTCPState parses a state file strictly: version 1, no unknown
// member, every rule valid, at most config.MaxTCPRules; duplicates are
// dropped.
func decodeTCPState(b []byte) ([]tcp.Rule, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var sf tcpStateFile
	if err := dec.Decode(&sf); err != nil {
		return nil, fmt.Errorf("not a rules file: %v", err)
	}
	if dec.More() {
		return nil, errors.New("not a rules file: data after the object")
	}
	if sf.Version != tcpStateVersion {
		return nil, fmt.Errorf("version %d, this ahpd reads version %d", sf.Version, tcpStateVersion)
	}
	if len(sf.Rules) > config.MaxTCPRules {
		return nil, fmt.Errorf("more than %d rules", config.MaxTCPRules)
	}
	var rules []tcp.Rule
	for i, s := range sf.Rules {
		r, err := tcp.ParseRule(s)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %v", i, err)
		}
		rules = appendRule(rules, r)
	}
	return rules, nil
}

// saveTCPState replaces the state file at path with rules.
func saveTCPState(path string, rules []tcp.Rule) error {
	sf := tcpStateFile{Version: tcpStateVersion, Rules: make([]string, 0, len(rules))}
	for _, r := range rules {
		sf.Rules = append(sf.Rules, r.String())
	}
	data, err := json.MarshalIndent(sf, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if err := atomicfile.Write(path, data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// appendRule appends r to rules unless it is there already.
func appendRule(rules []tcp.Rule, r tcp.Rule) []tcp.Rule {
	for _, o := range rules {
		if o == r {
			return rules
		}
	}
	return append(rules, r)
}

// mergeRules is a's rules, then those of b that a lacks.
func mergeRules(a, b []tcp.Rule) []tcp.Rule {
	out := make([]tcp.Rule, 0, len(a)+len(b))
	for _, r := range a {
		out = appendRule(out, r)
	}
	for _, r := range b {
		out = appendRule(out, r)
	}
	return out
}
