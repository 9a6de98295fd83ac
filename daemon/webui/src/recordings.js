// recordings.js — the recordings view of a terminal (issue 42): the list of
// its recordings (recordings/list on the page's session) and a player in
// its own xterm.js terminal. What to read and write when is player.js; this
// file is the DOM around it: the list, the controls (play/pause, speed, the
// timeline with its markers, the time and the duration, following a live
// recording) and the keys (space plays or pauses, ←/→ seek 5 s, Shift 30 s,
// Home/End).
//
// The list shows the newest LIST_LIMIT recordings (a page of
// recordings/list); "older recordings" at its end asks for the next page
// and adds it, so a terminal with thousands of recordings costs one page
// until more are asked for.
//
// The view lies over the stage; the live terminal under it keeps its
// subscription. Only one player at a time; closing the view ends it.

import { Terminal } from '@xterm/xterm';
import { Unicode11Addon } from '@xterm/addon-unicode11';

import { formatTime } from './cast.js';
import { CastPlayer, errorText, listRecordings, SEEK_STEP, sessionSource, SPEEDS } from './player.js';
import { THEMES } from './terminal.js';
import { ErrorCode } from './session.js';

// xtermSink applies the player's calls to term in call order: xterm's
// write is asynchronous while reset and resize are not, so each waits for
// the writes before it. after(cols) runs after each change of size.
function xtermSink(term, after) {
  let tail = Promise.resolve();
  const then = (fn) => (tail = tail.then(fn));
  return {
    reset(cols, rows) {
      then(() => {
        term.reset();
        term.resize(cols, rows);
        after();
      });
    },
    write(s) {
      then(() => new Promise((r) => term.write(s, r)));
    },
    resize(cols, rows) {
      then(() => {
        term.resize(cols, rows);
        after();
      });
    },
    flush() {
      return tail;
    },
  };
}

const el = (tag, props = {}, ...children) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'testid') e.dataset.testid = v;
    else if (k === 'className') e.className = v;
    else if (k in e) e[k] = v;
    else e.setAttribute(k, v);
  }
  e.append(...children);
  return e;
};

