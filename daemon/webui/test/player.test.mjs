// The recordings player (player.js) over fake recordings: a seek lands on
// the screen of that moment through the nearest keyframe, playing follows
// a fake clock, a live recording is followed, memory stays bounded, and
// errors are said plainly.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CastPlayer, KEYFRAME_PIECES_MAX, LIST_LIMIT, LIVE_POLL_MS, listRecordings, MARKERS_MAX, READ_BYTES, sessionSource } from '../src/player.js';
import { connect } from './harness.mjs';

const enc = new TextEncoder();
const dec = new TextDecoder();

// FakeTerm is a terminal whose "screen" is all the text written since its
// last reset, so the screen at time t is known: every "o" up to t.
class FakeTerm {
  constructor() {
    this.text = '';
    this.cols = 0;
    this.rows = 0;
    this.resets = 0;
  }
  reset(cols, rows) {
    this.text = '';
    this.cols = cols;
    this.rows = rows;
    this.resets++;
  }
  write(s) {
    this.text += s;
  }
  resize(cols, rows) {
    this.cols = cols;
    this.rows = rows;
  }
  async flush() {}
}

// fakeRecording builds a .cast from events and serves it like the daemon:
// reads cut at the last \n within maxBytes, a keyframe every kfEvery
// events whose screen is the FakeTerm's screen there (the output before it).
function fakeRecording(events, { width = 80, height = 24, kfEvery = 4, audit = [], live = false } = {}) {
  const lines = [`{"version":2,"width":${width},"height":${height},"timestamp":1765120000}`];
  for (const [t, c, d] of events) lines.push(JSON.stringify([t, c, d]));
  let bytes = enc.encode(lines.join('\n') + '\n');
  const keyframes = [];
  let off = enc.encode(lines[0] + '\n').length;
  let screen = '';
  let size = { cols: width, rows: height };
  events.forEach(([t, c, d], i) => {
    if (i % kfEvery === 0) keyframes.push({ time: t, offset: off, rows: size.rows, cols: size.cols, screen });
    if (c === 'o') screen += d;
    if (c === 'r') {
      const [cc, rr] = d.split('x').map(Number);
      size = { cols: cc, rows: rr };
    }
    off += enc.encode(lines[i + 1] + '\n').length;
  });
  const rec = {
    reads: [],
    keyframeCalls: [],
    live,
    get bytes() {
      return bytes;
    },
    append(evs) {
      const more = evs.map((e) => JSON.stringify(e)).join('\n') + '\n';
      const b = new Uint8Array(bytes.length + enc.encode(more).length);
      b.set(bytes);
      b.set(enc.encode(more), bytes.length);
      bytes = b;
    },
    source: {
      async read(offset, maxBytes) {
        rec.reads.push({ offset, maxBytes });
        let end = Math.min(bytes.length, offset + maxBytes);
        if (end < bytes.length) end = bytes.lastIndexOf(10, end - 1) + 1;
        if (end <= offset && offset < bytes.length) end = bytes.indexOf(10, offset) + 1;
        end = Math.max(end, offset);
        return {
          data: dec.decode(bytes.subarray(offset, end)), offset, nextOffset: end, size: bytes.length,
          // As the daemon: a live file is never at eof, its end is its size.
          eof: end >= bytes.length && !rec.live, live: rec.live,
        };
      },
      async index() {
        return { keyframes: keyframes.map(({ screen: _, ...k }) => ({ ...k, bytes: 0 })), audit, dropped: 0 };
      },
      async keyframe(n) {
        rec.keyframeCalls.push(n);
        if (!keyframes[n]) throw Object.assign(new Error('no such recording'), { code: -32002 });
        return keyframes[n];
      },
    },
  };
  return rec;
}

const outputUpTo = (events, t) => events.filter(([et, c]) => c === 'o' && et <= t).map(([, , d]) => d).join('');

// ticks drives the player with a fake clock: n ticks of stepMs, letting
// its reads settle between them.
async function ticks(p, clock, n, stepMs) {
  for (let i = 0; i < n; i++) {
    clock.ms += stepMs;
    p.tick();
    await settle();
  }
}
const settle = () => new Promise((r) => setImmediate(r));

