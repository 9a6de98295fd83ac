package tcp

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	for _, tc := range []struct{ in, canon, err string }{
		{"127.0.0.1:8080", "127.0.0.1:8080", ""},
		{"[::1]:22", "[::1]:22", ""},
		{"::1:80", "", "brackets"}, // ambiguous without them
		{"[::ffff:127.0.0.1]:80", "127.0.0.1:80", ""},
		{"10.1.2.3/8:80-443", "10.0.0.0/8:80-443", ""},
		{"LocalHost.:3000", "localhost:3000", ""},
		{"localhost:1-2", "", "one port"},
		{"127.0.0.1:0", "", "1–65535"},
		{"127.0.0.1:70000", "", "1–65535"},
		{"127.0.0.1:443-80", "", "empty"},
		{"127.0.0.1", "", "want HOST:PORT"},
		{":80", "", "no host"},
		{"bad host:80", "", "neither"},
		{"10.0.0.0/33:80", "", "CIDR"},
		{"[fe80::1%eth0]:80", "", "zone"},
		// IPv4-mapped prefixes are the IPv4 prefixes they map, their
		// length less 96; one shorter than /96 maps no IPv4 prefix.
		{"::ffff:127.0.0.0/104:80", "127.0.0.0/8:80", ""},
		{"::ffff:0:0/96:80", "0.0.0.0/0:80", ""},
		{"::ffff:7f00:1/128:80", "127.0.0.1:80", ""},
		{"::ffff:127.0.0.1/120:80-81", "127.0.0.0/24:80-81", ""},
		{"::ffff:10.1.2.3/104:443", "10.0.0.0/8:443", ""},
		{"[::ffff:10.1.2.3/112]:443", "10.1.0.0/16:443", ""},
		{"0:0:0:0:0:ffff:c0a8:0/112:22", "192.168.0.0/16:22", ""},
		{"::ffff:0:0/95:80", "", "shorter than /96"},
		{"::ffff:127.0.0.1/64:80", "", "shorter than /96"},
		{"::ffff:0:0/0:80", "", "shorter than /96"},
		{"::/0:80", "[::/0]:80", ""}, // IPv6 only: no mapped address matches it
		{"0.0.0.0:80", "0.0.0.0:80", ""},
		{"[::]:80", "[::]:80", ""},
	} {
		r, err := ParseRule(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseRule(%q) = %v, %v; want an error with %q", tc.in, r, err, tc.err)
			}
			continue
		}
		if err != nil || r.String() != tc.canon {
			t.Errorf("ParseRule(%q) = %q, %v; want %q", tc.in, r, err, tc.canon)
			continue
		}
		if back, err := ParseRule(r.String()); err != nil || back != r {
			t.Errorf("%q does not read back: %v, %v", r, back, err)
		}
	}
}

func TestAllowListChecks(t *testing.T) {
	var rules []Rule
	for _, s := range []string{"127.0.0.1:3000", "10.0.0.0/8:80-443", "localhost:3000", "[::1]:3000"} {
		r, err := ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	a := NewAllowList(append(rules, rules[0])) // a duplicate is dropped
	if n := len(a.Rules()); n != 4 {
		t.Fatalf("%d rules, want 4", n)
	}
	for _, tc := range []struct {
		host string
		port uint16
		ok   bool
	}{
		{"127.0.0.1", 3000, true}, {"127.0.0.1", 3001, false}, {"10.9.8.7", 443, true}, {"10.9.8.7", 444, false},
		{"11.0.0.1", 80, false}, {"localhost", 3000, true}, {"LOCALHOST", 3000, true}, {"localhost", 22, false},
		{"example.com", 3000, false}, {"::1", 3000, true}, {"[::1]", 3000, true}, {"::ffff:127.0.0.1", 3000, true},
	} {
		err := a.Check(tc.host, tc.port)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrNotAllowed) {
			t.Errorf("Check(%s, %d) = %v, want allowed=%v", tc.host, tc.port, err, tc.ok)
		}
	}
	// A name rule admits the name; its resolved address needs an address
	// rule of its own.
	if err := a.CheckAddr("localhost", netip.MustParseAddrPort("127.0.0.1:3000")); err != nil {
		t.Errorf("resolved 127.0.0.1:3000: %v", err)
	}
	err := a.CheckAddr("evil.example", netip.MustParseAddrPort("169.254.169.254:3000"))
	if err == nil || !strings.Contains(err.Error(), "169.254.169.254:3000") {
		t.Errorf("a name resolving to an address no rule admits: %v", err)
	}
	if !a.Remove(rules[0]) || a.Remove(rules[0]) || a.Check("127.0.0.1", 3000) == nil {
		t.Error("Remove did not remove the rule exactly once")
	}
	if !a.Add(rules[0]) || a.Add(rules[0]) {
		t.Error("Add did not add the rule exactly once")
	}
}

