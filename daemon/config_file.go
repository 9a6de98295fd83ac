package daemon

// The config file (PROTOCOL.md §10 --config): a small subset of TOML, one
// `key = value` per line, that the standard library parses without a new
// dependency. systemd/config.example.toml documents every key.
//
//	# comment
//	listen = "127.0.0.1:7681"
//	maxOutputStall = "60s"            # Go durations: 500ms, 2s, 1m30s
//	maxBufferedBytes = "64MiB"        # integers with optional KiB, MiB, GiB
//	hostReceive.windowBytes = "256KiB"
//	allowedOrigins = ["example.com:443", "localhost:7681"]
//
// Keys are those of the flags (camelCase) and of `ahpctl limits set`
// (PROTOCOL.md §9); values may be quoted ("…" with Go/TOML escapes, or '…'
// literally) or bare; arrays of strings fit on one line. Tables, multi-line
// strings and inline tables are refused with the line number. Limits and
// logLevel are re-read on SIGHUP; the other keys need a restart.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ahp-dev/ahpd/internal/units"
)

// maxConfigBytes bounds the config file.
const maxConfigBytes = 1 << 20

// settings are what the command line and the config file set.
type settings struct {
	Config           // the daemon's configuration (zero fields: defaults)
	Control   string // control socket path; "": the default; "none": no control plane
	LogLevel  string // debug, info, warn or error; default info
	LogFormat string // auto, text or journal; default auto
}

// defaultSettings has every limit at its default, so that a file may set
// one member of a ReceiveLimits group (Limits.WithDefaults only fills a
// group that is entirely zero).
func defaultSettings() settings {
	return settings{Config: Config{Limits: DefaultLimits()}, LogLevel: "info", LogFormat: "auto"}
}

// ConfigError is a problem with one line of a config file (Line 0: the
// file as a whole) or with a flag (Path "").
type ConfigError struct {
	Path   string
	Line   int
	Key    string
	Reason string
}

func (e *ConfigError) Error() string {
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
	set    func(s *settings, e configEntry) error
}

func scalar(e configEntry) (string, error) {
	if e.IsList {
		return "", errors.New("want a single value, not an array")
	}
	return e.Value, nil
}