function events(n, { resizeAt = -1, markerAt = -1 } = {}) {
  const evs = [];
  for (let i = 0; i < n; i++) {
    const t = i * 0.5;
    evs.push([t, 'o', `line ${i} é✓\r\n`]);
    if (i % 3 === 0) evs.push([t, 'i', 'x']);
    if (i === resizeAt) evs.push([t, 'r', '100x30']);
    if (i === markerAt) evs.push([t, 'm', 'dropped 7 bytes']);
  }
  return evs;
}

test('every seek shows the output up to its target, through the keyframe at or before it', async () => {
  const evs = events(40, { resizeAt: 10, markerAt: 20 });
  const rec = fakeRecording(evs, { kfEvery: 6 });
  const term = new FakeTerm();
  const p = new CastPlayer({ source: rec.source, term, now: () => 0, readBytes: 256 });
  await p.open({ duration: 19.5 });
  assert.equal(p.error, null);
  assert.equal(term.text, 'line 0 é✓\r\n');
  assert.deepEqual([term.cols, term.rows], [80, 24]);
  for (const t of [19.5, 0, 3.2, 5, 5.25, 12.7, 4.99, 100, -3]) {
    await p.seek(t);
    const target = Math.max(0, Math.min(t, 19.5));
    assert.equal(term.text, outputUpTo(evs, target), `seek ${t}`);
    assert.equal(p.time, target);
    assert.deepEqual([term.cols, term.rows], target >= 5 ? [100, 30] : [80, 24], `size at ${t}`);
    // The keyframe used is the last at or before the target.
    const want = p.keyframes.filter((k) => k.time <= target).at(-1).n;
    assert.equal(p.lastKeyframe, want, `keyframe of seek ${t}`);
  }
  assert.deepEqual(p.markers.filter((m) => m.kind === 'marker'), [{ time: 10, label: 'dropped 7 bytes', kind: 'marker' }]);
});

test('random seeks over random recordings all land on the output up to their target', async () => {
  let x = 7;
  const rnd = (n) => {
    x = (x * 1103515245 + 12345) % 2147483648;
    return x % n;
  };
  for (let r = 0; r < 20; r++) {
    const evs = [];
    let t = 0;
    for (let i = 0; i < 50 + rnd(200); i++) {
      t += rnd(4) === 0 ? 0 : rnd(1000) / 1000; // equal times too
      const code = ['o', 'o', 'o', 'i', 'm', 'r'][rnd(6)];
      evs.push([t, code, code === 'r' ? `${20 + rnd(100)}x${5 + rnd(40)}` : `${code}${i}·${'z'.repeat(rnd(30))}\n`]);
    }
    const rec = fakeRecording(evs, { kfEvery: 1 + rnd(30) });
    const term = new FakeTerm();
    const p = new CastPlayer({ source: rec.source, term, now: () => 0, readBytes: 64 + rnd(2000) });
    await p.open({ duration: t });
    for (let k = 0; k < 20; k++) {
      const target = rnd(Math.ceil(t * 1000) + 1) / 1000;
      await p.seek(target);
      assert.equal(p.error, null);
      assert.equal(term.text, outputUpTo(evs, target), `recording ${r}, seek ${target}`);
      const last = evs.filter(([et, c]) => c === 'r' && et <= target).at(-1);
      assert.deepEqual([term.cols, term.rows], last ? last[2].split('x').map(Number) : [80, 24], `size at ${target}`);
    }
  }
});

test('a seek reads from its keyframe, not from the start', async () => {
  const evs = events(2000);
  const rec = fakeRecording(evs, { kfEvery: 100 });
  const p = new CastPlayer({ source: rec.source, term: new FakeTerm(), now: () => 0, readBytes: 1024 });
  await p.open({ duration: 999.5 });
  await p.scanned;
  rec.reads.length = 0;
  await p.seek(900.2); // event 1800 is the keyframe's; 1800.4 → events up to 1800
  const kf = p.keyframeAt(900.2);
  assert.equal(kf.time, 900);
  assert.equal(rec.reads[0].offset, kf.offset);
  const read = rec.reads.length * 1024;
  assert.ok(read <= 3 * 1024, `read ${rec.reads.length} chunks for a seek one event past a keyframe`);
});

