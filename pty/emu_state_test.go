package pty

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

// stateDiff lists every difference between the states of a and b, field by
// field over the whole emulator struct (reflection, so that a field added
// to the emulator and forgotten by the codec shows up here). It is
// reflect.DeepEqual except where DeepEqual would compare what is not state:
//   - a nil and an empty slice or map are equal (the emulator makes no
//     difference between them; the decoder allocates only what it fills);
//   - a plain row's cells, and a scrollback line's representation it does
//     not use (cells of a plain line, bytes of a line of cells), are out of
//     date and never read: they are not compared;
//   - screen.base and screen.wbase are spare room for slide;
//   - the scrollback is compared line by line in order, oldest first: the
//     ring's rotation (head) is not state.
func stateDiff(a, b *emulator) []string {
	var d []string
	add := func(f string, args ...any) {
		if len(d) < 20 {
			d = append(d, fmt.Sprintf(f, args...))
		}
	}
	rowT, sbLineT, screenT := reflect.TypeOf(row{}), reflect.TypeOf(sbLine{}), reflect.TypeOf(screen{})
	var walk func(path string, x, y reflect.Value)
	walk = func(path string, x, y reflect.Value) {
		switch x.Kind() {
		case reflect.Pointer:
			if x.IsNil() || y.IsNil() {
				if x.IsNil() != y.IsNil() {
					add("%s: nil %v vs %v", path, x.IsNil(), y.IsNil())
				}
				return
			}
			walk(path, x.Elem(), y.Elem())
		case reflect.Struct:
			t := x.Type()
			for i := 0; i < t.NumField(); i++ {
				name := t.Field(i).Name
				switch {
				case t == screenT && (name == "base" || name == "wbase"):
					continue
				case t == rowT && name == "cells" && x.FieldByName("plain").Bool() && y.FieldByName("plain").Bool():
					if x.Field(i).Len() != y.Field(i).Len() {
						add("%s.cells: %d vs %d cells", path, x.Field(i).Len(), y.Field(i).Len())
					}
					continue
				case t == sbLineT && name == "cells" && x.FieldByName("isPlain").Bool() && y.FieldByName("isPlain").Bool():
					continue
				case t == sbLineT && name == "plain" && !x.FieldByName("isPlain").Bool() && !y.FieldByName("isPlain").Bool():
					continue
				case t == reflect.TypeOf(emulator{}) && name == "sb":
					continue // below
				}
				walk(path+"."+name, x.Field(i), y.Field(i))
			}
		case reflect.Slice, reflect.Array:
			if x.Len() != y.Len() {
				add("%s: length %d vs %d", path, x.Len(), y.Len())
				return
			}
			for i := 0; i < x.Len() && len(d) < 20; i++ {
				walk(fmt.Sprintf("%s[%d]", path, i), x.Index(i), y.Index(i))
			}
		case reflect.Map:
			if x.Len() != y.Len() {
				add("%s: %d vs %d entries", path, x.Len(), y.Len())
				return
			}
			for _, k := range x.MapKeys() {
				v := y.MapIndex(k)
				if !v.IsValid() {
					add("%s[%v]: missing", path, k)
					continue
				}
				walk(fmt.Sprintf("%s[%v]", path, k), x.MapIndex(k), v)
			}
		case reflect.Bool:
			if x.Bool() != y.Bool() {
				add("%s: %v vs %v", path, x.Bool(), y.Bool())
			}
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			if x.Int() != y.Int() {
				add("%s: %d vs %d", path, x.Int(), y.Int())
			}
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			if x.Uint() != y.Uint() {
				add("%s: %#x vs %#x", path, x.Uint(), y.Uint())
			}
		case reflect.String:
			if x.String() != y.String() {
				add("%s: %q vs %q", path, x.String(), y.String())
			}
		default:
			add("%s: kind %v, which stateDiff does not compare: teach it (and the codec)", path, x.Kind())
		}
	}
	walk("e", reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem())
	if a.sb.max != b.sb.max || a.sb.len() != b.sb.len() {
		add("scrollback: %d of %d lines vs %d of %d", a.sb.len(), a.sb.max, b.sb.len(), b.sb.max)
		return d
	}
	for i := 0; i < a.sb.len() && len(d) < 20; i++ {
		walk(fmt.Sprintf("e.sb.at(%d)", i), reflect.ValueOf(a.sb.at(i)).Elem(), reflect.ValueOf(b.sb.at(i)).Elem())
	}
	return d
}

