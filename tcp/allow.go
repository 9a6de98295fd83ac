package tcp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Rule admits TCP targets (PROTOCOL.md §8): a host name with one port, an
// address with one port, or a CIDR prefix with a port range.
//
//	localhost:3000        a name (matched case-insensitively)
//	127.0.0.1:8080        an address
//	[::1]:8080            an IPv6 address
//	10.0.0.0/8:80-443     a prefix and an inclusive port range
//	127.0.0.1:1-65535     an address, every port
//
// Targets are matched as IPv4 when they are IPv4-mapped IPv6 addresses
// (::ffff:a.b.c.d), and so are rules: an IPv4-mapped address or prefix
// becomes the IPv4 one it maps (::ffff:127.0.0.0/104 is 127.0.0.0/8, the
// IPv4 length being the IPv6 one less 96), and a mapped prefix shorter
// than /96, which would span IPv6 addresses that map nothing, is refused.
// An IPv6 prefix never admits an IPv4 target.
//
// The unspecified addresses 0.0.0.0 and :: are admitted only by a rule
// that names that one address (0.0.0.0:P, [::]:P, or a /32 or /128 of
// it): dialing them reaches this host, so a prefix that merely contains
// them (0.0.0.0/0, ::/0, ::ffff:0:0/96) does not.
type Rule struct {
	Name   string       // a host name, lower case; "" for an address rule
	Prefix netip.Prefix // the addresses of an address rule
	Lo, Hi uint16       // the inclusive port range
}

// ParseRule parses a rule; the error says what is wrong with it.
func ParseRule(s string) (Rule, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return Rule{}, fmt.Errorf("tcp rule %q: want HOST:PORT, ADDR:PORT or CIDR:PORT-PORT", s)
	}
	host, ports := s[:i], s[i+1:]
	var r Rule
	var err error
	if r.Lo, r.Hi, err = parsePorts(ports); err != nil {
		return Rule{}, fmt.Errorf("tcp rule %q: %v", s, err)
	}
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	} else if strings.Contains(host, ":") && !strings.Contains(host, "/") {
		return Rule{}, fmt.Errorf("tcp rule %q: an IPv6 address goes in brackets: [ADDR]:PORT", s)
	}
	switch {
	case host == "":
		return Rule{}, fmt.Errorf("tcp rule %q: no host", s)
	case strings.Contains(host, "/"):
		p, err := netip.ParsePrefix(host)
		if err != nil {
			return Rule{}, fmt.Errorf("tcp rule %q: %q is not a CIDR prefix", s, host)
		}
		if p.Addr().Is4In6() {
			if p.Bits() < 96 {
				return Rule{}, fmt.Errorf("tcp rule %q: %s is an IPv4-mapped prefix shorter than /96, which spans addresses that map no IPv4 one: write the IPv4 prefix (the mapped one's length less 96)", s, host)
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		r.Prefix = p.Masked()
	default:
		if a, err := netip.ParseAddr(strings.TrimSuffix(host, ".")); err == nil { // "127.0.0.1." is the address
			if a.Zone() != "" {
				return Rule{}, fmt.Errorf("tcp rule %q: an address with a zone cannot be allowed", s)
			}
			r.Prefix = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
			break
		}
		if !validName(host) {
			return Rule{}, fmt.Errorf("tcp rule %q: %q is neither an address nor a host name", s, host)
		}
		if r.Lo != r.Hi {
			return Rule{}, fmt.Errorf("tcp rule %q: a host name takes one port, not a range", s)
		}
		r.Name = strings.ToLower(strings.TrimSuffix(host, "."))
	}
	return r, nil
}

func parsePorts(s string) (lo, hi uint16, err error) {
	a, b, isRange := strings.Cut(s, "-")
	if lo, err = parsePort(a); err != nil {
		return 0, 0, err
	}
	hi = lo
	if isRange {
		if hi, err = parsePort(b); err != nil {
			return 0, 0, err
		}
		if hi < lo {
			return 0, 0, fmt.Errorf("port range %s is empty", s)
		}
	}
	return lo, hi, nil
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("port %q: want 1–65535", s)
	}
	return uint16(n), nil
}