test('seeks within one keyframe\'s stretch read its screen once', async () => {
  const evs = events(40);
  const rec = fakeRecording(evs, { kfEvery: 10 });
  const term = new FakeTerm();
  const p = new CastPlayer({ source: rec.source, term, now: () => 0 });
  await p.open({ duration: 19.5 });
  const [k1, k2] = [p.keyframes[1], p.keyframes[2]]; // the header's is p.keyframes[0]
  assert.ok(k1.time < k2.time);
  rec.keyframeCalls.length = 0;
  const within = [0, 0.25, 0.5, 0.75, 0.1].map((f) => k1.time + f * (k2.time - k1.time - 0.01));
  for (const t of within) {
    await p.seek(t);
    assert.equal(p.lastKeyframe, k1.n);
    assert.equal(term.text, outputUpTo(evs, t));
  }
  assert.deepEqual(rec.keyframeCalls, [k1.n]);
  await p.seek(k2.time);
  await p.seek(within[1]);
  assert.deepEqual(rec.keyframeCalls, [k1.n, k2.n, k1.n]);
  assert.equal(term.text, outputUpTo(evs, within[1]));
});

test('a recording without keyframes plays from its header', async () => {
  const evs = events(10);
  const rec = fakeRecording(evs, { width: 90, height: 20 });
  rec.source.index = async () => ({ keyframes: [], audit: [], dropped: 0 });
  const term = new FakeTerm();
  const p = new CastPlayer({ source: rec.source, term, now: () => 0 });
  await p.open({ duration: 4.5 });
  await p.seek(2.1);
  assert.equal(term.text, outputUpTo(evs, 2.1));
  assert.deepEqual([term.cols, term.rows], [90, 20]);
  assert.equal(rec.keyframeCalls.length, 0);
});

test('playing follows the clock at the speed set, pauses, and ends at the duration', async () => {
  const evs = events(20); // 0 .. 9.5 s
  const rec = fakeRecording(evs, { kfEvery: 5 });
  const term = new FakeTerm();
  const clock = { ms: 0 };
  const p = new CastPlayer({ source: rec.source, term, now: () => clock.ms, readBytes: 300 });
  await p.open({ duration: 10 });
  p.play();
  await ticks(p, clock, 4, 500); // 2 s
  assert.equal(p.time, 2);
  assert.equal(term.text, outputUpTo(evs, 2));
  p.setSpeed(4);
  await ticks(p, clock, 2, 500); // + 4 s
  assert.equal(p.time, 6);
  assert.equal(term.text, outputUpTo(evs, 6));
  p.toggle();
  await ticks(p, clock, 5, 500);
  assert.equal(p.time, 6, 'paused');
  assert.throws(() => p.setSpeed(3), /speed 3 is not one of 0.5, 1, 2, 4, 8/);
  p.setSpeed(0.5);
  p.toggle();
  await ticks(p, clock, 2, 1000); // + 1 s
  assert.equal(p.time, 7);
  p.setSpeed(8);
  await ticks(p, clock, 4, 1000);
  assert.equal(p.playing, false);
  assert.equal(p.ended, true);
  assert.equal(p.time, 10);
  assert.equal(term.text, outputUpTo(evs, 10));
  // Play again after the end starts over.
  p.play();
  await settle();
  await settle();
  assert.equal(p.time, 0);
  assert.equal(p.playing, true);
});