// TestAllowListMapped: rules written as IPv4-mapped prefixes admit the
// IPv4 addresses they map and no others, and the unspecified addresses
// (which dial this host) are admitted only by a rule naming them alone.
func TestAllowListMapped(t *testing.T) {
	for _, tc := range []struct {
		rule  string
		admit []string
		deny  []string
	}{
		{"::ffff:127.0.0.0/104:80", []string{"127.0.0.1", "127.255.0.9", "::ffff:127.0.0.1"}, []string{"0.0.0.0", "128.0.0.1", "::1", "::"}},
		{"::ffff:0:0/96:80", []string{"1.2.3.4", "127.0.0.1", "::ffff:8.8.8.8"}, []string{"0.0.0.0", "::ffff:0.0.0.0", "::", "::1"}},
		{"::ffff:7f00:1/128:80", []string{"127.0.0.1"}, []string{"127.0.0.2", "0.0.0.0"}},
		{"::ffff:127.0.0.1/120:80", []string{"127.0.0.1", "127.0.0.255"}, []string{"127.0.1.0", "0.0.0.0"}},
		{"0.0.0.0/0:80", []string{"1.2.3.4"}, []string{"0.0.0.0", "::"}},
		{"0.0.0.0/8:80", []string{"0.1.2.3"}, []string{"0.0.0.0"}},
		{"::/0:80", []string{"::1", "2001:db8::1"}, []string{"::", "127.0.0.1", "::ffff:127.0.0.1", "0.0.0.0"}},
		{"0.0.0.0:80", []string{"0.0.0.0", "::ffff:0.0.0.0"}, []string{"::", "127.0.0.1"}},
		{"0.0.0.0/32:80", []string{"0.0.0.0"}, []string{"::"}},
		{"[::ffff:0:0]:80", []string{"0.0.0.0"}, []string{"::"}},
		{"[::]:80", []string{"::"}, []string{"0.0.0.0", "::1"}},
	} {
		r, err := ParseRule(tc.rule)
		if err != nil {
			t.Fatalf("ParseRule(%q): %v", tc.rule, err)
		}
		a := NewAllowList([]Rule{r})
		for _, h := range tc.admit {
			if err := a.Check(h, 80); err != nil {
				t.Errorf("rule %s (%s): Check(%s) = %v, want admitted", tc.rule, r, h, err)
			}
			if err := a.CheckAddr("name", netip.AddrPortFrom(netip.MustParseAddr(h), 80)); err != nil {
				t.Errorf("rule %s (%s): CheckAddr(%s) = %v, want admitted", tc.rule, r, h, err)
			}
		}
		for _, h := range tc.deny {
			if err := a.Check(h, 80); err == nil {
				t.Errorf("rule %s (%s): Check(%s) admitted it", tc.rule, r, h)
			}
			if err := a.CheckAddr("name", netip.AddrPortFrom(netip.MustParseAddr(h), 80)); err == nil {
				t.Errorf("rule %s (%s): CheckAddr(%s) admitted it", tc.rule, r, h)
			}
		}
	}
}

// FuzzParseRule: never a panic, every accepted rule reads back as itself
// from its canonical form, no address rule is left IPv4-mapped, and only
// a rule of one address admits an unspecified one.
func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"127.0.0.1:80", "[::1]:1-65535", "10.0.0.0/8:80-443", "localhost:3000", "a:b:c", "[::]:0", "x/y:1",
		"::ffff:127.0.0.0/104:80", "::ffff:0:0/96:80", "::ffff:0:0/95:80", "::ffff:7f00:1/128:80", "0.0.0.0/0:1-65535", "::/0:22"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			return
		}
		back, err := ParseRule(r.String())
		if err != nil || back != r {
			t.Fatalf("%q → %q → %v, %v", s, r, back, err)
		}
		if r.Name != "" {
			return
		}
		if r.Prefix.Addr().Is4In6() {
			t.Fatalf("%q → %q: an IPv4-mapped prefix was kept", s, r)
		}
		a := NewAllowList([]Rule{r})
		for _, u := range []string{"0.0.0.0", "::"} {
			if a.Check(u, r.Lo) == nil && !(r.Prefix.IsSingleIP() && r.Prefix.Addr().String() == u) {
				t.Fatalf("%q → %q admits %s", s, r, u)
			}
		}
	})
}
