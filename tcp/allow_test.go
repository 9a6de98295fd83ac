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

// FuzzParseRule: never a panic, and every accepted rule reads back as
// itself from its canonical form.
func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"127.0.0.1:80", "[::1]:1-65535", "10.0.0.0/8:80-443", "localhost:3000", "a:b:c", "[::]:0", "x/y:1"} {
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
	})
}
