// The asciicast v2 reader (cast.js): what it accepts, what it refuses and
// how it says so, and its bound on one line.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CastError, CastReader, formatTime, LINE_MAX_CHARS, parseEvent, parseHeader, parseSize, utf8Length } from '../src/cast.js';

const HEADER = '{"version":2,"width":80,"height":24,"timestamp":1765120000,"title":"t","env":{"TERM":"xterm-256color"}}';
const CAST = [
  HEADER,
  '[0.000000, "o", "$ "]',
  '[0.500000, "i", "ls\\r"]',
  '[0.510000, "o", "ls\\r\\nfile é ✓ 𝄞\\r\\n"]',
  '[1.000000, "r", "100x30"]',
  '[1.000000, "m", "dropped 12 bytes"]',
  '[2.250000, "o", "\\u001b[1mbold\\u001b[0m"]',
].join('\n') + '\n';

test('a cast parses into its header and events, in order', () => {
  const r = new CastReader();
  const evs = [...r.push(CAST), ...r.end()];
  assert.deepEqual(r.header, {
    width: 80, height: 24, timestamp: 1765120000, title: 't', env: { TERM: 'xterm-256color' },
  });
  assert.deepEqual(evs.map((e) => [e.time, e.code, e.data]), [
    [0, 'o', '$ '],
    [0.5, 'i', 'ls\r'],
    [0.51, 'o', 'ls\r\nfile é ✓ 𝄞\r\n'],
    [1, 'r', '100x30'],
    [1, 'm', 'dropped 12 bytes'],
    [2.25, 'o', '\x1b[1mbold\x1b[0m'],
  ]);
  assert.equal(evs[3].cols, 100);
  assert.equal(evs[3].rows, 30);
});

test('the same events whatever the pieces the text comes in', () => {
  const whole = new CastReader();
  const want = [...whole.push(CAST), ...whole.end()];
  for (let seed = 1; seed <= 50; seed++) {
    let x = seed;
    const r = new CastReader();
    const got = [];
    for (let i = 0; i < CAST.length;) {
      x = (x * 1103515245 + 12345) % 2147483648;
      const n = 1 + (x % 17);
      got.push(...r.push(CAST.slice(i, i + n)));
      i += n;
    }
    got.push(...r.end());
    assert.deepEqual(got, want, `seed ${seed}`);
  }
});

test('CRLF line ends, blank lines and a last line without \\n are taken', () => {
  const r = new CastReader();
  const evs = [...r.push(`${HEADER}\r\n[0.1, "o", "a"]\r\n\n[0.2, "o", "b"]`), ...r.end()];
  assert.deepEqual(evs.map((e) => e.data), ['a', 'b']);
});

test('bad headers are refused on line 1, saying what is wrong', () => {
  const cases = [
    ['', /line 1: not JSON/],
    ['[2, 80, 24]', /line 1: the header is not a JSON object/],
    ['{"version":1,"width":80,"height":24}', /line 1: version 1, want 2/],
    ['{"version":2,"width":0,"height":24}', /line 1: width 0 is not an integer from 1 to 4096/],
    ['{"version":2,"width":80,"height":"24"}', /line 1: height "24" is not an integer/],
    ['{"version":2,"width":80,"height":99999}', /line 1: height 99999/],
  ];
  for (const [line, want] of cases) {
    assert.throws(() => parseHeader(line), (e) => e instanceof CastError && e.line === 1 && want.test(e.message), line);
  }
  assert.throws(() => new CastReader().end(), /no header: the recording is empty/);
});

