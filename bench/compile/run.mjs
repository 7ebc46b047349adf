#!/usr/bin/env node
// npm run bench:compile — compile time of large plans on this machine, and what
// the partitioner finds. One process, models built symbolically (no weights).
// Prints three tables (the large cases, the gap grid of presets x profiles,
// then cases whose host memory binds);
// paste them into docs/BENCHMARKS.md with the command.
import { compile } from '../../dist/src/compile.js';
import { planStats } from '../../dist/compiler/report/stats.js';
import { grid, hostBound, large } from './cases.mjs';

const fmt = (b) => (b / 1e9).toFixed(1) + ' GB';
console.log('| case | compile s | ops | method | gpu peak | cpu peak | nvme peak | predicted step s | LP bound s | gap % |');
console.log('|---|---|---|---|---|---|---|---|---|---|');
for (const c of large) {
  const t0 = performance.now();
  const plan = await compile(c.opts);
  const seconds = (performance.now() - t0) / 1e3;
  const s = planStats(plan);
  console.log(`| ${c.name} | ${seconds.toFixed(1)} | ${plan.graph.ops.length} | ${s.method} | ${fmt(s.tiers.gpu.peakBytes)} | ${fmt(s.tiers.cpu.peakBytes)} | ${fmt(s.tiers.nvme.peakBytes)} | ${s.predicted.stepSeconds.toFixed(2)} | ${s.lowerBoundSeconds?.toFixed(2)} | ${s.gapPercent?.toFixed(0)} |`);
}

// the gap grid: presets x profiles at their default capacities (fp16, batch 1)
console.log('\n| preset | profile | method | predicted step s | LP bound s | gap % | compile s |');
console.log('|---|---|---|---|---|---|---|');
for (const c of grid) {
  const t0 = performance.now();
  const plan = await compile(c.opts);
  const seconds = (performance.now() - t0) / 1e3;
  console.log(`| ${c.preset} | ${c.hw} | ${plan.placement.method} | ${plan.predicted.stepSeconds.toFixed(3)} | ${plan.bound?.lowerBoundSeconds.toFixed(3)} | ${plan.bound?.gapPercent.toFixed(1)} | ${seconds.toFixed(1)} |`);
}

// host memory that binds: the state does not fit GPU + CPU, part of it on
// NVMe (default NVMe; what a box with less RAM than the model state meets)
console.log('\n| case | method | predicted step s | LP bound s | gap % | compile s |');
console.log('|---|---|---|---|---|---|');
for (const { name, opts } of hostBound) {
  const t0 = performance.now();
  const plan = await compile(opts);
  const seconds = (performance.now() - t0) / 1e3;
  console.log(`| ${name} | ${plan.placement.method} | ${plan.predicted.stepSeconds.toFixed(3)} | ${plan.bound?.lowerBoundSeconds.toFixed(3)} | ${plan.bound?.gapPercent.toFixed(1)} | ${seconds.toFixed(1)} |`);
}
