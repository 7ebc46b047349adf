// bench-ring.ts — ring attention benchmark (npm run bench:ring), one run:
//   1. time: P = 2 ring (threads) vs single-rank blockwise attention of the same
//      total work (P = 1), forward, causal; ideal = T(P=1) / 2 on two cores, so
//      efficiency = (T1 / 2) / T2 (100 % = communication and imbalance fully hidden);
//   2. memory per rank vs S: the P = 2 ring's per-rank buffers (counted by the
//      kernel) and, under mpirun, each rank process's maxRSS; and the same at
//      S/P fixed (P = S / 4096), where it must stay flat;
//   3. Debian PyTorch's full (materialised) attention at the same sizes: time and
//      maxRSS of a subprocess; sizes whose S x S scores cannot fit in the memory
//      available are reported as such, not run.
// d = 64, 4 heads, batch 1, causal, S = 4k .. 32k. Prints a markdown table and
// replaces the "ring attention" section of docs/BENCHMARKS.md.
// Env: TIERCUT_BENCH_RING_SEQS=4096,8192 to run fewer sizes (the doc is then not written).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, freemem, loadavg, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { hashUniform, ringAttention } from '../../runtime/ring.js';
import type { WorkerRequest } from '../../runtime/ring-mpi-worker.js';

const HEADS = 4, DIM = 64, BATCH = 1, CAUSAL = true;
const FULL_SEQS = [4096, 8192, 16384, 32768];
const SEQS = process.env.TIERCUT_BENCH_RING_SEQS ? process.env.TIERCUT_BENCH_RING_SEQS.split(',').map(Number) : FULL_SEQS;
const FLAT_ROWS = 4096;   // S / P of the flat-memory series

function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json')) || JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).name !== 'tiercut') dir = dirname(dir);
  return dir;
}
const root = packageRoot();
const MB = (b: number) => (b / 2 ** 20).toFixed(1);

function inputs(seq: number) {
  const n = BATCH * HEADS * seq * DIM;
  return { q: hashUniform(1, n), k: hashUniform(2, n), v: hashUniform(3, n) };
}

function ring(seq: number, ranks: number) {
  const x = inputs(seq);
  const t0 = performance.now();
  const r = ringAttention({ ...x, batch: BATCH, heads: HEADS, seq, dim: DIM, causal: CAUSAL, ranks });
  return { seconds: (performance.now() - t0) / 1000, ranks: r.stats.ranks };
}

function haveMpirun(): boolean {
  return spawnSync('sh', ['-c', 'command -v mpirun'], { encoding: 'utf8' }).status === 0;
}

/** Forward under mpirun with 2 processes: wall time of the job and each rank's maxRSS. */
function mpiRing(seq: number, outDir: string): { seconds: number; maxRss: number[]; ringSeconds: number } | string {
  const req: WorkerRequest = {
    outDir, timeoutMs: 600_000,
    cases: [{ name: `s${seq}`, batch: BATCH, heads: HEADS, seq, dim: DIM, causal: CAUSAL, seed: 1, forwardOnly: true }],
  };
  const t0 = performance.now();
  const r = spawnSync('mpirun', ['-np', '2', '--oversubscribe', '--allow-run-as-root', 'node', join(root, 'dist', 'runtime', 'ring-mpi-worker.js'), JSON.stringify(req)], {
    encoding: 'utf8', env: { ...process.env, OMPI_MCA_btl_vader_single_copy_mechanism: 'none' },
  });
  const seconds = (performance.now() - t0) / 1000;
  if (r.status !== 0) return `mpirun failed: ${(r.stderr || r.stdout).trim().split('\n').slice(-3).join(' ')}`;
  const stats = [0, 1].map((rank) => JSON.parse(readFileSync(join(outDir, `s${seq}-rank${rank}.json`), 'utf8')));
  return { seconds, maxRss: stats.map((s) => s.maxRssBytes), ringSeconds: Math.max(...stats.map((s) => s.forward.seconds)) };
}

/** PyTorch full attention in a subprocess, or why it was not run. */
function torchAttention(seq: number): { seconds: number; maxRss: number } | string {
  // scores and softmax output (S x S x heads float32 each) plus the bool mask
  const needBytes = 2 * seq * seq * HEADS * 4 + seq * seq;
  const availBytes = freemem();
  if (needBytes > 0.7 * availBytes) {
    return `does not fit: needs ~${(needBytes / 1e9).toFixed(1)} GB for scores, ${(availBytes / 1e9).toFixed(1)} GB free`;
  }
  const r = spawnSync('/usr/bin/python3', [join(root, 'bench', 'ring', 'torch_attention.py'), String(seq), String(HEADS), String(DIM), CAUSAL ? '1' : '0', String(cpus().length)], { encoding: 'utf8' });
  if (r.status !== 0) return `failed: ${(r.stderr || '').trim().split('\n').slice(-1)[0] ?? `exit ${r.status}`}`;
  const j = JSON.parse(r.stdout.trim().split('\n').pop()!);
  return { seconds: j.seconds, maxRss: j.maxRssBytes };
}

