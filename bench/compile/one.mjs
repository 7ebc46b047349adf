#!/usr/bin/env node
// node bench/compile/one.mjs [ROOT] [CASE] [--row] — one compile of a large
// case of cases.mjs (CASE its key: gpt2-1.5b, the default: v100-32g with 16 GB
// of GPU; gpt3-175b: a100-80g with 1 TB CPU and 8 TB NVMe; gpt2-1.5b-gpu:
// a100-80g, where it fits) in this fresh process, from the build in
// ROOT (default: this checkout; another build, e.g. an older commit's from
// `git archive` with node_modules linked, to compare in interleaved runs).
// Prints wall seconds, the process's CPU seconds (user, sys: all threads,
// the HiGHS workers' included), the main thread's busy seconds (its event
// loop's active time: rounding, scheduling, simulating; not the waits for the
// solver threads) and the plan JSON's sha256 (first 16 hex); with --row,
// bench:compile's table row instead (run.mjs runs each large case so, as
// `tiercut compile` runs: one process each).
// TIERCUT_TIMING=1 adds the phase timeline on stderr; TIERCUT_LP_CACHE=0
// gives a cold solve.
import { createHash } from 'node:crypto';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { large } from './cases.mjs';

const rowAt = process.argv.indexOf('--row'), row = rowAt >= 0;
if (row) process.argv.splice(rowAt, 1);
const root = resolve(process.argv[2] ?? fileURLToPath(new URL('../..', import.meta.url)));
process.chdir(root);
const t0 = performance.now(), c0 = process.cpuUsage(), e0 = performance.eventLoopUtilization();
const { compile } = await import(`${root}/dist/src/compile.js`);
const which = process.argv[3] ?? 'gpt2-1.5b';
const chosen = large.find((c) => c.key === which);
if (!chosen) throw new Error(`one.mjs: CASE must be one of ${large.map((c) => c.key).join(', ')}, got ${which}`);
const plan = await compile(chosen.opts);
const wall = (performance.now() - t0) / 1e3, cpu = process.cpuUsage(c0), main = performance.eventLoopUtilization(e0).active / 1e3;
const sha = createHash('sha256').update(JSON.stringify(plan)).digest('hex').slice(0, 16);
if (row) {
  const { planStats } = await import(`${root}/dist/compiler/report/stats.js`);
  const st = planStats(plan), gb = (b) => (b / 1e9).toFixed(1) + ' GB';
  console.log(`| ${chosen.name} | ${wall.toFixed(1)} | ${plan.graph.ops.length} | ${st.method} | ${gb(st.tiers.gpu.peakBytes)} | ${gb(st.tiers.cpu.peakBytes)} | ${gb(st.tiers.nvme.peakBytes)} | ${st.predicted.stepSeconds.toFixed(st.predicted.stepSeconds < 1 ? 3 : 2)} | ${st.lowerBoundSeconds?.toFixed(st.predicted.stepSeconds < 1 ? 3 : 2)} | ${st.gapPercent?.toFixed(st.gapPercent < 10 ? 1 : 0)} |`);
  process.exit(0);
}
console.log(`${root}: wall ${wall.toFixed(2)} s, cpu user ${(cpu.user / 1e6).toFixed(2)} s sys ${(cpu.system / 1e6).toFixed(2)} s, main thread busy ${main.toFixed(2)} s, plan ${sha}`);
process.exit(0);
