// Ring attention over MPI: 4 processes under mpirun give the same results as
// the threads backend, and a rank that dies or stops answering ends the whole
// job with one clear error (naming the peer) instead of a hang.
// Needs mpirun (Open MPI; .ci/run installs openmpi-bin) and the built worker
// (dist/runtime/ring-mpi-worker.js, from `npm run build`). Skipped, saying why,
// only when mpirun is absent.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ringAttention, ringAttentionBackward } from '../../src/index.js';
import { hashUniform, rankChunks, scatterShard, shardRows } from '../../runtime/ring.js';
import type { WorkerCase, WorkerRequest } from '../../runtime/ring-mpi-worker.js';

const root = new URL('../../', import.meta.url).pathname;
const worker = join(root, 'dist', 'runtime', 'ring-mpi-worker.js');
const mpiAddon = join(root, 'build', 'Release', 'tiercut_ring_mpi.node');
const haveMpirun = spawnSync('sh', ['-c', 'command -v mpirun'], { encoding: 'utf8' }).status === 0;
if (!haveMpirun) console.log('ring MPI tests skipped: mpirun is not on PATH (apt-get install openmpi-bin libopenmpi-dev)');

const P = 4;
const outDir = mkdtempSync(join(tmpdir(), 'tiercut-ring-mpi-'));
afterAll(() => rmSync(outDir, { recursive: true, force: true }));

function mpirun(req: WorkerRequest, timeoutMs: number) {
  const t0 = Date.now();
  const r = spawnSync('mpirun', ['-np', String(P), '--oversubscribe', '--allow-run-as-root', 'node', worker, JSON.stringify(req)], {
    encoding: 'utf8', timeout: timeoutMs,
    // shared-memory transport without ptrace-based single copy (not allowed in many containers)
    env: { ...process.env, OMPI_MCA_btl_vader_single_copy_mechanism: 'none', OMPI_MCA_rmaps_base_oversubscribe: '1' },
  });
  return { ...r, seconds: (Date.now() - t0) / 1000, output: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}

describe.skipIf(!haveMpirun)('ring attention over MPI (4 processes)', () => {
  it('the worker and the MPI addon are built', () => {
    expect(existsSync(worker), `${worker} is missing: run npm run build`).toBe(true);
    expect(existsSync(mpiAddon), `${mpiAddon} is missing: run npx node-gyp rebuild`).toBe(true);
  });

  it('gives the same out, lse, dq, dk, dv as the threads backend, causal and not', () => {
    const cases: WorkerCase[] = [
      { name: 'causal', batch: 1, heads: 2, seq: 203, dim: 16, causal: true, seed: 101, block: 16 },
      { name: 'full', batch: 2, heads: 1, seq: 99, dim: 8, causal: false, seed: 202 },
    ];
    const r = mpirun({ outDir, timeoutMs: 30_000, cases }, 120_000);
    expect(r.status, r.output).toBe(0);
    for (const c of cases) {
      const bh = c.batch * c.heads, n = bh * c.seq * c.dim;
      const q = hashUniform(c.seed, n), k = hashUniform(c.seed + 1, n), v = hashUniform(c.seed + 2, n), dout = hashUniform(c.seed + 3, n);
      const shape = { batch: c.batch, heads: c.heads, seq: c.seq, dim: c.dim, causal: c.causal, ranks: P, block: c.block };
      const fwd = ringAttention({ q, k, v, ...shape });
      const bwd = ringAttentionBackward({ q, k, v, out: fwd.out, lse: fwd.lse, dout, ...shape });
      const got = { out: new Float32Array(n), lse: new Float32Array(bh * c.seq), dq: new Float32Array(n), dk: new Float32Array(n), dv: new Float32Array(n) };
      for (let rank = 0; rank < P; rank++) {
        const buf = readFileSync(join(outDir, `${c.name}-rank${rank}.bin`));
        const all = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
        const rows = shardRows(c.seq, P, rank);
        const sizes = [bh * rows * c.dim, bh * rows, bh * rows * c.dim, bh * rows * c.dim, bh * rows * c.dim];
        expect(all.length).toBe(sizes.reduce((a, b) => a + b, 0));
        let o = 0;
        (['out', 'lse', 'dq', 'dk', 'dv'] as const).forEach((key, i) => {
          scatterShard(all.subarray(o, o + sizes[i]), got[key], bh, c.seq, key === 'lse' ? 1 : c.dim, P, rank);
          o += sizes[i];
        });
        expect(rankChunks(c.seq, P, rank)[0].length).toBeGreaterThan(0);
      }
      const want = { out: fwd.out, lse: fwd.lse, dq: bwd.dq, dk: bwd.dk, dv: bwd.dv };
      for (const key of ['out', 'lse', 'dq', 'dk', 'dv'] as const) {
        let maxDiff = 0;
        for (let i = 0; i < want[key].length; i++) maxDiff = Math.max(maxDiff, Math.abs(got[key][i] - want[key][i]));
        console.log(`${c.name} ${key}: MPI vs threads max |diff| = ${maxDiff.toExponential(3)} over ${want[key].length} values`);
        expect(maxDiff, `${c.name} ${key}`).toBeLessThanOrEqual(1e-6);
      }
    }
  });

  const small: WorkerCase[] = [{ name: 'fault', batch: 1, heads: 1, seq: 64, dim: 8, causal: true, seed: 7 }];

  it('a rank that dies ends the job with one error, no hang', () => {
    const r = mpirun({ outDir, timeoutMs: 2000, cases: small, fault: 'die', faultRank: 2 }, 60_000);
    console.log(`die: exit ${r.status} signal ${r.signal} after ${r.seconds.toFixed(1)} s\n${r.output.trim().split('\n').slice(0, 12).join('\n')}`);
    expect(r.error, 'mpirun did not finish within 60 s').toBeUndefined();
    expect(r.status).not.toBe(0);
    // mpirun names the process that died; if a neighbour's timeout fires first, it names rank 2
    expect(r.output).toMatch(/rank 2|exited on signal 9|killed/i);
  });

  it('a rank that stops answering: the neighbour times out naming it, and the job ends', () => {
    const r = mpirun({ outDir, timeoutMs: 1500, cases: small, fault: 'stall', faultRank: 2 }, 60_000);
    console.log(`stall: exit ${r.status} after ${r.seconds.toFixed(1)} s\n${r.output.trim().split('\n').slice(0, 12).join('\n')}`);
    expect(r.error, 'mpirun did not finish within 60 s').toBeUndefined();
    expect(r.status).not.toBe(0);
    expect(r.output).toMatch(/rank 3: timed out after 1500 ms waiting to receive K\/V block of rank 2 \(step 1\) from rank 2/);
  });
});