test('playing waits for a chunk that has not arrived instead of running past it', async () => {
  const evs = events(40);
  const rec = fakeRecording(evs, { kfEvery: 100 });
  const clock = { ms: 0 };
  const term = new FakeTerm();
  const p = new CastPlayer({ source: rec.source, term, now: () => clock.ms, readBytes: 128 });
  await p.open({ duration: 19.5 });
  await p.scanned;
  const read = rec.source.read;
  let release;
  rec.source.read = (o, m) => new Promise((r) => { release = () => r(read(o, m)); });
  p.play();
  for (let i = 0; i < 10; i++) {
    clock.ms += 1000;
    p.tick();
    await settle();
    assert.equal(term.text, outputUpTo(evs, p.time), `at ${p.time}`);
  }
  assert.ok(p.time < 3, `the playhead ran to ${p.time} without data`);
  rec.source.read = read;
  release();
  await settle();
  await settle();
  clock.ms += 1000;
  p.tick();
  assert.ok(p.time > 1);
  assert.equal(term.text, outputUpTo(evs, p.time));
});

test('a live recording is followed: its end is read again every LIVE_POLL_MS', async () => {
  const evs = events(4); // 0 .. 1.5
  const rec = fakeRecording(evs, { live: true });
  const clock = { ms: 0 };
  const term = new FakeTerm();
  const p = new CastPlayer({ source: rec.source, term, now: () => clock.ms });
  await p.open({ duration: 1.5, live: true });
  await p.scanned;
  p.play();
  await ticks(p, clock, 4, 500);
  assert.equal(p.playing, true, `a live recording does not end at its end: ${JSON.stringify({ ...p.state(), markers: 0 })}`);
  assert.equal(term.text, outputUpTo(evs, 2));
  rec.append([[2.0, 'o', 'new\r\n'], [2.1, 'o', 'more\r\n']]);
  const before = rec.reads.length;
  await ticks(p, clock, 1, LIVE_POLL_MS / 4);
  assert.ok(rec.reads.length - before <= 1, 'polled more often than LIVE_POLL_MS');
  await ticks(p, clock, 8, LIVE_POLL_MS / 2);
  assert.ok(term.text.endsWith('new\r\nmore\r\n'), JSON.stringify(term.text));
  assert.equal(p.state().duration, 2.1);
  // The recording stops: the player ends with it.
  rec.live = false;
  await ticks(p, clock, 8, LIVE_POLL_MS / 2);
  assert.equal(p.playing, false);
  assert.equal(p.ended, true);
});

test('memory: a 48 MiB recording plays to its end holding at most 2 reads of events', async () => {
  // A generated recording: fixed-width lines, never held whole by the test either.
  const header = '{"version":2,"width":80,"height":24}\n';
  const line = (i) => `[${(i / 1000).toFixed(3).padStart(12, ' ')}, "o", "${'x'.repeat(60)}\\r\\n"]\n`;
  const L = line(0).length;
  const N = Math.floor((48 << 20) / L);
  const size = header.length + N * L;
  const source = {
    async read(offset, maxBytes) {
      if (offset === 0) {
        const n = Math.floor((maxBytes - header.length) / L);
        return { data: header + Array.from({ length: n }, (_, i) => line(i)).join(''), nextOffset: header.length + n * L, size, eof: false, live: false };
      }
      const first = (offset - header.length) / L;
      const n = Math.min(Math.floor(maxBytes / L), N - first);
      let data = '';
      for (let i = 0; i < n; i++) data += line(first + i);
      return { data, nextOffset: offset + n * L, size, eof: first + n >= N, live: false };
    },
    async index() {
      return { keyframes: [], audit: [], dropped: 0 };
    },
    async keyframe() {
      throw new Error('no keyframes');
    },
  };
  let written = 0;
  const term = { reset() {}, resize() {}, write(s) { written += s.length; } };
  const clock = { ms: 0 };
  const p = new CastPlayer({ source, term, now: () => clock.ms, readBytes: READ_BYTES });
  await p.open({ duration: (N - 1) / 1000 });
  assert.equal(p.markersPartial, true, 'a file over MARKER_SCAN_MAX_BYTES is not scanned');
  p.setSpeed(8);
  p.play();
  let n = 0;
  while (p.playing && n++ < 10_000) {
    clock.ms += 200;
    p.tick();
    await settle();
    assert.ok(p.queuedChars <= 2 * READ_BYTES, `held ${p.queuedChars} characters of events`);
  }
  assert.equal(p.ended, true, JSON.stringify({ ...p.state(), markers: 0, n }));
  assert.equal(p.error, null);
  assert.equal(written, N * 62);
  assert.ok(p.maxQueuedChars <= 2 * READ_BYTES, `held up to ${p.maxQueuedChars}`);
  assert.ok(p.maxQueuedChars > READ_BYTES / 2, 'the bound test never filled the queue');
});

