// bench-adam.mjs — `npm run bench:adam` (after `npm run build`): tiercut's fused CPU
// Adam against (b) a roofline kernel in the same addon that streams the same
// bytes (reads p, g, m, v; writes p, m, v: 28 B per parameter) and (c)
// torch.optim.Adam (default and foreach=True) and AdamW run by Debian's
// /usr/bin/python3 in a subprocess, for 100M and 250M fp32 parameters at 1 and 2
// threads; median of STEPS steps after one warm-up step. Prints Gparam/s, GB/s
// (28 B/param for everyone: the bytes an Adam step must move) and the ratios.
// The runtime checks an adam's gradient for inf/NaN on the copy that brings it
// in (gpu -> cpu), not in a second pass: (d) times that copy with the check
// riding on it against a plain memcpy of the same gradient, and (a_rt) is the
// update as the runtime runs it, (a') plus whatever the check added to the copy.
// Env: ADAM_BENCH_SIZES (comma list, default 100000000,250000000),
//      ADAM_BENCH_THREADS (default 1,2), ADAM_BENCH_STEPS (default 5).
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { cpuAdamInfo, cpuAdamStep } from '../../dist/src/index.js';
import { nativeAddon } from '../../dist/runtime/binding.js';

const here = dirname(fileURLToPath(import.meta.url));
const list = (v, d) => (v ? v.split(',').map(Number) : d);
const SIZES = list(process.env.ADAM_BENCH_SIZES, [100_000_000, 250_000_000]);
const THREADS = list(process.env.ADAM_BENCH_THREADS, [1, 2]);
const STEPS = Number(process.env.ADAM_BENCH_STEPS ?? 5);
const BYTES = 28;

const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const time = (f) => { const t0 = process.hrtime.bigint(); f(); return Number(process.hrtime.bigint() - t0) / 1e9; };
const info = cpuAdamInfo();
const addon = nativeAddon();
console.log(`tiercut CPU Adam benchmark: path ${info.best} (${info.supported.join(', ')}), pool ${info.maxThreads} threads, ` +
  `tile ${info.tileElems}, ${STEPS} timed steps after 1 warm-up, median`);

const rows = [];
for (const n of SIZES) {
  const arrived = new Float32Array(n);  // where the runtime's gradient copy lands
  const params = new Float32Array(n), grads = new Float32Array(n), expAvg = new Float32Array(n), expAvgSq = new Float32Array(n);
  let s = 12345;
  for (let i = 0; i < n; i++) { s ^= s << 13; s ^= s >>> 17; s ^= s << 5; const u = (s >>> 8) / 16777216; params[i] = u * 2 - 1; grads[i] = (u - 0.5) * 0.1; }
  for (const threads of THREADS) {
    if (threads > info.maxThreads) { console.log(`skip ${threads} threads: the pool has ${info.maxThreads}`); continue; }
    const adam = (checkFinite) => cpuAdamStep({ params, grads, expAvg, expAvgSq, step: 1, lr: 1e-3, beta1: 0.9, beta2: 0.999,
      eps: 1e-8, weightDecay: 0, adamw: false, threads, checkFinite });
    const roof = () => addon.adamRoofline({ params, grads, expAvg, expAvgSq, threads });
    const copy = (check) => addon.adamCopyGrads({ dst: arrived, src: grads, type: 'fp32', check });
    adam(true); adam(false); roof(); copy(true); copy(false);  // warm-up
    const t = { ours: [], oursNoCheck: [], roof: [], copy: [], copyChecked: [] };
    for (let k = 0; k < STEPS; k++) {  // interleaved, so a noisy neighbour hits all alike
      t.ours.push(time(() => adam(true)));
      t.oursNoCheck.push(time(() => adam(false)));
      t.roof.push(time(roof));
      t.copy.push(time(() => copy(false)));
      t.copyChecked.push(time(() => copy(true)));
    }
    const r = spawnSync('/usr/bin/python3', [join(here, 'torch_adam.py'), String(n), String(threads), String(STEPS)], { encoding: 'utf8', maxBuffer: 1 << 20 });
    let torch = {};
    if (r.status === 0) torch = JSON.parse(r.stdout.trim().split('\n').pop());
    else console.log(`torch subprocess failed (${r.status}): ${r.stderr.slice(-500)}`);
    const row = { n, threads, ours: median(t.ours), oursNoCheck: median(t.oursNoCheck), roof: median(t.roof),
      copy: median(t.copy), copyChecked: median(t.copyChecked), torch: {} };
    row.runtime = row.oursNoCheck + Math.max(0, row.copyChecked - row.copy);
    for (const k of ['torch Adam', 'torch Adam foreach', 'torch AdamW']) if (torch[k]) row.torch[k] = median(torch[k]);
    rows.push(row);
    printRow(row);
  }
}