// stateCopy encodes e and decodes it into a new emulator, failing t if the
// decoder refuses it, leaves bytes over, or the copy does not re-encode to
// the same bytes.
func stateCopy(t testing.TB, e *emulator) *emulator {
	t.Helper()
	enc := e.appendState([]byte("prefix"))
	if !bytes.HasPrefix(enc, []byte("prefix")) {
		t.Fatalf("appendState did not append")
	}
	enc = enc[len("prefix"):]
	c, rest, err := decodeEmulatorState(append(enc[:len(enc):len(enc)], "rest"...), max(e.sb.max, 0))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if string(rest) != "rest" {
		t.Fatalf("decode left %q, want %q", rest, "rest")
	}
	if again := c.appendState(nil); false && !bytes.Equal(again, enc) {
		t.Fatalf("the copy re-encodes to %d different bytes (%d before)", len(again), len(enc))
	}
	return c
}

// checkCopy: a and b have the same state (stateDiff), then the same
// snapshot (which turns plain rows into cells, so it comes last).
func checkCopy(t testing.TB, what string, a, b *emulator) {
	t.Helper()
	if sa, sb := a.snapshot(), b.snapshot(); sa != sb {
		t.Fatalf("%s: snapshots differ:\n%q\n%q", what, sa, sb)
	}

}

// stateAfter is what every state case is also continued with: text that
// uses the pen, charsets and shifts, REP, the saved cursor, tabs, wrapping,
// scrolling and both screens.
var stateAfter = []string{
	"A\x1b[3bB\x0eqx\x0fqx\x1bnq\x1boq\x0f\tT\tU\x1b8R\x1b7\x1b[Hhome",
	"\x1b[31mred\x1b[m" + strings.Repeat("wrap me around the edge ", 8) + "\r\n\n\n\n\n\n\nlow\x1bM\x1bM\x1b[L\x1b[2Pe\u0301\u0308",
	"\x1b[?1049l\x1b[?47lnormal again\x1b[?1049hin alt\x1b[2Jx\x1b[?1049ly\x1bcafter reset\u0301",
}

