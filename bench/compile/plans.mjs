#!/usr/bin/env node
// node bench/compile/plans.mjs [ROOT] — one line per case of bench:compile
// (cases.mjs: the large cases, the grid, the host-bound cases) and per small
// plan of the other paths: the sha256 of the plan JSON (first 16 hex), the
// predicted step and the bound. Two builds (ROOT: another checkout's, e.g. a
// git worktree of an older commit with node_modules linked and `npm run
// build` done) make the same plans when the two outputs are equal: the check
// for a change meant to keep every plan. With the LP cache on (the default),
// a second run solves nothing and takes a few minutes. With --time, each line
// ends with the compile's wall seconds (then the outputs differ between runs).
import { createHash } from 'node:crypto';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { grid, hostBound, large, small } from './cases.mjs';

const args = process.argv.slice(2).filter((a) => a !== '--time'), timed = process.argv.includes('--time');
const root = resolve(args[0] ?? fileURLToPath(new URL('../..', import.meta.url)));
process.chdir(root);
const { compile } = await import(`${root}/dist/src/compile.js`);
for (const c of [...large, ...grid, ...hostBound, ...small]) {
  const t0 = performance.now();
  const plan = await compile(c.opts);
  const seconds = timed ? `  ${((performance.now() - t0) / 1e3).toFixed(2)} s` : '';
  const sha = createHash('sha256').update(JSON.stringify(plan)).digest('hex').slice(0, 16);
  console.log(`${sha}  step ${plan.predicted.stepSeconds.toPrecision(6)}  bound ${plan.bound?.lowerBoundSeconds.toPrecision(6) ?? '-'}  ${c.name}${seconds}`);
}
process.exit(0);
