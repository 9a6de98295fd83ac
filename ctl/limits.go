package ctl

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"

	"github.com/ahp-dev/ahpd/internal/editdist"
	"github.com/ahp-dev/ahpd/internal/limits"
	"github.com/ahp-dev/ahpd/internal/units"
)

// Kinds of limit values.
const (
	kindSize     = int(limits.Bytes)
	kindDuration = int(limits.Duration)
	kindCount    = int(limits.Count)
)

// limitKey is one KEY of `limits set`: its wire name (PROTOCOL.md §9), its
// update_mask path, and accessors to ahpv1.Limits (durations in ns).
type limitKey struct {
	name string
	path string
	kind int
	spec limits.Spec
}

// get reads the key's value from l (0 when unset or not a valid duration:
// the daemon sends valid ones).
func (k limitKey) get(l *ahpv1.Limits) int64 {
	v, _ := limits.Get(l, k.spec)
	return v
}

func (k limitKey) set(l *ahpv1.Limits, v int64) { limits.Set(l, k.spec, v) }

// limitKeys lists the keys in the order `limits get` prints them: the
// table of internal/limits.
var limitKeys = func() []limitKey {
	var keys []limitKey
	for _, s := range limits.All() {
		keys = append(keys, limitKey{name: s.Name, path: limits.ProtoPath(s.Name), kind: int(s.Kind), spec: s})
	}
	return keys
}()

func normKey(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }

func findLimitKey(k string) (limitKey, bool) {
	n := normKey(k)
	for _, key := range limitKeys {
		if normKey(key.name) == n {
			return key, true
		}
	}
	return limitKey{}, false
}

// parseLimitAssignments turns KEY=VALUE arguments into a SetLimits request.
// VALUE "default" (or 0) restores the default.
func parseLimitAssignments(args []string) (*ahpv1.SetLimitsRequest, error) {
	req := &ahpv1.SetLimitsRequest{Limits: &ahpv1.Limits{}}
	var paths []string
	seen := map[string]bool{}
	for _, arg := range args {
		k, v, ok := strings.Cut(arg, "=")
		if !ok || k == "" {
			return nil, usagef("limits set: want KEY=VALUE, got %q", arg)
		}
		key, ok := findLimitKey(k)
		if !ok {
			return nil, usagef("limits set: unknown key %q%s (keys: %s)", k, didYouMean(k, limitKeyNameList()), limitKeyNames())
		}
		if seen[key.name] {
			return nil, usagef("limits set: %s given twice", key.name)
		}
		seen[key.name] = true
		var n int64
		var err error
		switch {
		case v == "default":
		case key.kind == kindDuration:
			var d time.Duration
			d, err = time.ParseDuration(v)
			n = int64(d)
			if err != nil {
				err = fmt.Errorf("want a duration such as 500ms, 2s or 1m30s, got %q", v)
			}
		case key.kind == kindSize:
			n, err = units.ParseSize(v)
		default:
			n, err = strconv.ParseInt(v, 10, 64)
			if err != nil {
				err = fmt.Errorf("want an integer, got %q", v)
			}
		}
		if err != nil {
			return nil, usagef("limits set: %s: %v", key.name, err)
		}
		key.set(req.Limits, n)
		paths = append(paths, key.path)
	}
	req.UpdateMask = &fieldmaskpb.FieldMask{Paths: paths}
	return req, nil
}

func limitKeyNames() string { return strings.Join(limitKeyNameList(), ", ") }

func limitKeyNameList() []string {
	names := make([]string, len(limitKeys))
	for i, k := range limitKeys {
		names[i] = k.name
	}
	return names
}

// didYouMean is " (did you mean NAME?)" for the candidate closest to
// name, when it is close enough to be a typo (ignoring case and '_'),
// else "".
func didYouMean(name string, candidates []string) string {
	best, bestD := "", 4
	n := normKey(name)
	for _, c := range candidates {
		if d := editdist.Distance(n, normKey(c)); d < bestD && 2*d < len(n) {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return " (did you mean " + best + "?)"
}

// limitValueView is `limits get KEY -o json|yaml`.
type limitValueView struct {
	Key        string `json:"key"`
	Value      string `json:"value"`
	Default    string `json:"default"`
	Overridden bool   `json:"overridden"` // by the channel's override (--channel)
}

// formatLimit renders a value the way `limits set` accepts it.
func formatLimit(kind int, v int64) string {
	switch kind {
	case kindDuration:
		return time.Duration(v).String()
	case kindSize:
		return units.FormatSize(v)
	}
	return strconv.FormatInt(v, 10)
}