function bytesText(n) {
  if (!Number.isFinite(n)) return '';
  if (n < 1024) return `${n} B`;
  if (n < 1 << 20) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / (1 << 20)).toFixed(1)} MiB`;
}

function startedText(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso ?? '');
  const p = (x) => String(x).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/**
 * createRecordingsView builds the view in host (hidden until open()).
 * options: {fontSize, theme, onClose()}.
 */
export function createRecordingsView(host, options = {}) {
  host.classList.add('recordings');
  host.dataset.testid = 'recordings';
  host.hidden = true;
  host.tabIndex = -1;

  const title = el('span', { className: 'rec-title', testid: 'recordings-title' });
  const back = el('button', { type: 'button', className: 'rec-button', testid: 'player-back', title: 'Back to the list of recordings', hidden: true }, '← list');
  const close = el('button', { type: 'button', className: 'rec-button', testid: 'recordings-close', title: 'Close the recordings (Esc)', 'aria-label': 'Close the recordings' }, '✕');
  const bar = el('div', { className: 'rec-bar' }, back, title, close);
  const message = el('div', { className: 'rec-message', testid: 'recordings-message', hidden: true });
  const list = el('ul', { className: 'rec-list', testid: 'recordings-list' });

  const termHost = el('div', { className: 'rec-term', testid: 'player-term' });
  const play = el('button', { type: 'button', className: 'rec-button rec-play', testid: 'player-play', title: 'Play or pause (space)' }, '▶');
  const time = el('span', { className: 'rec-time', testid: 'player-time' }, '0:00 / 0:00');
  const range = el('input', { type: 'range', className: 'rec-range', testid: 'player-timeline', min: '0', max: '0', step: '0.01', value: '0', 'aria-label': 'Time' });
  const markLayer = el('div', { className: 'rec-marks', testid: 'player-markers' });
  const timeline = el('div', { className: 'rec-timeline' }, range, markLayer);
  const speed = el('select', { className: 'rec-speed', testid: 'player-speed', title: 'Speed' },
    ...SPEEDS.map((s) => el('option', { value: String(s), selected: s === 1 }, `${s}×`)));
  const follow = el('button', { type: 'button', className: 'rec-button', testid: 'player-live', title: 'Jump to the end and follow this live recording', hidden: true }, '● live');
  const controls = el('div', { className: 'rec-controls' }, play, time, timeline, speed, follow);
  const note = el('div', { className: 'rec-note', testid: 'player-note', hidden: true });
  const error = el('div', { className: 'rec-error', testid: 'player-error', role: 'alert', hidden: true });
  const playerBox = el('div', { className: 'rec-player', testid: 'player', hidden: true }, termHost, controls, error, note);
  host.append(bar, message, list, playerBox);

  const term = new Terminal({
    allowProposedApi: true,
    cursorBlink: false,
    disableStdin: true,
    fontFamily: 'ui-monospace, "SFMono-Regular", "JetBrains Mono", Menlo, Consolas, monospace',
    fontSize: options.fontSize ?? 13,
    // The screen only: a keyframe has no scrollback, so a seek could not
    // show the same scrollback as playing through.
    scrollback: 0,
    theme: THEMES[options.theme] ?? THEMES.dark,
  });
  term.loadAddon(new Unicode11Addon());
  term.unicode.activeVersion = '11'; // as the live terminal and the daemon's emulator
  term.open(termHost);
  let fontSize = term.options.fontSize;

  let session = null;
  let channel = null;
  let recordings = [];
  let nextPage = null; // recordings/list's cursor of the older ones
  let loadingMore = false;
  let player = null;
  let current = null; // the recording played
  let raf = 0;
  let listGen = 0;

  // fitFont makes the recording's columns fit the view's width (smaller
  // font, down to 6 px); what still does not fit scrolls.
  function fitFont() {
    const screen = term.element?.querySelector('.xterm-screen');
    const w = termHost.clientWidth - 8;
    if (!screen || w <= 0 || !term.cols) return;
    const cell = screen.offsetWidth / term.cols;
    if (!cell) return;
    const want = Math.max(6, Math.min(options.fontSize ?? 13, Math.floor(fontSize * w / (cell * term.cols))));
    if (want !== fontSize) {
      fontSize = want;
      term.options.fontSize = want;
    }
  }

  new ResizeObserver(() => fitFont()).observe(termHost);

  function showMessage(text, isError = false) {
    message.hidden = !text;
    message.textContent = text;
    message.classList.toggle('error', isError);
  }

  function renderList() {
    list.replaceChildren(...recordings.map((r) => {
      const meta = [
        formatTime(r.duration),
        bytesText(r.bytes),
        r.cols && r.rows ? `${r.cols}x${r.rows}` : '',
      ].filter(Boolean).join(' · ');
      const b = el('button', { type: 'button', className: 'rec-item-button' },
        el('span', { className: 'rec-started' }, startedText(r.started)),
        r.live ? el('span', { className: 'rec-badge live' }, 'live') : '',
        r.input ? el('span', { className: 'rec-badge input', title: 'This recording has the keys typed too' }, 'input') : '',
        el('span', { className: 'rec-meta' }, meta),
        r.title ? el('span', { className: 'rec-item-title' }, r.title) : '');
      b.title = r.id;
      b.addEventListener('click', () => openPlayer(r));
      return el('li', { testid: 'recording-item', className: 'rec-item', 'data-id': r.id, 'data-live': String(!!r.live) }, b);
    }));
    if (nextPage !== null) {
      const more = el('button', { type: 'button', className: 'rec-button', testid: 'recordings-more', title: 'List the next older recordings' },
        loadingMore ? 'loading…' : 'older recordings');
      more.disabled = loadingMore;
      more.addEventListener('click', () => loadMore());
      list.append(el('li', { className: 'rec-item' }, more));
    }
  }

  async function loadList() {
    const gen = ++listGen;
    showMessage('loading…');
    list.replaceChildren();
    nextPage = null;
    loadingMore = false;
    try {
      const page = await listRecordings(session, channel);
      if (gen !== listGen) return;
      recordings = page.recordings;
      nextPage = page.next;
      renderList();
      showMessage(recordings.length ? '' : `No recordings of ${channel}. Start one with ahpctl terminal record ${channel} on.`);
    } catch (err) {
      if (gen !== listGen) return;
      recordings = [];
      nextPage = null;
      showMessage(err?.code === ErrorCode.METHOD_NOT_FOUND
        ? `This ahpd does not serve recordings (${errorText(err)}).`
        : `Cannot list the recordings of ${channel}: ${errorText(err)}.`, true);
    }
  }

  // loadMore adds the next page of older recordings to the list.
  async function loadMore() {
    if (nextPage === null || loadingMore) return;
    const gen = listGen;
    loadingMore = true;
    renderList();
    try {
      const page = await listRecordings(session, channel, { after: nextPage });
      if (gen !== listGen) return;
      recordings = recordings.concat(page.recordings);
      nextPage = page.next;
      showMessage('');
    } catch (err) {
      if (gen !== listGen) return;
      showMessage(`Cannot list the older recordings of ${channel}: ${errorText(err)}.`, true);
    } finally {
      if (gen === listGen) {
        loadingMore = false;
        renderList();
      }
    }
  }

  function stopPlayer() {
    if (raf) cancelAnimationFrame(raf);
    raf = 0;
    player?.close();
    player = null;
    current = null;
  }

  function showList() {
    stopPlayer();
    playerBox.hidden = true;
    back.hidden = true;
    list.hidden = false;
    title.textContent = `Recordings of ${channel}`;
    loadList();
    host.focus({ preventScroll: true });
  }

  function openPlayer(r) {
    stopPlayer();
    current = r;
    list.hidden = true;
    showMessage('');
    playerBox.hidden = false;
    back.hidden = false;
    title.textContent = `${startedText(r.started)} — ${r.channel ?? channel}`;
    title.title = r.id;
    speed.value = '1';
    error.hidden = true;
    const p = new CastPlayer({
      source: sessionSource(session, r.id),
      term: xtermSink(term, fitFont),
      onChange: () => render(),
    });
    player = p;
    render();
    playerBox.focus({ preventScroll: true });
    p.open(r);
  }

  function loop() {
    raf = 0;
    if (!player) return;
    player.tick();
    if (player.playing) raf = requestAnimationFrame(loop);
  }

  function render() {
    const p = player;
    if (!p) return;
    const s = p.state();
    play.textContent = s.playing ? '❚❚' : '▶';
    play.setAttribute('aria-label', s.playing ? 'Pause' : 'Play');
    time.textContent = `${formatTime(s.time)} / ${formatTime(s.duration)}`;
    range.max = String(s.duration);
    if (document.activeElement !== range || !dragging) range.value = String(s.time);
    follow.hidden = !s.live;
    playerBox.dataset.state = s.error ? 'error' : s.seeking ? 'seeking' : s.playing ? 'playing' : s.ended ? 'ended' : 'paused';
    error.hidden = !s.error;
    error.textContent = s.error ? `Cannot play this recording: ${s.error}` : '';
    const notes = [];
    if (s.markersPartial) notes.push(p.scanError ? `markers up to a bad line (${p.scanError})` : 'markers shown for the parts played (the recording is over 32 MiB)');
    if (s.markersTruncated) notes.push('the first 1000 markers shown');
    if (s.dropped) notes.push(`${bytesText(s.dropped)} of output were dropped while recording`);
    note.hidden = !notes.length;
    note.textContent = notes.join(' · ');
    renderMarkers(s);
    if (s.playing && !raf) raf = requestAnimationFrame(loop);
  }

  let drawnMarkers = '';
  function renderMarkers(s) {
    const key = `${s.duration}|${s.markers.length}`;
    if (key === drawnMarkers) return;
    drawnMarkers = key;
    markLayer.replaceChildren(...s.markers.map((m) => {
      const left = s.duration > 0 ? Math.min(100, (m.time / s.duration) * 100) : 0;
      const mk = el('button', {
        type: 'button', className: `rec-mark ${m.kind}`, testid: 'player-marker', title: `${formatTime(m.time)} ${m.label}`,
        tabIndex: -1,
      });
      mk.dataset.time = String(m.time);
      mk.dataset.kind = m.kind;
      mk.style.left = `${left}%`;
      mk.addEventListener('click', () => player?.seek(m.time));
      return mk;
    }));
  }

  // ---- controls ----

  play.addEventListener('click', () => player?.toggle());
  speed.addEventListener('change', () => player?.setSpeed(Number(speed.value)));
  let dragging = false;
  range.addEventListener('pointerdown', () => { dragging = true; });
  range.addEventListener('pointerup', () => { dragging = false; });
  // A drag asks for many times: one seek at a time, then the latest asked.
  let seekBusy = false;
  let seekNext = null;
  async function seekTo(t) {
    if (seekBusy) {
      seekNext = t;
      return;
    }
    seekBusy = true;
    try {
      for (let next = t; next != null; next = seekNext, seekNext = null) await player?.seek(next);
    } finally {
      seekBusy = false;
    }
  }
  range.addEventListener('input', () => seekTo(Number(range.value)));
  follow.addEventListener('click', async () => {
    if (!player) return;
    await player.seek(player.state().duration);
    player.play();
  });
  back.addEventListener('click', showList);
  close.addEventListener('click', () => hide());
  // The player's keys: space, arrows, Home/End; Escape closes the view.
  host.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape') {
      ev.preventDefault();
      hide();
      return;
    }
    if (!player || playerBox.hidden) return;
    if (ev.target === speed && ev.key !== ' ') return;
    let handled = true;
    const step = ev.shiftKey ? 30 : SEEK_STEP;
    switch (ev.key) {
      case ' ':
        player.toggle();
        break;
      case 'ArrowLeft':
        player.seekBy(-step);
        break;
      case 'ArrowRight':
        player.seekBy(step);
        break;
      case 'Home':
        player.seek(0);
        break;
      case 'End':
        player.seek(player.state().duration);
        break;
      default:
        handled = false;
    }
    if (handled) ev.preventDefault();
  }, true);
  playerBox.tabIndex = -1;

  function hide() {
    stopPlayer();
    listGen++;
    host.hidden = true;
    options.onClose?.();
  }

  return {
    /** open shows the recordings of channel (on session: a Session, or a function returning the current one) over the stage. */
    open(s, ch) {
      session = s;
      channel = ch;
      host.hidden = false;
      showList();
    },
    /** openRecording plays recording r (a recordings/list entry) at once. */
    openRecording: (r) => openPlayer(r),
    hide,
    get shown() {
      return !host.hidden;
    },
    get player() {
      return player;
    },
    term,
    setTheme(name) {
      term.options.theme = THEMES[name] ?? THEMES.dark;
    },
    /** flush resolves once the player's writes are in the terminal. */
    flush: () => player?.term.flush(),
    /** screenText returns the player's screen, its lines right-trimmed. */
    screenText() {
      const b = term.buffer.active;
      const out = [];
      for (let y = 0; y < term.rows; y++) out.push(b.getLine(b.viewportY + y)?.translateToString(true) ?? '');
      return out.join('\n');
    },
    state() {
      return {
        shown: !host.hidden,
        channel,
        list: recordings.map((r) => ({ ...r })),
        more: nextPage !== null,
        message: message.hidden ? '' : message.textContent,
        recording: current?.id ?? null,
        player: player ? player.state() : null,
        termRows: term.rows,
        termCols: term.cols,
        fontSize,
      };
    },
  };
}