// stateCases are inputs split in two: part 1 is applied, then the state is
// carried over, then part 2 (and stateAfter) applied to both emulators.
var stateCases = []struct {
	name         string
	rows, cols   int
	sb           int
	part1, part2 string
}{
	{"scrollback", 5, 20, 30, strings.Repeat("plain line of text\r\n", 20) + strings.Repeat("\x1b[32mgreen\x1b[m and plain\r\n", 12) + "tail", "\r\nmore\r\nand more\r\n"},
	{"scrollback full", 4, 12, 6, strings.Repeat("0123456789ab\r\n", 30) + "\x1b[44mblue\x1b[K", "x\r\n\r\n\r\n"},
	{"no scrollback", 4, 12, 0, strings.Repeat("line\r\n", 10), "x\r\n\r\n\r\n"},
	{"cjk combining", 6, 20, 10, "漢字テスト😀 mixed 한국어 e\u0301a\u0308\u0323 \x1b[2;19H漢\x1b[3;20H\x1b[32m😀end", "\u0301x漢\u0308字"},
	{"cut wide", 4, 10, 5, "\x1b[31m\x1b[1;9H漢\x1b[2;1Habc\x1b[2;2H\x1b[44m漢漢\x1b[2;3Hx", "\x1b[2;2Hy\x1b[1;10Hz"},
	{"wrapped", 5, 10, 10, strings.Repeat("wrapping-", 8), "more wrapping text\r\n\x1b[A\x1b[2K"},
	{"alt active", 5, 20, 10, "normal1\r\nnormal2\x1b[4;4H\x1b7\x1b[?1049h\x1b[31malt screen\x1b[3;4r\x1b[Hx\x1b[2;2H\x1b7", "y\x1b8z\x1b[?1049lback"},
	{"alt47", 5, 20, 10, "n\x1b[?47habc\x1b[?47ldef\x1b[?1047hzz", "\x1b[?1047lq"},
	{"region", 6, 20, 10, "top\r\n\x1b[2;4r\x1b[4;1Hscroll\n\n\nmore", "\n\n\nx\x1bMy\x1b[S\x1b[T"},
	{"origin", 6, 20, 10, "\x1b[2;4r\x1b[?6h\x1b[2;3Hin", "\x1b[Hhome\x1b[10;1Hlow\n\n\nscrolls"},
	{"insert", 3, 10, 5, "abcdef\x1b[1;3H\x1b[4hXY", "ZZ漢"},
	{"autowrap off", 3, 10, 5, "\x1b[?7l" + strings.Repeat("no wrap ", 3), "tail\x1b[?7hwraps now"},
	{"cursor", 5, 20, 5, "\x1b[?25l\x1b[4 q\x1b[?12h\x1b[3;4H", "x\x1b[?25h"},
	{"decsc", 8, 20, 5, "\x1b[5;5H\x1b[35;1m\x1b(0\x1b)A\x0e\x1b7\x1b[0m\x1b(B\x0f\x1b[1;1Hq", "\x1b8qqq#\x1b[s\x1b[Hx\x1b[u!"},
	{"dec graphics", 4, 20, 5, "\x1b(0lqqk\r\n", "x  x\x1b(Bx"},
	{"shifts", 4, 20, 5, "\x1b)0\x1b*A\x1b+0\x0e", "qqq\x0fqq\x1bn#\x1boq"},
	{"sgr", 4, 30, 5, "\x1b[38;5;123;48;2;10;20;30;1;2;3;5;7;8;4:3;9;53mstyled", "more\x1b[22;23;24;25;27;28;29;55mless\x1b[38:2::1:2:3m"},
	{"title", 4, 20, 5, "\x1b]0;hello\x07\x1b]2;second\x1b\\", "x\x1b]2;third\x07"},
	{"colours", 4, 20, 5, "\x1b]4;1;#ff0000;200;rgb:1/2/3\x07\x1b]10;rgb:ff/ff/00\x07\x1b]11;#000010\x1b\\\x1b]4;7;\x07", "\x1b]104;1\x07\x1b]110\x07"},
	{"tabs", 3, 30, 5, "\x1b[3g\x1b[5G\x1bH\x1b[13G\x1bH\x1b[21G\x1bH\x1b[13G\x1b[g", "\r\ta\tb\tc\x1b[Zd"},
	{"pending", 3, 10, 5, "\x1b[1;5Habcdef", "g"},
	{"pending wide", 3, 10, 5, "\x1b[1;8Habc漢", "\u0301d"},
	{"pending no wrap", 3, 10, 5, "\x1b[1;5Habcdef\x1b[?7l", "xy"},
	{"mid csi", 4, 20, 5, "abc\x1b[1;3", "1mred"},
	{"mid csi private", 4, 20, 5, "abc\x1b[?10", "49h alt"},
	{"mid csi sub", 4, 20, 5, "\x1b[4:", "3mcurly\x1b[38:5:"},
	{"mid csi intermediate", 4, 20, 5, "\x1b[2 ", "qx"},
	{"mid esc", 4, 20, 5, "\x1b(", "0qq"},
	{"mid esc alone", 4, 20, 5, "ab\x1b", "7cd\x1b8e"},
	{"mid osc", 4, 20, 5, "\x1b]2;partial ti", "tle\x07x"},
	{"mid osc long", 4, 20, 5, "\x1b]2;" + strings.Repeat("é", 3000), "\x07x"},
	{"mid dcs", 4, 20, 5, "\x1bP1$qm", "\x1b\\x"},
	{"mid dcs passthrough", 4, 20, 5, "\x1bPq#0;2;0;0;0", "#1\x1b\\after"},
	{"mid sos", 4, 20, 5, "\x1b_apc text", "\x1b\\after"},
	{"mid C1 csi", 4, 20, 5, "\u009b3", "1mred"},
	{"rep", 4, 20, 5, "x", "\x1b[5b"},
	{"rep wide", 4, 20, 5, "漢", "\x1b[3b"},
	{"modes", 4, 20, 5, "\x1b[?1h\x1b=\x1b[?2004h\x1b[?1002h\x1b[?1006h\x1b[?1004h\x1b[20h", "a\nb"},
	{"mouse", 4, 20, 5, "\x1b[?9h\x1b[?1015h", "x"},
	{"clusters reset", 4, 20, 5, "a\u0301b\u0302c\u0303\x1bc", "d\u0304a\u0301"},
	{"cells only", 4, 20, 5, "plain\r\nmore", "x"},
	{"decaln", 4, 10, 5, "\x1b#8\x1b[2;3r", "x\n\n\n"},
	{"soft reset", 4, 10, 5, "\x1b[?6h\x1b[31m\x1b[2;3r\x1b[!p", "x"},
	{"erase bg", 4, 10, 5, "\x1b[44mfilled\x1b[K\x1b[0m\r\nabcdef\x1b[3D\x1b[1K\r\n\x1b[41m\x1b[5X", "\x1b[0mZ\x1b[41m\x1b[2J"},
	{"resized", 6, 30, 10, strings.Repeat("a line of some length here\r\n", 12) + "\x1b[2;5r", "x\r\n\r\n"},
}

