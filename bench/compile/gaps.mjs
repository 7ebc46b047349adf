#!/usr/bin/env node
// node bench/compile/gaps.mjs [--mip SECONDS] [--all] [--model PATH] [PRESET HW ...]
// — where each grid cell's gap to its bound lies (after `npm run build`). Per
// cell (the gap grid of cases.mjs; with --all its large and host-bound cases
// too; or the PRESET HW pairs given, of models/gpt.ts or the --model given),
// four numbers, each at least the one before:
//   bound      the plan's lower bound (the bound LP, widened as the plan leaves its family)
//   own        the same LP with its choices fixed to the plan's (lp.ts placementBound):
//              own - bound is the gap of the plan's choices (where state rests,
//              what streams, what is kept), which no schedule of them can close
//   ideal      the plan's program simulated without the arena's waits (the
//              schedule's gap: ideal - own)
//   step       the plan's predicted step (the arena's gap: step - ideal)
// With --mip, also the bound LP solved by HiGHS as a MIP, its choice columns
// integral (groups' tiers, streams, kept and recomputed activations), within
// SECONDS: its dual bound says how much of the gap is the LP being a
// relaxation of whole choices. (For a model that fits on the GPU, bound and
// own are over the plans that keep it there, the MIP over every placement.)
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { grid, hostBound, large } from './cases.mjs';

const root = fileURLToPath(new URL('../..', import.meta.url));
process.chdir(root);
const { trainingGraph } = await import(`${root}/dist/src/compile.js`);
const { place } = await import(`${root}/dist/compiler/partition/search.js`);
const { boundModel, placementBound } = await import(`${root}/dist/compiler/partition/lp.js`);
const { LpWorker } = await import(`${root}/dist/compiler/partition/highs-worker.js`);
const { loadProfile } = await import(`${root}/dist/compiler/cost/profiles.js`);
const { simulate } = await import(`${root}/dist/compiler/simulate/simulate.js`);
const { simulated } = await import(`${root}/dist/compiler/partition/built.js`);

const args = process.argv.slice(2);
const mipAt = args.indexOf('--mip');
const mipSeconds = mipAt >= 0 ? Number(args.splice(mipAt, 2)[1]) : 0;
const allAt = args.indexOf('--all');
if (allAt >= 0) args.splice(allAt, 1);
const modelAt = args.indexOf('--model');
const model = modelAt >= 0 ? args.splice(modelAt, 2)[1] : 'models/gpt.ts';
const pairs = [];
for (let i = 0; i + 1 < args.length; i += 2) pairs.push({ name: `${args[i]} ${args[i + 1]}`, opts: { model, precision: 'fp16', preset: args[i], hw: args[i + 1] } });
const cells = pairs.length ? pairs : [...grid, ...(allAt >= 0 ? [...large, ...hostBound] : [])];
const highs = mipSeconds > 0 ? await createRequire(import.meta.url)('highs')() : undefined;

/** The bound LP's MIP (choice columns integral): its dual bound and best integral objective, in seconds. */
function mip(g, hw, widen) {
  const { data, colNames, seconds } = boundModel(g, hw, { widen });
  const integrality = new Int32Array(data.numCols);
  colNames.forEach((name, i) => { if (/^(st|p16|stream|mst_nvme|keep|recompute)_/.test(name)) integrality[i] = 1; });
  const m = highs.createModel({ ...data, integrality });
  try {
    m.options.set({ output_flag: false, time_limit: mipSeconds, mip_rel_gap: 1e-3 });
    m.run();
    return { dual: Number(m.info.get('mip_dual_bound')) * seconds, primal: Number(m.info.get('objective_function_value')) * seconds };
  } finally {
    m.dispose();
  }
}

const f = (x) => (typeof x === 'number' ? x.toFixed(4) : String(x));
const pct = (a, b) => (typeof a === 'number' && typeof b === 'number' ? `${((a / b - 1) * 100).toFixed(1)} %` : '-');
console.log(`| case | bound s (widened by) | own choices s (+) | ideal s (+) | step s (+) |${mipSeconds ? ' MIP dual / primal s |' : ''}`);
console.log(`|---|---|---|---|---|${mipSeconds ? '---|' : ''}`);
for (const { name, opts } of cells) {
  const { graph: g } = await trainingGraph(opts);
  const hw = loadProfile(opts.hw, opts);
  const solver = new LpWorker();
  try {
    const placed = await place(g, hw, { solver });
    const { placement, built } = placed, lp = await placed.lp;
    const ways = lp?.widenedBy ?? [];
    const widen = Object.fromEntries(ways.map((k) => [k, true]));
    const own = lp?.opCostFloor ? 'cpu ops' : await placementBound(g, hw, placement, solver, { widen });
    const ideal = simulate(g, placement, built.arenas.buffers, built.prog.instructions, hw).stepSeconds;
    const step = simulated(g, hw, built).stepSeconds;
    const m = mipSeconds ? mip(g, hw, widen) : undefined;
    console.log(`| ${name} | ${f(lp?.lowerBoundSeconds)} (${ways.join(', ') || 'family'}) | ${f(own)} (${pct(own, lp?.lowerBoundSeconds)}) | ${f(ideal)} (${pct(ideal, own)}) | ${f(step)} (${pct(step, ideal)}) |${m ? ` ${f(m.dual)} / ${f(m.primal)} |` : ''}`);
  } finally {
    solver.close();
  }
}
process.exit(0);
