// chart-panel.js — the charts beside the terminal, DOM-free (main.js draws
// them): which telemetry channel the panel shows, whether it shows, and
// where it goes in the stage (beside the terminal, under it, or not at all
// when the terminal would be left too small).
//
// A page opened on a terminal shows, without a click, the charts of a
// telemetry channel next to it: the daemon's own figures (`ahpd
// --daemon-telemetry`, which `make run` sets) first, then a machine's
// (`--kind system`), then any other live telemetry channel but a terminal's
// processes (the status line's sparkline shows those). The user closes it
// (saved with the page's preferences, prefs.js) and opens it again from the
// status line.

import { PROCESS_TITLE_PREFIX } from './process-status.js';

/** DAEMON_FIGURES_URI and DAEMON_FIGURES_TITLE name the channel of `ahpd --daemon-telemetry`. */
export const DAEMON_FIGURES_URI = 'ahp-telemetry:/ahpd';
export const DAEMON_FIGURES_TITLE = "ahpd's own figures";

/**
 * panelRank orders a channels/list entry for the panel: 0 the daemon's own
 * figures, 1 a system channel, 2 any other telemetry channel; null for one
 * the panel does not show (not telemetry, ended, a terminal's processes).
 */
export function panelRank(c) {
  if (!c || c.type !== 'telemetry') return null;
  if (c.state === 'exited' || c.state === 'closed') return null;
  const title = c.title ?? '';
  if (title.startsWith(PROCESS_TITLE_PREFIX)) return null;
  if (c.channel === DAEMON_FIGURES_URI || title === DAEMON_FIGURES_TITLE) return 0;
  if (title === 'system' || title.startsWith('system of ')) return 1;
  return 2;
}

/**
 * panelChannel returns the channels/list entry the panel shows (the best
 * ranked, the first listed among equals), or null. keep is the channel it
 * shows now: kept while it is listed and ranks as well as the best, so a
 * new channel of the same rank does not move the panel.
 */
export function panelChannel(channels, keep = null) {
  let best = null;
  let bestRank = Infinity;
  for (const c of channels ?? []) {
    const r = panelRank(c);
    if (r == null) continue;
    if (r < bestRank || (r === bestRank && c.channel === keep)) {
      best = c;
      bestRank = r;
    }
  }
  return best;
}

/** Side: the stage must be this wide (CSS px) for the panel to go beside the terminal. */
export const SIDE_MIN_STAGE = 760;
/** The side panel's width: a third of the stage, within these bounds. */
export const SIDE_WIDTH = { min: 300, share: 0.34, max: 440 };
/** Bottom: the stage must be this high for the panel to go under the terminal. */
export const BOTTOM_MIN_STAGE = 420;
/** The bottom panel's height: this share of the stage, within these bounds. */
export const BOTTOM_HEIGHT = { min: 180, share: 0.38, max: 300 };
/**
 * The chart heights inside the panel (the main telemetry view's are 210)
 * and the least distance between y ticks there: the plot (the chart less
 * its time axis, 26 px, and top margin, 11 px) is at least 4 × PANEL_Y_SPACE
 * high, so every y axis has two labels (telemetry.js createView).
 */
export const PANEL_CHART_HEIGHT = { side: 150, bottom: 130 };
export const PANEL_Y_SPACE = 18;

/**
 * panelPlacement decides where the panel goes in a stage of width × height
 * CSS px: {placement: 'side', size} (a column of size px on the right),
 * {placement: 'bottom', size} (a band of size px under the terminal) or
 * {placement: 'none', size: 0} (too small: the terminal keeps the stage).
 * The terminal keeps at least 460 px of width beside the panel (about 58
 * columns at the default font) and 240 px of height above it (about 14
 * rows); a narrower stage stacks the panel under the terminal, a lower one
 * leaves it out.
 */
export function panelPlacement(width, height) {
  if (!(width > 0 && height > 0)) return { placement: 'none', size: 0 };
  if (width >= SIDE_MIN_STAGE) {
    const size = Math.round(Math.min(SIDE_WIDTH.max, Math.max(SIDE_WIDTH.min, width * SIDE_WIDTH.share)));
    return { placement: 'side', size };
  }
  if (height >= BOTTOM_MIN_STAGE) {
    const size = Math.round(Math.min(BOTTOM_HEIGHT.max, Math.max(BOTTOM_HEIGHT.min, height * BOTTOM_HEIGHT.share)));
    return { placement: 'bottom', size };
  }
  return { placement: 'none', size: 0 };
}

/**
 * panelShown says whether the panel is on screen: the page shows a
 * terminal, a channel is found for it, the user has not closed it, and the
 * stage has room.
 */
export function panelShown({ view, channel, open, placement }) {
  return view === 'terminal' && !!channel && !!open && placement !== 'none';
}
