package telemetry

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/ahp-dev/ahpd/flow"
)

// Spec is what the control plane creates a telemetry channel from; the
// daemon's creator turns it into a Channel and its Source. It travels as
// the JSON create member {type:"telemetry", ...}.
type Spec struct {
	Type     string        `json:"type"`               // "telemetry"
	Kind     string        `json:"kind"`               // system, process, command, push, daemon, scrape
	Interval time.Duration `json:"interval,omitempty"` // system, process, daemon, scrape
	Pid      int           `json:"pid,omitempty"`      // process: the root
	Command  []string      `json:"command,omitempty"`  // command
	Policy   Policy        `json:"policy,omitempty"`
	// History: 0 the default, negative none.
	History time.Duration `json:"history,omitempty"`
	Title   string        `json:"title,omitempty"`
	// scrape (ScrapeConfig's fields of the same names).
	URL        string        `json:"url,omitempty"`
	Timeout    time.Duration `json:"timeout,omitempty"`
	MaxBytes   int64         `json:"maxBytes,omitempty"`
	TokenFile  string        `json:"bearerTokenFile,omitempty"`
	Match      []string      `json:"match,omitempty"`
	Labels     []string      `json:"labels,omitempty"`
	Histograms HistogramMode `json:"histograms,omitempty"`
	Quantiles  []float64     `json:"quantiles,omitempty"`
}

// ScrapeConfig is the config of the spec's scrape source, with allow,
// maxSeries and log.
func (s Spec) ScrapeConfig(allow Allower, maxSeries int, log *slog.Logger) ScrapeConfig {
	return ScrapeConfig{URL: s.URL, Interval: s.Interval, Timeout: s.Timeout, MaxBytes: s.MaxBytes, BearerTokenFile: s.TokenFile, Match: s.Match, Labels: s.Labels,
		Histograms: s.Histograms, Quantiles: s.Quantiles, MaxSeries: maxSeries, Allow: allow, Logger: log}
}

// The source kinds.
var Kinds = []string{"system", "process", "command", "push", "daemon", "scrape"}

// ParseSpec parses and checks a create member; errors are *flow.Error
// -32602 naming the field.
func ParseSpec(params json.RawMessage) (Spec, error) {
	var s Spec
	bad := func(format string, args ...any) (Spec, error) {
		return Spec{}, &flow.Error{Code: flow.ErrCodeInvalidParams, Message: "create." + fmt.Sprintf(format, args...)}
	}
	if err := json.Unmarshal(params, &s); err != nil {
		return bad("telemetry: %v", err)
	}
	switch s.Kind {
	case "system", "push", "daemon":
	case "process":
		if s.Pid <= 0 {
			return bad("pid: a process source needs the pid of its root")
		}
	case "command":
		if len(s.Command) == 0 || s.Command[0] == "" {
			return bad("command: a command source needs a command")
		}
	case "scrape":
		if err := s.ScrapeConfig(nil, 0, nil).Validate(); err != nil {
			return bad("%v", err)
		}
	default:
		return bad("kind: %s: want system, process, command, push, daemon or scrape", strconv.Quote(s.Kind))
	}
	if s.Interval != 0 {
		if _, err := CheckInterval(s.Interval); err != nil {
			return bad("%v", err)
		}
	}
	if _, err := ParsePolicy(string(s.Policy)); err != nil {
		return bad("%v", err)
	}
	return s, nil
}
