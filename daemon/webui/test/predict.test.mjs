// Predictive local echo (predict.js): what is predicted, shown, confirmed,
// repaired and when prediction stops, on a fake screen with a fake clock.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AUTO_OFF_MS, AUTO_ON_MS, MAX_PENDING, MODES, Predictor, tokens } from '../src/predict.js';
import { PREDICT_MODES, Prefs, PREFS_KEY } from '../src/prefs.js';
import { FakeClock } from './harness.mjs';

// FakeScreen is a tiny terminal: the host side writes to it as a shell would.
class FakeScreen {
  constructor(cols = 20, rows = 4) {
    this.w = cols;
    this.lines = Array.from({ length: rows }, () => Array(cols).fill(' '));
    this.cur = { row: 0, col: 0 };
    this.isAlt = false;
  }
  // adapter
  alt = () => this.isAlt;
  cursor = () => ({ ...this.cur });
  cell = (row, col) => this.lines[row]?.[col] ?? ' ';
  cols = () => this.w;
  // host side
  write(s) {
    for (const k of tokens(s)) {
      if (k === '\b') this.cur.col = Math.max(0, this.cur.col - 1);
      else if (k === '\r') this.cur.col = 0;
      else if (k === '\n') {
        this.cur.row++;
        if (this.cur.row >= this.lines.length) this.lines.push(Array(this.w).fill(' '));
      } else if (k === '\x1b[K') for (let c = this.cur.col; c < this.w; c++) this.lines[this.cur.row][c] = ' ';
      else if (k === '\x1b[D') this.cur.col = Math.max(0, this.cur.col - 1);
      else if (k === '\x1b[C') this.cur.col++;
      else if (k.length === 1 && k >= ' ') {
        this.lines[this.cur.row][this.cur.col] = k;
        this.cur.col = Math.min(this.w - 1, this.cur.col + 1);
      }
    }
  }
  text(row = this.cur.row) {
    return this.lines[row].join('').trimEnd();
  }
}

// min is the smallest round trip: the hand-written cases echo at once
// (min 0); the random ones echo a round trip later, as a link does.
function setup({ mode = 'always', srtt = 200, min = 0, prompt = '$ ' } = {}) {
  const screen = new FakeScreen();
  const clock = new FakeClock();
  let changes = 0;
  const p = new Predictor(screen, {
    mode, now: clock.now, setTimeout: clock.setTimeout, clearTimeout: clock.clearTimeout,
    onChange: () => changes++,
  });
  p.setRtt(srtt, min);
  screen.write(prompt);
  // host echoes data as a shell with echo on would; the page judges after parsing it
  const host = (s) => {
    screen.write(s);
    p.output();
  };
  return { screen, clock, p, host, changes: () => changes };
}

// drawn returns the row as the user sees it: the screen with the overlay on top.
function drawn(screen, p, row = screen.cur.row) {
  const line = [...screen.lines[row]];
  const o = p.overlay();
  if (o && o.row === row) for (const c of o.cells) line[c.col] = c.ch;
  return line.join('').trimEnd();
}

// warm makes prediction non-tentative: one key predicted and confirmed.
function warm(t) {
  t.p.input('a');
  assert.equal(t.p.overlay(), null, 'the first key is tentative: not shown');
  t.host('a');
  assert.equal(t.p.pending, 0);
  assert.equal(t.p.confirmedEpoch, t.p.epoch, 'confirmed: prediction is shown from now on');
}

test('tokens: escape sequences and code points are keys', () => {
  assert.deepEqual(tokens('ab\x1b[D\x1bOC\x7f\r😀'), ['a', 'b', '\x1b[D', '\x1bOC', '\x7f', '\r', '😀']);
});

test('confirm: a typed key is shown at once, underlined until the echo, then removed', () => {
  const t = setup();
  warm(t);
  t.p.input('b');
  assert.deepEqual(t.p.overlay(), { row: 0, cells: [{ col: 3, ch: 'b' }], cursor: 4 });
  assert.equal(drawn(t.screen, t.p), '$ ab');
  assert.equal(t.screen.text(), '$ a', 'the screen itself is untouched');
  t.p.input('c');
  assert.equal(drawn(t.screen, t.p), '$ abc');
  t.host('b'); // echo of b: c still pending
  assert.deepEqual(t.p.overlay().cells, [{ col: 4, ch: 'c' }]);
  t.host('c');
  assert.equal(t.p.overlay(), null);
  assert.equal(t.p.pending, 0);
  assert.equal(t.p.stats.confirmed, 3);
  assert.equal(t.clock.timers.size, 0, 'no deadline left armed');
});

