package config

// The config file (PROTOCOL.md §10 --config) is TOML, read with go-toml's
// parser, one `key = value` per key; systemd/config.example.toml documents
// every key.
//
//	# comment
//	listen = "127.0.0.1:7681"
//	maxOutputStall = "60s"            # Go durations: 500ms, 2s, 1m30s
//	maxBufferedBytes = "64MiB"        # integers with optional KiB, MiB, GiB or KB, MB, GB
//	hostReceive.windowBytes = "256KiB"
//	allowedOrigins = ["example.com:443", "localhost:7681"]
//
// tcpAllow lists the TCP targets (tcp.ParseRule's rules) the daemon may
// dial; `ahpctl tcp deny` of one of its rules rewrites it (tcpfile.go).
//
// Keys are those of the flags (camelCase) and of `ahpctl limits set`
// (PROTOCOL.md §9), the limit groups as dotted keys. A value is a string,
// an integer or a boolean, which its key reads as text (so "8" and 8 are
// the same), or an array of strings (over several lines if need be). As
// before the file was read as TOML, a value that holds no quote may be left
// unquoted (maxOutputStall = 2s, websocketCompression = none). Tables, quoted
// keys, multi-line strings and inline tables are refused with the line
// number. Limits, logLevel, tcpAllow and the files of tlsCert and tlsKey
// are re-read on SIGHUP; the other keys need a restart.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/ahp-dev/ahpd/internal/editdist"
	"github.com/ahp-dev/ahpd/internal/units"
	"github.com/ahp-dev/ahpd/tcp"
)

// maxConfigBytes bounds the config file.
const maxConfigBytes = 1 << 20

// Settings are what the command line and the config file set.
type Settings struct {
	Config           // the daemon's configuration (zero fields: defaults)
	Control   string // control socket path; "": the default; "none": no control plane
	LogLevel  string // debug, info, warn or error; default info
	LogFormat string // auto, text or journal; default auto
}

// DefaultSettings has every limit at its default, so that a file may set
// one member of a ReceiveLimits group (Limits.WithDefaults only fills a
// group that is entirely zero).
func DefaultSettings() Settings {
	return Settings{Config: Config{Limits: DefaultLimits()}, LogLevel: "info", LogFormat: "auto"}
}

// FileError is a problem with one line of a config file (Line 0: the
// file as a whole) or with a flag (Path "").
type FileError struct {
	Path   string
	Line   int
	Key    string
	Reason string
}

