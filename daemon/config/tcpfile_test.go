package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ahp-dev/ahpd/tcp"
)

func rules(t *testing.T, ss ...string) []tcp.Rule {
	t.Helper()
	var out []tcp.Rule
	for _, s := range ss {
		r, err := tcp.ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func TestConfigTCPAllow(t *testing.T) {
	s, err := loadText(t, "tcpAllow = [\"127.0.0.1:3000\", \"10.0.0.0/8:80-443\",\n  \"localhost:3000\"]\n", DefaultSettings(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := rules(t, "127.0.0.1:3000", "10.0.0.0/8:80-443", "localhost:3000"); !slices.Equal(s.TCPAllow, want) {
		t.Fatalf("TCPAllow = %v, want %v", s.TCPAllow, want)
	}
	if s, err := loadText(t, "", DefaultSettings(), nil); err != nil || len(s.TCPAllow) != 0 {
		t.Fatalf("no key: TCPAllow = %v, %v; want none", s.TCPAllow, err)
	}
	for _, c := range []struct{ text, want string }{
		{"# x\ntcpAllow = [\"127.0.0.1:3000\", \"nope\"]\n", `c.toml:2: tcpAllow: tcp rule "nope": `},
		{"tcpAllow = [\"localhost:1-9\"]\n", `c.toml:1: tcpAllow: tcp rule "localhost:1-9": a host name takes one port`},
		{"a = 1\n", "c.toml:1: a: unknown key"},
		{"tcpAllow = [1]\n", "c.toml:1: tcpAllow: array: want quoted strings"},
	} {
		if _, err := loadText(t, c.text, DefaultSettings(), nil); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("load(%q) = %v, want an error starting %q", c.text, err, c.want)
		}
	}
}

// TestEditTCPAllow: the key is replaced in place and every other line
// (comments, blank lines, unquoted values, trailing comments) stays.
func TestEditTCPAllow(t *testing.T) {
	add := func(rs ...tcp.Rule) func([]tcp.Rule) []tcp.Rule {
		return func(old []tcp.Rule) []tcp.Rule { return append(old, rs...) }
	}
	for _, c := range []struct {
		name, in string
		edit     func([]tcp.Rule) []tcp.Rule
		want     string
	}{
		{"one line", "# head\nmaxOutputStall = 2s   # bare\ntcpAllow = [\"127.0.0.1:1\"] # mine\n\nlisten = \"127.0.0.1:7681\"\n",
			add(rules(t, "[::1]:2")...),
			"# head\nmaxOutputStall = 2s   # bare\ntcpAllow = [\n  \"127.0.0.1:1\",\n  \"[::1]:2\",\n] # mine\n\nlisten = \"127.0.0.1:7681\"\n"},
		{"multi-line to one", "tcpAllow = [\n  \"127.0.0.1:1\", # a\n  \"127.0.0.1:2\",\n]\nlogLevel = debug\n",
			func(old []tcp.Rule) []tcp.Rule { return old[1:] },
			"tcpAllow = [\"127.0.0.1:2\"]\nlogLevel = debug\n"},
		{"bare word", "  tcpAllow = 127.0.0.1:1 # note\n", add(),
			"  tcpAllow = [\"127.0.0.1:1\"] # note\n"},
		{"to empty", "tcpAllow = [\"127.0.0.1:1\"]", func([]tcp.Rule) []tcp.Rule { return nil },
			"tcpAllow = []"},
		{"absent key", "# only a comment", add(rules(t, "127.0.0.1:1")...),
			"# only a comment\n\n# TCP targets ahpd may dial; `ahpctl tcp deny` rewrites this key.\ntcpAllow = [\"127.0.0.1:1\"]\n"},
		{"byte order mark", "\ufefflogLevel = info\ntcpAllow = []\n", add(rules(t, "127.0.0.1:1")...),
			"\ufefflogLevel = info\ntcpAllow = [\"127.0.0.1:1\"]\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.toml")
			if err := os.WriteFile(path, []byte(c.in), 0o640); err != nil {
				t.Fatal(err)
			}
			if err := EditTCPAllow(path, c.edit); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(path)
			if string(b) != c.want {
				t.Fatalf("file =\n%s\nwant\n%s", b, c.want)
			}
			if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
				t.Errorf("mode = %v, want 0640 kept", fi.Mode().Perm())
			}
			if _, _, err := LoadSettings(path, DefaultSettings(), nil); err != nil {
				t.Errorf("the rewritten file does not load: %v", err)
			}
			if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*tmp")); len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}

func TestEditTCPAllowNewFileAndSymlink(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ahpd", "config.toml")
	if err := EditTCPAllow(path, func([]tcp.Rule) []tcp.Rule { return nil }); err == nil {
		t.Fatal("EditTCPAllow created a directory")
	}
	os.Mkdir(filepath.Dir(path), 0o700)
	if err := EditTCPAllow(path, func([]tcp.Rule) []tcp.Rule { return rules(t, "127.0.0.1:8080") }); err != nil {
		t.Fatal(err)
	}
	s, _, err := LoadSettings(path, DefaultSettings(), nil)
	if err != nil || !slices.Equal(s.TCPAllow, rules(t, "127.0.0.1:8080")) {
		t.Fatalf("new file: TCPAllow = %v, %v", s.TCPAllow, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("new file mode = %v, want 0644", fi.Mode().Perm())
	}
	link := filepath.Join(dir, "link.toml")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if err := EditTCPAllow(link, func(old []tcp.Rule) []tcp.Rule { return append(old, rules(t, "127.0.0.1:9")...) }); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v, %v", fi, err)
	}
	s, _, _ = LoadSettings(path, DefaultSettings(), nil)
	if !slices.Equal(s.TCPAllow, rules(t, "127.0.0.1:8080", "127.0.0.1:9")) {
		t.Fatalf("through the link: target's TCPAllow = %v", s.TCPAllow)
	}
}

// TestEditTCPAllowRefusesBadFile: a file that does not load is not
// touched, and the error names its line.
func TestEditTCPAllowRefusesBadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.toml")
	in := "logLevel = info\n[table]\n"
	if err := os.WriteFile(path, []byte(in), 0o600); err != nil {
		t.Fatal(err)
	}
	err := EditTCPAllow(path, func(old []tcp.Rule) []tcp.Rule { return old })
	if err == nil || !strings.Contains(err.Error(), path+":2:") {
		t.Fatalf("err = %v, want it to name line 2", err)
	}
	if b, _ := os.ReadFile(path); string(b) != in {
		t.Fatalf("the bad file was changed:\n%s", b)
	}
	// A directory that is gone cannot be written (nor created: its parent
	// is a file).
	notDir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notDir, nil, 0o600)
	if err := EditTCPAllow(filepath.Join(notDir, "c.toml"), func([]tcp.Rule) []tcp.Rule { return nil }); err == nil {
		t.Fatal("writing under a file succeeded")
	}
}

// FuzzRewriteTCPAllow: for any text that parses, the rewrite never panics,
// reads back with the new rules, and every other key keeps its value.
func FuzzRewriteTCPAllow(f *testing.F) {
	f.Add("# head\nmaxOutputStall = 2s   # bare\ntcpAllow = [\"127.0.0.1:1\"] # mine\n")
	f.Add("tcpAllow = [\n  \"127.0.0.1:1\", # a\n  \"[::1]:2\",\n]\r\nlogLevel = debug\r\n")
	f.Add("  tcpAllow = 127.0.0.1:1 # note\n")
	f.Add("\ufefflisten = \"127.0.0.1:1\"")
	f.Add(configTOMLText)
	add, _ := tcp.ParseRule("10.0.0.0/8:80-443")
	f.Fuzz(func(t *testing.T, text string) {
		before, err := parseConfig("f", strings.TrimPrefix(text, "\ufeff"))
		if err != nil {
			return
		}
		if _, _, err := tcpAllowOf(before); err != nil {
			return
		}
		out, err := rewriteTCPAllow("f", text, func(old []tcp.Rule) []tcp.Rule { return append(old[:len(old)/2], add) })
		if err != nil {
			// A bare-word line may end in a comment that TOML refuses
			// (control characters, invalid UTF-8) once the value is
			// quoted: the read-back check refuses that rewrite, and
			// nothing is written. Other text must be rewritten.
			controls := strings.ContainsFunc(text, func(r rune) bool { return r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f })
			if strings.Contains(err.Error(), "rewriting") && !controls && utf8.ValidString(text) {
				t.Fatalf("rewrite of a valid file failed: %v\n%q", err, text)
			}
			return
		}
		after, err := parseConfig("f", strings.TrimPrefix(out, "\ufeff"))
		if err != nil {
			t.Fatalf("the rewritten text does not parse: %v\n%q", err, out)
		}
		values := func(cf *configFile) map[string]string {
			m := map[string]string{}
			for _, e := range cf.Entries {
				if e.Key != TCPAllowKey {
					m[e.Key] = e.Value + "|" + strings.Join(e.List, "|")
				}
			}
			return m
		}
		b, a := values(before), values(after)
		if len(a) != len(b) {
			t.Fatalf("keys %v became %v", b, a)
		}
		for k, v := range b {
			if a[k] != v {
				t.Fatalf("%s = %q became %q\n%q\n%q", k, v, a[k], text, out)
			}
		}
	})
}
