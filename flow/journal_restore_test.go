package flow_test

import (
	"errors"
	"testing"

	"github.com/ahp-dev/ahpd/flow"
)

// A journal carried across an upgrade in place (Records, then
// RestoreJournal in the new binary) resumes as the original would: the
// same replay, ids and positions.
func TestJournalRestoreResumesAsTheOriginal(t *testing.T) {
	j, sent := setupResume(t) // six messages of 500, 1000 credited
	recs := j.Records()
	if len(recs) != 4 || recs[0].ID != 3 || recs[0].Start != 1000 || recs[3].End != 3000 {
		t.Fatalf("Records: %d records from id %d at %d to %d; want 4 from id 3 at 1000 to 3000", len(recs), recs[0].ID, recs[0].Start, recs[len(recs)-1].End)
	}
	r, err := flow.RestoreJournal(j.Released(), recs)
	if err != nil {
		t.Fatal(err)
	}
	if r.Last() != j.Last() || r.Released() != j.Released() || r.Len() != j.Len() || r.RetainedBytes() != j.RetainedBytes() {
		t.Fatalf("restored: last %v released %v len %d; original %v %v %d", r.Last(), r.Released(), r.Len(), j.Last(), j.Released(), j.Len())
	}
	accepted := flow.Position{MessageID: 4, Position: 2000}
	rp, err := r.Resume(accepted, r.Released())
	if err != nil {
		t.Fatal(err)
	}
	s := newSender(t, flow.SenderConfig{})
	st, _ := journalled(t, s, r, &rp, "new", limits(8192, 1024, 2048))
	s.Wake(st)
	got := drain(t, s)
	want := sent[4:]
	if len(got) != len(want) {
		t.Fatalf("restored journal replayed %d messages, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("replayed message %d: id %d %.30q, want id %d %.30q", i, got[i].id, got[i].text, want[i].id, want[i].text)
		}
	}
	// The texts are copies: the original's memory may go.
	j.Discard()
	if got := r.Records(); got[3].Text != recs[3].Text {
		t.Fatal("a restored text changed when the original journal was discarded")
	}
}

func TestJournalRestoreRefusesInconsistentRecords(t *testing.T) {
	j, _ := setupResume(t)
	good := j.Records()
	for _, tc := range []struct {
		name     string
		released flow.Position
		edit     func([]flow.JournalRecord) []flow.JournalRecord
	}{
		{"a gap in ids", j.Released(), func(r []flow.JournalRecord) []flow.JournalRecord { r[1].ID++; return r }},
		{"ids after another released", flow.Position{MessageID: 1, Position: 1000}, nil},
		{"a gap in positions", j.Released(), func(r []flow.JournalRecord) []flow.JournalRecord { r[2].Start++; r[2].End++; return r }},
		{"a size that is not the text's", j.Released(), func(r []flow.JournalRecord) []flow.JournalRecord { r[0].End--; return r }},
		{"an empty text", j.Released(), func(r []flow.JournalRecord) []flow.JournalRecord { r[3].Text, r[3].End = "", r[3].Start; return r }},
		{"an unknown class", j.Released(), func(r []flow.JournalRecord) []flow.JournalRecord { r[0].Class = 7; return r }},
		{"a plain span past the text", j.Released(), func(r []flow.JournalRecord) []flow.JournalRecord { r[0].PlainTo = len(r[0].Text) + 1; return r }},
		{"a plain span with a quote", j.Released(), func(r []flow.JournalRecord) []flow.JournalRecord {
			r[0].PlainFrom, r[0].PlainTo = 0, len(r[0].Text) // the text is JSON: it has quotes
			return r
		}},
		{"a negative released position", flow.Position{MessageID: 2, Position: -1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := append([]flow.JournalRecord(nil), good...)
			if tc.edit != nil {
				recs = tc.edit(recs)
			}
			if _, err := flow.RestoreJournal(tc.released, recs); !errors.Is(err, flow.ErrResume) {
				t.Fatalf("RestoreJournal = %v, want ErrResume", err)
			}
		})
	}
	if _, err := flow.RestoreJournal(j.Released(), good); err != nil {
		t.Fatalf("the unedited records: %v", err)
	}
}

func TestReceiverRestore(t *testing.T) {
	l := limits(64*KiB, 16*KiB, 64*KiB)
	acc, rel := flow.Position{MessageID: 9, Position: 9000}, flow.Position{MessageID: 7, Position: 7000}
	r, err := flow.RestoreReceiver(l, acc, rel)
	if err != nil {
		t.Fatal(err)
	}
	if r.Accepted() != acc || r.Released() != rel || r.Announced() != 7000 || r.Limits() != l {
		t.Fatalf("restored receiver: accepted %v released %v announced %d", r.Accepted(), r.Released(), r.Announced())
	}
	// It goes on from there: releasing up to accepted announces the rest.
	if consumed, send, err := r.Release(acc); err != nil || !send || consumed != 9000 {
		t.Fatalf("Release(%v) = %d, %v, %v; want 9000, true, nil", acc, consumed, send, err)
	}
	for _, tc := range []struct {
		name     string
		l        flow.ReceiveLimits
		acc, rel flow.Position
	}{
		{"released beyond accepted", l, rel, acc},
		{"same id, other position", l, acc, flow.Position{MessageID: 9, Position: 8000}},
		{"negative", l, acc, flow.Position{MessageID: -1, Position: 0}},
		{"bad limits", limits(10, 10, 10), acc, rel},
	} {
		if _, err := flow.RestoreReceiver(tc.l, tc.acc, tc.rel); !errors.Is(err, flow.ErrResume) {
			t.Errorf("%s: RestoreReceiver = %v, want ErrResume", tc.name, err)
		}
	}
}