func (e *FileError) Error() string {
	var b strings.Builder
	switch {
	case e.Path == "":
		b.WriteString("--")
	case e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.Path, e.Line)
	default:
		b.WriteString(e.Path + ": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// configEntry is one `key = value` line.
type configEntry struct {
	Key    string
	Line   int
	Value  string   // unquoted scalar
	List   []string // elements of an array
	IsList bool
	// Start and End are the offsets of the `key = value` text in the file
	// (a trailing comment excluded), for rewriting it (tcpfile.go).
	Start, End int
}

// configFile is a parsed config file.
type configFile struct {
	Path    string
	Entries []configEntry // in file order; keys are unique
}

// line returns the line of key, or 0.
func (f *configFile) line(key string) int {
	if f == nil {
		return 0
	}
	for _, e := range f.Entries {
		if e.Key == key {
			return e.Line
		}
	}
	return 0
}

// configKey is one key of the config file.
type configKey struct {
	name   string
	flag   string // the flag that overrides it; "" if none
	reload bool   // SIGHUP applies it
	set    func(s *Settings, e configEntry) error
}

func scalar(e configEntry) (string, error) {
	if e.IsList {
		return "", errors.New("want a single value, not an array")
	}
	return e.Value, nil
}

func setString(dst func(*Settings) *string, allowed ...string) func(*Settings, configEntry) error {
	return func(s *Settings, e configEntry) error {
		v, err := scalar(e)
		if err != nil {
			return err
		}
		if len(allowed) > 0 && !contains(allowed, v) {
			return fmt.Errorf("want one of %s, got %q", strings.Join(allowed, ", "), v)
		}
		*dst(s) = v
		return nil
	}
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func parseBool(e configEntry) (bool, error) {
	v, err := scalar(e)
	if err != nil {
		return false, err
	}
	switch v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("want true or false, got %q", v)
}

func parseDurationValue(v string) (time.Duration, error) {
	if v == "default" || v == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("want a duration such as 500ms, 2s or 1m30s, got %q", v)
	}
	if d < 0 {
		return 0, fmt.Errorf("must not be negative, got %q", v)
	}
	return d, nil
}

// parseSizeValue parses a size as `ahpctl limits set` does
// (internal/units); "default" is 0.
func parseSizeValue(s string) (int64, error) {
	if s == "default" {
		return 0, nil
	}
	return units.ParseSize(s)
}

func parseCountValue(s string) (int64, error) {
	if s == "default" {
		return 0, nil
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want an integer, got %q", s)
	}
	if v < 0 || v > 1<<31-1 {
		return 0, fmt.Errorf("must be between 0 and %d, got %q", 1<<31-1, s)
	}
	return v, nil
}

// configKeys lists every key of the config file. The limit keys are
// LimitFields' names, as in `ahpctl limits set`.
var configKeys = func() []configKey {
	keys := []configKey{
		{name: "listen", flag: "listen", set: setString(func(s *Settings) *string { return &s.Listen })},
		{name: "control", flag: "control", set: setString(func(s *Settings) *string { return &s.Control })},
		{name: "stateDir", flag: "state-dir", set: setString(func(s *Settings) *string { return &s.StateDir })},
		{name: "websocketCompression", flag: "websocket-compression", set: setString(func(s *Settings) *string { return &s.WebsocketCompression }, "deflate", "none")},
		{name: "metricsPublic", flag: "metrics-public", set: func(s *Settings, e configEntry) error {
			v, err := parseBool(e)
			s.MetricsPublic = v
			return err
		}},
		{name: "defaultTerminal", flag: "no-default-terminal", set: func(s *Settings, e configEntry) error {
			v, err := parseBool(e)
			s.NoDefaultTerminal = !v
			return err
		}},
		{name: "typingFirst", flag: "no-typing-first", set: func(s *Settings, e configEntry) error {
			v, err := parseBool(e)
			s.NoTypingFirst = !v
			return err
		}},
		{name: "daemonTelemetry", flag: "daemon-telemetry", set: func(s *Settings, e configEntry) error {
			v, err := parseBool(e)
			s.DaemonTelemetry = v
			return err
		}},
		{name: "logLevel", flag: "log-level", reload: true, set: setString(func(s *Settings) *string { return &s.LogLevel }, "debug", "info", "warn", "error")},
		{name: "logFormat", flag: "log-format", set: setString(func(s *Settings) *string { return &s.LogFormat }, "auto", "text", "journal")},
		{name: "shutdownTimeout", set: func(s *Settings, e configEntry) error {
			v, err := scalar(e)
			if err == nil {
				s.ShutdownTimeout, err = parseDurationValue(v)
			}
			return err
		}},
		{name: "ticketTTL", set: func(s *Settings, e configEntry) error {
			v, err := scalar(e)
			if err == nil {
				s.TicketTTL, err = parseDurationValue(v)
			}
			return err
		}},
		{name: "maxTotalBufferedBytes", set: func(s *Settings, e configEntry) error {
			v, err := scalar(e)
			if err == nil {
				s.MaxTotalBufferedBytes, err = parseSizeValue(v)
			}
			return err
		}},
		{name: "maxBufferedBytesPerToken", set: func(s *Settings, e configEntry) error {
			v, err := scalar(e)
			if err == nil {
				s.MaxBufferedBytesPerToken, err = parseSizeValue(v)
			}
			return err
		}},
		{name: "maxConnectionsPerToken", set: func(s *Settings, e configEntry) error {
			v, err := scalar(e)
			if err != nil {
				return err
			}
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return fmt.Errorf("want a positive integer, got %q", v)
			}
			s.MaxConnectionsPerToken = n
			return nil
		}},
		{name: "allowedOrigins", set: func(s *Settings, e configEntry) error {
			list := e.List
			if !e.IsList {
				list = []string{e.Value}
			}
			for _, o := range list {
				if strings.Contains(o, "://") || !strings.Contains(o, ":") {
					return fmt.Errorf("want host:port values (e.g. \"example.com:443\"), got %q", o)
				}
			}
			s.AllowedOrigins = list
			return nil
		}},
		{name: TCPAllowKey, reload: true, set: func(s *Settings, e configEntry) error {
			list := e.List
			if !e.IsList {
				list = []string{e.Value}
			}
			if len(list) > MaxTCPRules {
				return fmt.Errorf("more than %d rules", MaxTCPRules)
			}
			rules := make([]tcp.Rule, 0, len(list))
			for _, v := range list {
				r, err := tcp.ParseRule(v)
				if err != nil {
					return err
				}
				rules = append(rules, r)
			}
			s.TCPAllow = rules
			return nil
		}},
		{name: "publicUrl", flag: "public-url", set: func(s *Settings, e configEntry) error {
			v, err := scalar(e)
			if err != nil {
				return err
			}
			if _, err := ParsePublicURL(v); err != nil {
				return err
			}
			s.PublicURL = v
			return nil
		}},
		{name: "tlsCert", flag: "tls-cert", reload: true, set: setString(func(s *Settings) *string { return &s.TLSCert })},
		{name: "tlsKey", flag: "tls-key", reload: true, set: setString(func(s *Settings) *string { return &s.TLSKey })},
		{name: "insecureListen", flag: "insecure-listen", set: func(s *Settings, e configEntry) error {
			v, err := parseBool(e)
			s.InsecureListen = v
			return err
		}},
		{name: "record", set: setString(func(s *Settings) *string { return &s.Record }, RecordModes...)},
		{name: "allowedHosts", set: func(s *Settings, e configEntry) error {
			list := e.List
			if !e.IsList {
				list = []string{e.Value}
			}
			for _, h := range list {
				if h == "" || strings.ContainsAny(h, ":/[]") {
					return fmt.Errorf("want host names without scheme or port (e.g. \"terminals.example.com\"), got %q", h)
				}
			}
			s.AllowedHosts = list
			return nil
		}},
	}
	for _, f := range LimitFields() {
		keys = append(keys, configKey{name: f.Name, reload: true, set: func(s *Settings, e configEntry) error {
			v, err := scalar(e)
			if err != nil {
				return err
			}
			var n int64
			switch f.Kind {
			case LimitDuration:
				var d time.Duration
				d, err = parseDurationValue(v)
				n = int64(d)
			case LimitBytes:
				n, err = parseSizeValue(v)
			default:
				n, err = parseCountValue(v)
			}
			if err != nil {
				return err
			}
			if n == 0 { // "default" or 0, as in `ahpctl limits set`
				n, _ = DefaultLimits().LimitValue(f.Name)
			}
			s.Limits.SetLimitValue(f.Name, n)
			return nil
		}})
	}
	return keys
}()

func findConfigKey(name string) (configKey, bool) {
	for _, k := range configKeys {
		if k.name == name {
			return k, true
		}
	}
	return configKey{}, false
}

// suggestKey returns a key that name probably meant, or "": the same key
// but for case, "_" and "-" (max_output_stall, state-dir), else the
// closest key within a typo's reach (maxOutputStal, tcpAlow): at most 2
// edits, and at most a quarter of the name's letters.
func suggestKey(name string) string {
	norm := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
	}
	n := norm(name)
	best, bestD := "", 3
	for _, k := range configKeys {
		kn := norm(k.name)
		if kn == n {
			return k.name
		}
		if d := editdist.Distance(n, kn); d < bestD && 4*d <= len(n) {
			best, bestD = k.name, d
		}
	}
	return best
}