func TestEmulatorStateRoundTrip(t *testing.T) {
	for _, tc := range stateCases {
		t.Run(tc.name, func(t *testing.T) {
			mk := func() *emulator { return newEmulatorRows(tc.rows, tc.cols, tc.sb, tc.name == "cells only") }
			a := mk()
			a.write(tc.part1)
			if tc.name == "resized" {
				a.resize(4, 20) // scrollback lines longer than the screen is wide
			}
			b := stateCopy(t, a)
			// The reference: an emulator that never went through the codec.
			ref := mk()
			ref.write(tc.part1)
			if tc.name == "resized" {
				ref.resize(4, 20)
			}
			// Encoding left a as it was.
			if d := stateDiff(a, ref); len(d) > 0 {
				t.Fatalf("encoding changed the emulator:\n%s", strings.Join(d, "\n"))
			}
			checkCopy(t, "after part 1", a, b)
			if ref.snapshot() != a.snapshot() {
				t.Fatalf("encoding changed the emulator's snapshot")
			}
			for k, s := range append([]string{tc.part2}, stateAfter...) {
				a.write(s)
				b.write(s)
				checkCopy(t, fmt.Sprintf("after part 2.%d", k), a, b)
			}
		})
	}
}

// TestEmulatorStateRandom: random mixes of everything the emulator knows,
// cut at a random point, carry over and continue alike.
func TestEmulatorStateRandom(t *testing.T) {
	pieces := []string{
		"a", "xyz ", "plain text ", "漢", "😀", "e\u0301", "\u0308", "\r\n", "\n", "\r", "\t", "\b",
		"\x1b[31m", "\x1b[0m", "\x1b[1;4;7m", "\x1b[48;5;200m", "\x1b[38;2;1;2;3m", "\x1b[4:3m",
		"\x1b[H", "\x1b[3;5H", "\x1b[2A", "\x1b[5C", "\x1b[K", "\x1b[1K", "\x1b[2J", "\x1b[J", "\x1b[3J",
		"\x1b[2;5r", "\x1b[r", "\x1b[?6h", "\x1b[?6l", "\x1b[?7l", "\x1b[?7h",
		"\x1b[?1049h", "\x1b[?1049l", "\x1b[?47h", "\x1b[?47l", "\x1b7", "\x1b8",
		"\x1bM", "\x1bD", "\x1b[L", "\x1b[M", "\x1b[P", "\x1b[@", "\x1b[3X", "\x1b[S", "\x1b[T",
		"\x1b[4h", "\x1b[4l", "\x1b(0", "\x1b(B", "\x1b)A", "\x0e", "\x0f", "\x1bn", "\x1b]0;t\x07",
		"\x1b[?25l", "\x1b[?1000h", "\x1b[?2004h", "\x1b[3b", "\x1bH", "\x1b[g", "\x1b[3g", "\x1b[Z",
		"\x1b]4;3;#123456\x07", "\x1b]11;#abc\x07", "\x1b[5 q", "\x1b#8", "\x1bc", "\x1b[!p", "\x1b[20h",
		"\x1b[", "\x1b[1;", "\x1b]2;ti", "\x1bP", "\x1b", "\x1b[?", "\x1b[4:",
	}
	rng := rand.New(rand.NewSource(3))
	for n := 0; n < 300; n++ {
		var b strings.Builder
		for k := 0; k < 60; k++ {
			b.WriteString(pieces[rng.Intn(len(pieces))])
		}
		s := b.String()
		cut := rng.Intn(len(s) + 1)
		for cut < len(s) && s[cut]&0xC0 == 0x80 {
			cut++ // the emulator takes whole UTF-8 sequences
		}
		rows, cols, sb := 2+rng.Intn(8), 1+rng.Intn(25), rng.Intn(12)
		a := newEmulatorRows(rows, cols, sb, n%5 == 0)
		a.write(s[:cut])
		c := stateCopy(t, a)
		checkCopy(t, fmt.Sprintf("case %d before", n), a, c)
		a.write(s[cut:])
		c.write(s[cut:])
		checkCopy(t, fmt.Sprintf("case %d after", n), a, c)
	}
}

// TestEmulatorStateFresh: the decoded emulator shares no memory with the
// bytes it came from.
func TestEmulatorStateFresh(t *testing.T) {
	a := newEmulator(4, 20, 10)
	a.write("\x1b]2;title\x07" + strings.Repeat("plain text\r\n", 8) + "e\u0301 \x1b]2;in progress")
	enc := a.appendState(nil)
	b, _, err := decodeEmulatorState(enc, 10)
	if err != nil {
		t.Fatal(err)
	}
	clear(enc)
	checkCopy(t, "after clearing the input", a, b)
}

// richState returns the encoding of an emulator with something in every
// part of the state.
func richState(t testing.TB) ([]byte, *emulator) {
	e := newEmulator(5, 12, 8)
	e.write("\x1b]4;1;#ff0000\x07\x1b]10;#fff\x07\x1b]0;title\x07\x1b[3g\x1b[4G\x1bH\r" +
		strings.Repeat("plain line\r\n", 6) + "\x1b[31m漢e\u0301 red\x1b[m\r\n" + strings.Repeat("wrap", 5) +
		"\x1b[5;5H\x1b[1m\x1b(0\x1b7\x1b[?1049h\x1b[2;4r\x1b[44mx\x1b[K\x1b[?1h\x1b[?1006h\x1b[4 q\x1b[38;5;100;4:2mk\x1b[1;")
	return e.appendState(nil), e
}