test('contradict: a later key confirmed while an earlier cell differs removes all and goes tentative', () => {
  const t = setup();
  warm(t);
  t.p.input('bc');
  assert.equal(drawn(t.screen, t.p), '$ abc');
  // The program wrote something else for b (say, it upper-cases), then c,
  // and the cursor is where c leaves it once c's echo is due.
  t.clock.advance(300);
  t.host('Bc');
  assert.equal(t.p.overlay(), null);
  assert.equal(t.p.stats.contradicted, 1);
  assert.ok(t.p.epoch > t.p.confirmedEpoch, 'tentative');
  // Tentative: the next key is made but not shown until confirmed.
  t.p.input('d');
  assert.equal(t.p.overlay(), null);
  t.host('d');
  t.p.input('e');
  assert.equal(drawn(t.screen, t.p), '$ aBcde', 'confirmed again: shown');
});

test('timeout: echo off (read -s): predictions expire unconfirmed, leave nothing, and stay tentative', () => {
  const t = setup();
  warm(t);
  t.p.input('s');
  assert.equal(drawn(t.screen, t.p), '$ as', 'a shown prediction until its deadline');
  const deadline = t.p.timeoutMs;
  assert.equal(deadline, 2 * 200 + 100);
  t.clock.advance(deadline - 1);
  assert.ok(t.p.overlay());
  t.clock.advance(1);
  assert.equal(t.p.overlay(), null, 'expired: removed without any output');
  assert.equal(t.p.stats.expired, 1);
  // The rest of the password is never shown.
  for (const ch of 'ecret') {
    t.p.input(ch);
    assert.equal(t.p.overlay(), null, `"${ch}" after an expiry is tentative`);
    t.clock.advance(100);
  }
  t.clock.advance(1000);
  assert.equal(t.p.pending, 0);
  assert.equal(t.clock.timers.size, 0);
  assert.equal(drawn(t.screen, t.p), '$ a');
});

test('after Enter the next line is tentative: a password prompt never shows a key', () => {
  const t = setup();
  warm(t);
  t.p.input('\r');
  t.host('\r\nPassword: ');
  for (const ch of 'hunter2') {
    t.p.input(ch);
    assert.equal(t.p.overlay(), null);
    t.clock.advance(50);
  }
  t.clock.advance(2000);
  assert.equal(t.p.pending, 0);
  assert.ok(t.p.stats.expired >= 1);
});

test('backspace deletes left of the cursor; the rest of the line shifts left', () => {
  const t = setup();
  warm(t);
  t.p.input('bc');
  t.host('bc');
  t.p.input('\x7f');
  assert.deepEqual(t.p.overlay(), { row: 0, cells: [{ col: 4, ch: ' ' }], cursor: 4 });
  assert.equal(drawn(t.screen, t.p), '$ ab');
  t.host('\b\x1b[K');
  assert.equal(t.p.pending, 0);
  // In the middle: "$ ab|c" → "$ a|c"
  t.host('c\b');
  t.p.input('\x7f');
  assert.equal(drawn(t.screen, t.p), '$ ac');
  t.host('\bc\x1b[K\b');
  assert.equal(t.p.overlay(), null);
  assert.equal(t.p.pending, 0);
});

test('arrows move the predicted cursor; a key typed there is inserted, the tail shifted right', () => {
  const t = setup();
  warm(t);
  t.p.input('bc');
  t.host('bc');
  t.p.input('\x1b[D\x1b[D');
  assert.deepEqual(t.p.overlay(), { row: 0, cells: [], cursor: 3 });
  t.p.input('X');
  assert.equal(drawn(t.screen, t.p), '$ aXbc');
  // Right over text moves; right at the end of the text is not predicted (readline would not move).
  t.p.input('\x1b[C');
  assert.equal(t.p.overlay().cursor, 5);
  // readline: the arrows move back, X is inserted, the tail is redrawn.
  t.host('\b\bXbc\b\b');
  t.host('\x1b[C');
  assert.equal(t.p.pending, 0, JSON.stringify([...t.p.cells]));
  assert.equal(t.p.overlay(), null);
  assert.equal(t.p.stats.contradicted + t.p.stats.expired, 0);
  t.p.input('\x1b[C');
  assert.equal(t.p.overlay().cursor, 6);
  t.p.input('\x1b[C'); // past the end: tentative, nothing more predicted
  assert.ok(t.p.epoch > t.p.confirmedEpoch);
});