// DefaultPaths are where ahpd looks for its config file without
// --config, in order; the first that exists is used.
func DefaultPaths() []string {
	var p []string
	if d := os.Getenv("CONFIGURATION_DIRECTORY"); d != "" { // systemd: ConfigurationDirectory=ahpd
		p = append(p, filepath.Join(filepath.SplitList(d)[0], "config.toml"))
	}
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		p = append(p, filepath.Join(d, "ahpd", "config.toml"))
	} else if h, err := os.UserHomeDir(); err == nil {
		p = append(p, filepath.Join(h, ".config", "ahpd", "config.toml"))
	}
	return append(p, "/etc/ahpd/config.toml")
}

// FindFile resolves --config: "none" is no file; "" is the first of
// DefaultPaths that exists, or none.
func FindFile(flagValue string) string {
	switch flagValue {
	case "none":
		return ""
	case "":
		for _, p := range DefaultPaths() {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
		return ""
	}
	return flagValue
}

// readConfigFile reads and parses the config file at path.
func readConfigFile(path string) (*configFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &FileError{Path: path, Reason: err.Error()}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, &FileError{Path: path, Reason: err.Error()}
	}
	if len(b) > maxConfigBytes {
		return nil, &FileError{Path: path, Reason: fmt.Sprintf("larger than %d bytes", maxConfigBytes)}
	}
	return parseConfig(path, string(b))
}

