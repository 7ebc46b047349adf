#!/usr/bin/env node
// node bench/compile/chunks.mjs [PRESET/HW ...] — what splitting parameter
// groups into chunks would give (issue 5: "large tensors may be split into
// chunks"), before the compiler does it itself: each of the gap grid's
// offloaded cells (or the cells given) compiled from models/gpt.ts and from
// bench/compile/gpt-chunked.ts (the same function, each block's attention and
// MLP in two halves: test/models/chunked.test.ts), after `npm run build`. Per
// cell: step / bound (gap) of each, the faster step against the lower of the
// two bounds (a bound over both families), and each compile's seconds.
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
process.chdir(root);
const { compile } = await import(`${root}/dist/src/compile.js`);
const cells = process.argv.length > 2
  ? process.argv.slice(2).map((s) => s.split('/'))
  : [['gpt3-6.7b', 'v100-32g'], ['gpt3-6.7b', 'a100-80g'], ['gpt3-6.7b', 'h100-80g'], ['gpt3-13b', 'v100-32g'], ['gpt3-13b', 'a100-80g'], ['gpt3-13b', 'h100-80g'], ['gpt3-13b', 'h200-141g']];
const gap = (step, bound) => `${((step / bound - 1) * 100).toFixed(2)} %`;
console.log('| preset | profile | models/gpt.ts: step / bound s (gap) | gpt-chunked.ts: step / bound s (gap) | the faster / the lower bound (gap) | compile s |');
console.log('|---|---|---|---|---|---|');
for (const [preset, hw] of cells) {
  const row = [];
  for (const model of ['models/gpt.ts', 'bench/compile/gpt-chunked.ts']) {
    const t0 = performance.now();
    const plan = await compile({ model, preset, hw, precision: 'fp16' });
    row.push({ step: plan.predicted.stepSeconds, bound: plan.bound.lowerBoundSeconds, seconds: (performance.now() - t0) / 1e3 });
  }
  const [a, b] = row, bound = Math.min(a.bound, b.bound), step = Math.min(a.step, b.step);
  const cell = (r) => `${r.step.toFixed(4)} / ${r.bound.toFixed(4)} (${gap(r.step, r.bound)})`;
  console.log(`| ${preset} | ${hw} | ${cell(a)} | ${cell(b)} | ${step.toFixed(4)} / ${bound.toFixed(4)} (${gap(step, bound)}) | ${a.seconds.toFixed(1)} / ${b.seconds.toFixed(1)} |`);
}
process.exit(0);