// validName accepts DNS host names: labels of letters, digits and
// hyphens (and underscores, which some service names use).
func validName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// String is the rule's canonical form, which ParseRule reads back.
func (r Rule) String() string {
	ports := strconv.Itoa(int(r.Lo))
	if r.Hi != r.Lo {
		ports += "-" + strconv.Itoa(int(r.Hi))
	}
	if r.Name != "" {
		return r.Name + ":" + ports
	}
	host := r.Prefix.String()
	if r.Prefix.IsSingleIP() {
		host = r.Prefix.Addr().String()
	}
	if r.Prefix.Addr().Is6() {
		host = "[" + host + "]"
	}
	return host + ":" + ports
}

func (r Rule) hasPort(p uint16) bool { return p >= r.Lo && p <= r.Hi }

// AllowList is the set of rules that admit TCP targets. Everything it
// does not admit is refused: ahpd is not an open proxy. Safe for
// concurrent use.
//
// A target is admitted in two steps. Before dialing, the requested host
// and port must match a rule: a name rule for a name, an address rule for
// an address. Names resolve at dial time, and every address the dial
// tries must match an address rule too — a name rule alone never lets a
// name that resolves (or is made to resolve) elsewhere reach an address
// the operator did not allow. So `localhost:3000` needs `127.0.0.1:3000`
// (or `[::1]:3000`) beside it; docs/protocol-decisions.md, "TCP targets".
type AllowList struct {
	mu    sync.RWMutex
	rules []Rule
}

// NewAllowList returns a list holding rules (duplicates dropped).
func NewAllowList(rules []Rule) *AllowList {
	a := &AllowList{}
	a.Set(rules)
	return a
}

// ErrNotAllowed is the error of a target no rule admits.
var ErrNotAllowed = errors.New("not allowed")

// Set replaces the rules.
func (a *AllowList) Set(rules []Rule) {
	var out []Rule
	for _, r := range rules {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	a.mu.Lock()
	a.rules = out
	a.mu.Unlock()
}

// Add adds a rule; false when it was there already.
func (a *AllowList) Add(r Rule) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if slices.Contains(a.rules, r) {
		return false
	}
	a.rules = append(a.rules, r)
	return true
}

// Remove removes a rule; false when it was not there.
func (a *AllowList) Remove(r Rule) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	i := slices.Index(a.rules, r)
	if i < 0 {
		return false
	}
	a.rules = slices.Delete(a.rules, i, i+1)
	return true
}

// Rules returns a copy of the rules, in the order they were added.
func (a *AllowList) Rules() []Rule {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return slices.Clone(a.rules)
}

// Check admits a requested target (host as given: a name or an address).
// The error wraps ErrNotAllowed and names the target.
func (a *AllowList) Check(host string, port uint16) error {
	target := net.JoinHostPort(host, strconv.Itoa(int(port)))
	if addr, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if a.admits(addr.Unmap(), port) {
			return nil
		}
		return fmt.Errorf("%w: tcp target %s (allow it with: ahpctl tcp allow %s)", ErrNotAllowed, target, target)
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	a.mu.RLock()
	defer a.mu.RUnlock()
	for _, r := range a.rules {
		if r.Name != "" && r.Name == name && r.hasPort(port) {
			return nil
		}
	}
	return fmt.Errorf("%w: tcp target %s (allow it with: ahpctl tcp allow %s)", ErrNotAllowed, target, target)
}

// CheckAddr admits an address a name resolved to, at dial time.
func (a *AllowList) CheckAddr(host string, addr netip.AddrPort) error {
	if a.admits(addr.Addr().Unmap(), addr.Port()) {
		return nil
	}
	ap := netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port()).String()
	return fmt.Errorf("%w: tcp target %s resolved to %s, which no address rule admits (allow it with: ahpctl tcp allow %s)",
		ErrNotAllowed, net.JoinHostPort(host, strconv.Itoa(int(addr.Port()))), ap, ap)
}

func (a *AllowList) admits(addr netip.Addr, port uint16) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	for _, r := range a.rules {
		if r.admits(addr, port) {
			return true
		}
	}
	return false
}

// admits reports whether an address rule admits addr (unmapped) and port:
// an unspecified address only when the rule names it alone (Rule).
func (r Rule) admits(addr netip.Addr, port uint16) bool {
	return r.Name == "" && r.Prefix.Contains(addr) && r.hasPort(port) &&
		(!addr.IsUnspecified() || r.Prefix.IsSingleIP())
}
