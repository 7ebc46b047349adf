#!/usr/bin/env node
// npm run bench:compile — compile time of large plans on this machine, and what
// the partitioner finds. One process, models built symbolically (no weights).
// Prints three tables (the large cases, the gap grid of presets x profiles,
// then cases whose host memory binds);
// paste them into docs/BENCHMARKS.md with the command.
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

// the gap grid: presets x profiles at their default capacities (fp16, batch 1)
console.log('\n| preset | profile | method | predicted step s | LP bound s | gap % | compile s |');
console.log('|---|---|---|---|---|---|---|');
for (const preset of ['gpt2-124m', 'gpt2-1.5b', 'gpt3-6.7b', 'gpt3-13b']) {
  for (const hw of ['v100-32g', 'a100-80g', 'h100-80g', 'h200-141g']) {
    const t0 = performance.now();
    const plan = await compile({ model: 'models/gpt.ts', preset, hw, precision: 'fp16' });
    const seconds = (performance.now() - t0) / 1e3;
    console.log(`| ${preset} | ${hw} | ${plan.placement.method} | ${plan.predicted.stepSeconds.toFixed(3)} | ${plan.bound?.lowerBoundSeconds.toFixed(3)} | ${plan.bound?.gapPercent.toFixed(1)} | ${seconds.toFixed(1)} |`);
  }
}

// host memory that binds: the state does not fit GPU + CPU, part of it on
// NVMe (default NVMe; what a box with less RAM than the model state meets)
console.log('\n| case | method | predicted step s | LP bound s | gap % | compile s |');
console.log('|---|---|---|---|---|---|');
const hostBound = [
  ['gpt3-6.7b, a100-80g, 24 GB GPU, 64 GB CPU', { preset: 'gpt3-6.7b', hw: 'a100-80g', gpuMemBytes: 24e9, cpuMemBytes: 64e9 }],
  ['gpt3-6.7b, v100-32g, 48 GB CPU', { preset: 'gpt3-6.7b', hw: 'v100-32g', cpuMemBytes: 48e9 }],
  ['gpt3-13b, v100-32g, 128 GB CPU', { preset: 'gpt3-13b', hw: 'v100-32g', cpuMemBytes: 128e9 }],
  ['gpt3-13b, a100-80g, 64 GB CPU', { preset: 'gpt3-13b', hw: 'a100-80g', cpuMemBytes: 64e9 }],
  ['llama2-13b, h100-80g, 96 GB CPU', { model: 'models/llama.ts', preset: 'llama2-13b', hw: 'h100-80g', cpuMemBytes: 96e9 }],
  ['llama2-7b, a100-80g, 24 GB GPU, 32 GB CPU', { model: 'models/llama.ts', preset: 'llama2-7b', hw: 'a100-80g', gpuMemBytes: 24e9, cpuMemBytes: 32e9 }],
  ['gpt2-1.5b, v100-32g, 8 GB GPU, 6 GB CPU', { preset: 'gpt2-1.5b', hw: 'v100-32g', gpuMemBytes: 8e9, cpuMemBytes: 6e9 }],
];
for (const [name, o] of hostBound) {
  const t0 = performance.now();
  const plan = await compile({ model: 'models/gpt.ts', precision: 'fp16', ...o });
  const seconds = (performance.now() - t0) / 1e3;
  console.log(`| ${name} | ${plan.placement.method} | ${plan.predicted.stepSeconds.toFixed(3)} | ${plan.bound?.lowerBoundSeconds.toFixed(3)} | ${plan.bound?.gapPercent.toFixed(1)} | ${seconds.toFixed(1)} |`);
}
