package config

import (
	"errors"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestParseConfigValues(t *testing.T) {
	text := strings.Join([]string{
		"# comment",
		"",
		`listen = "0.0.0.0:8080"   # trailing comment`,
		`stateDir = '/var/lib/ahpd/x#y'`,
		`websocketCompression = none`,
		`metricsPublic = true`,
		`defaultTerminal = false`,
		`typingFirst = false`,
		`logLevel = "debug"`,
		`shutdownTimeout = "3s"`,
		`ticketTTL = 1m`,
		`allowedOrigins = ["a.example:443", 'b.example:80',]`,
		`maxBufferedBytes = "8MiB"`,
		`maxOutputStall = 2s`,
		`maxSubscriptions = 1_000`,
		`hostReceive.windowBytes = "512KiB"`,
		`heartbeatInterval = default`,
	}, "\n")
	cf, err := parseConfig("c.toml", text)
	if err != nil {
		t.Fatal(err)
	}
	s := DefaultSettings()
	if err := cf.apply(&s, nil); err != nil {
		t.Fatal(err)
	}
	want := Settings{
		Config: Config{
			Listen: "0.0.0.0:8080", StateDir: "/var/lib/ahpd/x#y", WebsocketCompression: "none",
			MetricsPublic: true, NoDefaultTerminal: true, NoTypingFirst: true, ShutdownTimeout: 3 * time.Second, TicketTTL: time.Minute,
			AllowedOrigins: []string{"a.example:443", "b.example:80"},
		},
		LogLevel: "debug", LogFormat: "auto",
	}
	want.Limits = DefaultLimits()
	want.Limits.MaxBufferedBytes = 8 << 20
	want.Limits.MaxOutputStall = 2 * time.Second
	want.Limits.MaxSubscriptions = 1000
	want.Limits.HostReceive.WindowBytes = 512 << 10
	if got := s; !reflect.DeepEqual(got, want) {
		t.Fatalf("settings =\n%+v\nwant\n%+v", got, want)
	}
	if l := cf.line("maxOutputStall"); l != 14 {
		t.Fatalf("line(maxOutputStall) = %d, want 14", l)
	}
}

// configErrorCases are bad files and the start of the message they get.
var configErrorCases = []struct {
	text, want string
}{
	{"[limits]\n", "c.toml:1: tables are not supported"},
	{"listen\n", "c.toml:1: want key = value"},
	{"\n\nmaxoutputstall = 2s\n", "c.toml:3: maxoutputstall: unknown key (did you mean maxOutputStall?)"},
	{"bogus = 1\n", "c.toml:1: bogus: unknown key (config.example.toml lists every key)"},
	// A typo gets the closest key (issue 39).
	{"maxOutputStal = 2s\n", "c.toml:1: maxOutputStal: unknown key (did you mean maxOutputStall?)"},
	{"tcpAlow = []\n", "c.toml:1: tcpAlow: unknown key (did you mean tcpAllow?)"},
	{"maxBuferedByts = 1MiB\n", "c.toml:1: maxBuferedByts: unknown key (did you mean maxBufferedBytes?)"},
	{"state-dir = \"/x\"\n", "c.toml:1: state-dir: unknown key (did you mean stateDir?)"},
	{"listn = \"x:1\"\n", "c.toml:1: listn: unknown key (did you mean listen?)"},
	{"\"listen\" = \"x\"\n", "c.toml:1: bad key"},
	{"listen = \n", "c.toml:1: listen: missing value"},
	{"listen = \"127.0.0.1:1\n", "c.toml:1: listen: basic strings cannot have new lines"}, // go-toml's words
	{"listen = \"a\" b\n", "c.toml:1: listen: expected newline but got U+0062 'b'"},       // go-toml's
	{"listen = \"\"\"x\"\"\"\n", "c.toml:1: listen: multi-line strings are not supported"},
	{"allowedOrigins = [\"a:1\",\n", "c.toml:1: allowedOrigins: array is incomplete"}, // go-toml's
	// A value over several lines: the line of the error, the key of the value.
	{"allowedOrigins = [\n  \"a:1\",\n  b:2\n]\n", "c.toml:3: allowedOrigins: unexpected character U+0062 'b'"},
	{"allowedOrigins = { a = 1 }\n", "c.toml:1: allowedOrigins: inline tables are not supported"},
	{"maxOutputStall = 1s\nmaxOutputStall = 2s\n", "c.toml:2: maxOutputStall: given twice (first on line 1)"},
}

// configApplyCases parse but carry a bad value.
var configApplyCases = []struct {
	text, want string
}{
	{"maxOutputStall = fast\n", "c.toml:1: maxOutputStall: want a duration"},
	{"maxOutputStall = -1s\n", "c.toml:1: maxOutputStall: must not be negative"},
	{"maxBufferedBytes = 8Mo\n", "c.toml:1: maxBufferedBytes: want an integer with an optional unit: KiB, MiB, GiB (1024, 1024², 1024³ bytes) or KB, MB, GB (1000, 1000², 1000³ bytes)"},
	{"maxBufferedBytes = 99999999999GiB\n", "c.toml:1: maxBufferedBytes: \"99999999999GiB\" is too large"},
	{"maxSubscriptions = 1.5\n", "c.toml:1: maxSubscriptions: want an integer"},
	{"metricsPublic = yes\n", "c.toml:1: metricsPublic: want true or false"},
	{"websocketCompression = gzip\n", "c.toml:1: websocketCompression: want one of deflate, none"},
	{"logLevel = loud\n", "c.toml:1: logLevel: want one of debug, info, warn, error"},
	{"listen = [\"a:1\"]\n", "c.toml:1: listen: want a single value, not an array"},
	{"allowedOrigins = [\"https://a.example\"]\n", "c.toml:1: allowedOrigins: want host:port values"},
}

// configValidateCases parse and apply but fail Config.Validate.
var configValidateCases = []struct {
	text, want string
}{
	{"# x\nmaxOutputStall = 1ms\n", "c.toml:2: maxOutputStall: must be at least 100ms"},
	{"listen = nohost\n", "c.toml:1: listen: "},
	{"maxBufferedBytes = 1KiB\n", "c.toml:1: maxBufferedBytes: must be at least 1 MiB"},
	{"hostReceive.maximumFrameBytes = 8MiB\n", "c.toml:1: hostReceive.maximumFrameBytes: "},
	{"ticketTTL = 1ms\n", "c.toml:1: ticketTTL: must be at least 1s"},
	{"tcpRetain = 500ms\n", "c.toml:1: tcpRetain: must be at least 1s"},
}

func loadText(t *testing.T, text string, fromFlags Settings, flagged map[string]bool) (Settings, error) {
	t.Helper()
	path := t.TempDir() + "/c.toml"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	s, _, err := LoadSettings(path, fromFlags, flagged)
	if err != nil {
		// Messages name the temporary path; the cases say c.toml.
		err = errors.New(strings.ReplaceAll(err.Error(), path, "c.toml"))
	}
	return s, err
}

func TestConfigErrorsNameLineAndKey(t *testing.T) {
	var all []struct{ text, want string }
	all = append(all, configErrorCases...)
	all = append(all, configApplyCases...)
	all = append(all, configValidateCases...)
	for _, c := range all {
		_, err := loadText(t, c.text, DefaultSettings(), nil)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("load(%q) = %v, want an error starting %q", c.text, err, c.want)
		}
	}
}

