package config

// Rewriting the tcpAllow key of a config file, for `ahpctl tcp deny` of a
// rule that file holds (docs/protocol-decisions.md, "TCP targets"): the
// key's `key = value` text is replaced and every other byte of the file is
// kept. Rules added at run time are never written to a config file.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/ahp-dev/ahpd/tcp"
)

// TCPAllowKey is the config file key of the TCP allow-list.
const TCPAllowKey = "tcpAllow"

// MaxTCPRules bounds the rules of the TCP allow-list, in the file and at
// run time.
const MaxTCPRules = 1024

// EditTCPAllow rewrites the tcpAllow key of the config file at path. edit
// gets the rules the file holds now (none when the file or the key is
// absent) and returns those to write. The file must parse as ahpd's
// config: a file with an error is left alone, and the error names its
// line. The key's text is replaced in place (a comment after it is kept,
// comments inside its array are not); a file without the key gets it
// appended; a missing file is created (mode 0644) in its directory, which
// must exist.
//
// The new file is written to a temporary file in the same directory, given
// the old file's mode (and owner, where the process may set it), synced
// and renamed over the old one, so a reader sees the old file or the new
// one, never a part. A symbolic link is followed: its target is replaced.
// EditTCPAllow does not serialize concurrent callers.
func EditTCPAllow(path string, edit func([]tcp.Rule) []tcp.Rule) error {
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		real, err = path, nil
	}
	if err != nil {
		return err
	}
	var text string
	fi, err := os.Stat(real)
	switch {
	case err == nil:
		b, err := os.ReadFile(real)
		if err != nil {
			return err
		}
		if len(b) > maxConfigBytes {
			return &FileError{Path: path, Reason: fmt.Sprintf("larger than %d bytes", maxConfigBytes)}
		}
		text = string(b)
	case errors.Is(err, fs.ErrNotExist):
		fi = nil
	default:
		return err
	}
	text, err = rewriteTCPAllow(path, text, edit)
	if err != nil {
		return err
	}
	return replaceFile(real, []byte(text), fi)
}

// rewriteTCPAllow returns text, a config file's contents (path names it
// in errors), with its tcpAllow key set to what edit returns for the
// rules it holds now.
func rewriteTCPAllow(path, text string, edit func([]tcp.Rule) []tcp.Rule) (string, error) {
	// parseConfig drops a byte order mark, and its offsets do not count it.
	bom := strings.HasPrefix(text, "\ufeff")
	text = strings.TrimPrefix(text, "\ufeff")
	cf, err := parseConfig(path, text)
	if err != nil {
		return "", fmt.Errorf("not rewriting a config file with an error: %w", err)
	}
	old, entry, err := tcpAllowOf(cf)
	if err != nil {
		return "", err
	}
	rules := edit(slices.Clone(old))
	if len(rules) > MaxTCPRules {
		return "", fmt.Errorf("%s: more than %d rules", TCPAllowKey, MaxTCPRules)
	}
	value := formatTCPAllow(rules)
	if entry >= 0 {
		e := cf.Entries[entry]
		text = text[:e.Start] + value + text[e.End:]
	} else {
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		if text != "" {
			text += "\n"
		}
		text += "# TCP targets ahpd may dial; `ahpctl tcp deny` rewrites this key.\n" + value + "\n"
	}
	if len(text) > maxConfigBytes {
		return "", fmt.Errorf("the file would be larger than %d bytes", maxConfigBytes)
	}
	// The text must read back as written, or it is not written.
	cf, err = parseConfig(path, text)
	if err != nil {
		return "", fmt.Errorf("rewriting %s: %w", TCPAllowKey, err)
	}
	if back, _, err := tcpAllowOf(cf); err != nil || !slices.Equal(back, rules) {
		return "", fmt.Errorf("rewriting %s: the file does not read back as written", TCPAllowKey)
	}
	if bom {
		text = "\ufeff" + text
	}
	return text, nil
}

// tcpAllowOf returns the rules of cf's tcpAllow key and the index of its
// entry (-1: the key is absent).
func tcpAllowOf(cf *configFile) ([]tcp.Rule, int, error) {
	for i, e := range cf.Entries {
		if e.Key == TCPAllowKey {
			var s Settings
			k, _ := findConfigKey(TCPAllowKey)
			if err := k.set(&s, e); err != nil {
				return nil, -1, &FileError{Path: cf.Path, Line: e.Line, Key: e.Key, Reason: err.Error()}
			}
			return s.TCPAllow, i, nil
		}
	}
	return nil, -1, nil
}

// formatTCPAllow writes the key: one line for up to one rule, else a rule
// per line.
func formatTCPAllow(rules []tcp.Rule) string {
	if len(rules) <= 1 {
		if len(rules) == 0 {
			return TCPAllowKey + " = []"
		}
		return TCPAllowKey + ` = ["` + rules[0].String() + `"]`
	}
	var b strings.Builder
	b.WriteString(TCPAllowKey + " = [\n")
	for _, r := range rules {
		// Canonical rules are letters, digits and ".:-/[]": nothing to
		// escape.
		b.WriteString(`  "` + r.String() + "\",\n")
	}
	b.WriteString("]")
	return b.String()
}

// replaceFile writes data to path through a temporary file in its
// directory, renamed over it. old is the file's FileInfo, nil for a new
// file.
func replaceFile(path string, data []byte, old fs.FileInfo) error {
	dir := filepath.Dir(path)
	mode := fs.FileMode(0o644)
	if old != nil {
		mode = old.Mode().Perm()
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		return err
	}
	if old != nil {
		if sys, ok := old.Sys().(*syscall.Stat_t); ok && (int(sys.Uid) != os.Geteuid() || int(sys.Gid) != os.Getegid()) {
			// Keep the owner where we may (root may; others may only
			// keep their own uid and set a group they are in).
			_ = tmp.Chown(int(sys.Uid), int(sys.Gid))
		}
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	done = true
	// The rename is durable once the directory is synced; a failure here
	// leaves the new file in place, so it is not reported.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