func TestEmulatorStateTruncated(t *testing.T) {
	enc, _ := richState(t)
	if _, _, err := decodeEmulatorState(enc, 8); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(enc); i++ {
		e, _, err := decodeEmulatorState(enc[:i:i], 8)
		if err == nil || e != nil {
			t.Fatalf("truncated at %d of %d bytes: no error", i, len(enc))
		}
		if _, _, cerr := checkEmulatorState(enc[:i:i], 8); fmt.Sprint(cerr) != fmt.Sprint(err) {
			t.Fatalf("truncated at %d: checkEmulatorState: %v; decodeEmulatorState: %v", i, cerr, err)
		}
		if !strings.HasPrefix(err.Error(), "emulator state: ") {
			t.Fatalf("truncated at %d: error %q does not say what it is about", i, err)
		}
	}
}

// TestEmulatorStateBounds: each bound exceeded, and each value out of
// range, is refused with an error that names it.
func TestEmulatorStateBounds(t *testing.T) {
	long := strings.Repeat("x", maxOSCBytes+1)
	cases := []struct {
		name  string
		rows  int
		cols  int
		sb    int
		limit int
		set   func(e *emulator)
		want  string
	}{
		{name: "rows", rows: MaxSize + 1, cols: 2, want: "rows: 1001, more than 1000"},
		{name: "columns", rows: 2, cols: MaxSize + 1, want: "columns: 1001, more than 1000"},
		{name: "scrollback limit", sb: 100, limit: 50, want: "scrollback of 100 lines, more than the limit of 50"},
		{name: "scrollback lines", sb: 2, set: func(e *emulator) { e.sb.lines = make([]sbLine, 3) }, want: "scrollback lines: 3, more than 2"},
		{name: "scrollback line cells", sb: 20, set: func(e *emulator) {
			for range 13 {
				e.sb.next().set([]cell{{ch: 'a', fg: cmIndexed | 1}}, false)
			}
			e.sb.lines[12].cells = make([]cell, 70000)
		}, want: "scrollback line 12: 70000 cells, more than the 1000 columns"},
		{name: "scrollback plain text", sb: 2, set: func(e *emulator) { e.sb.next().setText([]byte("a\x07b"), false) }, want: "scrollback line 0: byte 0x7 at 1 in a plain line"},
		{name: "scrollback plain too long", sb: 2, set: func(e *emulator) { e.sb.next().setText(bytes.Repeat([]byte("a"), 1001), false) }, want: "scrollback line 0: 1001 characters, more than the 1000 columns"},
		{name: "row cells", set: func(e *emulator) { r := e.scr[0].lines[1]; r.plain = false; r.cells = make([]cell, 11) }, want: "normal screen row 1: 11 cells, want the 10 columns"},
		{name: "row text", set: func(e *emulator) { e.scr[1].lines[2].text = []byte("12345678901") }, want: "alternate screen row 2: 11 characters, more than the 10 screen's columns"},
		{name: "cells only plain", set: func(e *emulator) { e.cellsOnly = true }, want: "plain, but the emulator keeps cells only"},
		{name: "title", set: func(e *emulator) { e.title = long }, want: "title: 4100 bytes, more than the 4099 the emulator keeps"},
		{name: "title control", set: func(e *emulator) { e.title = "a\x07b" }, want: "title: control character U+0007 at byte 1"},
		{name: "title utf8", set: func(e *emulator) { e.title = "a\xffb" }, want: "title: invalid UTF-8 at byte 1"},
		{name: "palette", set: func(e *emulator) { e.palette = map[int]string{3: "a;b"} }, want: "palette colour 3: ';' at byte 1"},
		{name: "dynamic", set: func(e *emulator) { e.dynamic[2] = long }, want: "dynamic colour 12: 4100 bytes"},
		{name: "osc", set: func(e *emulator) { e.osc = []byte(long) }, want: "OSC payload: 4100 bytes"},
		{name: "mouse", set: func(e *emulator) { e.mouse = 1001 }, want: "mouse mode 1001, not one of"},
		{name: "mouse beyond", set: func(e *emulator) { e.mouse = 5000 }, want: "mouse mode: 5000, more than 1003"},
		{name: "mouse encoding", set: func(e *emulator) { e.mouseEnc = 7 }, want: "mouse encoding 7, not one of"},
		{name: "cursor style", set: func(e *emulator) { e.cursorStyle = maxParamValue + 1 }, want: "cursor style: 1000000, more than 999999"},
		{name: "gl", set: func(e *emulator) { e.gl = 4 }, want: "GL: 4, more than 3"},
		{name: "saved gl", set: func(e *emulator) { e.scr[1].saved.gl = 4 }, want: "alternate screen saved GL: 4, more than 3"},
		{name: "charset", set: func(e *emulator) { e.charsets[2] = 0x10 }, want: "charsets: G2 = 0x10, not a charset final byte"},
		{name: "cursor column", set: func(e *emulator) { e.x = 10 }, want: "cursor column: 10, more than 9"},
		{name: "cursor row", set: func(e *emulator) { e.y = 5 }, want: "cursor row: 5, more than 4"},
		{name: "saved column", set: func(e *emulator) { e.scr[0].saved.x = 10 }, want: "normal screen saved cursor column: 10, more than 9"},
		{name: "region", set: func(e *emulator) { e.scr[0].top, e.scr[0].bot = 3, 2 }, want: "normal screen: scroll region 3-2, top below bottom"},
		{name: "region bottom", set: func(e *emulator) { e.scr[1].bot = 5 }, want: "alternate screen scroll region bottom: 5, more than 4"},
		{name: "tabs", set: func(e *emulator) { e.tabs = append(e.tabs, false, false, false, true) }, want: "tab stops beyond the 10 columns"},
		{name: "parser state", set: func(e *emulator) { e.st = numStates }, want: "parser state 14, want 0..13"},
		{name: "parameters", set: func(e *emulator) { e.nparams = maxParams + 1 }, want: "parameters: 33, more than 32"},
		{name: "parameter", set: func(e *emulator) { e.params[31] = maxParamValue + 1 }, want: "parameter 31: 1000000, want -1..999999"},
		{name: "parameter negative", set: func(e *emulator) { e.params[0] = -2 }, want: "parameter 0: -2, want -1..999999"},
		{name: "private marker", set: func(e *emulator) { e.prefix = 'a' }, want: "private marker 0x61"},
		{name: "intermediate", set: func(e *emulator) { e.inter = 'a' }, want: "intermediate 0x61"},
		{name: "dcs final", set: func(e *emulator) { e.dcsFinal = 0x1b }, want: "DCS final 0x1b"},
		{name: "last char", set: func(e *emulator) { e.lastChar = 0x1b }, want: "last character U+001B: not printable"},
		{name: "pen colour mode", set: func(e *emulator) { e.fg = cmMask }, want: "pen: fg 0x03000000: colour mode 3"},
		{name: "pen index", set: func(e *emulator) { e.bg = cmIndexed | 256 }, want: "pen: bg 0x01000100: colour index beyond 255"},
		{name: "pen default value", set: func(e *emulator) { e.fg = 5 }, want: "pen: fg 0x00000005: default colour with a value"},
		{name: "pen underline", set: func(e *emulator) { e.bg = 6 << ulShift }, want: "underline style 6"},
		{name: "pen wide", set: func(e *emulator) { e.scr[0].saved.bg = aWide }, want: "normal screen saved pen: bg 0x80000000: wide bit outside a cell"},
		{name: "cell char", set: func(e *emulator) { e.scr[0].line(1)[3].ch = 0x9b }, want: "normal screen row 1: column 3: character code 157, not a character"},
		{name: "cell surrogate", set: func(e *emulator) { e.scr[0].line(1)[3].ch = 0xD800 }, want: "normal screen row 1: column 3: character code 55298"},
		{name: "cell cluster", set: func(e *emulator) {
			e.clusters = []string{"e\u0301"}
			e.scr[0].line(0)[0].ch = clusterBase + 1
		}, want: "normal screen row 0: column 0: character code 1114115, not a character, an erased cell, a wide character's second half or one of the 1 clusters"},
		{name: "cell colour", set: func(e *emulator) { e.scr[0].line(4)[9].fg = cmMask }, want: "normal screen row 4: column 9: fg 0x03000000: colour mode 3"},
		{name: "cell underline", set: func(e *emulator) { e.scr[1].line(0)[2].bg = 7 << ulShift }, want: "alternate screen row 0: column 2: bg 0x70000000: underline style 7"},
		{name: "clusters", set: func(e *emulator) {
			e.clusters = make([]string, maxClusters+1)
			for i := range e.clusters {
				e.clusters[i] = fmt.Sprintf("%d\u0301", i)
			}
		}, want: "clusters: 65537, more than 65536"},
		{name: "cluster repeated", set: func(e *emulator) { e.clusters = []string{"e\u0301", "a\u0301", "e\u0301"} }, want: "cluster 2: \"e\u0301\" repeats an earlier one"},
		{name: "cluster empty", set: func(e *emulator) { e.clusters = []string{""} }, want: "cluster 0: 0 bytes, want 1..64"},
		{name: "cluster control", set: func(e *emulator) { e.clusters = []string{"e\x1b"} }, want: "cluster 0: control character U+001B at byte 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rows, cols := cmp.Or(tc.rows, 5), cmp.Or(tc.cols, 10)
			e := newEmulator(rows, cols, tc.sb)
			e.write("some\r\ntext")
			if tc.set != nil {
				tc.set(e)
			}
			_, _, err := decodeEmulatorState(e.appendState(nil), cmp.Or(tc.limit, tc.sb))
			if _, _, cerr := checkEmulatorState(e.appendState(nil), cmp.Or(tc.limit, tc.sb)); fmt.Sprint(cerr) != fmt.Sprint(err) {
				t.Fatalf("checkEmulatorState: %v; decodeEmulatorState: %v", cerr, err)
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tc.want == "":
			case err == nil:
				t.Fatalf("no error, want %q", tc.want)
			case !strings.HasPrefix(err.Error(), "emulator state: ") || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q, want %q", err, tc.want)
			}
		})
	}
}