// parseConfig parses config text; path is only for messages. It reports
// every bad line (up to 20), each as a *FileError.
//
// go-toml's parser reads the text, one top-level expression at a time, and
// places each key. Where it rejects the line that starts an expression and
// that line reads `key = word` (a value left unquoted, as files may have it:
// 2s, 64MiB, none), the word is the value and parsing goes on with the next
// line; any other rejection ends the parse.
func parseConfig(path, text string) (*configFile, error) {
	text = strings.TrimPrefix(text, "\ufeff")
	if strings.HasSuffix(text, "\r") {
		// A CRLF file cut short: its last line ends as if in CRLF, not
		// as a line TOML refuses for its lone CR (which would then be
		// read as a bare word: "0x0" rather than the number 0, until
		// a rewrite appends a line and completes the CRLF). Offsets in
		// the text are unchanged.
		text += "\n"
	}
	data := []byte(text)
	c := &configParser{cf: &configFile{Path: path}, data: data[:len(data):len(data)], nl: []int{-1}, seen: map[string]int{}}
	for i, b := range c.data {
		if b == '\n' {
			c.nl = append(c.nl, i)
		}
	}
	c.nl = append(c.nl, len(c.data))
	var p unstable.Parser
	base, end := 0, 0 // offsets in data of p's input and of the end of the last expression
	for p.Reset(c.data); ; {
		if p.NextExpression() {
			end = c.expression(c.data[base:], base, p.Expression())
		} else if err := p.Error(); err == nil {
			break
		} else if base = c.rejected(err, base, end); base < 0 {
			break
		} else {
			end = base
			p.Reset(c.data[base:])
		}
	}
	if len(c.errs) > 0 {
		return nil, errors.Join(c.errs...)
	}
	return c.cf, nil
}

// configParser is the state of parseConfig.
type configParser struct {
	cf   *configFile
	data []byte // the text; cap(data) is len(data), for offsetIn
	nl   []int  // nl[i] is where line i ends (line 0 before the text, the last line at len(data))
	seen map[string]int
	errs []error
}

func (c *configParser) fail(line int, key, format string, args ...any) {
	if len(c.errs) < 20 {
		c.errs = append(c.errs, &FileError{Path: c.cf.Path, Line: line, Key: key, Reason: fmt.Sprintf(format, args...)})
	}
}

// lineAt returns the line (from 1) of offset off; lineText a line's text
// without blanks around it.
func (c *configParser) lineAt(off int) int { return sort.SearchInts(c.nl, off) }
func (c *configParser) lineText(line int) string {
	return strings.TrimSpace(string(c.data[c.nl[line-1]+1 : c.nl[line]]))
}

// add takes e, a key of configKeys given once.
func (c *configParser) add(e configEntry) {
	if _, ok := findConfigKey(e.Key); !ok {
		if s := suggestKey(e.Key); s != "" {
			c.fail(e.Line, e.Key, "unknown key (did you mean %s?)", s)
		} else {
			c.fail(e.Line, e.Key, "unknown key (config.example.toml lists every key)")
		}
	} else if first, dup := c.seen[e.Key]; dup {
		c.fail(e.Line, e.Key, "given twice (first on line %d)", first)
	} else {
		c.seen[e.Key] = e.Line
		c.cf.Entries = append(c.cf.Entries, e)
	}
}

