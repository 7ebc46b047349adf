// Local search on the kept plan: one group's configuration changed at a time.
//
// Takes the best plan so far (LpCandidates) after the candidate families
// (candidates.ts). Gives, where one wins, a faster one: per round, every move
// of one large group — a CPU update streamed to the GPU (state copied up,
// updated there, copied home), a streamed update back on the CPU, or an
// off-GPU group exchanging its configuration with one of the MOVE_PARTNERS
// nearest GPU-state groups of its size (candidates.ts exchanged) — simulated
// without the arena's waits (a floor no placement of its arenas beats);
// the MOVE_RETIMES moves with the lowest floors under the best are built
// and retimed, and the fastest that fits is kept where it gains
// MOVE_MIN_GAIN; at most MOVE_ROUNDS rounds. The families move groups by
// rules (the last gradients streamed first, the ends of the CPU's chain
// exchanged); these take any one group, which the rules pass over: gpt3-13b
// on an H100 streams h.22.attn.qkv.w too (1.0915 -> 1.0785 s), on an H200
// h.39.attn.qkv.w's state goes to the GPU and h.35.attn.qkv.w's to the CPU
// (0.2987 -> 0.2945 s) (docs/BENCHMARKS.md, forty-seventh session).
// Keeps true: acc.best only gets faster and every plan kept fits its
// capacities; deterministic (moves in group order, ties by that order).
// Cost: one program build and simulation per move and round (~30 ms each
// on gpt3-13b: 250 moves), MOVE_RETIMES builds and retimings a round; not
// tried where state rests on NVMe (there the floor needs the arenas' offsets,
// so every move would be built whole) or past MOVE_MAX_INSTRUCTIONS.

import type { HardwareProfile } from '../cost/profiles.js';
import type { Graph } from '../ir/types.js';
import { paramGroups, type ParamGroup } from './lp.js';
import type { Placement } from './placement.js';
import { buildProgram } from '../schedule/program.js';
import { simulate } from '../simulate/simulate.js';
import { mark } from '../../src/timing.js';
import { build, fitsTiers, retimed, simulated, type Built, type LpCandidates } from './built.js';
import { exchanged } from './candidates.js';

/** Rounds of moves (each keeps at most one). */
const MOVE_ROUNDS = 2;
/** Per round, the moves with the lowest floors that are built and retimed. */
const MOVE_RETIMES = 12;
/** GPU-state partners per off-GPU group (the nearest in program order). */
const MOVE_PARTNERS = 2;
/** A move is kept only where it shortens the step by this share. */
const MOVE_MIN_GAIN = 1e-3;
/** Groups smaller than the largest by more than this factor are not moved (biases, norms). */
const MOVE_SMALLEST = 64;
/** Not tried on longer programs (gpt3-175b's ~19 000 instructions: its NVMe state rules it out anyway). */
const MOVE_MAX_INSTRUCTIONS = 12_000;

type Move = { placement: Placement; floor: number };

export function lpTryMoves(g: Graph, hw: HardwareProfile, acc: LpCandidates): void {
  if (!acc.best || acc.best.prog.instructions.length > MOVE_MAX_INSTRUCTIONS || acc.best.placement.home.includes('nvme')) return;
  const groups = paramGroups(g);
  const largest = Math.max(0, ...groups.map((q) => q.stateBytes));
  const large = groups.filter((q) => q.stateBytes * MOVE_SMALLEST >= largest);
  for (let round = 0; round < MOVE_ROUNDS; round++) {
    const best: Built = acc.best;
    const beat = simulated(g, hw, best).stepSeconds * (1 - MOVE_MIN_GAIN);
    const moves: Move[] = [];
    for (const p of movesOf(g, best.placement, large)) {
      const prog = buildProgram(g, p);
      const floor = simulate(g, p, prog.buffers.map((b) => ({ ...b, offsetBytes: 0 })), prog.instructions, hw).stepSeconds;
      if (floor < beat) moves.push({ placement: p, floor });
    }
    // (a stable sort: ties in the moves' order)
    moves.sort((a, b) => a.floor - b.floor);
    let won: Built | undefined;
    let retimes = 0;
    for (const m of moves) {
      if (retimes >= MOVE_RETIMES) break;
      const b = build(g, hw, m.placement);
      retimes++;
      const c = retimed(g, hw, b, beat);
      if (!fitsTiers(c.arenas.arenaBytes, hw) || simulated(g, hw, c).stepSeconds >= beat) continue;
      if (!won || simulated(g, hw, c).stepSeconds < simulated(g, hw, won).stepSeconds) won = c;
    }
    mark('LP single-group moves');
    if (!won) return;
    acc.best = won;
  }
}

/** Every one-group change of p (group order): stream, unstream, or exchange with a near GPU-state group of its size. */
function movesOf(g: Graph, p: Placement, large: readonly ParamGroup[]): Placement[] {
  const kind = (q: ParamGroup) => (q.state.every((t) => p.home[t] === 'gpu') ? 'gpu' : q.state.every((t) => p.home[t] === 'cpu') ? (p.opTier[q.adam] === 'gpu' ? 'streamed' : 'cpu') : 'other');
  const out: Placement[] = [];
  const withUpdate = (q: ParamGroup, on: 'gpu' | 'cpu'): Placement => {
    const home = [...p.home], opTier = [...p.opTier];
    opTier[q.adam] = on; home[q.grad] = on;
    return { ...p, home, opTier };
  };
  for (const q of large) {
    const k = kind(q);
    if (k === 'cpu') out.push(withUpdate(q, 'gpu'));
    if (k === 'streamed') out.push(withUpdate(q, 'cpu'));
    if (k === 'gpu' || k === 'other') continue;
    const partners = large.filter((r) => r !== q && kind(r) === 'gpu' && r.stateBytes === q.stateBytes && r.state.length === q.state.length && (r.cast >= 0) === (q.cast >= 0) && r.remakeable === q.remakeable)
      .sort((a, b) => Math.abs(a.adam - q.adam) - Math.abs(b.adam - q.adam) || a.adam - b.adam).slice(0, MOVE_PARTNERS);
    for (const r of partners) out.push(exchanged(p, q, r));
  }
  return out;
}
