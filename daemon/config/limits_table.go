package config

import (
	"reflect"

	"github.com/ahp-dev/ahpd/flow"
	"github.com/ahp-dev/ahpd/internal/limits"
)

// LimitField describes one settable limit (a row of internal/limits).
type LimitField = limits.Spec

// LimitKind is how a limit's value is written.
type LimitKind = limits.Kind

// Kinds of limits.
const (
	LimitBytes    = limits.Bytes    // a size in bytes (UTF-16 bytes for flow-control limits)
	LimitDuration = limits.Duration // a time.Duration, as nanoseconds
	LimitCount    = limits.Count    // a plain count
)

// ReceiveGroups are the names of the three ReceiveLimits groups.
var ReceiveGroups = limits.Groups

// LimitFields lists every settable limit, in a stable order. The names of
// ReceiveLimits members are GROUP.windowBytes, GROUP.maximumFrameBytes and
// GROUP.maximumMessageBytes.
func LimitFields() []LimitField { return limits.All() }

// limitIndex maps each limit's name to its field in Limits: the
// `limit:"NAME"` tags, and for a flow.ReceiveLimits group its members' JSON
// names. It panics at start if a row of the table has no field or a tag
// no row.
var limitIndex = func() map[string][]int {
	idx := map[string][]int{}
	t := reflect.TypeFor[Limits]()
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("limit")
		if name == "" {
			continue
		}
		if f.Type != reflect.TypeFor[flow.ReceiveLimits]() {
			idx[name] = []int{i}
			continue
		}
		for j := range f.Type.NumField() {
			m := f.Type.Field(j)
			idx[name+"."+m.Tag.Get("json")] = []int{i, j}
		}
	}
	for _, s := range limits.All() {
		if idx[s.Name] == nil {
			panic("config.Limits has no field for the limit " + s.Name)
		}
	}
	if len(idx) != len(limits.All()) {
		panic("config.Limits has a limit tag that internal/limits does not list")
	}
	return idx
}()

// group returns the ReceiveLimits group called name.
func (l *Limits) group(name string) *flow.ReceiveLimits {
	i := limitIndex[name+"."+limits.Members[0]]
	return reflect.ValueOf(l).Elem().Field(i[0]).Addr().Interface().(*flow.ReceiveLimits)
}

// LimitValue returns the limit called name (durations in nanoseconds).
func (l Limits) LimitValue(name string) (int64, bool) {
	i, ok := limitIndex[name]
	if !ok {
		return 0, false
	}
	return reflect.ValueOf(l).FieldByIndex(i).Int(), true
}

// SetLimitValue sets the limit called name (durations in nanoseconds).
func (l *Limits) SetLimitValue(name string, v int64) bool {
	i, ok := limitIndex[name]
	if !ok {
		return false
	}
	reflect.ValueOf(l).Elem().FieldByIndex(i).SetInt(v)
	return true
}

// ChangedLimits returns the names of the limits whose values differ
// between a and b, in LimitFields order.
func ChangedLimits(a, b Limits) []string {
	var changed []string
	for _, f := range LimitFields() {
		x, _ := a.LimitValue(f.Name)
		y, _ := b.LimitValue(f.Name)
		if x != y {
			changed = append(changed, f.Name)
		}
	}
	return changed
}
