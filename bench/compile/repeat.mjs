#!/usr/bin/env node
// node bench/compile/repeat.mjs [ROOT] [CASE] [N] — CASE (a large case of
// cases.mjs, default gpt2-1.5b) compiled N times (default 3) in this one
// process, as `tiercut fit` and the test suite compile many models: wall and
// CPU seconds of each compile, and the plan JSON's sha256 (first 16 hex; the
// same every time). ROOT as in one.mjs (another build, to compare); the LP
// cache is off (every LP solved).
import { createHash } from 'node:crypto';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { large } from './cases.mjs';

process.env.TIERCUT_LP_CACHE = '0';
const root = resolve(process.argv[2] ?? fileURLToPath(new URL('../..', import.meta.url)));
process.chdir(root);
const { compile } = await import(`${root}/dist/src/compile.js`);
const which = process.argv[3] ?? 'gpt2-1.5b', n = Number(process.argv[4] ?? 3);
const chosen = large.find((c) => c.key === which);
if (!chosen) throw new Error(`repeat.mjs: CASE must be one of ${large.map((c) => c.key).join(', ')}, got ${which}`);
for (let i = 0; i < n; i++) {
  const t0 = performance.now(), c0 = process.cpuUsage();
  const plan = await compile(chosen.opts);
  const cpu = process.cpuUsage(c0);
  const sha = createHash('sha256').update(JSON.stringify(plan)).digest('hex').slice(0, 16);
  console.log(`${root} ${which} #${i + 1}: wall ${((performance.now() - t0) / 1e3).toFixed(2)} s, cpu user ${(cpu.user / 1e6).toFixed(2)} s, plan ${sha}`);
}
process.exit(0);
