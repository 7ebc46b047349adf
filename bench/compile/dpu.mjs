#!/usr/bin/env node
// node bench/compile/dpu.mjs [CASE-NAME-SUBSTRING ...] — the delayed parameter
// update's steady step beside the plain step, per case of bench:compile whose
// plain plan updates on the CPU (cases.mjs: the large cases, the grid, the
// host-bound cases, the small fp16 ones), in one process: the plain step; the
// steady step with every update delayed (lower/dpu.ts's default, what compile
// made before the thirty-first session); and compile's own (only the updates
// the plain plan runs on the CPU delayed, the plain placement tried for the
// steady step too, declined where it is no faster: then the plain step
// stands). Ratios to the plain step; the predicted steps are the simulator's
// (deterministic), so the load of the machine does not change them.
import { fileURLToPath } from 'node:url';
import { grid, hostBound, large, small } from './cases.mjs';

const root = fileURLToPath(new URL('../..', import.meta.url));
process.chdir(root);
const { compile, trainingGraph, place, planFor } = await import(`${root}/dist/src/compile.js`);
const { isDelayedUpdate, lowerDpu } = await import(`${root}/dist/compiler/lower/dpu.js`);
const { loadProfile } = await import(`${root}/dist/compiler/cost/profiles.js`);
const { LpWorker } = await import(`${root}/dist/compiler/partition/highs-worker.js`);
const { ADAM_DEFAULTS } = await import(`${root}/dist/compiler/lower/optimizer.js`);
const { diag, UserError } = await import(`${root}/dist/src/diagnostics.js`);
const DOES_NOT_FIT = diag.doesNotFit('').code;

const only = process.argv.slice(2);
const cases = [...large, ...grid, ...hostBound, ...small].filter((c) => (c.opts.precision ?? 'fp32') !== 'fp32' && (!only.length || only.some((s) => c.name.includes(s))));
const f = (s) => (s < 1e-3 ? `${(s * 1e6).toFixed(1)} µs` : s < 1 ? `${(s * 1e3).toFixed(1)} ms` : `${s.toFixed(3)} s`);
console.log('| case | plain step | every update delayed (x plain) | CPU updates delayed (x plain) | compile\'s steady step (x plain) |');
console.log('|---|---|---|---|---|');
for (const c of cases) {
  const plan = await compile({ ...c.opts, dpuWarmupSteps: 40 });
  const plain = plan.predicted.stepSeconds, d = plan.dpu;
  if (d.declined?.reason === 'nothing-to-delay') continue; // every update on the GPU
  // every update delayed, placed by the same search
  const hw = loadProfile(c.opts.hw ?? 'local', c.opts);
  const { graph } = await trainingGraph(c.opts);
  const solver = new LpWorker();
  let all; // (undefined: every gradient as state does not fit)
  try {
    const g = lowerDpu(graph);
    const placed = await place(g, hw, { solver });
    all = planFor(g, hw, placed.placement, { source: 'x', preset: 'y', config: {} }, ADAM_DEFAULTS, await placed.lp, placed.built).predicted.stepSeconds;
  } catch (e) {
    if (!(e instanceof UserError) || e.code !== DOES_NOT_FIT) throw e;
  } finally { solver.close(); }
  const cpu = d.steady ? d.steady.predicted.stepSeconds : d.declined.steadyStepSeconds; // (undefined: it does not fit)
  const kept = d.steady ? cpu : plain;
  const delayed = d.steady ? d.steady.graph.ops.filter((o) => isDelayedUpdate(d.steady.graph, o)).length : d.declined.delayedUpdates;
  const cpuCell = cpu === undefined ? `does not fit, ${delayed} delayed` : `${f(cpu)} (${(cpu / plain).toFixed(3)}), ${delayed} delayed`;
  const allCell = all === undefined ? 'does not fit' : `${f(all)} (${(all / plain).toFixed(3)})`;
  console.log(`| ${c.name} | ${f(plain)} | ${allCell} | ${cpuCell} | ${f(kept)} (${(kept / plain).toFixed(3)})${d.steady ? '' : ', declined'} |`);
}
process.exit(0);
