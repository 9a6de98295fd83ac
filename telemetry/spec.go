package telemetry

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/ahp-dev/ahpd/flow"
)

// Spec is what the control plane creates a telemetry channel from; the
// daemon's creator turns it into a Channel and its Source. It travels as
// the JSON create member {type:"telemetry", ...}.
type Spec struct {
	Type     string        `json:"type"`               // "telemetry"
	Kind     string        `json:"kind"`               // system, process, command, push, daemon
	Interval time.Duration `json:"interval,omitempty"` // system, process, daemon
	Pid      int           `json:"pid,omitempty"`      // process: the root
	Command  []string      `json:"command,omitempty"`  // command
	Policy   Policy        `json:"policy,omitempty"`
	// History: 0 the default, negative none.
	History time.Duration `json:"history,omitempty"`
	Title   string        `json:"title,omitempty"`
}

// The source kinds.
var Kinds = []string{"system", "process", "command", "push", "daemon"}

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
	default:
		return bad("kind: %s: want system, process, command, push or daemon", strconv.Quote(s.Kind))
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
