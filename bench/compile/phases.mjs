#!/usr/bin/env node
// node bench/compile/phases.mjs [ROOT] — the main thread's phases of the
// gpt2-1.5b/16 GB compile, one by one and with no solver running beside them
// (the LP is solved, untimed, before the LP placement is timed): wall ms / CPU
// ms per phase (CPU: process-wide, so GC and JIT threads count). ROOT as in
// one.mjs. The phases are called as compile calls them (placeMinCut = the cut's
// search and schedule; placeLp = rounding and schedule; planFor also rebuilds
// the schedule, then simulates and verifies).
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { large } from './cases.mjs';

const root = resolve(process.argv[2] ?? fileURLToPath(new URL('../..', import.meta.url)));
process.chdir(root);
const out = [];
let w = performance.now(), c = process.cpuUsage();
const lap = (label) => { const w1 = performance.now(), c1 = process.cpuUsage(c); out.push(`${label} ${(w1 - w).toFixed(0)}/${((c1.user + c1.system) / 1e3).toFixed(0)}`); w = performance.now(); c = process.cpuUsage(); };
const { trainingGraph, placeMinCut, placeLp, planFor } = await import(root + '/dist/src/compile.js');
const { startLp } = await import(root + '/dist/compiler/partition/lp.js');
const { LpWorker } = await import(root + '/dist/compiler/partition/highs-worker.js');
const { loadProfile } = await import(root + '/dist/compiler/cost/profiles.js');
const { buildProgram } = await import(root + '/dist/compiler/schedule/program.js');
const { assignOffsets } = await import(root + '/dist/compiler/schedule/arena.js');
const { simulate } = await import(root + '/dist/compiler/simulate/simulate.js');
lap('modules');
const opts = large[0].opts; // gpt2-1.5b, v100-32g, 16 GB GPU (cases.mjs)
const hw = loadProfile(opts.hw, { gpuMemBytes: opts.gpuMemBytes });
const { graph: g } = await trainingGraph(opts);
lap('graph');
let data;
startLp(g, hw, { solver: { solve(d) { data = d; return new Promise(() => {}); }, close() {} } });
lap('lpBuild');
const cut = placeMinCut(g, hw);
lap('mincut(search+sched)');
const solver = new LpWorker();
const run = startLp(g, hw, { solver });
const sol = await run.refine();
solver.close();
w = performance.now(); c = process.cpuUsage();
const p = placeLp(g, hw, sol);
lap('lpPlace(round+sched)');
const caps = { gpu: hw.gpu.capacityBytes, cpu: hw.cpu.capacityBytes, nvme: hw.nvme.capacityBytes };
const prog = buildProgram(g, p);
lap('program');
const ar = assignOffsets(prog, caps);
lap('arena');
simulate(g, p, ar.buffers, ar.instructions, hw);
lap('simulate');
const plan = planFor(g, hw, p, { source: 'x', preset: 'y', config: {} }, { lr: 1 }, sol);
lap('planFor(sched+sim+verify)');
JSON.stringify(plan);
lap('stringify');
console.log(out.join(' | '));
process.exit(0);