func TestConfigReportsEveryBadLine(t *testing.T) {
	_, err := loadText(t, "a = 1\nlisten = \"x:1\"\nb = 2\n", DefaultSettings(), nil)
	if err == nil || !strings.Contains(err.Error(), "c.toml:1: a:") || !strings.Contains(err.Error(), "c.toml:3: b:") {
		t.Fatalf("err = %v, want lines 1 and 3 reported", err)
	}
}

func TestFlagsOverrideFile(t *testing.T) {
	fl := DefaultSettings()
	fl.Listen = "127.0.0.1:9"
	fl.LogLevel = "warn"
	// The file's listen is invalid, but the flag replaces it, so it is not
	// even looked at; logLevel too.
	s, err := loadText(t, "listen = nohost\nlogLevel = debug\nmaxSubscriptions = 7\n", fl, map[string]bool{"listen": true, "log-level": true})
	if err != nil {
		t.Fatal(err)
	}
	if s.Listen != "127.0.0.1:9" || s.LogLevel != "warn" || s.Limits.MaxSubscriptions != 7 {
		t.Fatalf("settings = listen %q logLevel %q maxSubscriptions %d", s.Listen, s.LogLevel, s.Limits.MaxSubscriptions)
	}
	// A bad flag is named as a flag.
	fl.Listen = "nohost"
	if _, err := loadText(t, "", fl, map[string]bool{"listen": true}); err == nil || !strings.HasPrefix(err.Error(), "--listen: ") {
		t.Fatalf("bad --listen: err = %v, want it named", err)
	}
}

