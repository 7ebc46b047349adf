// compile leaves the min-cut unscheduled when its compute alone is slower than
// the LP's simulated plan, and decides the cut's fragmentation retries from the
// compact arena alone. Both rest on two facts checked here: the compute floor
// is never above a simulated step (for any placement), and the compact
// arena's peaks are assignOffsets' whenever those overflow a tier.
import { describe, it, expect } from 'vitest';
import { compile, placeLp, placeMinCut, trainingGraph } from '../../src/compile.js';
import { loadProfile, type HardwareProfile } from '../../compiler/cost/profiles.js';
import type { Graph } from '../../compiler/ir/types.js';
import { allGpu } from '../../compiler/partition/mincut.js';
import { startLp } from '../../compiler/partition/lp.js';
import type { Placement } from '../../compiler/partition/placement.js';
import { assignOffsets, compactArenaBytes } from '../../compiler/schedule/arena.js';
import { buildProgram } from '../../compiler/schedule/program.js';
import { stateOrder } from '../../compiler/schedule/state-order.js';
import { computeFloorSeconds, simulate } from '../../compiler/simulate/simulate.js';

const caps = (hw: HardwareProfile) => ({ gpu: hw.gpu.capacityBytes, cpu: hw.cpu.capacityBytes, nvme: hw.nvme.capacityBytes });

async function candidates(g: Graph, hw: HardwareProfile): Promise<[string, Placement][]> {
  const out: [string, Placement][] = [['all-gpu', allGpu(g)]];
  const cut = placeMinCut(g, hw);
  if (cut) out.push(['mincut', cut]);
  // every op on the CPU, every tensor at home there: the CPU stream carries the floor
  out.push(['all-cpu', { ...allGpu(g), opTier: g.ops.map(() => 'cpu'), home: g.tensors.map(() => 'cpu'), method: 'mincut' }]);
  const lp = startLp(g, hw);
  try {
    const sol = await lp.refine();
    if (sol.status === 'optimal') for (const how of ['largest', 'bytes'] as const) { try { out.push([`lp ${how}`, placeLp(g, hw, sol, how)]); } catch { /* its rounding may not fit */ } }
  } finally { lp.close(); }
  return out;
}

const cases = [
  { preset: 'tiny', hw: 'v100-32g', gpuMemBytes: 300_000, cpuMemBytes: 200_000 },
  { preset: 'tiny', hw: 'v100-32g', gpuMemBytes: 400_000, cpuMemBytes: 200_000 },
  { preset: 'gpt2-124m', hw: 'v100-32g', gpuMemBytes: 2e9 },
];

describe('compute floor and compact arena', () => {
  for (const c of cases) {
    it(`${c.preset} on ${c.hw}, gpu ${c.gpuMemBytes}: the floor is under every simulated step; the compact arena says whether the arenas overflow`, async () => {
      const hw = loadProfile(c.hw, c);
      const { graph: g } = await trainingGraph({ model: 'models/gpt.ts', preset: c.preset, precision: 'fp16' });
      for (const [name, p] of await candidates(g, hw)) {
        const prog = buildProgram(g, p);
        const order = stateOrder(g, prog);
        const compact = compactArenaBytes(prog, order);
        const arenas = assignOffsets(prog, caps(hw), order);
        const fits = (a: Record<'gpu' | 'cpu' | 'nvme', number>) => a.gpu <= hw.gpu.capacityBytes && a.cpu <= hw.cpu.capacityBytes && a.nvme <= hw.nvme.capacityBytes;
        // assignOffsets keeps the compact placement when it does not fit, and returns arenas that fit when it does
        if (fits(compact)) expect(fits(arenas.arenaBytes), name).toBe(true);
        else expect(arenas.arenaBytes, name).toEqual(compact);
        const sim = simulate(g, p, arenas.buffers, arenas.instructions, hw);
        const floor = computeFloorSeconds(g, p, hw);
        console.log(`${c.preset} ${name}: floor ${floor.toExponential(4)} s, step ${sim.stepSeconds.toExponential(4)} s, gpu busy ${sim.streamBusySeconds.gpu.toExponential(4)}, cpu busy ${sim.streamBusySeconds.cpu.toExponential(4)}`);
        expect(floor).toBeGreaterThan(0);
        expect(floor, name).toBeLessThanOrEqual(Math.max(sim.streamBusySeconds.gpu, sim.streamBusySeconds.cpu) * (1 + 1e-12));
        expect(floor, name).toBeLessThanOrEqual(sim.stepSeconds * (1 + 1e-12));
      }
    });
  }

  it('gpt2-1.5b, 16 GB: the cut left unscheduled is one the simulator finds slower than the plan compile keeps', async () => {
    const opts = { model: 'models/gpt.ts', preset: 'gpt2-1.5b', hw: 'v100-32g', gpuMemBytes: 16e9, precision: 'fp16' as const, batch: 1, seq: 1024 };
    const hw = loadProfile(opts.hw, opts);
    const { graph: g } = await trainingGraph(opts);
    const cut = placeMinCut(g, hw)!;
    const plan = await compile(opts);
    const floor = computeFloorSeconds(g, cut, hw);
    const prog = buildProgram(g, cut);
    const a = assignOffsets(prog, caps(hw), stateOrder(g, prog));
    const cutStep = simulate(g, cut, a.buffers, a.instructions, hw).stepSeconds;
    console.log(`cut: floor ${floor.toFixed(4)} s, simulated ${cutStep.toFixed(4)} s; compile's ${plan.placement.method} plan ${plan.predicted.stepSeconds.toFixed(4)} s`);
    expect(plan.placement.method).toBe('lp');
    expect(floor).toBeGreaterThan(plan.predicted.stepSeconds);
    expect(cutStep).toBeGreaterThanOrEqual(floor);
  });
});