test('markers: "m" events and audit lines, time ordered, at most MARKERS_MAX', async () => {
  const evs = [];
  for (let i = 0; i < MARKERS_MAX + 50; i++) evs.push([i, 'm', `m${i}`]);
  const audit = [
    { type: 'audit', time: 2.5, event: 'attach', viewer: 'alice', token: 'tok1', role: 'control', remote: '127.0.0.1:5000' },
    { type: 'audit', time: 3, event: 'input', token: 'tok1', role: 'control' },
  ];
  const rec = fakeRecording(evs, { audit });
  const p = new CastPlayer({ source: rec.source, term: new FakeTerm(), now: () => 0, readBytes: 4096 });
  await p.open({ duration: MARKERS_MAX + 49 });
  await p.scanned;
  assert.equal(p.markers.length, MARKERS_MAX);
  assert.equal(p.markersTruncated, true);
  const a = p.markers.filter((m) => m.kind === 'audit');
  assert.deepEqual(a.map((m) => m.label), ['attach alice (control) from 127.0.0.1:5000', 'input tok1 (control)']);
  for (let i = 1; i < p.markers.length; i++) assert.ok(p.markers[i - 1].time <= p.markers[i].time);
});

test('an audit larger than a message comes in pages: all of it is read, each auditNext where its page ends', async () => {
  const audit = [];
  for (let i = 0; i < 25; i++) audit.push({ type: 'audit', time: i / 10, event: 'attach', viewer: `v${i}`, role: 'view' });
  const rec = fakeRecording(events(10), { audit: [] });
  const asked = [];
  const page = (from, next) => ({ keyframes: [], audit: audit.slice(from, next ?? audit.length), auditFrom: from, auditNext: next, dropped: 0 });
  rec.source.index = async (from = 0) => {
    asked.push(from);
    return page(from, from + 10 < audit.length ? from + 10 : null);
  };
  const p = new CastPlayer({ source: rec.source, term: new FakeTerm(), now: () => 0, readBytes: 4096 });
  await p.open({ duration: 5 });
  assert.deepEqual(asked, [0, 10, 20]);
  assert.deepEqual(p.markers.filter((m) => m.kind === 'audit').map((m) => m.label.split(' ')[1]), audit.map((a) => a.viewer));
  // A next that does not move forward, or skips, is an error, not a loop.
  for (const bad of [0, 5, 11, 'x']) {
    const r = fakeRecording(events(10));
    r.source.index = async (from = 0) => (from === 0 ? page(0, 10) : page(from, bad));
    const q = new CastPlayer({ source: r.source, term: new FakeTerm(), now: () => 0, readBytes: 4096 });
    await q.open({ duration: 5 });
    assert.match(String(q.error), /auditNext|no audit/, `auditNext ${bad}`);
  }
});

