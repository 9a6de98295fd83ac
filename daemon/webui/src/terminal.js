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
//     role only; a view-only page sends nothing and says so when typed in).
//     Keys typed while the page is still attaching (right after load, or
//     after picking a channel) are kept (bounded) and sent once the
//     subscription is live; keys typed while reconnecting are not, and after
//     the program exited nothing is sent;
//   - tells the host the size that fits the container (terminal/resize,
//     control role) once each subscription is ready, and again when its
//     own viewport changes or the clipped badge is clicked, never because
//     another viewer's size applied: the most recently active control
//     viewer's size decides (the host's policy, pty/size.go), so a tab
//     that did not change does not snap the size back.
//     xterm itself is only resized by the host's terminal/reset and
//     terminal/resize, so it always matches the host's emulator; when that
//     is larger than the viewport the page is told (clipped);
//   - predicts the echo of keys typed (predict.js) while the round trip is
//     long, in a layer drawn over the terminal: never in xterm's buffer,
//     which only the host's output writes;
//   - reports the program's title (OSC 0/2, xterm's onTitleChange);
//   - links are clickable (addon-web-links), a selection is copied when the
//     mouse button is let go and on Ctrl+Shift+C, Ctrl +/-/0 sets the font
//     size, and the WebGL renderer is used where it works (the DOM renderer
//     otherwise, and again after a lost WebGL context).

import { Terminal } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';
import { Unicode11Addon } from '@xterm/addon-unicode11';
import { WebLinksAddon } from '@xterm/addon-web-links';
import { WebglAddon } from '@xterm/addon-webgl';
import '@xterm/xterm/css/xterm.css';

import { ErrorCode } from './session.js';
import { terminalConsumer } from './terminal-stream.js';
import { clampFontSize, FONT_SIZE_DEFAULT, shortcut } from './prefs.js';
import { InputGate, pickRenderer, ResizePolicy } from './terminal-policy.js';
import { Predictor } from './predict.js';

/** kind is the channels/list type this view shows. */
export const kind = 'terminal';

const RESIZE_DEBOUNCE_MS = 150;

export const THEMES = {
  dark: {
    background: '#0f1115', foreground: '#d7dae0', cursor: '#d7dae0', cursorAccent: '#0f1115',
    selectionBackground: '#2d4a66',
  },
  light: {
    background: '#fbfbfa', foreground: '#1f2328', cursor: '#1f2328', cursorAccent: '#fbfbfa',
    selectionBackground: '#b6d3f2',
    black: '#24292f', red: '#cf222e', green: '#116329', yellow: '#7d4e00', blue: '#0969da',
    magenta: '#8250df', cyan: '#1b7c83', white: '#6e7781',
    brightBlack: '#57606a', brightRed: '#a40e26', brightGreen: '#1a7f37', brightYellow: '#633c01',
    brightBlue: '#218bff', brightMagenta: '#a475f9', brightCyan: '#3192aa', brightWhite: '#8c959f',
  },
};

/**
 * createView opens a Terminal in container and returns the view.
 * hooks (all optional): onSize(rows, cols) the host's size was applied;
 * onReady() channel/ready (the snapshot is complete); onExit({code, signal});
 * onForbidden() the host refused a request as beyond this page's role;
 * onTitle(title) the program set its title; onClipped(null | {rows, cols,
 * fitRows, fitCols}) whether the host's size exceeds the viewport;
 * onViewOnlyTyping() keys were typed in a view-only page; onNotSent() keys
 * were typed while no subscription is live (reconnecting); onCopy({ok,
 * chars, error}) a selection was copied (or not); onFontSize(n) Ctrl +/-/0.
 * options: {fontSize, theme ('dark'|'light'), renderer ('webgl'|'dom'),
 * predict ('auto'|'always'|'never')}.
 * The view also has term (the Terminal) and screenText(), for tests.
 */
