// The charts panel beside a terminal (chart-panel.js): which telemetry
// channel it shows, where it goes for a stage's size, when it is shown.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  BOTTOM_MIN_STAGE, DAEMON_FIGURES_TITLE, DAEMON_FIGURES_URI, panelChannel, panelPlacement, panelRank, panelShown, SIDE_MIN_STAGE,
} from '../src/chart-panel.js';

const ch = (channel, type, title = '', state = 'running') => ({ channel, type, title, state, viewers: 0 });
const shell = ch('ahp-terminal:/shell', 'terminal', 'shell');
const daemon = ch(DAEMON_FIGURES_URI, 'telemetry', DAEMON_FIGURES_TITLE);
const system = ch('ahp-telemetry:/system', 'telemetry', 'system of box');
const proc = ch('ahp-telemetry:/process-of-shell', 'telemetry', 'processes of ahp-terminal:/shell');
const push = ch('ahp-telemetry:/e2e', 'telemetry', 'pushed samples');
const scrape = ch('ahp-telemetry:/scrape-127.0.0.1:9100', 'telemetry', 'scrape of http://127.0.0.1:9100/metrics');
const tcp = ch('ahp-tcp:/db', 'tcp', 'db');

test('panel: the daemon\'s own figures first, then a system channel, then any other telemetry', () => {
  assert.equal(panelChannel([shell, push, system, daemon, proc]).channel, DAEMON_FIGURES_URI);
  assert.equal(panelChannel([shell, push, proc, system]).channel, system.channel);
  assert.equal(panelChannel([shell, proc, scrape, push]).channel, scrape.channel, 'the first listed among equals');
  // Found by its title too (a daemon channel created with ahpctl telemetry create --kind daemon).
  assert.equal(panelChannel([push, ch('ahp-telemetry:/daemon', 'telemetry', DAEMON_FIGURES_TITLE)]).channel, 'ahp-telemetry:/daemon');
  assert.equal(panelRank(system), 1);
  assert.equal(panelRank(ch('ahp-telemetry:/system', 'telemetry', 'system')), 1);
});

test('panel: none for terminals alone, a terminal\'s processes, ended channels, other types', () => {
  assert.equal(panelChannel([]), null);
  assert.equal(panelChannel(null), null);
  assert.equal(panelChannel([shell, tcp]), null);
  assert.equal(panelChannel([shell, proc]), null, 'the status line shows the processes');
  assert.equal(panelChannel([shell, { ...daemon, state: 'closed' }, { ...system, state: 'exited' }]), null);
  assert.equal(panelChannel([{ ...daemon, title: undefined }]).channel, DAEMON_FIGURES_URI, 'by URI without a title');
});

test('panel: the channel shown is kept among equals, not over a better one', () => {
  assert.equal(panelChannel([shell, push, scrape], scrape.channel).channel, scrape.channel, 'a new equal does not move it');
  assert.equal(panelChannel([shell, push, scrape], 'ahp-telemetry:/gone').channel, push.channel);
  assert.equal(panelChannel([shell, push, daemon], push.channel).channel, DAEMON_FIGURES_URI, 'the daemon\'s figures win');
});

test('panel placement: beside a wide stage, under a narrow one, none when too small', () => {
  // 1280 px window, 220 px sidebar: 1060 px of stage.
  const wide = panelPlacement(1060, 774);
  assert.equal(wide.placement, 'side');
  assert.ok(wide.size >= 300 && wide.size <= 440, wide.size);
  assert.ok(1060 - wide.size >= 600, 'most of the width stays the terminal\'s');
  // At the threshold the terminal keeps 460 px.
  const edge = panelPlacement(SIDE_MIN_STAGE, 600);
  assert.equal(edge.placement, 'side');
  assert.ok(SIDE_MIN_STAGE - edge.size >= 460, String(edge.size));
  assert.equal(panelPlacement(4000, 2000).size, 440);
  // 768 px window: 548 px of stage; a phone: 320 px.
  for (const [w, h] of [[548, 874], [320, 614], [SIDE_MIN_STAGE - 1, BOTTOM_MIN_STAGE]]) {
    const p = panelPlacement(w, h);
    assert.equal(p.placement, 'bottom', `${w}x${h}`);
    assert.ok(p.size >= 180 && p.size <= 300, `${w}x${h}: ${p.size}`);
    assert.ok(h - p.size >= 240, `${w}x${h}: the terminal keeps ${h - p.size} px`);
  }
  // A phone held sideways: no room for both.
  assert.deepEqual(panelPlacement(640, BOTTOM_MIN_STAGE - 1), { placement: 'none', size: 0 });
  assert.deepEqual(panelPlacement(0, 0), { placement: 'none', size: 0 }, 'not laid out yet');
  assert.deepEqual(panelPlacement(NaN, 500), { placement: 'none', size: 0 });
});

test('panel shown: beside a terminal, with a channel, open, with room', () => {
  const on = { view: 'terminal', channel: DAEMON_FIGURES_URI, open: true, placement: 'side' };
  assert.equal(panelShown(on), true);
  assert.equal(panelShown({ ...on, placement: 'bottom' }), true);
  assert.equal(panelShown({ ...on, view: 'telemetry' }), false, 'the telemetry view shows charts itself');
  assert.equal(panelShown({ ...on, view: null }), false, 'not attached yet');
  assert.equal(panelShown({ ...on, channel: null }), false);
  assert.equal(panelShown({ ...on, open: false }), false, 'closed by the user');
  assert.equal(panelShown({ ...on, placement: 'none' }), false);
});

test('panel charts: every plot is high enough for two y labels', async () => {
  const { PANEL_CHART_HEIGHT, PANEL_Y_SPACE } = await import('../src/chart-panel.js');
  // telemetry.js: a time axis of 26 px and a top margin of 11 px.
  for (const [where, h] of Object.entries(PANEL_CHART_HEIGHT)) assert.ok(h - 26 - 11 >= 4 * PANEL_Y_SPACE, `${where}: ${h}`);
  assert.ok(PANEL_Y_SPACE >= 11 + 4, 'labels (11 px) never touch');
});
