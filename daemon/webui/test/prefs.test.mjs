// Saved preferences, keyboard shortcuts, the clipped test, and the page's
// words for closes and titles (prefs.js, page-text.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { clippedBy, clippedText, FONT_SIZE_DEFAULT, FONT_SIZE_MAX, FONT_SIZE_MIN, Prefs, PREFS_KEY, shortcut, sizeText } from '../src/prefs.js';
import { channelLabel, closeText, documentTitle } from '../src/page-text.js';

function memStorage(init = {}) {
  const m = new Map(Object.entries(init));
  return { m, getItem: (k) => (m.has(k) ? m.get(k) : null), setItem: (k, v) => m.set(k, String(v)) };
}

test('prefs: defaults, saved values survive a reload, junk is ignored', () => {
  const st = memStorage();
  const p = new Prefs(st);
  assert.deepEqual([p.fontSize, p.theme], [FONT_SIZE_DEFAULT, 'dark']);
  assert.equal(p.set({ fontSize: 15 }), true);
  assert.equal(p.set({ theme: 'light' }), true);
  assert.equal(p.set({ theme: 'light' }), false, 'no change, no write');
  assert.deepEqual(JSON.parse(st.m.get(PREFS_KEY)), { fontSize: 15, theme: 'light', predict: 'auto', charts: 'open' });
  const again = new Prefs(st);
  assert.deepEqual([again.fontSize, again.theme], [15, 'light']);

  assert.equal(new Prefs(memStorage({ [PREFS_KEY]: '{not json' })).fontSize, FONT_SIZE_DEFAULT);
  const odd = new Prefs(memStorage({ [PREFS_KEY]: JSON.stringify({ fontSize: 400, theme: 'neon' }) }));
  assert.deepEqual([odd.fontSize, odd.theme], [FONT_SIZE_MAX, 'dark']);
  p.set({ fontSize: 1 });
  assert.equal(p.fontSize, FONT_SIZE_MIN);
  // No storage (or one that throws): the change holds in memory.
  const none = new Prefs(null);
  none.set({ fontSize: 20 });
  assert.equal(none.fontSize, 20);
  const broken = new Prefs({ getItem() { throw new Error('denied'); }, setItem() { throw new Error('full'); } });
  assert.equal(broken.set({ theme: 'light' }), true);
  assert.equal(broken.theme, 'light');
});

test('prefs: the charts panel is open by default; closing it is kept', () => {
  const st = memStorage();
  const p = new Prefs(st);
  assert.equal(p.charts, 'open');
  assert.equal(p.set({ charts: 'closed' }), true);
  assert.equal(p.set({ charts: 'closed' }), false);
  assert.equal(new Prefs(st).charts, 'closed', 'after a reload');
  assert.equal(p.set({ fontSize: 20 }), true);
  assert.equal(new Prefs(st).charts, 'closed', 'other changes keep it');
  assert.equal(p.set({ charts: 'sideways' }), false, 'junk is ignored');
  p.set({ charts: 'open' });
  assert.equal(new Prefs(st).charts, 'open');
  // Saved by an older page (no charts key): open.
  assert.equal(new Prefs(memStorage({ [PREFS_KEY]: JSON.stringify({ fontSize: 14, theme: 'dark', predict: 'auto' }) })).charts, 'open');
  assert.equal(new Prefs(memStorage({ [PREFS_KEY]: JSON.stringify({ charts: 7 }) })).charts, 'open');
});

test('shortcuts: Ctrl+Shift+C copies, Ctrl +/-/0 set the font, everything else goes to the terminal', () => {
  const k = (key, mods = {}) => shortcut({ type: 'keydown', key, code: '', ...mods });
  assert.equal(k('C', { ctrlKey: true, shiftKey: true }), 'copy');
  assert.equal(k('c', { ctrlKey: true }), null, 'Ctrl+C is the shell\'s interrupt');
  assert.equal(k('=', { ctrlKey: true }), 'font+');
  assert.equal(k('+', { ctrlKey: true, shiftKey: true }), 'font+');
  assert.equal(k('-', { ctrlKey: true }), 'font-');
  assert.equal(k('0', { ctrlKey: true }), 'font0');
  assert.equal(k('=', { metaKey: true }), 'font+');
  assert.equal(k('=', {}), null);
  assert.equal(k('a', { ctrlKey: true }), null);
  assert.equal(k('=', { ctrlKey: true, altKey: true }), null);
  assert.equal(shortcut({ type: 'keyup', key: '=', ctrlKey: true }), null);
});

test('clipped: only when the host size exceeds the viewport in rows or columns', () => {
  assert.equal(clippedBy({ rows: 24, cols: 80 }, { rows: 30, cols: 100 }), null);
  assert.equal(clippedBy({ rows: 30, cols: 100 }, { rows: 30, cols: 100 }), null);
  assert.deepEqual(clippedBy({ rows: 40, cols: 100 }, { rows: 30, cols: 120 }), { rows: 40, cols: 100, fitRows: 30, fitCols: 120 });
  assert.deepEqual(clippedBy({ rows: 20, cols: 130 }, { rows: 30, cols: 120 }), { rows: 20, cols: 130, fitRows: 30, fitCols: 120 });
  assert.equal(clippedBy(null, { rows: 30, cols: 120 }), null, 'no host size yet');
  assert.equal(clippedBy({ rows: 40, cols: 100 }, null), null);
});

test('close text: the code and reason as the daemon sent them', () => {
  assert.equal(closeText(1001, 'host shutting down'), 'closed 1001 “host shutting down”');
  assert.equal(closeText(1001, ''), 'closed 1001 (the daemon shut down)');
  assert.equal(closeText(1012, ''), 'closed 1012 (the daemon is upgrading in place; reconnecting)');
  assert.equal(closeText(1012, 'host upgrading'), 'closed 1012 “host upgrading”');
  assert.equal(closeText(1008, 'kicked by operator'), 'closed 1008 “kicked by operator”');
  assert.equal(closeText(1006, ''), 'connection lost (1006, no close frame)');
  assert.equal(closeText(null, ''), 'closed');
});

test('titles: the program\'s title, else the channel id', () => {
  assert.equal(documentTitle('vim notes.txt', 'ahp-terminal:/shell'), 'vim notes.txt — ahpd');
  assert.equal(documentTitle('  ', 'ahp-terminal:/shell'), 'shell — ahpd');
  assert.equal(documentTitle('', null), 'ahpd');
  assert.equal(channelLabel({ channel: 'ahp-terminal:/shell', title: 'htop' }), 'htop');
  assert.equal(channelLabel({ channel: 'ahp-telemetry:/sys', title: '' }), 'sys');
  assert.equal(channelLabel({ channel: 'odd', title: '' }), 'odd');
});

test('sizes are written columns x rows, as ahpctl writes them (133x51)', () => {
  assert.equal(sizeText(51, 133), '133x51');
  const c = clippedBy({ rows: 40, cols: 120 }, { rows: 28, cols: 87 });
  const t = clippedText(c, true);
  assert.equal(t.text, 'clipped 120x40 > 87x28');
  assert.match(t.title, /^The terminal is 120x40 \(columns x rows\), larger than this window \(87x28\)/);
  assert.match(t.title, /Type here, or click, to resize it/);
  assert.doesNotMatch(clippedText(c, false).title, /click/);
});
