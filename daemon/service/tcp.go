package service

// The TCP control plane (PROTOCOL.md §8, §10): the allow-list in force,
// its persistence in the config file, and TCP channels created over the
// control socket. docs/protocol-decisions.md, "TCP targets", records the
// decisions.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ahp-dev/ahpd/daemon/config"
	"github.com/ahp-dev/ahpd/daemon/registry"
	"github.com/ahp-dev/ahpd/daemon/session"
	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/internal/fds"
	"github.com/ahp-dev/ahpd/tcp"
)

// hintLookupTimeout bounds the name lookup of AllowTCP's hint.
const hintLookupTimeout = 2 * time.Second

// TCPRuleChange is the result of AllowTCP and DenyTCP.
type TCPRuleChange struct {
	Rule tcp.Rule
	// Changed: the rule was added (AllowTCP) or removed (DenyTCP); false
	// when it was so already.
	Changed bool
	// Persisted: the config file now says the same about the rule.
	Persisted bool
	// PersistError says why the file was not written (Persisted false).
	PersistError string
	// ConfigFile is the file written, or that could not be; "" for
	// --config none.
	ConfigFile string
	// Hint, for a name rule, names the addresses the name resolves to and
	// the address rule a dial needs too.
	Hint string
}

// TCPAllowList is the allow-list in force, which the "tcp" Creator checks.
func (s *Service) TCPAllowList() *tcp.AllowList { return s.tcpAllow }

// parseRule parses a control-plane rule, as an *ArgError when bad.
func parseRule(rule string) (tcp.Rule, error) {
	r, err := tcp.ParseRule(strings.TrimSpace(rule))
	if err != nil {
		return tcp.Rule{}, argErr("rule", "%v", err)
	}
	return r, nil
}

// AllowTCP adds a rule to the allow-list, at once, and to the tcpAllow key
// of the config file.
func (s *Service) AllowTCP(ctx context.Context, rule string) (TCPRuleChange, error) {
	r, err := parseRule(rule)
	if err != nil {
		return TCPRuleChange{}, err
	}
	s.tcpMu.Lock()
	defer s.tcpMu.Unlock()
	if len(s.tcpAllow.Rules()) >= config.MaxTCPRules && !slices.Contains(s.tcpAllow.Rules(), r) {
		return TCPRuleChange{}, fmt.Errorf("%w: %d TCP rules (the maximum); deny one first", ErrTooMany, config.MaxTCPRules)
	}
	c := TCPRuleChange{Rule: r, Changed: s.tcpAllow.Add(r)}
	// The file gets the rule even when the daemon had it already: it may
	// be missing there (an earlier write failed, the file was edited).
	c.ConfigFile, err = s.persistTCP(func(old []tcp.Rule) []tcp.Rule {
		if slices.Contains(old, r) {
			return old
		}
		return append(old, r)
	})
	c.Persisted = err == nil
	if err != nil {
		c.PersistError = err.Error()
	}
	if r.Name != "" {
		c.Hint = s.nameHint(ctx, r)
	}
	s.log.Info("tcp rule allowed", "rule", r.String(), "added", c.Changed, "persisted", c.Persisted, "file", c.ConfigFile, "err", c.PersistError)
	return c, nil
}

// DenyTCP removes a rule from the allow-list, at once, and from the
// tcpAllow key of the config file. Channels already dialed are not closed.
func (s *Service) DenyTCP(ctx context.Context, rule string) (TCPRuleChange, error) {
	r, err := parseRule(rule)
	if err != nil {
		return TCPRuleChange{}, err
	}
	s.tcpMu.Lock()
	defer s.tcpMu.Unlock()
	c := TCPRuleChange{Rule: r, Changed: s.tcpAllow.Remove(r)}
	c.ConfigFile, err = s.persistTCP(func(old []tcp.Rule) []tcp.Rule {
		return slices.DeleteFunc(old, func(o tcp.Rule) bool { return o == r })
	})
	c.Persisted = err == nil
	if err != nil {
		c.PersistError = err.Error()
	}
	s.log.Info("tcp rule denied", "rule", r.String(), "removed", c.Changed, "persisted", c.Persisted, "file", c.ConfigFile, "err", c.PersistError)
	return c, nil
}