// TestExampleConfigDocumentsEveryKey uncomments every "# key = value" line
// of systemd/config.example.toml: every key must be there, the file must
// load, and each limit's documented value must be its default.
func TestExampleConfigDocumentsEveryKey(t *testing.T) {
	b, err := os.ReadFile("../../systemd/config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^# ([A-Za-z][A-Za-z0-9_.]*) = (.*)$`)
	seen := map[string]bool{}
	var out []string
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		seen[m[1]] = true
		out = append(out, m[1]+" = "+m[2])
	}
	for _, k := range configKeys {
		if !seen[k.name] {
			t.Errorf("config.example.toml does not document %s", k.name)
		}
	}
	// allowedOrigins' example is not the default (which is computed).
	s, err := loadText(t, strings.Join(out, "\n")+"\n", DefaultSettings(), nil)
	if err != nil {
		t.Fatalf("the example, uncommented: %v", err)
	}
	if s.Limits != DefaultLimits() {
		t.Errorf("the example's limits are not the defaults:\n%+v\nwant\n%+v", s.Limits, DefaultLimits())
	}
	d := Config{}.WithDefaults()
	if s.Listen != d.Listen || s.ShutdownTimeout != d.ShutdownTimeout || s.TicketTTL != d.TicketTTL || s.WebsocketCompression != d.WebsocketCompression {
		t.Errorf("the example's daemon keys are not the defaults: %+v", s.Config)
	}
}