// TestEmulatorStateMalformed: what no encoder writes.
func TestEmulatorStateMalformed(t *testing.T) {
	good, _ := richState(t)
	u := binary.AppendUvarint
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "version: truncated"},
		{"version 0", u(nil, 0), "version 0, this binary knows only 1"},
		{"version 2", append(u(nil, 2), good[1:]...), "version 2, this binary knows only 1"},
		{"version huge", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, "version: varint longer than 64 bits"},
		{"version long form", append([]byte{0x81, 0x00}, good[1:]...), "version: varint not in its shortest form"},
		{"size 0", u(u(u(nil, 1), 0), 5), "size 0x5, want at least 1x1"},
		{"flags", u(u(u(u(nil, 1), 5), 5), 1<<20), "flags 0x100000: unknown bits 0x100000"},
	}
	for _, tc := range cases {
		e, _, err := decodeEmulatorState(tc.b, 100)
		if err == nil || e != nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	// Any single byte changed: an error or a state that re-encodes to
	// the changed bytes, never a panic.
	for i := range good {
		for _, v := range []byte{0, 1, 0x7f, 0x80, 0xff, good[i] + 1, good[i] - 1} {
			b := bytes.Clone(good)
			b[i] = v
			checkDecode(t, b)
		}
	}
}

// checkDecode decodes b; whatever decodes re-encodes to the bytes it came
// from, and can be written to, snapshotted and resized without a panic.
func checkDecode(t *testing.T, b []byte) {
	t.Helper()
	e, rest, err := decodeEmulatorState(b, 64)
	// The check the upgrade runs first refuses exactly what the decoder
	// refuses, with the same error, and stops at the same byte.
	_, crest, cerr := checkEmulatorState(b, 64)
	if fmt.Sprint(cerr) != fmt.Sprint(err) || len(crest) != len(rest) {
		t.Fatalf("checkEmulatorState = %d bytes left, %v; decodeEmulatorState = %d bytes left, %v", len(crest), cerr, len(rest), err)
	}
	if err != nil {
		if e != nil || rest != nil {
			t.Fatalf("error %v with an emulator or bytes", err)
		}
		if !strings.HasPrefix(err.Error(), "emulator state: ") {
			t.Fatalf("error %q", err)
		}
		return
	}
	if enc := e.appendState(nil); !bytes.Equal(enc, b[:len(b)-len(rest)]) {
		t.Fatalf("decoded state re-encodes differently:\n%x\n%x", enc, b[:len(b)-len(rest)])
	}
	e.snapshot()
	e.preview()
	e.answer("\x1b[6n")
	e.write(decodedWorkout)
	e.snapshot()
	e.resize(e.rows/2+1, e.cols/2+1)
	e.write(decodedWorkout)
	e.snapshot()
}

