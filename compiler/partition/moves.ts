// Local search on the kept plan: one group's configuration changed at a time.
//
// Takes the best plan so far (LpCandidates) after the candidate families
// (candidates.ts). Gives, where one wins, a faster one: every move of one
// large group — a CPU update streamed to the GPU (state copied up, updated
// there, copied home), a streamed update back on the CPU, or an off-GPU
// group exchanging its configuration with one of the MOVE_PARTNERS nearest
// GPU-state groups of its size (candidates.ts exchanged) — simulated without
// the arena's waits (a floor no placement of its arenas beats); the
// MOVE_RETIMES moves with the lowest floors under the best, and
// MOVE_RETIMES_IN_TURN more one floor at a time, are built and retimed, and
// the fastest that fits is kept where it gains MOVE_MIN_GAIN.
// The families move groups by rules (the last gradients streamed first, the
// ends of the CPU's chain exchanged); these take any one group, which the
// rules pass over: gpt3-13b on an H100 streams h.22.attn.qkv.w too (1.0915
// -> 1.0785 s), on an H200 h.39.attn.qkv.w's state goes to the GPU and
// h.35.attn.qkv.w's to the CPU (0.2987 -> 0.2945 s). A second round of moves
// from the one kept found nothing more in either (docs/BENCHMARKS.md,
// forty-seventh session).
// Keeps true: acc.best only gets faster and every plan kept fits its
// capacities; deterministic (moves in group order, ties by that order).
// Cost: one program build and simulation per move (~30 ms on gpt3-13b, ~250
// moves) and up to MOVE_RETIMES + MOVE_RETIMES_IN_TURN builds and retimings;
// not tried where state rests on NVMe (there the floor needs the arenas'
// offsets, so every move would be built whole) or past MOVE_MAX_INSTRUCTIONS.

import type { HardwareProfile } from '../cost/profiles.js';
import type { Graph } from '../ir/types.js';
import { paramGroups, streamedUpdate, type ParamGroup } from './lp.js';
import type { Placement } from './placement.js';
import { buildProgram } from '../schedule/program.js';
import { simulateFloor } from '../simulate/simulate.js';
import { mark } from '../../src/timing.js';
import { build, fitsTiers, retimed, simulated, type LpCandidates } from './built.js';
import { exchangeable, exchanged } from './candidates.js';

/** The moves with the lowest floors that are built and retimed. */
const MOVE_RETIMES = 12;
/** And the moves after them built and retimed one floor at a time in turn (inTurns). */
const MOVE_RETIMES_IN_TURN = 12;
/** GPU-state partners per off-GPU group (the nearest in program order). */
const MOVE_PARTNERS = 2;
/** A move is kept only where it shortens the step by this share. */
const MOVE_MIN_GAIN = 1e-3;
/** Floors within this share of each other tie (inTurns). */
const FLOOR_TIE = 1e-6;
/** Groups smaller than the largest by more than this factor are not moved (biases, norms). */
const MOVE_SMALLEST = 64;
/** Not tried on longer programs (gpt3-175b's ~19 000 instructions: its NVMe state rules it out anyway). */
const MOVE_MAX_INSTRUCTIONS = 12_000;

type Move = { placement: Placement; floor: number };

export function lpTryMoves(g: Graph, hw: HardwareProfile, acc: LpCandidates): void {
  const best = acc.best;
  if (!best || best.prog.instructions.length > MOVE_MAX_INSTRUCTIONS || best.placement.home.includes('nvme')) return;
  const groups = paramGroups(g);
  const largest = Math.max(0, ...groups.map((q) => q.stateBytes));
  const large = groups.filter((q) => q.stateBytes * MOVE_SMALLEST >= largest);
  const beat = simulated(g, hw, best).stepSeconds * (1 - MOVE_MIN_GAIN);
  const moves: Move[] = [];
  for (const p of movesOf(best.placement, large)) {
    const floor = simulateFloor(g, p, buildProgram(g, p), hw).stepSeconds;
    if (floor < beat) moves.push({ placement: p, floor });
  }
  // (a stable sort: ties in the moves' order)
  moves.sort((a, b) => a.floor - b.floor);
  // the lowest floors, then as many more in turn over the floors left: the
  // lowest can all be one kind of change (gpt3-6.7b/v100 in parts: 59 MLP
  // parts' streams at 2.2740 s, the twelve retimed 2.2879-2.3669 s, none
  // kept; then the qkv parts' at 2.2777 s, one retimed 2.2827 s, kept), and
  // within one floor the retimes differ (gpt3-13b/h200: 40 moves at 0.2945
  // s, the first eight retimed 0.2945-0.3063 s, the sixth the one kept)
  const order = [...moves.slice(0, MOVE_RETIMES), ...inTurns(moves.slice(MOVE_RETIMES)).slice(0, MOVE_RETIMES_IN_TURN)];
  for (const m of order) {
    const c = retimed(g, hw, build(g, hw, m.placement), beat);
    if (fitsTiers(c.arenas.arenaBytes, hw) && simulated(g, hw, c).stepSeconds < Math.min(beat, simulated(g, hw, acc.best!).stepSeconds)) acc.best = c;
  }
  mark('LP single-group moves');
}

/**
 * The moves (sorted by floor) one per floor in turn, lowest first, round
 * after round; floors within FLOOR_TIE of each other are one. Moves whose
 * floors tie are most often one change to alike groups (any of many layers'
 * MLP weights streamed): the streams' totals are the same, so are the
 * floors, and only the arenas' waits tell them apart.
 */
function inTurns(moves: readonly Move[]): Move[] {
  const ties: Move[][] = [];
  for (const m of moves) {
    const last = ties[ties.length - 1];
    if (last && m.floor - last[0].floor <= FLOOR_TIE * last[0].floor) last.push(m); else ties.push([m]);
  }
  const out: Move[] = [];
  for (let k = 0; out.length < moves.length; k++) for (const t of ties) if (k < t.length) out.push(t[k]);
  return out;
}

/** Every one-group change of p (group order): stream, unstream, or exchange with a near GPU-state group of its size. */
function movesOf(p: Placement, large: readonly ParamGroup[]): Placement[] {
  const kind = (q: ParamGroup) => (q.state.every((t) => p.home[t] === 'gpu') ? 'gpu' : streamedUpdate(p, q) ? 'streamed' : q.state.every((t) => p.home[t] === 'cpu') ? 'cpu' : 'other');
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
    const partners = large.filter((r) => kind(r) === 'gpu' && exchangeable(q, r))
      .sort((a, b) => Math.abs(a.adam - q.adam) - Math.abs(b.adam - q.adam) || a.adam - b.adam).slice(0, MOVE_PARTNERS);
    for (const r of partners) out.push(exchanged(p, q, r));
  }
  return out;
}