// TCPRules returns the rules in force, in the order they were added, and
// the config file AllowTCP and DenyTCP rewrite ("" for --config none; for
// a daemon that loaded no file, the one they would create).
func (s *Service) TCPRules(ctx context.Context) ([]tcp.Rule, string) {
	s.tcpMu.Lock()
	defer s.tcpMu.Unlock()
	return s.tcpAllow.Rules(), s.persistPath()
}

// ReloadTCPRules replaces the rules in force with those of the config
// file just read (SIGHUP), and makes that file the one AllowTCP and DenyTCP
// rewrite (as Options.ConfigFile). It reports whether the rules changed.
func (s *Service) ReloadTCPRules(ctx context.Context, configFile string, rules []tcp.Rule) bool {
	s.tcpMu.Lock()
	defer s.tcpMu.Unlock()
	old := s.tcpAllow.Rules()
	s.tcpAllow.Set(rules)
	s.tcpFile = configFile
	return !slices.Equal(old, s.tcpAllow.Rules())
}

// RestoreTCPRules puts in force the rules a previous binary had at an
// upgrade in place (rules added with --config none, or not yet saved,
// included); the config file AllowTCP and DenyTCP write stays this
// daemon's.
func (s *Service) RestoreTCPRules(rules []tcp.Rule) {
	s.tcpMu.Lock()
	defer s.tcpMu.Unlock()
	s.tcpAllow.Set(rules)
}

// persistPath is the file persistTCP writes: the one the daemon loaded,
// else the per-user default; "" for --config none. Call with tcpMu held.
func (s *Service) persistPath() string {
	switch s.tcpFile {
	case "none":
		return ""
	case "":
		return config.UserPath()
	}
	return s.tcpFile
}

// persistTCP applies edit to the tcpAllow key of the config file (see
// persistPath) and returns the file's path. Call with tcpMu held.
func (s *Service) persistTCP(edit func([]tcp.Rule) []tcp.Rule) (string, error) {
	path := s.persistPath()
	switch {
	case s.tcpFile == "none":
		return "", errors.New("the daemon runs with --config none: no config file to write")
	case path == "":
		return "", errors.New("the daemon loaded no config file and has no home directory to create one in")
	}
	if s.tcpFile == "" {
		// The per-user directory (~/.config/ahpd) may not exist yet.
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return path, fmt.Errorf("writing %s: %w", path, err)
		}
	}
	if err := config.EditTCPAllow(path, edit); err != nil {
		return path, fmt.Errorf("writing %s: %w", path, err)
	}
	// A file just created is the one to rewrite from now on, and the one
	// the next start finds.
	s.tcpFile = path
	return path, nil
}

// nameHint says what a name rule needs beside it: the addresses the name
// resolves to now must be admitted by address rules too (tcp.AllowList).
// It is "" when they all are.
func (s *Service) nameHint(ctx context.Context, r tcp.Rule) string {
	port := strconv.Itoa(int(r.Lo))
	target := r.Name + ":" + port
	ctx, cancel := context.WithTimeout(ctx, hintLookupTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", r.Name)
	if err != nil || len(addrs) == 0 {
		return fmt.Sprintf("%s does not resolve now; names resolve when a channel dials, and each address needs an address rule too (ahpctl tcp allow ADDR:%s)", target, port)
	}
	var shown, missing []string
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a.Unmap(), r.Lo)
		host := ap.Addr().String()
		if ap.Addr().Is6() {
			host = "[" + host + "]"
		}
		if slices.Contains(shown, host) {
			continue
		}
		shown = append(shown, host)
		if s.tcpAllow.CheckAddr(r.Name, ap) != nil {
			missing = append(missing, ap.String())
		}
	}
	if len(missing) == 0 {
		return ""
	}
	hint := fmt.Sprintf("%s resolves to %s; dials need an address rule too: ahpctl tcp allow %s", target, strings.Join(shown, ", "), missing[0])
	if len(missing) > 1 {
		hint += " (and for the other addresses: ahpctl tcp allow " + strings.Join(missing[1:], " ") + ")"
	}
	return hint
}

// dialWaiter is implemented by channels that dial (a tcp.Channel).
type dialWaiter interface {
	WaitDialed(ctx context.Context) error
}