export function createView(container, hooks = {}, options = {}) {
  const term = new Terminal({
    allowProposedApi: true, // term.unicode is a proposed API
    cursorBlink: true,
    fontFamily: 'ui-monospace, "SFMono-Regular", "JetBrains Mono", Menlo, Consolas, monospace',
    fontSize: clampFontSize(options.fontSize ?? FONT_SIZE_DEFAULT),
    scrollback: 10000,
    theme: THEMES[options.theme] ?? THEMES.dark,
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.loadAddon(new Unicode11Addon());
  term.unicode.activeVersion = '11'; // §8: widths follow Unicode 11, like the host's emulator
  term.loadAddon(new WebLinksAddon(openLink, {
    hover(_ev, text) {
      container.dataset.hoverLink = text;
    },
    leave() {
      delete container.dataset.hoverLink;
    },
  }));
  term.open(container);
  {
    const d = fit.proposeDimensions();
    if (d) term.resize(d.cols, d.rows);
  }

  // ---- renderer ----

  let renderer = 'dom';
  let webglLosses = 0;
  let webgl = null;
  const glInfo = options.renderer === 'dom' ? null : webglInfo(); // what the browser offers
  function useWebgl() {
    if (pickRenderer(options.renderer, glInfo) !== 'webgl') return;
    try {
      const gl = new WebglAddon();
      gl.onContextLoss(() => {
        // The GPU process went away (or the browser took the context back):
        // go back to the DOM renderer rather than show a frozen canvas.
        webglLosses++;
        dropWebgl();
      });
      term.loadAddon(gl);
      webgl = gl;
      renderer = 'webgl';
    } catch {
      dropWebgl();
    }
  }
  function dropWebgl() {
    const gl = webgl;
    webgl = null;
    renderer = 'dom';
    try {
      gl?.dispose();
    } catch {
      // already torn down
    }
    term.refresh(0, term.rows - 1);
  }
  useWebgl();

  const gate = new InputGate();

  // ---- input ----

  function input(data) {
    const r = gate.input(data);
    if (r === 'view-only') hooks.onViewOnlyTyping?.();
    else if (r === 'dropped' && gate.early === null) hooks.onNotSent?.();
    if (r === 'sent') predictInput(data);
  }

  const inputs = [
    term.onData(input),
    term.onBinary((data) => {
      // Binary strings carry bytes as U+0000–U+00FF; terminal/input is UTF-8
      // text, so only the ASCII part can travel unchanged.
      if (/[^\x00-\x7f]/.test(data)) return;
      input(data);
    }),
    term.onTitleChange((t) => hooks.onTitle?.(t)),
  ];

  // A view-only page has stdin disabled, so xterm reports no data: the keys
  // are seen here, to say why nothing happens.
  const onKeyDown = (ev) => {
    if (gate.role !== 'view' || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key.length === 1 || ev.key === 'Enter' || ev.key === 'Backspace') hooks.onViewOnlyTyping?.();
  };
  container.addEventListener('keydown', onKeyDown, true);

  term.attachCustomKeyEventHandler((ev) => {
    const action = shortcut(ev);
    if (!action) return true;
    ev.preventDefault(); // Ctrl +/- would zoom the page
    if (action === 'copy') copySelection();
    else hooks.onFontSize?.(action === 'font0' ? FONT_SIZE_DEFAULT : term.options.fontSize + (action === 'font+' ? 1 : -1));
    return false;
  });

  // ---- copy ----

  function copySelection() {
    const text = term.getSelection();
    if (!text) return;
    copyText(text).then(
      () => hooks.onCopy?.({ ok: true, chars: text.length }),
      (err) => hooks.onCopy?.({ ok: false, chars: text.length, error: String(err?.message ?? err) }),
    );
  }
  // Copy on select: when the mouse button is let go over a selection.
  const onMouseUp = () => {
    setTimeout(() => {
      if (term.hasSelection()) copySelection();
    }, 0);
  };
  container.addEventListener('mouseup', onMouseUp);

  // ---- resize requests ----

  let resizeTimer = null;
  const measure = () => {
    const d = fit.proposeDimensions();
    return d && d.rows > 0 && d.cols > 0 ? { rows: d.rows, cols: d.cols } : null;
  };
  const policy = new ResizePolicy({
    measure,
    request(rows, cols) {
      // The host answers with a terminal/resize notice in the stream, which
      // resizes xterm in order with the output (and every other viewer's).
      gate.sub?.resize(rows, cols).catch((err) => {
        if (err.code === ErrorCode.FORBIDDEN) hooks.onForbidden?.();
      });
    },
    onClipped: (c) => hooks.onClipped?.(c),
  });
  const canRequest = () => !!gate.sub && gate.role === 'control' && !gate.exited;
  function viewportChanged() {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => policy.viewport(), RESIZE_DEBOUNCE_MS);
  }
  const observer = new ResizeObserver(viewportChanged);
  observer.observe(container);

  // ---- the stream ----

  const stream = terminalConsumer(term, {
    onSize(r, c) {
      hooks.onSize?.(r, c);
      policy.hostSize(r, c); // another viewer's size: shown, not fought
    },
    onReady() {
      hooks.onReady?.();
      policy.readied(canRequest());
    },
    onExit(e) {
      gate.exit();
      policy.setCanRequest(false);
      hooks.onExit?.(e);
    },
  });
  // ---- predictive echo (predict.js) ----

  // The predictor reads the screen through this adapter; rows are buffer
  // lines (baseY + cursorY), so a scroll is a change of row.
  const screenAdapter = {
    alt: () => term.buffer.active.type === 'alternate',
    cursor() {
      const b = term.buffer.active;
      return { row: b.baseY + b.cursorY, col: b.cursorX };
    },
    cell(row, col) {
      return term.buffer.active.getLine(row)?.getCell(col)?.getChars() || ' ';
    },
    cols: () => term.cols,
  };
  const predictor = new Predictor(screenAdapter, { mode: options.predict, onChange: drawPredictions });
  const layer = document.createElement('div');
  layer.className = 'ahp-predict';
  layer.dataset.testid = 'predict-overlay';
  layer.setAttribute('aria-hidden', 'true');
  layer.style.cssText = 'position:absolute;left:0;top:0;right:0;bottom:0;pointer-events:none;z-index:10;overflow:hidden';
  (term.element?.querySelector('.xterm-screen') ?? container).append(layer);
  let focused = false;
  let meter = null;
  let offSample = null;
  let idleTimer = null;

  // predictInput predicts data (already sent) when this page may type here:
  // control role, a live subscription, focused, no snapshot being applied,
  // the whole terminal in view.
  function predictInput(data) {
    predictor.setAllowed(focused && gate.role === 'control' && !!gate.sub && !gate.exited &&
      !stream.holding() && !policy.clipped);
    if (!predictor.active) return;
    // While typing, the round trip is sampled every srtt (rtt.js), and for
    // a while after the last key.
    meter?.busy(true, 'predict');
    clearTimeout(idleTimer);
    idleTimer = setTimeout(() => meter?.busy(false, 'predict'), 5000);
    predictor.input(data);
  }

  // drawPredictions draws predictor.overlay(): each predicted cell as an
  // opaque, underlined cell over the terminal's own, and the predicted
  // cursor as an outline. Cell metrics come from xterm's screen element,
  // which is cols × rows cells.
  function drawPredictions() {
    const o = predictor.overlay();
    const b = term.buffer.active;
    const y = o ? o.row - b.viewportY : -1;
    if (!o || y < 0 || y >= term.rows) {
      if (layer.firstChild) layer.replaceChildren();
      return;
    }
    const box = layer.parentElement.getBoundingClientRect();
    const w = box.width / term.cols;
    const h = box.height / term.rows;
    const theme = term.options.theme ?? THEMES.dark;
    const font = `${term.options.fontSize}px ${term.options.fontFamily}`;
    const nodes = [];
    for (const c of o.cells) {
      const span = document.createElement('span');
      span.className = 'ahp-predict-cell';
      span.dataset.col = String(c.col);
      span.textContent = c.ch;
      span.style.cssText = `position:absolute;left:${c.col * w}px;top:${y * h}px;width:${w}px;height:${h}px;` +
        `line-height:${h}px;font:${font};white-space:pre;overflow:hidden;text-decoration:underline;` +
        `color:${theme.foreground};background:${theme.background}`;
      nodes.push(span);
    }
    if (o.cursor !== null) {
      const cur = document.createElement('span');
      cur.className = 'ahp-predict-cursor';
      cur.style.cssText = `position:absolute;left:${o.cursor * w}px;top:${y * h}px;width:${w}px;height:${h}px;` +
        `box-sizing:border-box;border:1px solid ${theme.cursor}`;
      nodes.push(cur);
    }
    layer.replaceChildren(...nodes);
  }

  const predictions = [
    // Judged once the host's output is parsed.
    term.onWriteParsed(() => predictor.output()),
    term.buffer.onBufferChange(() => predictor.output()),
    term.onResize(() => predictor.reset()),
    term.onScroll(() => drawPredictions()),
  ];
  const onFocus = () => {
    focused = true;
  };
  const onBlur = () => {
    focused = false;
    predictor.setAllowed(false);
  };
  term.textarea?.addEventListener('focus', onFocus);
  term.textarea?.addEventListener('blur', onBlur);
  focused = document.activeElement === term.textarea;

  // While a snapshot's preview is up, xterm shows the alternate screen,
  // where it turns the wheel into arrow keys for the program: ignore it
  // (until the snapshot is applied, a frame or a second away).
  term.attachCustomWheelEventHandler(() => !stream.holding());

  return {
    kind,
    term,
    predictor, // for tests
    /**
     * attaching: the page is attaching a channel on the user's behalf (first
     * load, or a channel picked in the list). Keys typed until the
     * subscription is live are kept and sent then, and the page asks for
     * its size once the snapshot is in.
     */
    attaching() {
      gate.attaching();
      policy.attaching();
    },
    onSubscribed(s) {
      policy.ended(); // the new subscription is ready at its channel/ready
      gate.subscribed(s);
      predictor.reset();
    },
    onMessage(msg, release, sub) {
      // A snapshot: what was predicted is void (the predictor starts over,
      // tentative, when it arrives). A new size is term.onResize's; a
      // terminal/resize to the same size (the host confirms the typing
      // viewer's size) changes nothing.
      if (msg.method === 'terminal/reset') predictor.reset();
      stream.onMessage(msg, release, sub);
    },
    onEnd(_info, s) {
      stream.end(s);
      gate.ended(s);
      policy.ended();
      predictor.reset();
    },
    /** cancelAttach forgets keys kept for an attach that failed. */
    cancelAttach() {
      gate.cancel();
    },
    /** setRole sets what the page may do: 'control' types and resizes, 'view' only watches. */
    setRole(r) {
      gate.setRole(r);
      term.options.disableStdin = r === 'view';
      if (policy.ready) policy.setCanRequest(canRequest());
    },
    focus() {
      term.focus();
    },
    /** fitToWindow asks the host for this viewport's size (the clipped badge's action). */
    fitToWindow() {
      return policy.fit();
    },
    setFontSize(n) {
      term.options.fontSize = clampFontSize(n);
      predictor.reset(); // drawn with the old cell size
      viewportChanged(); // a new cell size: a new fit, which this page asks for
    },
    setTheme(name) {
      term.options.theme = THEMES[name] ?? THEMES.dark;
      drawPredictions();
    },
    /** setPredict sets predictive echo: 'auto', 'always' or 'never'. */
    setPredict(mode) {
      predictor.setMode(mode);
    },
    /**
     * setRttMeter gives the session's round-trip meter (rtt.js), or null
     * (no session, or a host without ping: auto then predicts nothing).
     */
    setRttMeter(m) {
      offSample?.();
      offSample = null;
      meter = m;
      if (m) {
        offSample = m.onSample((x) => predictor.setRtt(x.srtt, x.min));
        if (m.srtt !== null) predictor.setRtt(m.srtt, m.min);
      }
    },
    /** loseWebglContext simulates a lost WebGL context (tests). */
    loseWebglContext() {
      if (!webgl) return false;
      for (const canvas of container.querySelectorAll('.xterm-screen canvas')) {
        const gl = canvas.getContext('webgl2');
        const ext = gl?.getExtension('WEBGL_lose_context');
        if (ext) {
          ext.loseContext();
          return true;
        }
      }
      return false;
    },
    state() {
      return {
        renderer, webglName: glInfo?.name ?? null, webglLosses, fontSize: term.options.fontSize, clipped: policy.clipped, fit: measure(),
        requests: policy.requests, exited: gate.exited, stream: { ...stream.counts }, earlyQueued: gate.early?.length ?? null, earlyDropped: gate.dropped,
        predict: {
          mode: predictor.mode, active: predictor.active, srtt: predictor.srtt, pending: predictor.pending,
          shown: layer.childElementCount, tentative: predictor.epoch > predictor.confirmedEpoch, stats: { ...predictor.stats },
        },
      };
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
      clearTimeout(idleTimer);
      offSample?.();
      predictor.dispose();
      for (const d of predictions) d.dispose();
      term.textarea?.removeEventListener('focus', onFocus);
      term.textarea?.removeEventListener('blur', onBlur);
      observer.disconnect();
      container.removeEventListener('keydown', onKeyDown, true);
      container.removeEventListener('mouseup', onMouseUp);
      for (const d of inputs) d.dispose();
      term.dispose();
    },
  };
}

// webglInfo returns null when the browser gives no WebGL 2 context, else
// {name}: the renderer's unmasked name ('' when the browser hides it), to
// tell a GPU from a software rasterizer (pickRenderer).
function webglInfo() {
  try {
    const ctx = document.createElement('canvas').getContext('webgl2');
    if (!ctx) return null;
    const dbg = ctx.getExtension('WEBGL_debug_renderer_info');
    const name = String((dbg ? ctx.getParameter(dbg.UNMASKED_RENDERER_WEBGL) : ctx.getParameter(ctx.RENDERER)) ?? '');
    ctx.getExtension('WEBGL_lose_context')?.loseContext(); // give the probe's context back now
    return { name };
  } catch {
    return null;
  }
}

// openLink opens a link in a new tab that cannot reach back into this page.
function openLink(ev, uri) {
  ev.preventDefault?.();
  if (!/^https?:\/\//i.test(uri)) return;
  window.open(uri, '_blank', 'noopener,noreferrer');
}

// copyText puts text on the clipboard: the async Clipboard API where the
// page is a secure context (https, or http on localhost), else the older
// execCommand('copy') from a hidden textarea.
async function copyText(text) {
  if (navigator.clipboard?.writeText && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return;
    } catch {
      // fall through to the old way
    }
  }
  const ta = document.createElement('textarea');
  ta.value = text;
  ta.setAttribute('readonly', '');
  ta.style.cssText = 'position:fixed;left:-9999px;top:0;opacity:0';
  const prev = document.activeElement;
  document.body.append(ta);
  ta.select();
  let ok = false;
  try {
    ok = document.execCommand('copy');
  } finally {
    ta.remove();
    prev?.focus?.();
  }
  if (!ok) throw new Error('the browser refused to copy');
}
