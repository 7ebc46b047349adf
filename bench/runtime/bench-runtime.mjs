// bench-runtime.mjs — `npm run bench:runtime` (after `npm run build`):
//  1. the nvme store (native/tiers/nvme_store.h, O_DIRECT, queue depth 8, 1 MiB
//     blocks, one request per pass) writing then reading a file with each backend it has (io_uring when
//     built with liburing, the pread/pwrite thread pool), against fio in the same
//     directory in the same run (direct=1, bs=1M; io_uring and libaio at iodepth 8
//     = the store's queue depth, and psync at depth 1), rounds interleaved; fio
//     from Debian, installed with apt-get when missing;
//  2. measured vs predicted step time of the bundled tiny models (fp32; gpt and
//     llama also in fp16 / bf16; gpt with its state on NVMe, plain and fp16 DPU;
//     gpt2-124m at batch 1, seq 32 with its state on NVMe: MiB-sized requests) compiled with a
//     profile calibrated here (`tiercut hw calibrate`), and the step time against
//     the busiest stream's busy time (how well the streams overlap).
// Prints a markdown table and replaces the runtime section of docs/BENCHMARKS.md.
// Env: RUNTIME_BENCH_DIR (default: the OS temp dir), RUNTIME_BENCH_BYTES (default
// 1 GiB), RUNTIME_BENCH_ROUNDS (3), RUNTIME_BENCH_STEPS (30), RUNTIME_BENCH_REPEATS
// (3: calibrate + run every model, repeated), RUNTIME_BENCH_REQUEST_BYTES (the
// store's request size; default: one request per pass).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { nativeAddon } from '../../dist/runtime/binding.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const DIR = process.env.RUNTIME_BENCH_DIR ?? tmpdir();
const BYTES = Number(process.env.RUNTIME_BENCH_BYTES ?? 2 ** 30);
const ROUNDS = Number(process.env.RUNTIME_BENCH_ROUNDS ?? 3);
const STEPS = Number(process.env.RUNTIME_BENCH_STEPS ?? 30);
const REPEATS = Number(process.env.RUNTIME_BENCH_REPEATS ?? 3);
const REQUEST_BYTES = Number(process.env.RUNTIME_BENCH_REQUEST_BYTES ?? BYTES);
const work = mkdtempSync(join(DIR, 'tiercut-bench-runtime-'));
const gb = (x) => (x / 1e9).toFixed(2);
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const t0 = Date.now();
const load0 = loadavg()[0];

// ---------------------------------------------------------------------------
// fio

function haveFio() { return spawnSync('sh', ['-c', 'command -v fio'], { encoding: 'utf8' }).status === 0; }
if (!haveFio()) {
  console.log('fio not found; installing Debian fio with apt-get');
  spawnSync('sh', ['-c', 'DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio >/dev/null'], { stdio: 'inherit' });
}
const fioVersion = haveFio() ? spawnSync('fio', ['--version'], { encoding: 'utf8' }).stdout.trim() : undefined;

