// terminal.js — the terminal view: the xterm.js glue for `terminal` channels.
// It follows the view interface at the top of session.js (kind, createView;
// the view is a Client.attach consumer plus setRole and dispose), so views
// for other channel kinds (tcp.js, telemetry.js) can sit beside it.
//
// It builds one xterm.js Terminal in its container and:
//   - applies the stream (terminal/output, terminal/reset snapshots,
//     terminal/resize, channel/ready, terminal/exit) through
//     terminal-stream.js, releasing each message from xterm's write
//     callback, so credit follows rendering;
//   - sends keystrokes as terminal/input on the live subscription (control
//     role only; a view-only page sends nothing);
//   - asks the host, debounced, for the size that fits the container
//     (terminal/resize, control role, after channel/ready). xterm itself is
//     only resized by the host's terminal/reset and terminal/resize, so it
//     always matches the host's emulator.

import { Terminal } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';
import { Unicode11Addon } from '@xterm/addon-unicode11';
import '@xterm/xterm/css/xterm.css';

import { ErrorCode } from './session.js';
import { terminalConsumer } from './terminal-stream.js';

/** kind is the channels/list type this view shows. */
export const kind = 'terminal';

const RESIZE_DEBOUNCE_MS = 150;

/**
 * createView opens a Terminal in container and returns the view.
 * hooks (all optional): onSize(rows, cols) the host's size was applied;
 * onReady() channel/ready (the snapshot is complete); onExit({code, signal});
 * onForbidden() the host refused a request as beyond this page's role.
 * The view also has term (the Terminal) and screenText(), for tests.
 */
export function createView(container, hooks = {}) {
  const term = new Terminal({
    allowProposedApi: true, // term.unicode is a proposed API
    cursorBlink: true,
    fontFamily: 'ui-monospace, "SFMono-Regular", "JetBrains Mono", Menlo, Consolas, monospace',
    fontSize: 13,
    scrollback: 10000,
    theme: { background: '#0f1115', foreground: '#d7dae0', cursor: '#d7dae0', selectionBackground: '#2d4a66' },
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.loadAddon(new Unicode11Addon());
  term.unicode.activeVersion = '11'; // §8: widths follow Unicode 11, like the host's emulator
  term.open(container);
  {
    const d = fit.proposeDimensions();
    if (d) term.resize(d.cols, d.rows);
  }

  let sub = null; // the live Subscription, from onSubscribed to its onEnd
  let role = null; // 'control' | 'view', from setRole
  let ready = false; // channel/ready of the current subscription applied
  let rows = 0; // the host's size, from terminal/reset and terminal/resize
  let cols = 0;

  // ---- input ----

  const inputs = [
    term.onData((data) => {
      if (!sub || role !== 'control') return; // view-only: nothing is sent
      sub.sendInput(data);
    }),
    term.onBinary((data) => {
      // Binary strings carry bytes as U+0000–U+00FF; terminal/input is UTF-8
      // text, so only the ASCII part can travel unchanged.
      if (!sub || role !== 'control' || /[^\x00-\x7f]/.test(data)) return;
      sub.sendInput(data);
    }),
  ];

  // ---- resize requests ----

  let resizeTimer = null;
  let lastRequested = '';
  function scheduleResizeRequest() {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(requestResize, RESIZE_DEBOUNCE_MS);
  }
  function requestResize() {
    if (!sub || role !== 'control' || !ready) return;
    const d = fit.proposeDimensions();
    if (!d || !(d.rows > 0 && d.cols > 0)) return;
    if (d.rows === rows && d.cols === cols) return;
    const key = `${sub.id}:${d.rows}x${d.cols}`;
    if (key === lastRequested) return;
    lastRequested = key;
    // The host answers with a terminal/resize notice in the stream, which
    // resizes xterm in order with the output.
    sub.resize(d.rows, d.cols).catch((err) => {
      if (err.code === ErrorCode.FORBIDDEN) hooks.onForbidden?.();
    });
  }
  const observer = new ResizeObserver(scheduleResizeRequest);
  observer.observe(container);

  // ---- the stream ----

  const stream = terminalConsumer(term, {
    onSize(r, c) {
      rows = r;
      cols = c;
      hooks.onSize?.(r, c);
      scheduleResizeRequest();
    },
    onReady() {
      ready = true;
      hooks.onReady?.();
      scheduleResizeRequest();
    },
    onExit(e) {
      hooks.onExit?.(e);
    },
  });

  return {
    kind,
    term,
    onSubscribed(s) {
      sub = s;
      ready = false;
    },
    onMessage: stream.onMessage,
    onEnd(_info, s) {
      if (sub === s) sub = null;
      ready = false;
    },
    /** setRole sets what the page may do: 'control' types and resizes, 'view' only watches. */
    setRole(r) {
      role = r;
      term.options.disableStdin = r !== 'control';
    },
    /** screenText returns the visible lines of the terminal, right-trimmed. */
    screenText() {
      const b = term.buffer.active;
      const lines = [];
      for (let y = 0; y < term.rows; y++) lines.push(b.getLine(b.viewportY + y)?.translateToString(true) ?? '');
      return lines.join('\n');
    },
    dispose() {
      clearTimeout(resizeTimer);
      observer.disconnect();
      for (const d of inputs) d.dispose();
      term.dispose();
    },
  };
}
