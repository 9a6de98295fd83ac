// build.mjs — bundles src/ into dist/ (main.js, main.css, index.html).
// dist/ holds only .gitkeep in git; Go embeds whatever is there (embed.go).
import * as esbuild from 'esbuild';
import { copyFile, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';

const dist = new URL('./dist/', import.meta.url).pathname;

for (const name of await readdir(dist)) {
  if (name !== '.gitkeep') await rm(join(dist, name), { recursive: true, force: true });
}

await esbuild.build({
  entryPoints: { main: 'src/main.js' },
  bundle: true,
  // AHP_WEB_MINIFY=0 keeps names and lines readable (profiles: e2e/bench-cat.mjs --profile).
  minify: process.env.AHP_WEB_MINIFY !== '0',
  format: 'esm',
  target: ['es2020', 'chrome100', 'firefox100', 'safari15'],
  outdir: dist,
  legalComments: 'eof',
  logLevel: 'info',
});
await copyFile('src/index.html', join(dist, 'index.html'));