func TestParseSizeValue(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{{"0", 0}, {"default", 0}, {"4096", 4096}, {"64KiB", 64 << 10}, {"8 MiB", 8 << 20}, {"1gib", 1 << 30}, {"1_048_576", 1 << 20}} {
		if got, err := parseSizeValue(c.in); err != nil || got != c.want {
			t.Errorf("parseSizeValue(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

// FuzzParseConfig: the loader never panics, every error is a *FileError
// on a line of the text, and what it accepts applies and validates without
// panicking either.
func FuzzParseConfig(f *testing.F) {
	for _, c := range configErrorCases {
		f.Add(c.text)
	}
	for _, c := range configApplyCases {
		f.Add(c.text)
	}
	f.Add("listen = \"127.0.0.1:1\"\nallowedOrigins = [\"a:1\", 'b:2']\nhostReceive.windowBytes = 1MiB # x\n")
	f.Add(configTOMLText)
	f.Fuzz(func(t *testing.T, text string) {
		lines := strings.Count(text, "\n") + 1
		cf, err := parseConfig("f", text)
		if err != nil {
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var ce *FileError
				if !errors.As(e, &ce) || ce.Line < 1 || ce.Line > lines {
					t.Fatalf("error %v is not a *FileError on one of the %d lines", e, lines)
				}
			}
			return
		}
		for _, e := range cf.Entries {
			if e.Line < 1 || e.Line > lines {
				t.Fatalf("entry %s on line %d of %d", e.Key, e.Line, lines)
			}
		}
		s := DefaultSettings()
		if cf.apply(&s, nil) == nil {
			_ = s.validate(cf, nil)
		}
	})
}

// configTOMLText is TOML beyond the old one-line subset: an array over
// several lines with a comment, CRLF line ends, an escape, an integer in
// hex, blanks around the dot of a key.
const configTOMLText = "allowedOrigins = [\r\n  \"a.example:443\", # first\r\n  'b.example:80',\r\n]\r\n" +
	"maxSubscriptions = 0x10\r\nhostReceive . windowBytes = \"512\\u004BiB\"\r\nmaxOutputStall = 2s\r\n"

func TestConfigIsTOML(t *testing.T) {
	s, err := loadText(t, configTOMLText, DefaultSettings(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.AllowedOrigins; !reflect.DeepEqual(got, []string{"a.example:443", "b.example:80"}) {
		t.Errorf("allowedOrigins = %q", got)
	}
	if s.Limits.MaxSubscriptions != 16 || s.Limits.HostReceive.WindowBytes != 512<<10 || s.Limits.MaxOutputStall != 2*time.Second {
		t.Errorf("maxSubscriptions %d, hostReceive.windowBytes %d, maxOutputStall %v; want 16, 512KiB, 2s",
			s.Limits.MaxSubscriptions, s.Limits.HostReceive.WindowBytes, s.Limits.MaxOutputStall)
	}
}

// TestConfigCRLFCutShort: a CRLF file whose last line lost its LF reads
// as the whole file would: the lone CR ends the line (TOML itself refuses
// it, and the line was then read as a bare word, "0x10" rather than 16).
func TestConfigCRLFCutShort(t *testing.T) {
	s, err := loadText(t, "maxOutputStall = 2s\r\nmaxSubscriptions = 0x10\r", DefaultSettings(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Limits.MaxSubscriptions != 16 || s.Limits.MaxOutputStall != 2*time.Second {
		t.Errorf("maxSubscriptions %d, maxOutputStall %v; want 16, 2s", s.Limits.MaxSubscriptions, s.Limits.MaxOutputStall)
	}
}

// TestConfigUnknownKeyNamesItsLine: an unknown key is reported with its
// own line, wherever it is in the file.
func TestConfigUnknownKeyNamesItsLine(t *testing.T) {
	text := "# ahpd\nlisten = \"127.0.0.1:1\"\n\nmaxOutputStal = \"2s\" # typo\nmaxSubscriptions = 8\n"
	_, err := loadText(t, text, DefaultSettings(), nil)
	if want := "c.toml:4: maxOutputStal: unknown key"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err = %v, want one starting %q", err, want)
	}
}

// TestConfigWrongTypeNamesKeyAndLine: a value of the wrong type is
// reported with its key and line.
func TestConfigWrongTypeNamesKeyAndLine(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"listen = \"127.0.0.1:1\"\n\nmetricsPublic = \"yes\"\n", "c.toml:3: metricsPublic: want true or false"},
		{"# x\nmaxSubscriptions = 1.5\n", "c.toml:2: maxSubscriptions: want an integer"},
		{"# x\n# y\nlisten = [\"a:1\"]\n", "c.toml:3: listen: want a single value, not an array"},
		{"\nmaxConnectionsPerToken = true\n", "c.toml:2: maxConnectionsPerToken: want a positive integer"},
		{"\nallowedOrigins = { a = 1 }\n", "c.toml:2: allowedOrigins: inline tables are not supported"},
	} {
		_, err := loadText(t, c.text, DefaultSettings(), nil)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("load(%q) = %v, want an error starting %q", c.text, err, c.want)
		}
	}
}

// TestConfigSyntaxErrorNamesItsLine: a syntax error is reported with its
// line (and the key of that line).
func TestConfigSyntaxErrorNamesItsLine(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"listen = \"127.0.0.1:1\"\nmaxSubscriptions = 8\n\n# x\nstateDir = \"/a\" b\n", "c.toml:5: stateDir: "},
		{"maxSubscriptions = 8\nlisten = \"127.0.0.1:1\n", "c.toml:2: listen: "},
		{"maxSubscriptions = 8\n\nallowedHosts = [\"a\" \"b\"]\n", "c.toml:3: allowedHosts: "},
	} {
		_, err := loadText(t, c.text, DefaultSettings(), nil)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("load(%q) = %v, want an error starting %q", c.text, err, c.want)
		}
	}
}