test('bad event lines are refused with their line number', () => {
  const cases = [
    ['[0.1, "o"]', /an event is \[seconds, code, data\]/],
    ['{"t":1}', /an event is \[seconds, code, data\]/],
    ['[0.1, "o", "a"', /not JSON/],
    ['[-1, "o", "a"]', /time -1 is not a number ≥ 0/],
    ['["1", "o", "a"]', /time "1" is not a number/],
    ['[0.5, "x", "a"]', /event code "x" is not one of o, i, r, m/],
    ['[0.5, "o", 5]', /event data is number, want a string/],
    ['[0.5, "r", "80x"]', /resize "80x" is not COLSxROWS/],
    ['[0.5, "r", "0x24"]', /resize "0x24"/],
    ['[0.5, "r", "80x5000"]', /resize "80x5000"/],
    ['[0.05, "o", "a"]', /time 0.05 is before the previous event's 0.1/],
  ];
  for (const [line, want] of cases) {
    const r = new CastReader();
    assert.throws(() => r.push(`${HEADER}\n[0.1, "o", "ok"]\n${line}\n`),
      (e) => e instanceof CastError && e.line === 3 && e.message.startsWith('line 3: ') && want.test(e.message), line);
  }
});

test('reading from an offset (no header): errors count the lines of that read', () => {
  const r = new CastReader({ header: false });
  assert.equal(r.push('[3.0, "o", "a"]\n').length, 1);
  assert.throws(() => r.push('[3.1, "q", "a"]\n'), /event line 2 of this read: event code "q"/);
});

test('a line longer than LINE_MAX_CHARS is refused as it arrives, without holding more', () => {
  const r = new CastReader();
  r.push(`${HEADER}\n[0.1, "o", "`);
  const piece = 'x'.repeat(64 * 1024);
  let fed = 0;
  assert.throws(() => {
    for (;;) {
      r.push(piece);
      fed += piece.length;
      assert.ok(fed <= LINE_MAX_CHARS + piece.length, 'fed past the bound without an error');
    }
  }, /line 2: a line longer than 1048576 characters/);
  assert.ok(r.pending.length <= LINE_MAX_CHARS);
  // And as one string of 8 MiB, at once.
  assert.throws(() => new CastReader().push(`${HEADER}\n[0.1, "o", "${'y'.repeat(8 << 20)}"]\n`), /line 2: a line longer/);
});

test('a large input is parsed in one pass', () => {
  // 200,000 lines: linear work (a quadratic reader would not finish).
  const lines = [HEADER];
  for (let i = 0; i < 200_000; i++) lines.push(`[${(i / 100).toFixed(6)}, "o", "line ${i}\\r\\n"]`);
  const text = lines.join('\n') + '\n';
  const r = new CastReader();
  let n = 0;
  for (let i = 0; i < text.length; i += 256 * 1024) n += r.push(text.slice(i, i + 256 * 1024)).length;
  n += r.end().length;
  assert.equal(n, 200_000);
});

test('parseEvent, parseSize, utf8Length, formatTime', () => {
  assert.deepEqual(parseEvent('[1.5, "r", "132x43"]'), { time: 1.5, code: 'r', data: '132x43', cols: 132, rows: 43 });
  assert.deepEqual(parseSize('1x1'), { cols: 1, rows: 1 });
  assert.equal(utf8Length('a é ✓ 𝄞'), 1 + 1 + 2 + 1 + 3 + 1 + 4);
  assert.equal(utf8Length('\ud800x'), 4); // a lone surrogate: U+FFFD's 3 bytes
  assert.equal(formatTime(0), '0:00');
  assert.equal(formatTime(65.9), '1:05');
  assert.equal(formatTime(3725), '1:02:05');
  assert.equal(formatTime(NaN), '0:00');
});

test('mutated input: every line is an event or a CastError, never another exception', () => {
  // A fuzz of sorts, seeded from the table's lines: bytes replaced,
  // inserted and cut; what comes out is events or a CastError naming a line.
  const seeds = CAST.split('\n').filter(Boolean);
  const alphabet = '[]{}",:0123456789.-eE\\nuorim x\u00e9\ud83d\ude00\u0000';
  let x = 12345;
  const rnd = (n) => {
    x = (x * 1103515245 + 12345) % 2147483648;
    return x % n;
  };
  let events = 0;
  let errors = 0;
  for (let i = 0; i < 20_000; i++) {
    let line = seeds[1 + rnd(seeds.length - 1)];
    for (let k = 0, n = 1 + rnd(3); k < n; k++) {
      const at = rnd(line.length + 1);
      const c = alphabet[rnd(alphabet.length)];
      switch (rnd(3)) {
        case 0: line = line.slice(0, at) + c + line.slice(at + 1); break;
        case 1: line = line.slice(0, at) + c + line.slice(at); break;
        default: line = line.slice(0, at) + line.slice(at + 1 + rnd(4));
      }
    }
    const r = new CastReader();
    try {
      events += [...r.push(`${HEADER}\n${line}\n`), ...r.end()].length;
    } catch (e) {
      assert.ok(e instanceof CastError, `${JSON.stringify(line)}: ${e}`);
      assert.match(e.message, /^line 2: /);
      errors++;
    }
  }
  assert.ok(events > 1000 && errors > 1000, `events ${events}, errors ${errors}`);
});