// expression takes a `key = value` that go-toml parsed, or refuses a table
// header; doc is the parser's input, at offset base of data. It returns
// where the expression ends in data.
func (c *configParser) expression(doc []byte, base int, expr *unstable.Node) int {
	var parts []string
	var from, to uint32 // the key in doc
	quoted := false
	for keys := expr.Key(); keys.Next(); {
		r := keys.Node().Raw
		if parts == nil {
			from = r.Offset
		}
		to = r.Offset + r.Length
		parts = append(parts, string(keys.Node().Data))
		quoted = quoted || doc[r.Offset] == '"' || doc[r.Offset] == '\''
	}
	line := c.lineAt(base + int(from))
	key := strings.Join(parts, ".")
	switch {
	case expr.Kind != unstable.KeyValue: // [table] or [[array of tables]]
		c.fail(line, "", "tables are not supported: write dotted keys (e.g. hostReceive.windowBytes = \"256KiB\")")
		return c.nl[line] // a header is one line
	case quoted:
		c.fail(line, "", "bad key %q: use the names in config.example.toml (letters, digits, '.', '_' and '-'; no quotes)", doc[from:to])
	default:
		if e, err := entryValue(doc, expr.Value()); err != nil {
			c.fail(line, key, "%v", err)
		} else {
			e.Key, e.Line = key, line
			e.Start, e.End = base+int(expr.Raw.Offset), base+int(expr.Raw.Offset+expr.Raw.Length)
			c.add(e)
		}
	}
	return base + int(expr.Raw.Offset+expr.Raw.Length)
}