function main(): void {
  const started = performance.now();
  const load0 = loadavg()[0];
  const lines: string[] = [];
  const out = (s: string) => { console.log(s); lines.push(s); };
  const mpi = haveMpirun() && existsSync(join(root, 'build', 'Release', 'tiercut_ring_mpi.node'));
  const outDir = mkdtempSync(join(tmpdir(), 'tiercut-bench-ring-'));
  ring(1024, 2); // warm up (page faults, thread start)

  out(`Machine: ${cpus().length} cores (${cpus()[0]?.model ?? '?'}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB; batch ${BATCH}, ${HEADS} heads, d ${DIM}, causal, float32, forward pass.`);
  out('');
  out('| S | P=1 blockwise s | P=2 ring s | efficiency (T1/2)/T2 | P=2 wait s (max rank) | ring peak MB/rank (P=2) | MPI P=2 s | MPI maxRSS MB/rank | PyTorch full s | PyTorch maxRSS MB |');
  out('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  const effs: number[] = [];
  for (const seq of SEQS) {
    const one = ring(seq, 1);
    const two = ring(seq, 2);
    const eff = (one.seconds / 2) / two.seconds;
    effs.push(eff);
    const m = mpi ? mpiRing(seq, outDir) : 'mpirun not installed';
    const t = torchAttention(seq);
    out(`| ${seq} | ${one.seconds.toFixed(2)} | ${two.seconds.toFixed(2)} | ${(100 * eff).toFixed(1)} % | ${Math.max(...two.ranks.map((r) => r.waitSeconds)).toFixed(3)} | ` +
      `${MB(Math.max(...two.ranks.map((r) => r.peakBytes)))} | ` +
      (typeof m === 'string' ? `${m} | – | ` : `${m.seconds.toFixed(2)} (ring ${m.ringSeconds.toFixed(2)}) | ${m.maxRss.map(MB).join(', ')} | `) +
      (typeof t === 'string' ? `${t} | – |` : `${t.seconds.toFixed(2)} | ${MB(t.maxRss)} |`));
  }
  out('');
  out(`Per-rank memory at fixed S/P = ${FLAT_ROWS} (threads; every buffer a rank allocates: its q/k/v/out shards, two k/v ring buffers, softmax state, scratch):`);
  out('');
  out('| S | P | peak MB per rank (min – max over ranks) | seconds |');
  out('|---:|---:|---:|---:|');
  for (const seq of SEQS) {
    const P = Math.max(1, seq / FLAT_ROWS);
    const r = ring(seq, P);
    const peaks = r.ranks.map((x) => x.peakBytes);
    out(`| ${seq} | ${P} | ${MB(Math.min(...peaks))} – ${MB(Math.max(...peaks))} | ${r.seconds.toFixed(2)} |`);
  }
  rmSync(outDir, { recursive: true, force: true });
  const load1 = loadavg()[0];
  out('');
  out(`Mean P=2 efficiency ${(100 * effs.reduce((a, b) => a + b, 0) / effs.length).toFixed(1)} % (target >= 90 %). ` +
    `Load average ${load0.toFixed(1)} at start, ${load1.toFixed(1)} at end; bench wall ${((performance.now() - started) / 1000).toFixed(0)} s.`);

  if (SEQS.join() !== FULL_SEQS.join()) {
    console.log('\n(partial run: docs/BENCHMARKS.md not updated)');
    return;
  }
  const doc = join(root, 'docs', 'BENCHMARKS.md');
  const begin = '<!-- ring:begin -->', end = '<!-- ring:end -->';
  const section = [begin, '## Ring attention', '', 'Command: `npm run bench:ring` (bench/ring/bench-ring.ts; PyTorch via `/usr/bin/python3 bench/ring/torch_attention.py`).',
    `Run ${new Date().toISOString().slice(0, 10)}.`, '', ...lines, end].join('\n');
  let text = existsSync(doc) ? readFileSync(doc, 'utf8') : '# Benchmarks\n';
  if (text.includes(begin) && text.includes(end)) text = text.slice(0, text.indexOf(begin)) + section + text.slice(text.indexOf(end) + end.length);
  else text = text.replace(/\n*$/, '\n\n') + section + '\n';
  writeFileSync(doc, text);
  console.log(`\nwrote ${doc}`);
}

main();
