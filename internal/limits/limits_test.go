package limits

import (
	"testing"

	ahpv1 "github.com/ahp-dev/ahpd/proto/ahp/v1"
)

// TestTableCoversProto: every limit has its field in ahpv1.Limits (a value
// set is read back), and every field of ahpv1.Limits is a limit or a
// group: a field added to the proto without a row here fails.
func TestTableCoversProto(t *testing.T) {
	p := &ahpv1.Limits{}
	for i, s := range All() {
		v := int64(1000 + i)
		if s.Kind == Duration {
			v *= 1e6
		}
		Set(p, s, v)
		got, err := Get(p, s)
		if err != nil || got != v {
			t.Errorf("%s: Set %d, Get %d, %v", s.Name, v, got, err)
		}
	}
	covered := map[string]bool{}
	for _, s := range All() {
		g, _, ok := s.Group()
		if ok {
			covered[ProtoPath(g)] = true
		} else {
			covered[ProtoPath(s.Name)] = true
		}
	}
	fields := p.ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		if name := string(fields.Get(i).Name()); !covered[name] {
			t.Errorf("ahpv1.Limits.%s has no row in the table", name)
		}
	}
}

func TestProtoPath(t *testing.T) {
	for in, want := range map[string]string{"maxIdLength": "max_id_length", "hostReceive.windowBytes": "host_receive.window_bytes", "maxTerminals": "max_terminals"} {
		if got := ProtoPath(in); got != want {
			t.Errorf("ProtoPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestGetUnsetIsZero(t *testing.T) {
	for _, s := range All() {
		if v, err := Get(&ahpv1.Limits{}, s); v != 0 || err != nil {
			t.Errorf("%s of empty Limits = %d, %v", s.Name, v, err)
		}
	}
}