test('alternate screen (vim): nothing is predicted, and entering it removes what was', () => {
  const t = setup();
  warm(t);
  t.p.input('b');
  assert.ok(t.p.overlay());
  t.screen.isAlt = true;
  t.p.output();
  assert.equal(t.p.overlay(), null);
  t.p.input('ihello');
  assert.equal(t.p.overlay(), null);
  assert.equal(t.p.pending, 0);
});

test('reset (a snapshot, a resize) removes every prediction and starts tentative', () => {
  const t = setup();
  warm(t);
  t.p.input('bcd');
  assert.ok(t.p.overlay());
  const before = t.changes();
  t.p.reset();
  assert.equal(t.p.overlay(), null);
  assert.ok(t.changes() > before, 'the view is told to redraw');
  assert.equal(t.clock.timers.size, 0);
  t.p.input('x');
  assert.equal(t.p.overlay(), null, 'tentative after a reset');
});

test('a row change (output, a scroll) removes the predictions', () => {
  const t = setup();
  warm(t);
  t.p.input('b');
  t.host('\r\nbackground job done\r\n$ ');
  assert.equal(t.p.overlay(), null);
  assert.equal(t.p.stats.moved, 1);
  assert.equal(t.p.pending, 0);
});

test('modes: auto predicts above 30 ms and stops below 20 ms; never and always', () => {
  const t = setup({ mode: 'auto', srtt: 10 });
  assert.equal(t.p.active, false);
  t.p.input('a');
  assert.equal(t.p.pending, 0);
  t.p.setRtt(AUTO_ON_MS + 1);
  assert.equal(t.p.active, true);
  t.p.setRtt(25); // between the thresholds: stays on
  assert.equal(t.p.active, true);
  t.p.setRtt(AUTO_OFF_MS - 1);
  assert.equal(t.p.active, false);
  t.p.setMode('always');
  assert.equal(t.p.active, true);
  t.p.input('b');
  assert.equal(t.p.pending, 2);
  t.p.setMode('never');
  assert.equal(t.p.pending, 0, 'turning it off removes what was predicted');
  assert.equal(t.p.active, false);
  t.p.setMode('always');
  t.p.setAllowed(false); // not focused, view role
  assert.equal(t.p.active, false);
});

test('what is not predicted: control keys, wide characters, the right margin', () => {
  const t = setup();
  warm(t);
  const e = t.p.epoch;
  t.p.input('\x03');
  assert.equal(t.p.epoch, e + 1, 'Ctrl-C: tentative');
  t.host('^C\r\n$ ');
  t.p.input('z');
  t.host('z');
  t.p.input('界');
  assert.equal(t.p.pending, 0, 'a wide character is not predicted');
  const t2 = setup({ prompt: '$ ' + 'x'.repeat(16) }); // warm's key takes the cursor to the last column
  warm(t2);
  t2.p.input('y');
  assert.equal(t2.p.pending, 0);
});

test('predictions stay bounded under a long burst of keys with no echo', () => {
  const t = setup();
  warm(t);
  for (let i = 0; i < 5000; i++) t.p.input(i % 3 === 0 ? '\x7f' : 'q');
  assert.ok(t.p.pending <= MAX_PENDING, `pending ${t.p.pending}`);
  t.clock.advance(10_000);
  assert.equal(t.p.pending, 0);
  assert.equal(t.clock.timers.size, 0);
});

test('the setting is saved with the page\'s other preferences; auto by default, junk ignored', () => {
  assert.deepEqual(PREDICT_MODES, MODES);
  const m = new Map();
  const st = { getItem: (k) => m.get(k) ?? null, setItem: (k, v) => m.set(k, v) };
  const p = new Prefs(st);
  assert.equal(p.predict, 'auto');
  assert.equal(p.set({ predict: 'always' }), true);
  assert.equal(p.set({ predict: 'sometimes' }), false);
  assert.equal(new Prefs(st).predict, 'always');
  assert.equal(JSON.parse(m.get(PREFS_KEY)).predict, 'always');
  m.set(PREFS_KEY, JSON.stringify({ predict: 42 }));
  assert.equal(new Prefs(st).predict, 'auto');
});