// keyValueLine matches a line that starts with a bare, maybe dotted, key
// and "=": the key and what follows "=". Compiled when a config file
// first needs it, not at every start (a daemon without errors in its
// config never does; docs/benchmarks-memory.md).
var keyValueLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^([A-Za-z0-9_-]+(?:[ \t]*\.[ \t]*[A-Za-z0-9_-]+)*)[ \t]*=(.*)$`)
})

// rejected handles err, go-toml's parser rejecting the text after offset
// end (its input starting at base): it takes the line as `key = word` or
// reports it. It returns the offset of the line to go on with, or -1.
func (c *configParser) rejected(err error, base, end int) int {
	off := len(c.data)
	if perr := (*unstable.ParserError)(nil); errors.As(err, &perr) {
		off = base + offsetIn(c.data[base:], perr.Highlight)
	}
	line, start := c.lineAt(off), c.lineAt(end) // start: where the rejected expression starts
	for rest := c.data[end:c.nl[start]]; start < line && blankOrComment(rest); {
		start++
		rest = c.data[c.nl[start-1]+1 : c.nl[start]]
	}
	text := c.lineText(start)
	m := keyValueLine().FindStringSubmatch(text)
	var key, word string
	if m != nil {
		key = strings.Join(strings.Fields(m[1]), "") // "a . b" is a.b
		word, _, _ = strings.Cut(m[2], "#")
		word = strings.TrimSpace(word)
	}
	next := min(c.nl[line]+1, len(c.data))
	switch {
	case start != line: // within a value that spans lines
	case m == nil && text != "" && !strings.Contains(text, "=") && text[0] != '#' && text[0] != '[':
		c.fail(line, "", "want key = value, got %q", text)
		return next
	case m == nil:
	case word == "":
		c.fail(line, key, "missing value")
		return next
	case word[0] != '[' && word[0] != '{' && !strings.ContainsAny(word, "\"'"):
		from := c.nl[line-1] + 1
		raw := string(c.data[from:c.nl[line]])
		if i := strings.IndexByte(raw, '#'); i >= 0 { // a bare word holds no '#'
			raw = raw[:i]
		}
		c.add(configEntry{Key: key, Line: line, Value: word,
			Start: from + len(raw) - len(strings.TrimLeft(raw, " \t")), End: from + len(strings.TrimRight(raw, " \t\r"))})
		return next
	}
	c.fail(line, key, "%v", err)
	return -1
}

func blankOrComment(b []byte) bool {
	s := strings.TrimSpace(string(b))
	return s == "" || s[0] == '#'
}

// offsetIn returns the offset in b of sub, a slice of b's array, or len(b).
func offsetIn(b, sub []byte) int {
	off := cap(b) - cap(sub)
	if sub == nil || off < 0 || off > len(b) {
		return len(b)
	}
	return off
}

// entryValue converts the value of a `key = value`; doc is the parser's
// input. Integers become decimal text; other scalars keep their text, which
// the keys' setters parse.
func entryValue(doc []byte, v *unstable.Node) (configEntry, error) {
	switch v.Kind {
	case unstable.Array:
		e := configEntry{IsList: true}
		for it := v.Children(); it.Next(); {
			n := it.Node()
			if n.Kind != unstable.String {
				return configEntry{}, fmt.Errorf("array: want quoted strings, got %s", strings.ToLower(n.Kind.String()))
			}
			if multiline(doc, n) {
				return configEntry{}, errors.New("array: multi-line strings are not supported")
			}
			e.List = append(e.List, string(n.Data))
		}
		return e, nil
	case unstable.InlineTable:
		return configEntry{}, errors.New("inline tables are not supported")
	case unstable.String:
		if multiline(doc, v) {
			return configEntry{}, errors.New("multi-line strings are not supported")
		}
	case unstable.Integer:
		if n, err := strconv.ParseInt(string(v.Data), 0, 64); err == nil {
			return configEntry{Value: strconv.FormatInt(n, 10)}, nil
		}
	}
	return configEntry{Value: string(v.Data)}, nil
}

// multiline reports whether the string n is in triple quotes.
func multiline(doc []byte, n *unstable.Node) bool {
	raw := doc[n.Raw.Offset : n.Raw.Offset+n.Raw.Length]
	return bytes.HasPrefix(raw, []byte(`"""`)) || bytes.HasPrefix(raw, []byte("'''"))
}

// apply sets s from the file's entries; flagged keys (set on the command
// line) are skipped, since flags override the file.
func (f *configFile) apply(s *Settings, flagged map[string]bool) error {
	if f == nil {
		return nil
	}
	var errs []error
	for _, e := range f.Entries {
		k, _ := findConfigKey(e.Key)
		if k.flag != "" && flagged[k.flag] {
			continue
		}
		if err := k.set(s, e); err != nil {
			errs = append(errs, &FileError{Path: f.Path, Line: e.Line, Key: e.Key, Reason: err.Error()})
		}
	}
	return errors.Join(errs...)
}

// validate checks s as New will, and names where a bad value came from:
// the file's line or the flag.
func (s Settings) validate(f *configFile, flagged map[string]bool) error {
	where := func(key, reason string) error {
		if k, ok := findConfigKey(key); ok && k.flag != "" && flagged[k.flag] {
			return &FileError{Key: k.flag, Reason: reason}
		}
		if line := f.line(key); line > 0 {
			return &FileError{Path: f.Path, Line: line, Key: key, Reason: reason}
		}
		// key has its default: blame the file's key that the reason
		// mentions (e.g. hostReceive.maximumFrameBytes when the default
		// hostReceive.windowBytes is now too small for it).
		if culprit := blame(f, key, reason); culprit != "" {
			return &FileError{Path: f.Path, Line: f.line(culprit), Key: culprit,
				Reason: fmt.Sprintf("conflicts with the default of %s (%s: %s)", key, key, reason)}
		}
		return &FileError{Path: f.pathOr("defaults"), Key: key, Reason: reason}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(s.LogLevel)); err != nil {
		return where("logLevel", "want debug, info, warn or error, got "+strconv.Quote(s.LogLevel))
	}
	if !contains([]string{"auto", "text", "journal"}, s.LogFormat) {
		return where("logFormat", "want auto, text or journal, got "+strconv.Quote(s.LogFormat))
	}
	cfg := s.Config.WithDefaults()
	if cfg.TicketTTL < time.Second {
		return where("ticketTTL", "must be at least 1s")
	}
	if err := cfg.Validate(); err != nil {
		msg := strings.TrimPrefix(err.Error(), "limits: ")
		if key, reason, ok := strings.Cut(msg, ": "); ok {
			if _, known := findConfigKey(key); known {
				return where(key, reason)
			}
			// A ReceiveLimits group as a whole (e.g. clientReceiveDefaults).
			for _, k := range configKeys {
				if strings.HasPrefix(k.name, key+".") && f.line(k.name) > 0 {
					return where(k.name, key+": "+reason)
				}
			}
		}
		return &FileError{Path: f.pathOr("(defaults)"), Reason: err.Error()}
	}
	return nil
}

// blame returns the key of f that a validation failure of key (which f
// does not set) most likely comes from: one named in reason, preferring
// key's own ReceiveLimits group, else "".
func blame(f *configFile, key, reason string) string {
	if f == nil {
		return ""
	}
	group, _, _ := strings.Cut(key, ".")
	var named string
	for _, e := range f.Entries {
		g, member, ok := strings.Cut(e.Key, ".")
		if ok && g == group && strings.Contains(reason, member) {
			return e.Key
		}
		if named == "" && strings.Contains(reason, e.Key) {
			named = e.Key
		}
	}
	return named
}

func (f *configFile) pathOr(def string) string {
	if f == nil {
		return def
	}
	return f.Path
}

// LoadSettings builds the Settings: defaults, then the config file at
// path ("" for none), then the flags that were set (flagged, by name) from
// fromFlags. It returns the parsed file too, for line numbers.
func LoadSettings(path string, fromFlags Settings, flagged map[string]bool) (Settings, *configFile, error) {
	s := DefaultSettings()
	var cf *configFile
	if path != "" {
		var err error
		if cf, err = readConfigFile(path); err != nil {
			return s, nil, err
		}
		if err := cf.apply(&s, flagged); err != nil {
			return s, cf, err
		}
	}
	for name, copyFlag := range flagSetters {
		if flagged[name] {
			copyFlag(&s, &fromFlags)
		}
	}
	if err := s.validate(cf, flagged); err != nil {
		return s, cf, err
	}
	return s, cf, nil
}

// flagSetters copy each flag that the config file also sets.
var flagSetters = map[string]func(dst, src *Settings){
	"listen":                func(d, s *Settings) { d.Listen = s.Listen },
	"control":               func(d, s *Settings) { d.Control = s.Control },
	"state-dir":             func(d, s *Settings) { d.StateDir = s.StateDir },
	"websocket-compression": func(d, s *Settings) { d.WebsocketCompression = s.WebsocketCompression },
	"metrics-public":        func(d, s *Settings) { d.MetricsPublic = s.MetricsPublic },
	"no-default-terminal":   func(d, s *Settings) { d.NoDefaultTerminal = s.NoDefaultTerminal },
	"no-typing-first":       func(d, s *Settings) { d.NoTypingFirst = s.NoTypingFirst },
	"daemon-telemetry":      func(d, s *Settings) { d.DaemonTelemetry = s.DaemonTelemetry },
	"log-level":             func(d, s *Settings) { d.LogLevel = s.LogLevel },
	"log-format":            func(d, s *Settings) { d.LogFormat = s.LogFormat },
	"public-url":            func(d, s *Settings) { d.PublicURL = s.PublicURL },
	"tls-cert":              func(d, s *Settings) { d.TLSCert = s.TLSCert },
	"tls-key":               func(d, s *Settings) { d.TLSKey = s.TLSKey },
	"insecure-listen":       func(d, s *Settings) { d.InsecureListen = s.InsecureListen },
}

// RestartOnlyChanges names the keys whose values differ between a and b
// and that only a restart applies.
func RestartOnlyChanges(a, b Settings) []string {
	var out []string
	add := func(key string, differ bool) {
		if differ {
			out = append(out, key)
		}
	}
	add("listen", a.Listen != b.Listen)
	add("control", a.Control != b.Control)
	add("stateDir", a.StateDir != b.StateDir)
	add("websocketCompression", a.WebsocketCompression != b.WebsocketCompression)
	add("metricsPublic", a.MetricsPublic != b.MetricsPublic)
	add("defaultTerminal", a.NoDefaultTerminal != b.NoDefaultTerminal)
	add("typingFirst", a.NoTypingFirst != b.NoTypingFirst)
	add("daemonTelemetry", a.DaemonTelemetry != b.DaemonTelemetry)
	add("logFormat", a.LogFormat != b.LogFormat)
	add("shutdownTimeout", a.ShutdownTimeout != b.ShutdownTimeout)
	add("ticketTTL", a.TicketTTL != b.TicketTTL)
	add("maxTotalBufferedBytes", a.MaxTotalBufferedBytes != b.MaxTotalBufferedBytes)
	add("maxBufferedBytesPerToken", a.MaxBufferedBytesPerToken != b.MaxBufferedBytesPerToken)
	add("maxConnectionsPerToken", a.MaxConnectionsPerToken != b.MaxConnectionsPerToken)
	add("allowedOrigins", strings.Join(a.AllowedOrigins, ",") != strings.Join(b.AllowedOrigins, ","))
	add("allowedHosts", strings.Join(a.AllowedHosts, ",") != strings.Join(b.AllowedHosts, ","))
	add("publicUrl", a.PublicURL != b.PublicURL)
	add("insecureListen", a.InsecureListen != b.InsecureListen)
	add("record", a.Record != b.Record)
	// tlsCert and tlsKey are re-read at SIGHUP, but TLS cannot be turned
	// on or off on a listener that serves: that needs a restart.
	add("tlsCert", a.TLS() != b.TLS())
	return out
}