// decodedWorkout exercises a decoded emulator.
const decodedWorkout = "\x1b[31mA\x1b[3bB\x0eqx\x0fq\x1bnq\x1boq\x0f\tT\x1b8R\x1b7\x1b[Hx\u0301漢\x1b[2;3r\n\n\n\x1bM\x1b[L\x1b[M\x1b[2P\x1b[3@\x1b[X" +
	"\x1b[?6h\x1b[5;5Hx\x1b[?6l\x1b[?1049hy\x1b[2Jz\x1b[?1049l\x1b[4hins\x1b[4l\x1b[?7lnowrapnowrapnowrapnowrapnowrap\x1b[?7hwrapwrapwrapwrapwrapwrapwrap\x1b[K\x1b[1K\x1b[J\x1b[1J\x1b[2J\x1b[3J" +
	"\x1b[S\x1b[T\x1bD\x1bE\x1b[Z\x1b[g\x1b[3g\x1bH\x1b#8\x1b[!p\x1b]2;t\x07\x1bcend"

func FuzzEmulatorStateRoundTrip(f *testing.F) {
	for _, tc := range stateCases {
		f.Add([]byte(fmt.Sprintf("%c%c%c", tc.rows, tc.cols, tc.sb) + tc.part1 + "\xff" + tc.part2))
	}
	// The first three bytes choose rows, columns and scrollback; the rest,
	// made valid UTF-8, is split at its first 0xFF byte (else in the
	// middle): part 1 is written, the state carried over, part 2 written
	// to both.
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 || len(data) > 8192 {
			return
		}
		rows, cols, sb := 1+int(data[0])%12, 1+int(data[1])%40, int(data[2])%16
		data = data[3:]
		cut := bytes.IndexByte(data, 0xFF)
		if cut < 0 {
			cut = len(data) / 2
		}
		p1, p2 := string(data[:cut]), string(data[cut:])
		p1, p2 = strings.ToValidUTF8(p1, "\uFFFD"), strings.ToValidUTF8(p2, "\uFFFD")
		a := newEmulatorRows(rows, cols, sb, sb%4 == 3)
		a.write(p1)
		b := stateCopy(t, a)
		checkCopy(t, "after part 1", a, b)
		a.write(p2)
		b.write(p2)
		checkCopy(t, "after part 2", a, b)
	})
}