test('history (Up) replaces the line: keys after it are tentative until one is confirmed', () => {
  const t = setup();
  warm(t);
  t.p.input('\x1b[A');
  t.host('\b\x1b[Kls -l'); // readline draws the previous command
  t.p.input('a');
  assert.equal(t.p.overlay(), null, 'tentative after an unpredictable key');
  t.host('a');
  assert.equal(t.p.pending, 0);
  t.p.input('b');
  assert.equal(drawn(t.screen, t.p), '$ ls -lab');
});

test('a prediction typed over a pending one on the same cell replaces it; undone keys leave nothing', () => {
  const t = setup();
  warm(t);
  t.p.input('b\x7f');
  assert.equal(t.p.overlay()?.cells.length ?? 0, 0, 'b then backspace: nothing to draw');
  t.host('b');
  t.host('\b \b');
  assert.equal(t.p.pending, 0);
  assert.equal(t.p.stats.contradicted + t.p.stats.expired, 0);
  assert.equal(drawn(t.screen, t.p), '$ a');
});

test('two backspaces: the echo of the first confirms what it erased, and nothing is contradicted', () => {
  const t = setup();
  warm(t);
  t.p.input('bc');
  t.host('bc');
  t.p.input('\x7f\x7f');
  assert.equal(drawn(t.screen, t.p), '$ a');
  t.host('\b \b'); // the first backspace's echo
  assert.equal(t.p.stats.contradicted, 0);
  assert.equal(drawn(t.screen, t.p), '$ a');
  t.host('\b \b');
  assert.equal(t.p.pending, 0);
  assert.equal(t.p.stats.contradicted + t.p.stats.expired, 0);
});

// Readline is a model of a line editor in insert mode: what it writes for
// each key, as bash's readline does (the tail redrawn, the cursor moved back).
class Readline {
  constructor(prompt) {
    this.line = '';
    this.pos = 0;
    this.prompt = prompt;
  }
  key(k) {
    const L = this.line;
    const p = this.pos;
    if (k === '\x7f') {
      if (p === 0) return '\x07';
      this.line = L.slice(0, p - 1) + L.slice(p);
      this.pos = p - 1;
      const tail = this.line.slice(this.pos);
      return '\b' + tail + ' ' + '\b'.repeat(tail.length + 1);
    }
    if (k === '\x1b[3~') {
      if (p >= L.length) return '\x07';
      this.line = L.slice(0, p) + L.slice(p + 1);
      const tail = this.line.slice(p);
      return tail + ' ' + '\b'.repeat(tail.length + 1);
    }
    if (k === '\x1b[D') {
      if (p === 0) return '\x07';
      this.pos--;
      return '\b';
    }
    if (k === '\x1b[C') {
      if (p >= L.length) return '\x07';
      this.pos++;
      return L[p];
    }
    this.line = L.slice(0, p) + k + L.slice(p);
    this.pos = p + 1;
    const tail = this.line.slice(this.pos);
    return k + tail + '\b'.repeat(tail.length);
  }
  text() {
    return (this.prompt + this.line).trimEnd();
  }
}

// rng is a small deterministic generator (mulberry32).
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

