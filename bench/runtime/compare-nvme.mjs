// compare-nvme.mjs — old vs new on the plan with optimizer state on NVMe, side by side.
//
// Usage: node bench/runtime/compare-nvme.mjs PROFILE PAIRS VARIANT...
//   VARIANT = label=ROOT[,ENV=VALUE...]: ROOT is a built checkout (dist/ and
//   build/Release/ present); the plan is compiled once per ROOT with its own
//   compiler (`tiercut compile models/gpt.ts --preset tiny --hw PROFILE
//   --gpu-mem 400000 --cpu-mem 200000`), then every round runs each variant once
//   (`tiercut run PLAN --steps 30 --json --spill-dir DIR` with its env), in an
//   order that rotates each round. Per run: median step after 2 warm-up steps,
//   median of step / busiest stream over the same steps. Prints per variant the
//   median over rounds of both, the plan's predicted step and the run's nvme
//   I/O count per step, as a markdown table. Env: COMPARE_NVME_DIR (spill
//   directory; default the OS temp dir), COMPARE_NVME_STEPS (30).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const [profile, pairsArg, ...specs] = process.argv.slice(2);
if (!profile || !pairsArg || specs.length === 0) {
  console.error('usage: node bench/runtime/compare-nvme.mjs PROFILE PAIRS label=ROOT[,ENV=VALUE...] ...');
  process.exit(1);
}
const STEPS = Number(process.env.COMPARE_NVME_STEPS ?? 30);
const work = mkdtempSync(join(process.env.COMPARE_NVME_DIR ?? tmpdir(), 'tiercut-compare-nvme-'));
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const cli = (root, args, env = {}) => spawnSync(process.execPath, [join(root, 'bin/tiercut.js'), ...args], { encoding: 'utf8', cwd: root, env: { ...process.env, ...env }, timeout: 300_000 });

const variants = specs.map((spec, i) => {
  const [head, ...envs] = spec.split(',');
  const [label, root] = head.split('=');
  return { label, root: resolve(root), env: Object.fromEntries(envs.map((e) => e.split('='))), plan: join(work, `plan-${i}.json`), runs: [] };
});
const plans = new Map();  // root -> plan file (one compile per checkout)
for (const v of variants) {
  if (!plans.has(v.root)) {
    const c = cli(v.root, ['compile', 'models/gpt.ts', '--preset', 'tiny', '--hw', resolve(profile), '--gpu-mem', '400000', '--cpu-mem', '200000', '-o', v.plan]);
    if (c.status !== 0) throw new Error(`${v.label}: compile failed: ${c.stderr}`);
    plans.set(v.root, v.plan);
  }
  v.plan = plans.get(v.root);
}
const load0 = loadavg()[0];
const rounds = Number(pairsArg);
for (let r = 0; r < rounds; r++) {
  const order = variants.map((_, i) => variants[(i + r) % variants.length]);
  for (const v of order) {
    const run = cli(v.root, ['run', v.plan, '--steps', String(STEPS), '--json', '--spill-dir', work], v.env);
    if (run.status !== 0) throw new Error(`${v.label}: run failed: ${run.stderr}`);
    const lines = run.stdout.trim().split('\n').map((l) => JSON.parse(l));
    const steps = lines.filter((l) => l.step !== undefined).slice(2);
    const summary = lines.at(-1).summary;
    v.runs.push({
      step: median(steps.map((l) => l.seconds)), overlap: median(steps.map((l) => l.seconds / l.busiestStreamSeconds)),
      predicted: summary.predictedStepSeconds, ios: summary.nvme?.ios, merged: summary.nvme?.mergedChunks,
    });
  }
}
const load1 = loadavg()[0];
rmSync(work, { recursive: true, force: true });
const ms = (s) => (s * 1e3).toFixed(2);
console.log(`${rounds} rounds, ${STEPS} steps a run, load ${load0.toFixed(1)} -> ${load1.toFixed(1)}\n`);
console.log(`| variant | predicted ms | step ms (median; per round) | step / ${variants[0].label}'s, same round (median) | measured / predicted | step / busiest (median) | nvme I/Os per run | merged |`);
console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
for (const v of variants) {
  const step = median(v.runs.map((x) => x.step)), pred = v.runs[0].predicted;
  const paired = median(v.runs.map((x, r) => x.step / variants[0].runs[r].step));
  console.log(`| ${v.label} | ${ms(pred)} | ${ms(step)} (${v.runs.map((x) => ms(x.step)).join(', ')}) | ${paired.toFixed(2)} | ${(step / pred).toFixed(2)} | ` +
    `${median(v.runs.map((x) => x.overlap)).toFixed(2)} | ${v.runs[0].ios ?? '-'} | ${v.runs[0].merged ?? '-'} |`);
}
