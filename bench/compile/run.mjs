#!/usr/bin/env node
// npm run bench:compile — compile time of large plans on this machine, and what
// the partitioner finds. One process, models built symbolically (no weights).
// Prints a table; paste it into docs/BENCHMARKS.md with the command.
import { compile } from '../../dist/src/compile.js';
import { planStats } from '../../dist/compiler/report/stats.js';

const cases = [
  { name: 'gpt2-1.5b, v100-32g, 16 GB GPU (ZeRO-Offload)', opts: { model: 'models/gpt.ts', preset: 'gpt2-1.5b', hw: 'v100-32g', gpuMemBytes: 16e9, precision: 'fp16', batch: 1, seq: 1024 } },
  { name: 'gpt3-175b, a100-80g, 1 TB CPU, 8 TB NVMe', opts: { model: 'models/gpt.ts', preset: 'gpt3-175b', hw: 'a100-80g', cpuMemBytes: 1e12, nvmeBytes: 8e12, precision: 'fp16' } },
];
const fmt = (b) => (b / 1e9).toFixed(1) + ' GB';
console.log('| case | compile s | ops | method | gpu peak | cpu peak | nvme peak | predicted step s | LP bound s | gap % |');
console.log('|---|---|---|---|---|---|---|---|---|---|');
for (const c of cases) {
  const t0 = performance.now();
  const plan = await compile(c.opts);
  const seconds = (performance.now() - t0) / 1e3;
  const s = planStats(plan);
  console.log(`| ${c.name} | ${seconds.toFixed(1)} | ${plan.graph.ops.length} | ${s.method} | ${fmt(s.tiers.gpu.peakBytes)} | ${fmt(s.tiers.cpu.peakBytes)} | ${fmt(s.tiers.nvme.peakBytes)} | ${s.predicted.stepSeconds.toFixed(2)} | ${s.lowerBoundSeconds?.toFixed(2)} | ${s.gapPercent?.toFixed(0)} |`);
}
