package ctl

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"

	"github.com/ahp-dev/ahpd/internal/editdist"
)

func TestEditDistanceAndSuggest(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"ls", "ls", 0}, {"lsit", "list", 1}, {"chanels", "channels", 1}, {"status", "stats", 1}, {"abc", "xyz", 3}, {"kitten", "sitting", 3}} {
		if got := editdist.Distance(tc.a, tc.b); got != tc.d {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
	root := rootCommand()
	for in, want := range map[string]string{"chanels": "channels", "attahc": "attach", "tokne": "token", "xyz": "", "q": "", "limts": "limits", "vewers": "viewers"} {
		if got := root.suggest(in); got != want {
			t.Errorf("suggest(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMatchShortName(t *testing.T) {
	chans := []*ahpv1.Channel{
		{Uri: "ahp-terminal:/shell", Id: "shell"},
		{Uri: "ahp-terminal:/web", Id: "web"},
		{Uri: "ahp-tcp:/web", Id: "web"},
		{Uri: "ahp-telemetry:/sys", Id: "sys"},
	}
	if got, err := matchShortName("shell", chans); err != nil || got != "ahp-terminal:/shell" {
		t.Fatalf("shell = %q, %v", got, err)
	}
	if got, err := matchShortName("sys", chans); err != nil || got != "ahp-telemetry:/sys" {
		t.Fatalf("sys = %q, %v", got, err)
	}
	_, err := matchShortName("web", chans)
	if _, ok := err.(*usageError); !ok || !strings.Contains(err.Error(), "ahp-terminal:/web, ahp-tcp:/web") {
		t.Fatalf("ambiguous web: %T %v", err, err)
	}
	if _, err := matchShortName("nope", chans); err == nil || !strings.Contains(err.Error(), `no channel has the ID "nope"`) {
		t.Fatalf("nope: %v", err)
	} else if _, ok := err.(*usageError); ok {
		t.Fatal("a missing channel is not bad usage")
	}
	// A command of one type looks among that type's channels, and names
	// that type's URI when none has the ID (issue 39: telemetry push
	// nosuch suggested ahp-terminal:/nosuch).
	if got, err := matchShortNameOf("web", "tcp", chans); err != nil || got != "ahp-tcp:/web" {
		t.Fatalf("tcp web = %q, %v", got, err)
	}
	if _, err := matchShortNameOf("nosuch", "telemetry", chans); err == nil || !strings.Contains(err.Error(), `no telemetry channel has the ID "nosuch"`) || !strings.Contains(err.Error(), "ahp-telemetry:/nosuch") || strings.Contains(err.Error(), "ahp-terminal:") {
		t.Fatalf("telemetry nosuch: %v", err)
	}
	if _, err := matchShortNameOf("shell", "telemetry", chans); err == nil || !strings.Contains(err.Error(), "ahp-telemetry:/shell") {
		t.Fatalf("telemetry shell (a terminal's ID): %v", err)
	}
	if _, err := matchShortName("nope", chans); err == nil || !strings.Contains(err.Error(), "ahp-terminal:/nope, ahp-telemetry:/nope or ahp-tcp:/nope") {
		t.Fatalf("nope, any type: %v", err)
	}
	if isShortName("ahp-terminal:/x") || !isShortName("x") || isShortName("") {
		t.Fatal("isShortName")
	}
}

func TestParseDetachKey(t *testing.T) {
	for in, want := range map[string]byte{"ctrl-]": 0x1d, "ctrl-a": 1, "Ctrl-A": 1, "ctrl-z": 26, "ctrl-@": 0, "ctrl-\\": 0x1c, "ctrl-_": 0x1f} {
		got, _, err := parseDetachKey(in)
		if err != nil || got != want {
			t.Errorf("parseDetachKey(%q) = %#x, %v; want %#x", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a", "ctrl-", "ctrl-ab", "alt-a", "ctrl-1"} {
		if _, _, err := parseDetachKey(bad); err == nil {
			t.Errorf("parseDetachKey(%q) succeeded", bad)
		}
	}
	// With Ctrl-A as the prefix, Ctrl-] is an ordinary key.
	at := &attacher{key: 1}
	if b, d := at.feed([]byte("x\x1d\x01\x01y\x01d")); string(b) != "x\x1d\x01y" || !d {
		t.Fatalf("feed with ctrl-a = %q, %v", b, d)
	}
}

func TestExitCode(t *testing.T) {
	code := func(n int) *int { return &n }
	for _, tc := range []struct {
		e    exitedError
		want int
	}{{exitedError{Code: code(0)}, 0}, {exitedError{Code: code(3)}, 3}, {exitedError{Signal: "SIGKILL"}, 137}, {exitedError{Signal: "SIGHUP"}, 129}, {exitedError{Signal: "SIG40"}, 168}, {exitedError{Signal: "SIGNOPE"}, 128}, {exitedError{}, 0}} {
		if got := tc.e.exitCode(); got != tc.want {
			t.Errorf("%+v.exitCode() = %d, want %d", tc.e, got, tc.want)
		}
	}
}

func TestCmpTokenIDs(t *testing.T) {
	ids := []string{"tok-10", "tok-2", "tok-1", "x"}
	tokens := make([]*ahpv1.Token, len(ids))
	for i, id := range ids {
		tokens[i] = &ahpv1.Token{Id: id}
	}
	sortTokens(tokens)
	var got []string
	for _, tk := range tokens {
		got = append(got, tk.Id)
	}
	if strings.Join(got, " ") != "tok-1 tok-2 tok-10 x" {
		t.Fatalf("sorted = %v", got)
	}
}

// The --ttl help names its default once (the flag's zero default is not
// shown again as "(default 0s)").
func TestLeafUsageDefaultsOnce(t *testing.T) {
	var out bytes.Buffer
	a := &app{stdout: &out}
	var create *command
	for _, c := range rootCommand().sub {
		if c.name == "token" {
			create = c.lookup("create")
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	create.setup(fs)
	a.printLeafUsage(&out, create, fs, "ahpctl token create")
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Count(line, "(default") > 1 || strings.Contains(line, "(default 0s)") {
			t.Errorf("usage line %q", line)
		}
	}
	if !strings.Contains(out.String(), "--role role") || !strings.Contains(out.String(), "(default view)") {
		t.Errorf("usage lost the other defaults:\n%s", out.String())
	}
}

func TestYAML(t *testing.T) {
	type inner struct {
		A string `json:"a"`
		N int    `json:"num"`
	}
	v := map[string]any{"z": 1} // one key: map order is moot
	for _, tc := range []struct {
		in   any
		want string
	}{
		{v, "z: 1\n"},
		{[]any{}, "[]\n"},
		{map[string]any{}, "{}\n"},
		{"x", "x\n"},
		{struct {
			Name  string   `json:"name"`
			Empty []string `json:"empty"`
			List  []string `json:"list"`
			Objs  []inner  `json:"objs"`
			Sub   inner    `json:"sub"`
			Nil   *int     `json:"nil"`
			B     bool     `json:"b"`
			F     float64  `json:"f"`
		}{"ahp-terminal:/shell", []string{}, []string{"a", "true", "1.5", "", "x: y", "#c", "- d", "multi\nline", "tab\there", " sp"}, []inner{{"p", 1}, {"q", 2}}, inner{"r", 3}, nil, true, 0.25},
			`name: ahp-terminal:/shell
empty: []
list:
  - a
  - "true"
  - "1.5"
  - ""
  - "x: y"
  - "#c"
  - "- d"
  - "multi\nline"
  - "tab\there"
  - " sp"
objs:
  - a: p
    num: 1
  - a: q
    num: 2
sub:
  a: r
  num: 3
nil: null
b: true
f: 0.25
`},
		{[][]int{{1, 2}, {3}}, "- - 1\n  - 2\n- - 3\n"},
	} {
		got, err := toYAML(tc.in)
		if err != nil || string(got) != tc.want {
			t.Errorf("toYAML(%#v) =\n%s(%v); want\n%s", tc.in, got, err, tc.want)
		}
	}
	// Keys keep the JSON's order (struct field order), not sorted.
	got, _ := toYAML(channelView{Channel: "ahp-terminal:/a", ID: "a", Type: "terminal"})
	if !strings.HasPrefix(string(got), "channel: ahp-terminal:/a\nid: a\ntype: terminal\n") {
		t.Errorf("channelView as YAML:\n%s", got)
	}
}
