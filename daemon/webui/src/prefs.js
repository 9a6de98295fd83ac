// prefs.js — the page's saved preferences (terminal font size, theme,
// predictive echo and the charts panel beside the terminal) and the
// terminal's keyboard shortcuts. DOM-free: storage is passed in (the page
// gives localStorage), so node tests drive it.

import { MODES } from './predict.js';

export const PREFS_KEY = 'ahpd.prefs';
export const FONT_SIZE_DEFAULT = 13;
export const FONT_SIZE_MIN = 8;
export const FONT_SIZE_MAX = 32;
export const THEMES = ['dark', 'light'];
/** PREDICT_MODES are the settings of predictive echo (predict.js's MODES): auto is the default. */
export const PREDICT_MODES = MODES;
/** CHARTS_MODES: the charts panel beside a terminal (chart-panel.js) is open (the default) or closed. */
export const CHARTS_MODES = ['open', 'closed'];

/** clampFontSize returns n as a whole font size within bounds (the default for junk). */
export function clampFontSize(n) {
  const v = Math.round(Number(n));
  if (!Number.isFinite(v)) return FONT_SIZE_DEFAULT;
  return Math.min(FONT_SIZE_MAX, Math.max(FONT_SIZE_MIN, v));
}

/**
 * Prefs loads and saves {fontSize, theme, predict, charts} as one JSON value under
 * PREFS_KEY. storage: {getItem, setItem} or null (then nothing is kept).
 * A missing, unreadable or invalid value gives the defaults.
 */
export class Prefs {
  constructor(storage) {
    this.storage = storage;
    this.fontSize = FONT_SIZE_DEFAULT;
    this.theme = 'dark';
    this.predict = PREDICT_MODES[0];
    this.charts = CHARTS_MODES[0];
    let saved = null;
    try {
      saved = JSON.parse(storage?.getItem(PREFS_KEY) ?? 'null');
    } catch {
      saved = null;
    }
    if (saved && typeof saved === 'object') {
      if (saved.fontSize != null) this.fontSize = clampFontSize(saved.fontSize);
      if (THEMES.includes(saved.theme)) this.theme = saved.theme;
      if (PREDICT_MODES.includes(saved.predict)) this.predict = saved.predict;
      if (CHARTS_MODES.includes(saved.charts)) this.charts = saved.charts;
    }
  }

  /** set changes some of {fontSize, theme, predict, charts} and saves; it returns whether anything changed. */
  set(change) {
    const fontSize = change.fontSize != null ? clampFontSize(change.fontSize) : this.fontSize;
    const theme = THEMES.includes(change.theme) ? change.theme : this.theme;
    const predict = PREDICT_MODES.includes(change.predict) ? change.predict : this.predict;
    const charts = CHARTS_MODES.includes(change.charts) ? change.charts : this.charts;
    if (fontSize === this.fontSize && theme === this.theme && predict === this.predict && charts === this.charts) return false;
    this.fontSize = fontSize;
    this.theme = theme;
    this.predict = predict;
    this.charts = charts;
    try {
      this.storage?.setItem(PREFS_KEY, JSON.stringify({ fontSize, theme, predict, charts }));
    } catch {
      // storage full or disabled: the change holds for this page only
    }
    return true;
  }
}

/**
 * shortcut maps a keydown event ({type, key, code, ctrlKey, metaKey,
 * shiftKey, altKey}) to the page action it is, or null for keys that go to
 * the terminal: 'copy' (Ctrl+Shift+C, as in GNOME Terminal and Windows
 * Terminal; plain Ctrl+C stays the shell's interrupt), 'font+' (Ctrl + or
 * Ctrl =), 'font-' (Ctrl -), 'font0' (Ctrl 0). Cmd counts as Ctrl on macOS
 * for the font keys (Cmd+C copies natively there).
 */
export function shortcut(ev) {
  if (ev.type !== 'keydown' || ev.altKey) return null;
  const ctrl = ev.ctrlKey || ev.metaKey;
  if (!ctrl) return null;
  if (ev.ctrlKey && ev.shiftKey && (ev.key === 'C' || ev.key === 'c' || ev.code === 'KeyC')) return 'copy';
  if (ev.key === '+' || ev.key === '=' || ev.code === 'NumpadAdd') return 'font+';
  if (ev.key === '-' || ev.key === '_' || ev.code === 'NumpadSubtract') return 'font-';
  if ((ev.key === '0' || ev.code === 'Numpad0') && !ev.shiftKey) return 'font0';
  return null;
}

/**
 * clippedBy compares the host's terminal size with what fits the viewport
 * (both {rows, cols}); it returns null when the terminal fits, else
 * {rows, cols, fitRows, fitCols}.
 */
export function clippedBy(host, fit) {
  if (!host || !fit || !(host.rows > 0 && host.cols > 0 && fit.rows > 0 && fit.cols > 0)) return null;
  if (host.rows <= fit.rows && host.cols <= fit.cols) return null;
  return { rows: host.rows, cols: host.cols, fitRows: fit.rows, fitCols: fit.cols };
}

/**
 * sizeText writes a terminal size as ahpctl does: columns x rows ("133x51").
 */
export function sizeText(rows, cols) {
  return `${cols}x${rows}`;
}

/**
 * clippedText is the clipped badge's text and title for clippedBy's c;
 * canResize says whether this page may resize (control role).
 */
export function clippedText(c, canResize) {
  const host = sizeText(c.rows, c.cols);
  const fit = sizeText(c.fitRows, c.fitCols);
  return {
    text: `clipped ${host} > ${fit}`,
    title: `The terminal is ${host} (columns x rows), larger than this window (${fit}): ` +
      'another viewer used it last and its size applies, so part of it is cut off here.' +
      (canResize ? ' Type here, or click, to resize it to this window.' : ''),
  };
}
