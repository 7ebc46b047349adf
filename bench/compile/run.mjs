#!/usr/bin/env node
// npm run bench:compile — compile time of large plans on this machine, and what
// the partitioner finds. Models built symbolically (no weights). Prints four
// tables (the large cases, each compiled in a fresh process of its own, as
// `tiercut compile` runs: one.mjs --row; then, in this one process, the gap
// grid of GPT presets x profiles, the other presets on those profiles, and
// the cases whose host memory binds);
// paste them into docs/BENCHMARKS.md with the command.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { compile } from '../../dist/src/compile.js';
import { grid, hostBound, large, otherPresets } from './cases.mjs';

const root = fileURLToPath(new URL('../..', import.meta.url));
console.log('| case | compile s | ops | method | gpu peak | cpu peak | nvme peak | predicted step s | LP bound s | gap % |');
console.log('|---|---|---|---|---|---|---|---|---|---|');
for (const c of large) process.stdout.write(execFileSync(process.execPath, [fileURLToPath(new URL('./one.mjs', import.meta.url)), root, c.key, '--row'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }));

/** Compiles opts in this process; gives the plan and its compile seconds. */
async function timed(opts) {
  const t0 = performance.now();
  const plan = await compile(opts);
  return { plan, seconds: (performance.now() - t0) / 1e3 };
}
/** A plan's step, bound and gap, as the tables print them. */
const stepBoundGap = (plan) => `${plan.predicted.stepSeconds.toFixed(3)} | ${plan.bound?.lowerBoundSeconds.toFixed(3)} | ${plan.bound?.gapPercent.toFixed(1)}`;

// the gap grid: presets x profiles at their default capacities (fp16, batch 1)
console.log('\n| preset | profile | method | predicted step s | LP bound s | gap % | compile s |');
console.log('|---|---|---|---|---|---|---|');
for (const c of grid) {
  const { plan, seconds } = await timed(c.opts);
  console.log(`| ${c.preset} | ${c.hw} | ${plan.placement.method} | ${stepBoundGap(plan)} | ${seconds.toFixed(1)} |`);
}

// the other presets (LLaMA-2, BERT-large) on the same profiles
console.log('\n| preset | profile | method | predicted step s | LP bound s | gap % | widened by | compile s |');
console.log('|---|---|---|---|---|---|---|---|');
for (const c of otherPresets) {
  const { plan, seconds } = await timed(c.opts);
  console.log(`| ${c.preset} | ${c.hw} | ${plan.placement.method} | ${stepBoundGap(plan)} | ${plan.bound?.widenedBy?.join(', ') || '-'} | ${seconds.toFixed(1)} |`);
}

// host memory that binds: the state does not fit GPU + CPU, part of it on
// NVMe (default NVMe; what a box with less RAM than the model state meets)
console.log('\n| case | method | predicted step s | LP bound s | gap % | compile s |');
console.log('|---|---|---|---|---|---|');
for (const { name, opts } of hostBound) {
  const { plan, seconds } = await timed(opts);
  console.log(`| ${name} | ${plan.placement.method} | ${stepBoundGap(plan)} | ${seconds.toFixed(1)} |`);
}
