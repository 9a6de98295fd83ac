package service

// The TCP control plane (PROTOCOL.md §8, §10): the allow-list in force,
// where its rules are kept (the config file's tcpAllow key, and the rules
// added at run time in the state directory), and TCP channels created
// over the control socket. docs/protocol-decisions.md, "TCP targets", records the
// decisions.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
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
	// Changed: the rule was added to (AllowTCP) or removed from (DenyTCP)
	// the rules in force; false when it was so already.
	Changed bool
	// Persisted: the files now say the same about the rule (AllowTCP: the
	// state file or the config file holds it; DenyTCP: neither does).
	Persisted bool
	// PersistError says why a file was not written (Persisted false).
	PersistError string
	// ConfigFile is the config file that holds the rule already (AllowTCP)
	// or that the rule was removed from, or could not be (DenyTCP); ""
	// when the config file has nothing to do with the rule.
	ConfigFile string
	// StateFile is the daemon's rules file in its state directory
	// (TCPStateFileName) written with the rule (AllowTCP) or without it
	// (DenyTCP), or that could not be; "" when it was not involved.
	StateFile string
	// Hint, for a name rule, names the addresses the name resolves to and
	// the address rule a dial needs too.
	Hint string
}

// ErrTCPRuleNotFound: DenyTCP of a rule that is neither in force nor in
// a file.
var ErrTCPRuleNotFound = errors.New("tcp rule not found")

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

// AllowTCP adds a rule to the allow-list, at once, and to the daemon's
// state file (never to a config file: a rule added at run time is this
// daemon's, docs/protocol-decisions.md "TCP targets"). A rule the config
// file holds already is not written again.
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
	c := TCPRuleChange{Rule: r, Changed: s.tcpAllow.Add(r), Persisted: true}
	switch {
	case slices.Contains(s.tcpConfigRules, r):
		c.ConfigFile = s.configPath()
	case s.tcpStateFile == "":
		c.Persisted, c.PersistError = false, "the daemon keeps no state file"
	case !slices.Contains(s.tcpStateRules, r):
		c.StateFile = s.tcpStateFile
		rules := append(slices.Clone(s.tcpStateRules), r)
		if err := saveTCPState(s.tcpStateFile, rules); err != nil {
			c.Persisted, c.PersistError = false, err.Error()
		} else {
			s.tcpStateRules = rules
		}
	default:
		c.StateFile = s.tcpStateFile
	}
	if r.Name != "" {
		c.Hint = s.nameHint(ctx, r)
	}
	s.log.Info("tcp rule allowed", "rule", r.String(), "added", c.Changed, "persisted", c.Persisted,
		"config_file", c.ConfigFile, "state_file", c.StateFile, "err", c.PersistError)
	return c, nil
}

// DenyTCP removes a rule from the allow-list, at once, and from the file
// that holds it: the state file, and the config file the daemon loaded
// when its tcpAllow key holds the rule (that key is rewritten, every other
// line kept). A rule that is neither in force nor in a file is
// ErrTCPRuleNotFound. Channels already dialed are not closed.
func (s *Service) DenyTCP(ctx context.Context, rule string) (TCPRuleChange, error) {
	r, err := parseRule(rule)
	if err != nil {
		return TCPRuleChange{}, err
	}
	s.tcpMu.Lock()
	defer s.tcpMu.Unlock()
	inState, inConfig := slices.Contains(s.tcpStateRules, r), slices.Contains(s.tcpConfigRules, r)
	c := TCPRuleChange{Rule: r, Changed: s.tcpAllow.Remove(r)}
	if !c.Changed && !inState && !inConfig {
		return c, fmt.Errorf("%w: %s is not allowed (ahpctl tcp list shows the rules)", ErrTCPRuleNotFound, r)
	}
	without := func(old []tcp.Rule) []tcp.Rule {
		return slices.DeleteFunc(slices.Clone(old), func(o tcp.Rule) bool { return o == r })
	}
	var errs []string
	if inState {
		c.StateFile = s.tcpStateFile
		rules := without(s.tcpStateRules)
		if err := saveTCPState(s.tcpStateFile, rules); err != nil {
			errs = append(errs, err.Error())
		} else {
			s.tcpStateRules = rules
		}
	}
	if inConfig {
		c.ConfigFile = s.configPath()
		switch {
		case c.ConfigFile == "":
			// Rules given without a file (Options.Config alone): nothing
			// to rewrite.
			s.tcpConfigRules = without(s.tcpConfigRules)
		default:
			if err := config.EditTCPAllow(c.ConfigFile, without); err != nil {
				errs = append(errs, fmt.Sprintf("writing %s: %v", c.ConfigFile, err))
			} else {
				s.tcpConfigRules = without(s.tcpConfigRules)
			}
		}
	}
	c.Persisted = len(errs) == 0
	c.PersistError = strings.Join(errs, "; ")
	s.log.Info("tcp rule denied", "rule", r.String(), "removed", c.Changed, "persisted", c.Persisted,
		"config_file", c.ConfigFile, "state_file", c.StateFile, "err", c.PersistError)
	return c, nil
}