// typeRandom types n random keys (printable, backspace, arrows, Delete) into a
// Readline behind a round trip of 200 ms plus up to jitter ms (in order;
// coalesce: the echoes of successive keys often arrive in one write, as
// when the PTY is read once for several keys); valid: only keys readline acts
// on (no bell) and no right arrow or Delete over trailing spaces. It
// returns what it saw.
function typeRandom(seed, n, valid, jitter = 0, coalesce = false) {
  const t = setup({ min: 200 });
  const rl = new Readline('$ ');
  const r = rng(seed);
  const cols = t.screen.cols();
  t.p.input('a');
  t.clock.advance(200);
  t.host('a');
  rl.key('a');
  let wrongShown = 0;
  let last = 0; // when the previous echo arrives: the link keeps order
  let chunk = null; // the last echo scheduled
  for (let i = 0; i < n; i++) {
    const x = r();
    let k;
    if (x < 0.55) k = 'xyz01 .'[Math.floor(r() * 7)];
    else if (x < 0.75) k = '\x7f';
    else if (x < 0.85) k = '\x1b[D';
    else if (x < 0.93) k = '\x1b[C';
    else k = '\x1b[3~';
    if (valid) {
      if (k === '\x7f' || k === '\x1b[D') {
        if (rl.pos === 0) k = 'q';
      } else if ((k === '\x1b[C' || k === '\x1b[3~') && rl.line.slice(rl.pos).trim() === '') {
        // Readline moves over trailing spaces; the predictor cannot tell
        // them from the end of the line and does not predict it.
        k = 'q';
      }
    }
    if (k.length === 1 && k !== '\x7f' && rl.prompt.length + rl.line.length >= cols - 3) k = '\x1b[D';
    if (valid && k === '\x1b[D' && rl.pos === 0) continue;
    const out = rl.key(k);
    t.p.input(k);
    // What the user sees now should be the line as it will be, when shown.
    const o = t.p.overlay();
    if (o && o.cells.length > 0 && drawn(t.screen, t.p) !== rl.text()) wrongShown++;
    last = Math.max(last, t.clock.t + 200 + Math.floor(r() * jitter));
    if (chunk && chunk.pending && coalesce && last - chunk.first <= 40 && r() < 0.5) {
      // This echo and the one before arrive in one write (one message):
      // the earlier one waits for this one (40 ms at most).
      t.clock.clearTimeout(chunk.timer);
      chunk.s += out;
    } else chunk = { s: out, pending: true, first: last };
    const c = chunk;
    c.timer = t.clock.setTimeout(() => {
      c.pending = false;
      t.host(c.s);
    }, last - t.clock.t);
    t.clock.advance(Math.floor(r() * 60));
  }
  t.clock.advance(3000);
  return { t, rl, wrongShown };
}

test('random typing into a line editor at 200 ms: nothing predicted is left once the echoes are in', () => {
  for (let seed = 1; seed <= 40; seed++) {
    for (const [valid, jitter, coalesce] of [[true, 0, false], [true, 60, false], [true, 0, true], [false, 0, false], [false, 60, true]]) {
      const { t, rl, wrongShown } = typeRandom(seed, 120, valid, jitter, coalesce);
      const where = `seed ${seed} valid ${valid} jitter ${jitter} coalesce ${coalesce}`;
      assert.equal(t.p.overlay(), null, `${where}: an overlay is left`);
      assert.equal(t.p.pending, 0, `${where}: predictions pending`);
      assert.equal(t.clock.timers.size, 0, `${where}: a timer left`);
      assert.equal(t.screen.text(0), rl.text(), `${where}: the screen is the host's`);
      if (valid) {
        assert.equal(t.p.stats.contradicted + t.p.stats.expired, 0, `${where}: ${JSON.stringify(t.p.stats)}`);
        assert.equal(wrongShown, 0, `${where}: a shown prediction differed from the line`);
      }
    }
  }
});

test('a cell that shows the predicted character sooner than an echo could come is not a confirmation', () => {
  const t = setup({ min: 200 });
  t.p.input('a');
  t.clock.advance(200);
  t.host('a'); // confirmed: a round trip later
  assert.equal(t.p.stats.confirmed, 1);
  t.p.input('b');
  // 10 ms later, output of something typed before (or a program) puts a b
  // there: not this key's echo, which cannot be back yet.
  t.clock.advance(10);
  t.host('b\b');
  assert.equal(t.p.stats.confirmed, 1, 'not confirmed by output 10 ms after the key');
  assert.equal(t.p.pending, 2, 'b and the cursor still wait');
  t.clock.advance(190);
  t.host('b'); // the echo: the cell does not change, so it settles unconfirmed
  assert.equal(t.p.pending, 0);
  assert.equal(t.p.stats.contradicted + t.p.stats.expired, 0);
});

test('Delete removes the character under the cursor; at the end of the line it is not predicted', () => {
  const t = setup();
  warm(t);
  t.p.input('bc');
  t.host('bc');
  t.p.input('\x1b[D\x1b[D\x1b[3~');
  assert.equal(drawn(t.screen, t.p), '$ ac');
  t.host('\b\bc \b\b');
  assert.equal(t.p.pending, 0);
  assert.equal(t.screen.text(), '$ ac');
  t.p.input('\x1b[C\x1b[3~'); // past the c: nothing to delete
  assert.ok(t.p.epoch > t.p.confirmedEpoch, 'tentative');
});