function printRow(row) {
  const fmt = (name, sec) => `  ${name.padEnd(34)} ${(sec * 1e3).toFixed(1).padStart(8)} ms  ${(row.n / sec / 1e9).toFixed(3).padStart(6)} Gparam/s  ${(row.n * BYTES / sec / 1e9).toFixed(2).padStart(6)} GB/s`;
  console.log(`\n${(row.n / 1e6).toFixed(0)}M params, ${row.threads} thread(s)`);
  console.log(fmt('(a) tiercut Adam (with inf/NaN check)', row.ours));
  console.log(fmt('(a\') tiercut Adam, checkFinite: false', row.oursNoCheck));
  console.log(fmt('(a_rt) runtime: (a\') + check on the copy', row.runtime));
  console.log(fmt('(b) roofline (same 28 B/param)', row.roof));
  console.log(`  (d) gradient copy-in, 1 thread: memcpy ${(row.copy * 1e3).toFixed(1)} ms, with the inf/NaN check ${(row.copyChecked * 1e3).toFixed(1)} ms ` +
    `(${(row.copyChecked / row.copy * 100).toFixed(0)} % of memcpy)`);
  for (const [k, v] of Object.entries(row.torch)) console.log(fmt(`(c) ${k}`, v));
  const fastestTorch = Math.min(...Object.values(row.torch));
  console.log(`  (a)/(b) ${(row.roof / row.ours * 100).toFixed(1)} %, (a_rt)/(b) ${(row.roof / row.runtime * 100).toFixed(1)} % (target >= 90 %), ` +
    `(a')/(b) ${(row.roof / row.oursNoCheck * 100).toFixed(1)} %; ` +
    `(a) vs fastest torch ${(fastestTorch / row.ours).toFixed(2)}x (target >= 3x)`);
}

// (e) the runtime's update op with a p16 output and its copy to the (emulated)
// GPU: the copy on the h2d stream following the update tile by tile, against the
// same copy run after the update (on the cpu stream: serial). Step time as the
// executor measures it, median of STEPS steps after one warm-up.
const DT = { f32: 0, f16: 1 }, TIERS = { gpu: 0, cpu: 1 }, STREAM = { cpu: 1, h2d: 2 };
async function overlapRow(n) {
  const align = (x) => Math.ceil(x / 4096) * 4096;
  const sizes = [4 * n, 2 * n, 4 * n, 4 * n, 2 * n];
  let off = 0;
  const cpu = sizes.map((size, k) => { const b = { tensor: k, tier: TIERS.cpu, offsetBytes: off, sizeBytes: size }; off += align(size); return b; });
  const program = (copyStream) => ({
    tiers: [{ capacityBytes: align(2 * n), arenaBytes: align(2 * n) }, { capacityBytes: off, arenaBytes: off }, { capacityBytes: 0, arenaBytes: 0 }],
    spillDir: '',
    tensors: [DT.f32, DT.f16, DT.f32, DT.f32, DT.f16, DT.f16].map((dtype) => ({ dtype, shape: [n] })),
    buffers: [...cpu, { tensor: 5, tier: TIERS.gpu, offsetBytes: 0, sizeBytes: 2 * n }],
    ops: [{ kind: 21, iattr: [0, 0], fattr: [1e-3, 0.9, 0.999, 1e-8, 0] }],  // adam
    instructions: [
      { stream: STREAM.cpu, kind: 0, op: 0, inputs: [0, 1, 2, 3], outputs: [0, 2, 3, 4], waits: [] },
      { stream: copyStream, kind: 1, op: -1, inputs: [4], outputs: [5], waits: [0] },
    ],
  });
  const out = {};
  for (const [name, stream] of [['serial', STREAM.cpu], ['followed', STREAM.h2d]]) {
    const session = addon.createSession(program(stream));
    try {
      session.write(1, new Uint16Array(n).fill(0x2e66));  // 0.1 in fp16
      const t = [];
      for (let k = 0; k <= STEPS; k++) { const st = await session.step(k + 1); if (k > 0) t.push(st.seconds); }
      out[name] = median(t);
    } finally {
      session.close();
    }
  }
  console.log(`\n(e) ${n / 1e6}M params: update writing p16 + its copy to the GPU tier: serial ${(out.serial * 1e3).toFixed(1)} ms, ` +
    `followed tile by tile ${(out.followed * 1e3).toFixed(1)} ms (${(out.followed / out.serial * 100).toFixed(0)} % of serial)`);
  return out;
}
const overlap = await overlapRow(SIZES[0]);

console.log('\nmarkdown:\n');
console.log('| params | threads | (a) tiercut ms | (a\') no check ms | (a_rt) runtime ms | (b) roofline ms | memcpy / checked copy ms | torch Adam ms | torch foreach ms | torch AdamW ms | (a) GB/s | (a)/(b) | (a_rt)/(b) | (a\')/(b) | (a) vs fastest torch |');
console.log('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const r of rows) {
  const ms = (x) => (x === undefined ? '-' : (x * 1e3).toFixed(0));
  const fastest = Math.min(...Object.values(r.torch));
  console.log(`| ${r.n / 1e6}M | ${r.threads} | ${ms(r.ours)} | ${ms(r.oursNoCheck)} | ${ms(r.runtime)} | ${ms(r.roof)} | ${ms(r.copy)} / ${ms(r.copyChecked)} | ` +
    `${ms(r.torch['torch Adam'])} | ${ms(r.torch['torch Adam foreach'])} | ${ms(r.torch['torch AdamW'])} | ${(r.n * BYTES / r.ours / 1e9).toFixed(1)} | ` +
    `${(r.roof / r.ours * 100).toFixed(0)} % | ${(r.roof / r.runtime * 100).toFixed(0)} % | ${(r.roof / r.oursNoCheck * 100).toFixed(0)} % | ${(fastest / r.ours).toFixed(1)}x |`);
}
console.log(`\n(e) update + p16 copy, ${SIZES[0] / 1e6}M params: serial ${(overlap.serial * 1e3).toFixed(0)} ms, followed ${(overlap.followed * 1e3).toFixed(0)} ms ` +
  `(${(overlap.followed / overlap.serial * 100).toFixed(0)} %)`);