test('errors are said plainly: a bad line, a read that does not move, a refused id', async () => {
  {
    const rec = fakeRecording(events(30), { kfEvery: 100 });
    const good = rec.bytes;
    const text = dec.decode(good).replace('[10,"o","line 20 é✓\\r\\n"]', '[10,"o",42]');
    const b = enc.encode(text);
    rec.source.read = async (offset, maxBytes) => {
      let end = Math.min(b.length, offset + maxBytes);
      if (end < b.length) end = b.lastIndexOf(10, end - 1) + 1;
      return { data: dec.decode(b.subarray(offset, end)), nextOffset: end, size: b.length, eof: end >= b.length, live: false };
    };
    const p = new CastPlayer({ source: rec.source, term: new FakeTerm(), now: () => 0, readBytes: 200 });
    await p.open({ duration: 14.5 });
    await p.scanned;
    assert.equal(p.markersPartial, true);
    assert.match(p.scanError, /line 29: event data is number, want a string/);
    await p.seek(12);
    assert.match(p.error, /event data is number, want a string/);
    assert.equal(p.seeking, false);
  }
  {
    const rec = fakeRecording(events(30));
    const read = rec.source.read;
    rec.source.read = async (o, m) => (o === 0 ? read(o, m) : { data: '', nextOffset: o, size: 99, eof: false });
    const p = new CastPlayer({ source: rec.source, term: new FakeTerm(), now: () => 0, readBytes: 200 });
    await p.open({ duration: 14.5 });
    assert.match(p.error, /recordings\/read at \d+: nextOffset \d+ does not move forward/);
  }
  {
    const rec = fakeRecording(events(3));
    rec.source.read = async () => {
      throw Object.assign(new Error('recording not found'), { code: -32002 });
    };
    const p = new CastPlayer({ source: rec.source, term: new FakeTerm(), now: () => 0 });
    await p.open({});
    assert.equal(p.error, 'recording not found (error -32002)');
  }
  {
    const rec = fakeRecording([]);
    rec.source.read = async () => ({ data: '{"version":2,"width":80,"height":24}', nextOffset: 36, size: 36, eof: true });
    const p = new CastPlayer({ source: rec.source, term: new FakeTerm(), now: () => 0 });
    await p.open({});
    assert.match(p.error, /line 1: no header line: the recording is empty/);
  }
});

test('a seek made while another is reading wins; the older one writes nothing', async () => {
  const evs = events(200);
  const rec = fakeRecording(evs, { kfEvery: 50 });
  const term = new FakeTerm();
  const p = new CastPlayer({ source: rec.source, term, now: () => 0, readBytes: 256 });
  await p.open({ duration: 99.5 });
  const a = p.seek(80);
  const b = p.seek(30.3);
  await Promise.all([a, b]);
  assert.equal(term.text, outputUpTo(evs, 30.3));
  assert.equal(p.time, 30.3);
});

test('sessionSource and listRecordings send recordings/* on the session', async () => {
  const { session, ws } = await connect();
  const sock = { take: () => ws.take().filter((m) => m.method?.startsWith('recordings/')), recv: (m) => ws.recv(m) };
  const listed = listRecordings(session, 'ahp-terminal:/t1');
  const [req] = sock.take();
  assert.deepEqual([req.method, req.params], ['recordings/list', { channel: 'ahp-terminal:/t1', limit: LIST_LIMIT }]);
  sock.recv({ jsonrpc: '2.0', id: req.id, result: { recordings: [{ id: 'x' }], next: 'k1' } });
  assert.deepEqual(await listed, { recordings: [{ id: 'x' }], next: 'k1' });
  // The next page: after the cursor; an answer without next is the last.
  const older = listRecordings(session, 'ahp-terminal:/t1', { after: 'k1', limit: 5 });
  const [req2] = sock.take();
  assert.deepEqual(req2.params, { channel: 'ahp-terminal:/t1', limit: 5, after: 'k1' });
  sock.recv({ jsonrpc: '2.0', id: req2.id, result: { recordings: [{ id: 'y' }] } });
  assert.deepEqual(await older, { recordings: [{ id: 'y' }], next: null });
  // A next that is not a new cursor would loop: an error.
  for (const next of ['k1', 7]) {
    const again = listRecordings(session, 'ahp-terminal:/t1', { after: 'k1' });
    const [r] = sock.take();
    sock.recv({ jsonrpc: '2.0', id: r.id, result: { recordings: [], next } });
    await assert.rejects(again, /not a new cursor/);
  }
  // A function: the session of the moment (the page's, after a reconnect).
  const src = sessionSource(() => session, 'x');
  src.read(10, 4096);
  src.index();
  src.keyframe(2);
  src.keyframe(2, 77);
  assert.deepEqual(sock.take().map((m) => [m.method, m.params]), [
    ['recordings/read', { id: 'x', offset: 10, maxBytes: 4096 }],
    ['recordings/index', { id: 'x' }],
    ['recordings/keyframe', { id: 'x', n: 2 }],
    ['recordings/keyframe', { id: 'x', n: 2, from: 77 }],
  ]);
  const bad = listRecordings(session);
  const [r2] = sock.take();
  assert.deepEqual(r2.params, { limit: LIST_LIMIT });
  sock.recv({ jsonrpc: '2.0', id: r2.id, result: {} });
  await assert.rejects(bad, /without a recordings array/);
  await assert.rejects(sessionSource(() => null, 'x').read(0, 10), /not connected/);
});

