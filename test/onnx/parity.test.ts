// ONNX models exported by PyTorch (scripts/fixtures/gen_onnx.py, training-mode
// export with the loss inside the graph) import, compile and train like PyTorch:
//  - forward parity: tiercut's loss at the exported weights equals
//    onnxruntime-node's output within 1e-5;
//  - training parity: the loss over 5 torch.optim.Adam steps (lr 1e-3) from the
//    same weights and batch is PyTorch's within 1e-4 (absolute);
//  - models with BatchNorm (training mode): after those steps, the running
//    statistics equal PyTorch's buffers within 1e-5.
import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import ort from 'onnxruntime-node';
import { compile } from '../../src/compile.js';
import { TrainingSession } from '../../runtime/session.js';
import { fileData } from '../../runtime/data.js';
import { readSafetensors, toFloat64 } from '../../runtime/safetensors.js';

const FIX = 'fixtures/onnx';
const MODELS = ['gpt-tiny', 'bert-tiny', 'resnet-tiny'];

interface Expected { inputs: string[]; outputs: { loss: number[] }; losses: number[]; adam: { lr: number; betas: [number, number]; eps: number }; state?: Record<string, number[]> }

async function ortLoss(name: string): Promise<number> {
  const session = await ort.InferenceSession.create(`${FIX}/${name}.onnx`);
  const feeds: Record<string, ort.Tensor> = {};
  for (const [input, t] of readSafetensors(`${FIX}/${name}.data.safetensors`)) {
    const v = toFloat64(t);
    feeds[input] = t.dtype === 'I64' ? new ort.Tensor('int64', BigInt64Array.from(v, (x) => BigInt(x)), [...t.shape]) : new ort.Tensor('float32', Float32Array.from(v), [...t.shape]);
  }
  const out = await session.run(feeds);
  return Number((out.loss.data as Float32Array)[0]);
}

describe('ONNX import: parity with onnxruntime (forward) and PyTorch (training)', () => {
  for (const name of MODELS) {
    it(name, async () => {
      const expected = JSON.parse(readFileSync(`${FIX}/${name}.expected.json`, 'utf8')) as Expected;
      const plan = await compile({ model: `${FIX}/${name}.onnx`, optimizer: { lr: expected.adam.lr, beta1: expected.adam.betas[0], beta2: expected.adam.betas[1], eps: expected.adam.eps } });
      const session = new TrainingSession(plan, {});
      const data = fileData(plan.graph, `${FIX}/${name}.data.safetensors`);
      const losses: number[] = [];
      let state: Map<string, Float32Array>;
      try {
        for (let k = 1; k <= expected.losses.length; k++) losses.push((await session.step(k, data(k))).loss);
        state = session.parameters();
      } finally {
        session.close();
      }
      const ref = await ortLoss(name);
      const fwd = Math.abs(losses[0] - ref);
      console.log(`${name}: forward |tiercut - onnxruntime| = ${fwd.toExponential(3)}; losses ${losses.map((l) => l.toFixed(6)).join(' ')}`);
      expect(fwd).toBeLessThanOrEqual(1e-5);
      expect(Math.abs(ref - expected.outputs.loss[0])).toBeLessThanOrEqual(1e-5); // onnxruntime agrees with torch too
      const worst = Math.max(...losses.map((l, i) => Math.abs(l - expected.losses[i])));
      console.log(`${name}: training max |tiercut - torch| over ${losses.length} Adam steps = ${worst.toExponential(3)}`);
      expect(worst).toBeLessThanOrEqual(1e-4);
      for (const [buffer, want] of Object.entries(expected.state ?? {})) {
        const got = state.get(buffer);
        expect(got, `${name}: running statistic ${buffer}`).toBeDefined();
        const diff = Math.max(...want.map((w, i) => Math.abs(got![i] - w)));
        console.log(`${name}: ${buffer} after ${losses.length} steps: max |tiercut - torch| = ${diff.toExponential(3)}`);
        expect(diff).toBeLessThanOrEqual(1e-5);
      }
    });
  }
});