// TCPRules returns the rules in force, in the order they were added, and
// the config file the daemon loaded ("" when none).
func (s *Service) TCPRules(ctx context.Context) ([]tcp.Rule, string) {
	s.tcpMu.Lock()
	defer s.tcpMu.Unlock()
	return s.tcpAllow.Rules(), s.configPath()
}

// TCPRuleListing is the allow-list with where each rule is kept.
type TCPRuleListing struct {
	Rules []tcp.Rule
	// Sources[i] says which files hold Rules[i]: "config", "state",
	// "config,state", or "" (in force only: carried over an upgrade in
	// place, or a write failed).
	Sources []string
	// ConfigFile is the config file the daemon loaded ("" when none);
	// StateFile the rules file in its state directory ("" when none).
	ConfigFile, StateFile string
}

// ListTCPRules returns the rules in force and where each is kept.
func (s *Service) ListTCPRules(ctx context.Context) TCPRuleListing {
	s.tcpMu.Lock()
	defer s.tcpMu.Unlock()
	l := TCPRuleListing{Rules: s.tcpAllow.Rules(), ConfigFile: s.configPath(), StateFile: s.tcpStateFile}
	for _, r := range l.Rules {
		var from []string
		if slices.Contains(s.tcpConfigRules, r) {
			from = append(from, "config")
		}
		if slices.Contains(s.tcpStateRules, r) {
			from = append(from, "state")
		}
		l.Sources = append(l.Sources, strings.Join(from, ","))
	}
	return l
}

// ReloadTCPRules puts in force the rules of the config file just read
// (SIGHUP) and those of the state file, read again, and makes that config
// file the one DenyTCP rewrites (as Options.ConfigFile). A state file
// that cannot be read now keeps the rules it had. It reports whether the
// rules in force changed.
func (s *Service) ReloadTCPRules(ctx context.Context, configFile string, rules []tcp.Rule) bool {
	s.tcpMu.Lock()
	defer s.tcpMu.Unlock()
	if s.tcpStateFile != "" {
		if st, err := loadTCPState(s.tcpStateFile); err != nil {
			s.log.Error("reload: the TCP rules file is kept as it was", "err", err)
		} else {
			s.tcpStateRules = st
		}
	}
	old := s.tcpAllow.Rules()
	s.tcpFile = configFile
	s.tcpConfigRules = slices.Clone(rules)
	s.tcpAllow.Set(mergeRules(rules, s.tcpStateRules))
	return !slices.Equal(old, s.tcpAllow.Rules())
}

// RestoreTCPRules puts in force the rules a previous binary had at an
// upgrade in place (a rule whose file could not be written, or a config
// rule denied while the config file was read-only, included); the files
// the rules are kept in stay this daemon's.
func (s *Service) RestoreTCPRules(rules []tcp.Rule) {
	s.tcpMu.Lock()
	defer s.tcpMu.Unlock()
	s.tcpAllow.Set(rules)
}

// configPath is the config file the daemon loaded, "" when none (or
// --config none). Call with tcpMu held.
func (s *Service) configPath() string {
	if s.tcpFile == "none" {
		return ""
	}
	return s.tcpFile
}

// loadTCPStateAtStart reads the state file into tcpStateRules and puts
// its rules in force after the config file's. A file that cannot be used
// is set aside as FILE.bad, logged, and its rules are not used (fail
// closed: fewer targets, never a rule nobody vouches for).
func (s *Service) loadTCPStateAtStart() {
	if s.tcpStateFile == "" {
		return
	}
	rules, err := loadTCPState(s.tcpStateFile)
	if err != nil {
		bad := s.tcpStateFile + ".bad"
		if rerr := os.Rename(s.tcpStateFile, bad); rerr != nil {
			s.log.Error("TCP rules file not used", "err", err, "set_aside_err", rerr)
		} else {
			s.log.Error("TCP rules file not used; set aside", "err", err, "moved_to", bad)
		}
		return
	}
	s.tcpStateRules = rules
	for _, r := range rules {
		s.tcpAllow.Add(r)
	}
	if len(rules) > 0 {
		s.log.Info("tcp rules kept in the state directory", "file", s.tcpStateFile, "rules", len(rules))
	}
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