// piecewise serves rec's keyframes as the daemon does a screen larger than
// a message: pieces of at most size UTF-8 bytes, cut at a character, each
// with from and next (null after the last).
function piecewise(rec, size) {
  const calls = [];
  const whole = rec.source.keyframe;
  rec.source.keyframe = async (n, from = 0) => {
    calls.push([n, from]);
    const kf = await whole(n);
    const b = enc.encode(kf.screen);
    let end = Math.min(b.length, from + size);
    while (end > from && end < b.length && (b[end] & 0xc0) === 0x80) end--;
    return { ...kf, screen: dec.decode(b.subarray(from, end)), from, next: end < b.length ? end : null, bytes: b.length };
  };
  return calls;
}

test('a keyframe larger than a message is read in pieces, whole before it is shown', async () => {
  const evs = [];
  for (let i = 0; i < 40; i++) evs.push([i * 0.5, 'o', `\x1b[3${i % 8}mlíne ${i} 漢🙂\r\n`]);
  const rec = fakeRecording(evs, { kfEvery: 20 });
  const calls = piecewise(rec, 7);
  const term = new FakeTerm();
  const p = new CastPlayer({ source: rec.source, term });
  await p.open();
  await p.seek(15);
  assert.equal(p.error, null);
  assert.equal(p.lastKeyframe, 1);
  assert.equal(term.text, outputUpTo(evs, 15));
  const screen = outputUpTo(evs, evs[19][0]); // keyframe 1's: the output before event 20
  const pieces = calls.filter(([n]) => n === 1);
  assert.ok(pieces.length > enc.encode(screen).length / 7, `${pieces.length} pieces of a ${enc.encode(screen).length}-byte screen`);
  // "\x1b[30ml" is 6 bytes and "í" 2: the first piece stops before it.
  assert.deepEqual(pieces.map(([, from]) => from).slice(0, 2), [0, 6]);
  assert.ok(pieces.every(([, from], i) => i === 0 || from > pieces[i - 1][1] && from - pieces[i - 1][1] <= 7));
  assert.equal(p.keyframeReads, 2); // keyframe 0 at open, 1 at the seek: one read each, however many pieces
});

test('keyframe pieces that do not move forward are an error, not a loop', async () => {
  const evs = [];
  for (let i = 0; i < 20; i++) evs.push([i * 0.5, 'o', `line ${i}\r\n`]);
  for (const [name, next] of [['repeats', (from) => from], ['skips', (from) => from + 100], ['goes back', () => 0]]) {
    const rec = fakeRecording(evs, { kfEvery: 10 });
    let calls = 0;
    rec.source.keyframe = async (n, from = 0) => {
      calls++;
      return { time: 4.5, offset: 0, rows: 24, cols: 80, screen: from ? 'b' : 'a', from, next: next(from) };
    };
    const p = new CastPlayer({ source: rec.source, term: new FakeTerm() });
    await p.open();
    calls = 0;
    await p.seek(7);
    assert.match(p.error ?? '', /is not where the piece ends/, name);
    assert.ok(calls <= 3, `${name}: ${calls} calls`);
  }
  // A daemon whose pieces never end: stopped at KEYFRAME_PIECES_MAX.
  const rec = fakeRecording(evs, { kfEvery: 10 });
  let calls = 0;
  rec.source.keyframe = async (n, from = 0) => {
    calls++;
    return { time: 4.5, offset: 0, rows: 24, cols: 80, screen: 'x', from, next: from + 1 };
  };
  const p = new CastPlayer({ source: rec.source, term: new FakeTerm() });
  await p.open();
  calls = 0;
  await p.seek(7);
  assert.match(p.error ?? '', /more than \d+ pieces/);
  assert.equal(calls, KEYFRAME_PIECES_MAX);
});
