// A recomputed op with several recomputed outputs (an attention's output and
// its log-sum-exp, a norm's output and statistics) runs once more for all of
// them when they are read close together, not once per output; the outputs
// taken from that one run are the right ones (training matches the plan that
// keeps every activation, bit for bit).
import { describe, it, expect } from 'vitest';
import { compile, planFor, trainingGraph } from '../../src/compile.js';
import { loadProfile } from '../../compiler/cost/profiles.js';
import { paramGroups } from '../../compiler/partition/lp.js';
import { placementFrom } from '../../compiler/partition/lp-round.js';
import { ADAM_DEFAULTS } from '../../compiler/lower/optimizer.js';
import type { Plan } from '../../compiler/plan/types.js';
import { trainLosses } from '../helpers.js';

const losses = (plan: Plan, steps: number) => trainLosses(plan, steps, 5);

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
    const kept = await compile({ model: 'models/gpt.ts', preset: 'tiny' });
    expect(kept.placement.method).toBe('all-gpu');
    const [a, b] = [await losses(kept, 4), await losses(plan, 4)];
    console.log(`kept       ${a.join(' ')}\nrecomputed ${b.join(' ')}`);
    expect(b).toEqual(a);
  });
});