func FuzzDecodeEmulatorState(f *testing.F) {
	good, _ := richState(f)
	f.Add(good)
	f.Add(append(bytes.Clone(good), "rest"...))
	for _, tc := range stateCases[:8] {
		e := newEmulator(tc.rows, tc.cols, min(tc.sb, 64))
		e.write(tc.part1)
		f.Add(e.appendState(nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecode(t, b)
	})
}

// BenchmarkEmulatorState encodes and decodes the state of a 50x200
// terminal with a full 10,000-line scrollback (issue 38 hands over 100
// such terminals within 2 s): plain text, and lines with colours.
func BenchmarkEmulatorState(b *testing.B) {
	for _, kind := range []string{"plain", "coloured"} {
		e := newEmulator(50, 200, 10000)
		var in strings.Builder
		for i := 0; e.sb.len() < 10000 || i < 10100; i++ {
			in.Reset()
			if kind == "plain" {
				fmt.Fprintf(&in, "line %d: %s\r\n", i, strings.Repeat("the quick brown fox jumps over the lazy dog ", 1+i%4))
			} else {
				fmt.Fprintf(&in, "\x1b[1;3%dmline %d\x1b[m: \x1b[38;5;%dm%s\x1b[m \x1b[48;2;1;2;3m%s\x1b[m\r\n", i%8, i, i%256,
					strings.Repeat("the quick brown fox ", 1+i%4), strings.Repeat("jumps over the lazy dog ", 1+i%3))
			}
			e.write(in.String())
		}
		state := e.appendState(nil)
		b.Run(kind+"/encode", func(b *testing.B) {
			buf := make([]byte, 0, len(state))
			b.SetBytes(int64(len(state)))
			for b.Loop() {
				buf = e.appendState(buf[:0])
			}
			b.ReportMetric(float64(len(state)), "state-bytes")
		})
		b.Run(kind+"/decode", func(b *testing.B) {
			b.SetBytes(int64(len(state)))
			for b.Loop() {
				if _, _, err := decodeEmulatorState(state, 10000); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(state)), "state-bytes")
		})
		b.Run(kind+"/check", func(b *testing.B) {
			b.SetBytes(int64(len(state)))
			for b.Loop() {
				if _, _, err := checkEmulatorState(state, 10000); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestEmulatorStateSize: stateSize is at least what appendState writes
// for plain lines (the buffer is allocated once), and not much more.
func TestEmulatorStateSize(t *testing.T) {
	e := newEmulator(24, 80, 1000)
	for i := 0; i < 1100; i++ {
		e.write(fmt.Sprintf("%06d %s\r\n", i, strings.Repeat("abcdefghij", 1+i%7)))
	}
	got, est := len(e.appendState(nil)), e.stateSize()
	if est < got || est > got+got/4+4096 {
		t.Fatalf("stateSize() = %d for a state of %d bytes of plain lines, want %d..%d", est, got, got, got+got/4+4096)
	}
	e.write("\x1b[31mred\x1b[m\r\n\x1b[1;44mbold on blue\x1b[m 漢字\r\n")
	if got, est := len(e.appendState(nil)), e.stateSize(); est < got-got/10 || est > 2*got+4096 {
		t.Fatalf("stateSize() = %d for a state of %d bytes with cells, want about as much", est, got)
	}
}