// CreateTCP creates a TCP channel to host:port with the "tcp" Creator, the
// same as subscribe {create:{type:"tcp"}}, under id (a generated one when
// empty), and waits until it is connected. A refused target (an
// *flow.Error -32003 naming it), a failed dial (-32008, which closes the
// channel) and a caller that gives up end it without a channel.
func (s *Service) CreateTCP(ctx context.Context, host string, port int, id string) (*registry.Channel, error) {
	if port < 1 || port > 65535 {
		return nil, argErr("port", "want 1–65535, got %d", port)
	}
	if host == "" {
		return nil, argErr("host", "must not be empty")
	}
	if err := ctx.Err(); err != nil {
		return nil, err // the caller gave up: dial nothing
	}
	params, err := json.Marshal(struct {
		Type string `json:"type"`
		Host string `json:"host"`
		Port int    `json:"port"`
	}{"tcp", strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), port})
	if err != nil {
		return nil, err
	}
	ch, err := s.createChannel("control", "tcp", id, params, session.Owner{})
	if err != nil {
		return nil, err
	}
	if w, ok := ch.Impl().(dialWaiter); ok {
		if err := w.WaitDialed(ctx); err != nil {
			_ = s.CloseChannel(ch.URI)
			return nil, err
		}
	}
	return ch, nil
}

// TCPStats are the daemon's TCP figures, for /metrics.
type TCPStats struct {
	Channels int64 // TCP channels in the registry
	// BytesIn, BytesOut and Resumes sum over every TCP channel since the
	// start, those that ended included: they never decrease.
	BytesIn, BytesOut, Resumes int64
}

func (t *TCPStats) add(i tcp.Info) {
	t.BytesIn += i.BytesIn
	t.BytesOut += i.BytesOut
	t.Resumes += i.Resumes
}

// TCPStats returns the daemon's TCP figures.
func (s *Service) TCPStats(ctx context.Context) TCPStats {
	s.tcpStatsMu.Lock()
	defer s.tcpStatsMu.Unlock()
	st := s.tcpEnded
	st.Channels = 0
	for _, ch := range s.registry.List() {
		if t, ok := ch.Impl().(tcpInfoer); ok {
			st.Channels++
			st.add(t.Info())
		}
	}
	return st
}

// fdReserve is how many descriptors TCP channels leave free: when
// no more than this many are left below the process's limit, a TCP
// channel is refused, so that terminals (a PTY takes two), viewer
// connections and the operator's own still open.
const fdReserve = 64

// takeSlot counts a channel of type typ being created for token: a TCP
// channel against maxTcpChannels and maxTcpChannelsPerToken, after the
// descriptor reserve is checked. release gives the count back, once; it
// does nothing for other kinds, which are not counted here.
func (s *Service) takeSlot(typ, token string) (release func(), err error) {
	if typ != "tcp" {
		return func() {}, nil
	}
	l := s.Limits()
	if open, limit, err := fds.Open(); err == nil && uint64(open+fdReserve) >= limit {
		s.log.Warn("TCP channel refused: descriptor reserve", "open", open, "limit", limit, "reserve", fdReserve)
		return nil, &flow.Error{Code: flow.ErrCodeLimitExceeded, Message: fmt.Sprintf("limit exceeded: %d of the daemon's %d file descriptors are open, and TCP channels leave the last %d to terminals and connections; close channels or raise the daemon's LimitNOFILE", open, limit, fdReserve)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tcpCount >= l.MaxTCPChannels {
		return nil, &flow.Error{Code: flow.ErrCodeLimitExceeded, Message: fmt.Sprintf("limit exceeded: %d TCP channels (maxTcpChannels); close one or let a retained one expire (tcpRetain)", l.MaxTCPChannels)}
	}
	if token != "" && s.tcpByToken[token] >= l.MaxTCPChannelsPerToken {
		return nil, &flow.Error{Code: flow.ErrCodeLimitExceeded, Message: fmt.Sprintf("limit exceeded: %d TCP channels for this token (maxTcpChannelsPerToken); close one or let a retained one expire (tcpRetain)", l.MaxTCPChannelsPerToken)}
	}
	return s.countTCPLocked(token), nil
}

// countTCP counts a TCP channel of token in maxTcpChannels and
// maxTcpChannelsPerToken without checking them (an adopted channel), and
// returns what gives the count back, once.
func (s *Service) countTCP(token string) (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.countTCPLocked(token)
}

func (s *Service) countTCPLocked(token string) (release func()) {
	s.tcpCount++
	if token != "" {
		s.tcpByToken[token]++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.tcpCount--
			if token != "" {
				if s.tcpByToken[token]--; s.tcpByToken[token] <= 0 {
					delete(s.tcpByToken, token)
				}
			}
		})
	}
}