func setString(dst func(*settings) *string, allowed ...string) func(*settings, configEntry) error {
	return func(s *settings, e configEntry) error {
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
		{name: "listen", flag: "listen", set: setString(func(s *settings) *string { return &s.Listen })},
		{name: "control", flag: "control", set: setString(func(s *settings) *string { return &s.Control })},
		{name: "stateDir", flag: "state-dir", set: setString(func(s *settings) *string { return &s.StateDir })},
		{name: "websocketCompression", flag: "websocket-compression", set: setString(func(s *settings) *string { return &s.WebsocketCompression }, "deflate", "none")},
		{name: "metricsPublic", flag: "metrics-public", set: func(s *settings, e configEntry) error {
			v, err := parseBool(e)
			s.MetricsPublic = v
			return err
		}},
		{name: "defaultTerminal", flag: "no-default-terminal", set: func(s *settings, e configEntry) error {
			v, err := parseBool(e)
			s.NoDefaultTerminal = !v
			return err
		}},
		{name: "typingFirst", flag: "no-typing-first", set: func(s *settings, e configEntry) error {
			v, err := parseBool(e)
			s.NoTypingFirst = !v
			return err
		}},
		{name: "logLevel", flag: "log-level", reload: true, set: setString(func(s *settings) *string { return &s.LogLevel }, "debug", "info", "warn", "error")},
		{name: "logFormat", flag: "log-format", set: setString(func(s *settings) *string { return &s.LogFormat }, "auto", "text", "journal")},
		{name: "shutdownTimeout", set: func(s *settings, e configEntry) error {
			v, err := scalar(e)
			if err == nil {
				s.ShutdownTimeout, err = parseDurationValue(v)
			}
			return err
		}},
		{name: "ticketTTL", set: func(s *settings, e configEntry) error {
			v, err := scalar(e)
			if err == nil {
				s.TicketTTL, err = parseDurationValue(v)
			}
			return err
		}},
		{name: "maxTotalBufferedBytes", set: func(s *settings, e configEntry) error {
			v, err := scalar(e)
			if err == nil {
				s.MaxTotalBufferedBytes, err = parseSizeValue(v)
			}
			return err
		}},
		{name: "maxConnectionsPerToken", set: func(s *settings, e configEntry) error {
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
		{name: "allowedOrigins", set: func(s *settings, e configEntry) error {
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
		{name: "allowedHosts", set: func(s *settings, e configEntry) error {
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
		keys = append(keys, configKey{name: f.Name, reload: true, set: func(s *settings, e configEntry) error {
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

// suggestKey returns a key that name probably meant (case, "_" and "-"
// aside), or "".
func suggestKey(name string) string {
	norm := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
	}
	for _, k := range configKeys {
		if norm(k.name) == norm(name) {
			return k.name
		}
	}
	return ""
}

// defaultConfigPaths are where ahpd looks for its config file without
// --config, in order; the first that exists is used.
func defaultConfigPaths() []string {
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

// findConfig resolves --config: "none" is no file; "" is the first of
// defaultConfigPaths that exists, or none.
func findConfig(flagValue string) string {
	switch flagValue {
	case "none":
		return ""
	case "":
		for _, p := range defaultConfigPaths() {
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
		return nil, &ConfigError{Path: path, Reason: err.Error()}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, &ConfigError{Path: path, Reason: err.Error()}
	}
	if len(b) > maxConfigBytes {
		return nil, &ConfigError{Path: path, Reason: fmt.Sprintf("larger than %d bytes", maxConfigBytes)}
	}
	return parseConfig(path, string(b))
}

// parseConfig parses config text; path is only for messages. It reports
// every bad line (up to 20), each as a *ConfigError.
func parseConfig(path, text string) (*configFile, error) {
	cf := &configFile{Path: path}
	var errs []error
	fail := func(line int, key, format string, args ...any) {
		if len(errs) < 20 {
			errs = append(errs, &ConfigError{Path: path, Line: line, Key: key, Reason: fmt.Sprintf(format, args...)})
		}
	}
	seen := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if n == 1 {
			line = strings.TrimPrefix(line, "\ufeff")
		}
		if line == "" || line[0] == '#' {
			continue
		}
		if line[0] == '[' {
			fail(n, "", "tables are not supported: write dotted keys (e.g. hostReceive.windowBytes = \"256KiB\")")
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			fail(n, "", "want key = value, got %q", line)
			continue
		}
		key := strings.TrimSpace(k)
		if !validBareKey(key) {
			fail(n, "", "bad key %q: use the names in config.example.toml (letters, digits, '.', '_' and '-'; no quotes)", key)
			continue
		}
		e, err := parseConfigValue(strings.TrimSpace(v))
		if err != nil {
			fail(n, key, "%v", err)
			continue
		}
		e.Key, e.Line = key, n
		if _, ok := findConfigKey(key); !ok {
			if s := suggestKey(key); s != "" {
				fail(n, key, "unknown key (did you mean %s?)", s)
			} else {
				fail(n, key, "unknown key (config.example.toml lists every key)")
			}
			continue
		}
		if first, dup := seen[key]; dup {
			fail(n, key, "given twice (first on line %d)", first)
			continue
		}
		seen[key] = n
		cf.Entries = append(cf.Entries, e)
	}
	if err := sc.Err(); err != nil {
		fail(n+1, "", "%v", err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cf, nil
}

func validBareKey(k string) bool {
	if k == "" || k[0] == '.' || k[len(k)-1] == '.' {
		return false
	}
	for _, r := range k {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
		default:
			return false
		}
	}
	return true
}

// parseConfigValue parses what follows "=", with an optional trailing
// comment.
func parseConfigValue(v string) (configEntry, error) {
	if v == "" {
		return configEntry{}, errors.New("missing value")
	}
	if v[0] == '[' {
		var e configEntry
		e.IsList = true
		rest := strings.TrimSpace(v[1:])
		for {
			if rest == "" {
				return configEntry{}, errors.New("unterminated array: an array must fit on one line")
			}
			if rest[0] == ']' {
				rest = rest[1:]
				break
			}
			s, after, err := parseString(rest)
			if err != nil {
				return configEntry{}, fmt.Errorf("array: %v", err)
			}
			e.List = append(e.List, s)
			rest = strings.TrimSpace(after)
			if strings.HasPrefix(rest, ",") {
				rest = strings.TrimSpace(rest[1:])
			} else if !strings.HasPrefix(rest, "]") {
				return configEntry{}, errors.New("array: want , or ] after an element")
			}
		}
		if err := trailing(rest); err != nil {
			return configEntry{}, err
		}
		return e, nil
	}
	if v[0] == '"' || v[0] == '\'' {
		s, rest, err := parseString(v)
		if err != nil {
			return configEntry{}, err
		}
		if err := trailing(rest); err != nil {
			return configEntry{}, err
		}
		return configEntry{Value: s}, nil
	}
	if v[0] == '{' {
		return configEntry{}, errors.New("inline tables are not supported")
	}
	bare, _, _ := strings.Cut(v, "#")
	bare = strings.TrimSpace(bare)
	if bare == "" {
		return configEntry{}, errors.New("missing value")
	}
	if strings.ContainsAny(bare, "\"'") {
		return configEntry{}, fmt.Errorf("stray quote in %q", bare)
	}
	return configEntry{Value: bare}, nil
}

// parseString parses a quoted string at the start of s and returns it
// and the rest of s.
func parseString(s string) (string, string, error) {
	switch {
	case strings.HasPrefix(s, `"""`) || strings.HasPrefix(s, `'''`):
		return "", "", errors.New("multi-line strings are not supported")
	case strings.HasPrefix(s, "'"):
		end := strings.IndexByte(s[1:], '\'')
		if end < 0 {
			return "", "", errors.New("unterminated string")
		}
		return s[1 : 1+end], s[2+end:], nil
	case strings.HasPrefix(s, `"`):
		for i := 1; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++
			case '"':
				u, err := strconv.Unquote(s[:i+1])
				if err != nil {
					return "", "", fmt.Errorf("bad string %s: %v", s[:i+1], err)
				}
				return u, s[i+1:], nil
			}
		}
		return "", "", errors.New("unterminated string")
	}
	return "", "", fmt.Errorf("want a quoted string, got %q", s)
}

func trailing(rest string) error {
	rest = strings.TrimSpace(rest)
	if rest != "" && rest[0] != '#' {
		return fmt.Errorf("unexpected %q after the value", rest)
	}
	return nil
}

// apply sets s from the file's entries; flagged keys (set on the command
// line) are skipped, since flags override the file.
func (f *configFile) apply(s *settings, flagged map[string]bool) error {
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
			errs = append(errs, &ConfigError{Path: f.Path, Line: e.Line, Key: e.Key, Reason: err.Error()})
		}
	}
	return errors.Join(errs...)
}

// validate checks s as New will, and names where a bad value came from:
// the file's line or the flag.
func (s settings) validate(f *configFile, flagged map[string]bool) error {
	where := func(key, reason string) error {
		if k, ok := findConfigKey(key); ok && k.flag != "" && flagged[k.flag] {
			return &ConfigError{Key: k.flag, Reason: reason}
		}
		if line := f.line(key); line > 0 {
			return &ConfigError{Path: f.Path, Line: line, Key: key, Reason: reason}
		}
		// key has its default: blame the file's key that the reason
		// mentions (e.g. hostReceive.maximumFrameBytes when the default
		// hostReceive.windowBytes is now too small for it).
		if culprit := blame(f, key, reason); culprit != "" {
			return &ConfigError{Path: f.Path, Line: f.line(culprit), Key: culprit,
				Reason: fmt.Sprintf("conflicts with the default of %s (%s: %s)", key, key, reason)}
		}
		return &ConfigError{Path: f.pathOr("defaults"), Key: key, Reason: reason}
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
		return &ConfigError{Path: f.pathOr("(defaults)"), Reason: err.Error()}
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

// loadSettings builds the settings: defaults, then the config file at
// path ("" for none), then the flags that were set (flagged, by name) from
// fromFlags. It returns the parsed file too, for line numbers.
func loadSettings(path string, fromFlags settings, flagged map[string]bool) (settings, *configFile, error) {
	s := defaultSettings()
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
var flagSetters = map[string]func(dst, src *settings){
	"listen":                func(d, s *settings) { d.Listen = s.Listen },
	"control":               func(d, s *settings) { d.Control = s.Control },
	"state-dir":             func(d, s *settings) { d.StateDir = s.StateDir },
	"websocket-compression": func(d, s *settings) { d.WebsocketCompression = s.WebsocketCompression },
	"metrics-public":        func(d, s *settings) { d.MetricsPublic = s.MetricsPublic },
	"no-default-terminal":   func(d, s *settings) { d.NoDefaultTerminal = s.NoDefaultTerminal },
	"no-typing-first":       func(d, s *settings) { d.NoTypingFirst = s.NoTypingFirst },
	"log-level":             func(d, s *settings) { d.LogLevel = s.LogLevel },
	"log-format":            func(d, s *settings) { d.LogFormat = s.LogFormat },
}

// restartOnlyChanges names the keys whose values differ between a and b
// and that only a restart applies.
func restartOnlyChanges(a, b settings) []string {
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
	add("logFormat", a.LogFormat != b.LogFormat)
	add("shutdownTimeout", a.ShutdownTimeout != b.ShutdownTimeout)
	add("ticketTTL", a.TicketTTL != b.TicketTTL)
	add("maxTotalBufferedBytes", a.MaxTotalBufferedBytes != b.MaxTotalBufferedBytes)
	add("maxConnectionsPerToken", a.MaxConnectionsPerToken != b.MaxConnectionsPerToken)
	add("allowedOrigins", strings.Join(a.AllowedOrigins, ",") != strings.Join(b.AllowedOrigins, ","))
	add("allowedHosts", strings.Join(a.AllowedHosts, ",") != strings.Join(b.AllowedHosts, ","))
	return out
}
