// ring-mpi-worker.ts — one rank of ring attention over MPI. Started by mpirun,
// one process per rank:
//   mpirun -np 4 --oversubscribe --allow-run-as-root node dist/runtime/ring-mpi-worker.js '<json>'
// The JSON argument (WorkerRequest below) lists cases; each rank makes only its
// own zigzag shard of the seeded inputs (hashUniformShard: q = seed, k = seed+1,
// v = seed+2, dout = seed+3), runs the forward and (unless forwardOnly) backward
// pass through tiercut_ring_mpi.node, and writes <outDir>/<case>-rank<r>.bin
// (float32 out | lse | dq | dk | dv, its shard rows) and <case>-rank<r>.json
// (RingRankStats of each pass, process maxRSS). Used by test/ring and bench/ring.
//
// Any error: prints "tiercut ring worker (rank r): <message>" and calls
// MPI_Abort, so mpirun ends every rank and exits non-zero — one error, no hang.
// Fault injection for tests: fault = 'die' (rank faultRank SIGKILLs itself
// after MPI starts) or 'stall' (rank faultRank never joins the ring).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { nativeRingMpiAddon } from './binding.js';
import { hashUniformShard } from './ring.js';

export interface WorkerCase {
  name: string;
  batch: number; heads: number; seq: number; dim: number; causal: boolean; seed: number;
  block?: number;
  forwardOnly?: boolean;
}

export interface WorkerRequest {
  outDir: string;
  timeoutMs: number;
  cases: WorkerCase[];
  fault?: 'die' | 'stall';
  faultRank?: number;
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function main(): void {
  const req = JSON.parse(process.argv[2] ?? '{}') as WorkerRequest;
  const mpi = nativeRingMpiAddon();
  const { rank, size } = mpi.start();
  try {
    if (req.fault === 'die' && rank === req.faultRank) process.kill(process.pid, 'SIGKILL');
    if (req.fault === 'stall' && rank === req.faultRank) sleepSync(10 * req.timeoutMs + 30_000);
    for (const c of req.cases) {
      const bh = c.batch * c.heads;
      const shard = (seed: number, width: number) => hashUniformShard(seed, bh, c.seq, width, size, rank);
      const q = shard(c.seed, c.dim), k = shard(c.seed + 1, c.dim), v = shard(c.seed + 2, c.dim);
      const args = { q, k, v, batch: c.batch, heads: c.heads, seq: c.seq, dim: c.dim, causal: c.causal,
        block: c.block, timeoutMs: req.timeoutMs };
      const fwd = mpi.ringAttention(args);
      const parts: Float32Array[] = [fwd.out, fwd.lse];
      const stats: Record<string, unknown> = { rank, size, forward: fwd.stats.ranks[0] };
      if (!c.forwardOnly) {
        const dout = shard(c.seed + 3, c.dim);
        const bwd = mpi.ringAttentionBackward({ ...args, out: fwd.out, lse: fwd.lse, dout });
        parts.push(bwd.dq, bwd.dk, bwd.dv);
        stats.backward = bwd.stats.ranks[0];
      }
      stats.maxRssBytes = process.resourceUsage().maxRSS * 1024;
      const bytes = Buffer.concat(parts.map((p) => Buffer.from(p.buffer, p.byteOffset, p.byteLength)));
      writeFileSync(join(req.outDir, `${c.name}-rank${rank}.bin`), bytes);
      writeFileSync(join(req.outDir, `${c.name}-rank${rank}.json`), JSON.stringify(stats));
    }
  } catch (e) {
    mpi.abort(`tiercut ring worker (rank ${rank}): ${(e as Error).message}`);
  }
  mpi.stop();
}

main();