// Every write pass, the store's and fio's, goes to a new file (fio preallocates
// it, as the store does), and reads read what that pass wrote.
function fio(rw, engine, depth) {
  if (engine === 'io_uring' && !fioUring) return NaN;
  if (rw === 'write') rmSync(join(work, 'fio.bin'), { force: true });
  const r = spawnSync('fio', ['--name=tiercut', `--directory=${work}`, `--rw=${rw}`, '--bs=1M', '--direct=1', `--size=${BYTES}`,
    `--ioengine=${engine}`, `--iodepth=${depth}`, '--numjobs=1', '--filename=fio.bin', '--output-format=json'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`fio failed: ${r.stderr}`);
  const job = JSON.parse(r.stdout).jobs[0];
  return (rw === 'write' ? job.write : job.read).bw_bytes;
}

// does this fio have the io_uring engine (and may it use it here)?
const fioUring = fioVersion !== undefined && spawnSync('fio', ['--name=probe', `--directory=${work}`, '--rw=read', '--bs=4k', '--size=4k', '--ioengine=io_uring', '--filename=probe.bin', '--output-format=json'], { encoding: 'utf8' }).status === 0;
rmSync(join(work, 'probe.bin'), { force: true });

const addon = nativeAddon();
const backends = addon.nvmeBackends();
const storeBackends = backends.uring ? ['uring', 'threads'] : ['threads'];
const series = () => ({ w: [], r: [] });
const io = { store: Object.fromEntries(storeBackends.map((b) => [b, series()])), fioUring8: series(), fioLibaio8: series(), fioPsync1: series() };
let direct = true, note = '';
function storeBench(backend) {
  process.env.TIERCUT_NVME_IO = backend;
  // one request per pass, as fio streams one file: the store cuts it into 1 MiB
  // blocks with 8 in flight (the executor likewise hands ready copies to the
  // store as one batch); REQUEST_BYTES smaller shows the cost of draining the
  // queue between requests
  try { return addon.nvmeBench({ dir: work, bytes: BYTES, queueDepth: 8, blockBytes: 1 << 20, requestBytes: REQUEST_BYTES }); }
  finally { delete process.env.TIERCUT_NVME_IO; }
}
// The contenders of a round run one after another; their order rotates from
// round to round, so that none always follows the same neighbour (this disk's
// speed drifts within seconds).
const contenders = [
  ...storeBackends.map((b) => () => {
    const s = storeBench(b);
    io.store[b].w.push(s.writeBytesPerSec); io.store[b].r.push(s.readBytesPerSec);
    direct = s.direct; note = s.note;
    return `store ${s.backend} write ${gb(s.writeBytesPerSec)} read ${gb(s.readBytesPerSec)}`;
  }),
  ...(fioVersion ? [['fioUring8', 'io_uring', 8], ['fioLibaio8', 'libaio', 8], ['fioPsync1', 'psync', 1]].map(([key, engine, depth]) => () => {
    io[key].w.push(fio('write', engine, depth)); io[key].r.push(fio('read', engine, depth));
    return `fio ${engine} qd${depth} write ${gb(io[key].w.at(-1))} read ${gb(io[key].r.at(-1))}`;
  }) : []),
];
for (let round = 0; round < ROUNDS; round++) {
  const line = [];
  for (let i = 0; i < contenders.length; i++) line.push(contenders[(i + round) % contenders.length]());
  rmSync(join(work, 'fio.bin'), { force: true });
  console.log(`round ${round + 1} (GB/s): ${line.join('; ')}`);
}

// ---------------------------------------------------------------------------
// measured vs predicted

const cli = (...args) => spawnSync(process.execPath, [join(root, 'bin/tiercut.js'), ...args], { encoding: 'utf8', cwd: root, maxBuffer: 1 << 28 });
const profile = join(work, 'calibrated.json');
const calibrations = [];

const MODELS = [
  ['models/gpt.ts', 'tiny', []],
  ['models/gpt.ts', 'tiny', ['--gpu-mem', '400000', '--cpu-mem', '200000'], 'gpt tiny, state on NVMe'],
  ['models/llama.ts', 'tiny', []],
  ['models/bert.ts', 'tiny', []],
  ['models/mlp.ts', 'tiny', []],
  ['models/gpt.ts', 'tiny', ['--precision', 'fp16'], 'gpt tiny fp16'],
  ['models/llama.ts', 'tiny', ['--precision', 'bf16'], 'llama tiny bf16'],
  ['models/gpt.ts', 'tiny', ['--precision', 'fp16', '--gpu-mem', '400000', '--cpu-mem', '200000', '--dpu', '--dpu-warmup', '3'], 'gpt tiny fp16, state on NVMe, DPU'],
  // MiB-sized NVMe requests (the tiny plans' are a few KiB: latency-bound); ~1 s steps, so 8 of them
  ['models/gpt.ts', 'gpt2-124m', ['--batch', '1', '--seq', '32', '--precision', 'fp16', '--gpu-mem', '1GB', '--cpu-mem', '600MB'], 'gpt2-124m fp16 (batch 1, seq 32), state on NVMe', 8],
];
// REPEATS times: calibrate, then compile and run every model with that profile
// (this machine's load drifts: each repeat's prediction is compared with runs
// made right after its calibration; the table gives the median over repeats)
const runs = [];
for (let rep = 0; rep < REPEATS; rep++) {
const cal = cli('hw', 'calibrate', '-o', profile, '--spill-dir', work);
if (cal.status !== 0) throw new Error(`calibrate failed: ${cal.stderr}`);
console.log(`repeat ${rep + 1}: ${cal.stdout.trim()}`);
calibrations.push(cal.stdout.trim().replace(/^wrote \S+: /, ''));
const steps = [];
runs.push(steps);
for (const [model, preset, extra, label, modelSteps] of MODELS) {
  const plan = join(work, `${preset}-${steps.length}.plan.json`);
  const c = cli('compile', model, '--preset', preset, '--hw', profile, ...extra, '-o', plan);
  if (c.status !== 0) { console.log(`${model}: compile failed: ${c.stderr.trim()}`); continue; }
  const nSteps = Math.min(STEPS, modelSteps ?? STEPS);
  const r = cli('run', plan, '--steps', String(nSteps), '--json', '--spill-dir', work);
  if (r.status !== 0) { console.log(`${model}: run failed: ${r.stderr.trim()}`); continue; }
  const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
  const summary = lines.at(-1).summary;
  const stepLines = lines.filter((l) => l.step !== undefined).slice(2); // after 2 warm-up steps
  const measured = median(stepLines.map((l) => l.seconds));
  const overlap = median(stepLines.map((l) => l.seconds / l.busiestStreamSeconds));
  const busy = summary.streamBusySeconds;
  const busiest = Object.entries(busy).sort((a, b) => b[1] - a[1])[0];
  const pbusy = summary.predictedStreamBusySeconds;
  const pbusiest = Object.entries(pbusy).sort((a, b) => b[1] - a[1])[0];
  const p = JSON.parse(readFileSync(plan, 'utf8'));
  steps.push({
    label: label ?? `${model.replace('models/', '').replace('.ts', '')} ${preset}`, instructions: p.instructions.length,
    measured, predicted: summary.predictedStepSeconds, busiest, pbusiest, stepOverBusiest: overlap, nvme: summary.nvme,
    commands: [`tiercut compile ${model} --preset ${preset} --hw calibrated.json ${extra.join(' ')} -o plan.json`.replace(/ +/g, ' '), `tiercut run plan.json --steps ${nSteps} --json --spill-dir DIR`],
  });
  console.log(`${steps.at(-1).label}: measured ${(measured * 1e3).toFixed(3)} ms, predicted ${(summary.predictedStepSeconds * 1e3).toFixed(3)} ms, step / busiest ${overlap.toFixed(2)}`);
}
}
rmSync(work, { recursive: true, force: true });

// ---------------------------------------------------------------------------
// table

const pct = (a, b) => `${((a / b) * 100).toFixed(0)} %`;
const ms = (s) => (s * 1e3).toFixed(3);
const date = new Date().toISOString().slice(0, 10);
const out = [];
out.push('## Runtime: NVMe store vs fio, measured vs predicted step time', '');
out.push('Command: `npm run build && npm run bench:runtime` (bench/runtime/bench-runtime.mjs; `RUNTIME_BENCH_DIR` picks the directory).');
out.push(`Run ${date}. Machine: ${cpus().length} cores (${cpus()[0]?.model ?? '?'}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB; directory ${DIR}; ` +
  `${(BYTES / 2 ** 30).toFixed(2)} GiB per pass, ${ROUNDS} rounds interleaved, median; ${fioVersion ?? 'fio not available'}. ` +
  `Load average ${load0.toFixed(1)} at start, ${loadavg()[0].toFixed(1)} at end; bench wall ${((Date.now() - t0) / 1e3).toFixed(0)} s.`, '');
out.push(`Store: ${direct ? 'O_DIRECT' : `buffered (${note})`}, queue depth 8, 1 MiB blocks, ${REQUEST_BYTES >= BYTES ? 'one request per pass' : `${(REQUEST_BYTES / 2 ** 20).toFixed(0)} MiB requests`}; backends ${storeBackends.map((b) => (b === 'uring' ? 'io_uring (liburing)' : 'thread pool (pread/pwrite)')).join(' and ')}` +
  `${backends.uring ? '' : ` (io_uring unavailable: ${backends.uringWhy})`}. fio: direct=1, bs=1M, same directory, same rounds. ` +
  'Every write pass (store or fio) writes a new preallocated file, every read pass reads it back; the order of the contenders rotates each round.', '');
const med = (a) => median(a.filter((x) => Number.isFinite(x)));
const cols = [['fio io_uring qd8', io.fioUring8], ['fio libaio qd8', io.fioLibaio8], ['fio psync qd1', io.fioPsync1]];
const bname = (b) => (b === 'uring' ? 'io_uring' : 'threads');
// paired: in each round, the store's pass over the better fio qd8 pass of the
// same round (minutes apart at most, where the medians above may come from
// rounds the disk ran at different speeds); the median of those ratios
const paired = (b, k) => median(io.store[b][k].map((x, i) => x / Math.max(...[io.fioUring8[k][i], io.fioLibaio8[k][i]].filter((y) => Number.isFinite(y)))));
out.push(`| | ${storeBackends.map((b) => `store ${bname(b)} GB/s`).join(' | ')} | ${cols.map(([n]) => `${n} GB/s`).join(' | ')} | ${storeBackends.map((b) => `store ${bname(b)} / best fio qd8`).join(' | ')} | ${storeBackends.map((b) => `store ${bname(b)} / best fio qd8, paired per round`).join(' | ')} |`);
out.push(`|---|${storeBackends.map(() => '---:').join('|')}|${cols.map(() => '---:').join('|')}|${storeBackends.map(() => '---:').join('|')}|${storeBackends.map(() => '---:').join('|')}|`);
for (const [name, k] of [['write', 'w'], ['read', 'r']]) {
  const best8 = Math.max(...[med(io.fioUring8[k]), med(io.fioLibaio8[k])].filter((x) => Number.isFinite(x)));
  out.push(`| ${name} | ${storeBackends.map((b) => gb(med(io.store[b][k]))).join(' | ')} | ${cols.map(([, s]) => (fioVersion ? gb(med(s[k])) : '–')).join(' | ')} | ` +
    `${storeBackends.map((b) => (fioVersion ? pct(med(io.store[b][k]), best8) : '–')).join(' | ')} | ` +
    `${storeBackends.map((b) => (fioVersion ? `${(paired(b, k) * 100).toFixed(0)} %` : '–')).join(' | ')} |`);
}
out.push('', 'Per round (GB/s, write/read): ' + Array.from({ length: ROUNDS }, (_, i) =>
  `round ${i + 1}: ${storeBackends.map((b) => `store ${b} ${gb(io.store[b].w[i])}/${gb(io.store[b].r[i])}`).join(', ')}` +
  (fioVersion ? `, ${cols.map(([n, s]) => `${n} ${gb(s.w[i])}/${gb(s.r[i])}`).join(', ')}` : '')).join('; ') + '.', '');
out.push(`Step time: ${REPEATS} repeats of \`tiercut hw calibrate -o calibrated.json --spill-dir DIR\` followed by every model compiled with that profile and run ${STEPS} steps (fewer where the commands say) ` +
  `(commands below). Per repeat: measured = median step after 2 warm-up steps; step / busiest = median over the same steps of each step's time over its busiest stream's busy time. ` +
  `The table gives per model the median over the repeats (each repeat's measured / predicted in brackets); "busiest" columns are from the median repeat.`, '');
calibrations.forEach((c, i) => out.push(`- calibration ${i + 1}: ${c}`));
out.push('');
out.push('| model | instructions | measured ms | predicted ms | measured / predicted (per repeat) | step / busiest (per repeat) | busiest stream (measured) ms | busiest stream (predicted) ms |');
out.push('|---|---:|---:|---:|---:|---:|---:|---:|');
const labels = [...new Set(runs.flat().map((s) => s.label))];
const rows = [];
for (const label of labels) {
  const reps = runs.map((r) => r.find((s) => s.label === label)).filter(Boolean);
  const ratio = reps.map((s) => s.measured / s.predicted);
  const mid = reps[ratio.indexOf(median(ratio))];
  const overl = reps.map((s) => s.stepOverBusiest);
  rows.push({ label, ratio: median(ratio), overlap: median(overl), nvme: mid.nvme, commands: mid.commands });
  out.push(`| ${label} | ${mid.instructions} | ${ms(median(reps.map((s) => s.measured)))} | ${ms(median(reps.map((s) => s.predicted)))} | ` +
    `**${median(ratio).toFixed(2)}** (${ratio.map((x) => x.toFixed(2)).join(', ')}) | **${median(overl).toFixed(2)}** (${overl.map((x) => x.toFixed(2)).join(', ')}) | ` +
    `${mid.busiest[0]} ${ms(mid.busiest[1])} | ${mid.pbusiest[0]} ${ms(mid.pbusiest[1])} |`);
}
out.push('', 'Commands per model:', '');
for (const r of rows) out.push(`- ${r.label}: \`${r.commands.join('` then `')}\`${r.nvme ? ` (nvme: ${r.nvme.backend}, ${r.nvme.direct ? 'O_DIRECT' : 'buffered'}, queue depth ${r.nvme.queueDepth}, ${r.nvme.edgeReads} edge-block reads)` : ''}`);
const table = out.join('\n');
console.log('\n' + table);

const doc = join(root, 'docs', 'BENCHMARKS.md');
const section = `<!-- runtime:begin -->\n${table}\n<!-- runtime:end -->`;
let text = existsSync(doc) ? readFileSync(doc, 'utf8') : '# Benchmarks\n';
text = /<!-- runtime:begin -->[\s\S]*<!-- runtime:end -->/.test(text)
  ? text.replace(/<!-- runtime:begin -->[\s\S]*<!-- runtime:end -->/, section) : `${text.trimEnd()}\n\n${section}\n`;
writeFileSync(doc, text);
console.log(`\nupdated ${doc} (runtime section)`);
