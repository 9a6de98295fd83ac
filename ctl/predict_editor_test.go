package ctl

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// lineEditor is a host-side line editor like a shell's: the echo it
// writes for each key (readline's way of inserting and deleting in the
// middle of a line: rewrite the rest and move back).
type lineEditor struct {
	line []byte
	at   int
}

func (e *lineEditor) key(k string) string {
	rest := func() string { return string(e.line[e.at:]) }
	switch k {
	case "\r":
		e.line, e.at = e.line[:0], 0
		return "\r\n$ "
	case "\x7f":
		if e.at == 0 {
			return "\a"
		}
		e.line = append(e.line[:e.at-1], e.line[e.at:]...)
		e.at--
		return "\b" + rest() + " " + strings.Repeat("\b", len(e.line)-e.at+1)
	case "\x1b[D":
		if e.at == 0 {
			return "\a"
		}
		e.at--
		return "\b"
	case "\x1b[C":
		if e.at == len(e.line) {
			return ""
		}
		e.at++
		return string(e.line[e.at-1])
	}
	e.line = append(e.line[:e.at], append([]byte(k), e.line[e.at:]...)...)
	e.at++
	return k + rest() + strings.Repeat("\b", len(e.line)-e.at)
}

// TestPredictLineEditor types random keys into a line editor behind a
// 200 ms round trip (with jitter), in fake time: whenever the echo has
// settled, the terminal shows exactly the host's screen; and plain typing
// at the end of the line, once confirmed, is shown at once, every key.
func TestPredictLineEditor(t *testing.T) {
	keys := []string{"a", "b", "c", " ", "\x7f", "\x1b[D", "\x1b[C", "\r"}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 40))
		r := newPredictRig(t, predictAlways)
		var ed lineEditor
		r.host("$ ")
		type echo struct {
			at   time.Time
			text string
		}
		var queue []echo
		deliver := func() {
			for len(queue) > 0 && !queue[0].at.After(r.now) {
				r.host(queue[0].text)
				queue = queue[1:]
			}
		}
		endOnly := seed%4 == 0 // plain typing at the end of the line
		shown, typed := 0, 0
		for i := 0; i < 60; i++ {
			k := keys[rng.IntN(len(keys))]
			if endOnly {
				k = keys[rng.IntN(4)]
			}
			before := r.p.shown == r.p.epoch && !r.p.hold && len(r.p.pending) < maxPredictions
			c := r.p.cursor()
			r.key(k)
			// Every character and every backspace the editor takes is
			// shown at once while prediction is confirmed.
			if before && i > 0 && (len(k) == 1 && k[0] >= ' ' && k[0] < 0x7f || k == "\x7f" && ed.at > 0) {
				typed++
				want := k
				if k == "\x7f" {
					c.x--
					want = r.p.text(c.x, c.y) // what moved left over the deleted one
				}
				if r.predicted(c.x, c.y, cmpOr(want, " ")) {
					shown++
				}
			}
			e := ed.key(k)
			at := r.now.Add(200*time.Millisecond + time.Duration(rng.IntN(40))*time.Millisecond)
			if n := len(queue); n > 0 && at.Before(queue[n-1].at) {
				at = queue[n-1].at // the link keeps order
			}
			queue = append(queue, echo{at, e})
			for range rng.IntN(30) {
				r.now = r.now.Add(10 * time.Millisecond)
				deliver()
				if err := r.p.tick(r.now, r); err != nil {
					t.Fatal(err)
				}
			}
			if len(queue) == 0 && rng.IntN(3) == 0 {
				r.tick(time.Second)
				r.settled(fmt.Sprintf("seed %d, key %d: a quiet moment", seed, i))
			}
		}
		for len(queue) > 0 {
			r.now = queue[0].at
			deliver()
		}
		r.tick(time.Second)
		r.settled(fmt.Sprintf("seed %d: at the end", seed))
		if shown != typed {
			t.Errorf("seed %d: %d of %d keys shown at once", seed, shown, typed)
		}
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
