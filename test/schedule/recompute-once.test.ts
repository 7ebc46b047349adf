// A recomputed op with several recomputed outputs (an attention's output and
// its log-sum-exp, a norm's output and statistics) runs once more for all of
// them when they are read close together, not once per output; the outputs
// taken from that one run are the right ones (training matches the plan that
// keeps every activation, bit for bit). With Placement.rerunHeld, a rerun's
// output is kept for its next reader close behind: an attention recomputed
// for LLaMA's backward pass runs there once, not once per reader. A weight
// copied to the GPU for a recompute in the backward pass stays there for its
// own gradient's op close behind, not copied up once more.
import { describe, it, expect } from 'vitest';
import { compile, planFor, trainingGraph } from '../../src/compile.js';
import { loadProfile } from '../../compiler/cost/profiles.js';
import { paramGroups } from '../../compiler/partition/lp.js';
import { placementFrom } from '../../compiler/partition/lp-round.js';
import { ADAM_DEFAULTS } from '../../compiler/lower/optimizer.js';
import type { Plan } from '../../compiler/plan/types.js';
import { trainLosses } from '../helpers.js';

const losses = (plan: Plan, steps: number) => trainLosses(plan, steps, 5);

/** Trains `plan` and the all-GPU plan of the same model for 4 steps: the same losses, bit for bit. */
async function trainsAsAllGpu(opts: { model: string; preset: string }, plan: Plan, label: string): Promise<void> {
  const kept = await compile(opts);
  expect(kept.placement.method).toBe('all-gpu');
  const [a, b] = [await losses(kept, 4), await losses(plan, 4)];
  console.log(`kept ${a.join(' ')}\n${label} ${b.join(' ')}`);
  expect(b).toEqual(a);
}

describe('recompute', () => {
  it('runs an op once more for all of its recomputed outputs, and trains as the plan that keeps them', async () => {
    const hw = loadProfile('v100-32g', {});
    const { graph: g } = await trainingGraph({ model: 'models/gpt.ts', preset: 'tiny' });
    const groups = paramGroups(g);
    // every output of each attention and layer norm recomputed (their inputs are kept)
    const multi = g.ops.filter((o) => (o.kind === 'causalAttention' || o.kind === 'layerNorm') && o.phase !== 'update');
    expect(multi.length).toBeGreaterThan(0);
    const recompute = new Set(multi.flatMap((o) => o.outputs));
    const p = placementFrom(g, groups, groups.map(() => 'gpu'), groups.map(() => 'gpu'), new Set(), 0, recompute);
    const plan = planFor(g, hw, p, { source: 'models/gpt.ts', preset: 'tiny', config: {} }, ADAM_DEFAULTS);
    const runs = new Map<number, number>();
    for (const x of plan.instructions) if (x.kind === 'run') runs.set(x.op, (runs.get(x.op) ?? 0) + 1);
    // (an op whose outputs are read again soon after it ran keeps them: no rerun)
    for (const o of multi) expect(runs.get(o.id), `${o.kind} ${o.id} (${o.outputs.length} outputs)`).toBeLessThanOrEqual(2);
    expect(multi.filter((o) => runs.get(o.id) === 2).length).toBeGreaterThan(multi.length / 2);
    await trainsAsAllGpu({ model: 'models/gpt.ts', preset: 'tiny' }, plan, 'recomputed');
  });

  it('with rerunHeld, a recomputed attention runs once in the backward pass for both its readers, and trains as the plan that keeps it', async () => {
    const hw = loadProfile('v100-32g', {});
    const opts = { model: 'models/llama.ts', preset: 'tiny' };
    const { graph: g } = await trainingGraph(opts);
    const groups = paramGroups(g);
    const attention = g.ops.filter((o) => o.kind === 'attention' && o.phase === 'forward');
    expect(attention.length).toBe(2);
    const recompute = new Set(attention.flatMap((o) => o.outputs));
    const p = placementFrom(g, groups, groups.map(() => 'gpu'), groups.map(() => 'gpu'), new Set(), 0, recompute);
    const model = { source: 'models/llama.ts', preset: 'tiny', config: {} };
    const runsOf = (plan: Plan) => attention.map((o) => plan.instructions.filter((x) => x.kind === 'run' && x.op === o.id).length);
    // each attention's output is read in the backward pass by its output
    // projection's weight gradient and by its own backward, a few ops apart:
    // without the field each runs it again (forward + 2), with it the first does
    const each = planFor(g, hw, p, model, ADAM_DEFAULTS), held = planFor(g, hw, { ...p, rerunHeld: 4 }, model, ADAM_DEFAULTS);
    expect(runsOf(each)).toEqual([3, 3]);
    expect(runsOf(held)).toEqual([2, 2]);
    expect(held.placement.rerunHeld).toBe(4);
    await trainsAsAllGpu(opts, held, 'held rerun');
  });

  it('copies a weight resting on the CPU up once in the backward pass for a recompute that reads it and its gradient op', async () => {
    const hw = loadProfile('v100-32g', {});
    const opts = { model: 'models/llama.ts', preset: 'tiny' };
    const { graph: g } = await trainingGraph(opts);
    const groups = paramGroups(g);
    // each MLP's gate weight rests on the CPU (state and compute copy), and its
    // forward output is recomputed: the rerun reads the weight in the backward
    // pass, and so does the op making the gradient of the gate's input
    const gate = (i: number) => /mlp\.gate_proj\.weight$/.test(g.tensors[groups[i].p16].name);
    const gates = groups.map((_, i) => i).filter(gate);
    expect(gates.length).toBe(2);
    const tiers = groups.map((_, i): 'gpu' | 'cpu' => (gate(i) ? 'cpu' : 'gpu'));
    const made = g.ops.filter((o) => o.phase === 'forward' && gates.some((i) => o.inputs.includes(groups[i].p16)));
    const p = placementFrom(g, groups, tiers, [...tiers], new Set(), 0, new Set(made.flatMap((o) => o.outputs)));
    const plan = planFor(g, hw, p, { source: 'models/llama.ts', preset: 'tiny', config: {} }, ADAM_DEFAULTS);
    for (const i of gates) {
      const w = groups[i].p16;
      const readers = g.ops.filter((o) => o.phase !== 'update' && o.inputs.includes(w));
      expect(readers.map((o) => o.phase)).toEqual(['forward', 'backward']);
      // one copy up for the forward pass, one for the backward pass's readers
      // (the first layer's: the recompute and the gradient op; three before)
      expect(plan.instructions.filter((x) => x.kind === 'copy' && x.stream === 'h2d' && plan.buffers[x.inputs[0]].tensor === w).length, g.tensors[w].name).toBe(2);
    }
    // the first layer's gate matmul runs again in the backward pass (the last
    // layer's output is still on the GPU from the forward pass, read within
    // REFETCH_GAP ops)
    expect(made.map((o) => plan.instructions.filter((x) => x.kind === 'run' && x.op === o.id).length)).toEqual([2, 1]);
    await trainsAsAllGpu(opts, plan, 'gate on CPU');
  });
});
