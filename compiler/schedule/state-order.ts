// State order: Graph + Program -> the order of the persistent nvme buffers in
// their arena, so that a parameter's state lies together in the spill file.
//
// Takes the graph (its adam ops) and the program. Gives, per buffer, a sort
// key for the arena pass (arena.ts), NaN for a buffer it does not order. An
// adam op's state operands — outputs [p, m, v]: the parameter (param16 in
// fp32 training, master32 otherwise), Adam m, Adam v — that rest on nvme for
// the whole run form one group, in operand order (the order the update reads
// them and writes them back), and groups follow the order of their update
// instructions in the step. So the update's reads and write-backs of one
// parameter, which the executor hands to the store together, are
// file-contiguous and go as one I/O (native/tiers/nvme_run.h), and so are
// those of parameters updated one after another.
// Keeps true: the key is a pure function of the graph and the program
// (deterministic). Cost: O(ops + instructions + buffers).

import type { Graph } from '../ir/types.js';
import type { Program } from './program.js';

/** Per buffer id: its place among the persistent nvme buffers (lower first), or NaN. */
export function stateOrder(g: Graph, prog: Program): Float64Array {
  const key = new Float64Array(prog.buffers.length).fill(NaN);
  const homeOf = new Map<number, number>();  // tensor -> its persistent nvme buffer
  for (const b of prog.buffers) if (b.tier === 'nvme' && b.allocAt < 0 && b.freeAt < 0) homeOf.set(b.tensor, b.id);
  if (homeOf.size === 0) return key;
  const runAt = new Map<number, number>();  // op -> its first run instruction
  for (const x of prog.instructions) if (x.kind === 'run' && !runAt.has(x.op)) runAt.set(x.op, x.id);
  for (const op of g.ops) {
    if (op.kind !== 'adam') continue;
    const at = runAt.get(op.id);
    if (at === undefined) continue;
    op.outputs.forEach((t, rank) => {
      const b = homeOf.get(t);
      if (b !== undefined && Number.isNaN(key[b])) key[b] = at * 8 + rank;
    });
  }
  return key;
}
