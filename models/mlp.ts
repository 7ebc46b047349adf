// A multi-layer perceptron classifier: D inputs, hidden layers of H with GELU,
// K classes, mean cross-entropy. The smallest model that exercises matmul,
// bias add, GELU and the loss.
// B = batch, D = features, H = hidden width, K = classes
import type { Model, PresetBase } from 'tiercut/dsl';

interface MlpConfig extends PresetBase {
  features: number;
  hidden: number;
  layers: number;
  classes: number;
}

const mlp: Model<MlpConfig> = {
  presets: {
    tiny: { features: 16, hidden: 32, layers: 2, classes: 8, batch: 8, seq: 1 },
    wide: { features: 1024, hidden: 4096, layers: 4, classes: 1000, batch: 64, seq: 1 },
  },
  build(nn, cfg) {
    const x0 = nn.input('x', [cfg.batch, cfg.features], 'f32');
    const labels = nn.input('labels', [cfg.batch], 'i32');
    let x = x0;
    let width = cfg.features;
    for (let l = 0; l < cfg.layers; l++) {
      x = nn.scope(`fc${l}`, () => {
        const w = nn.param('w', [width, cfg.hidden], { normal: 1 / Math.sqrt(width) });
        return nn.gelu(nn.add(nn.matmul(x, w), nn.param('b', [cfg.hidden], { constant: 0 })));
      });
      width = cfg.hidden;
    }
    const logits = nn.scope('head', () =>
      nn.add(nn.matmul(x, nn.param('w', [width, cfg.classes], { normal: 1 / Math.sqrt(width) })), nn.param('b', [cfg.classes], { constant: 0 })));
    return nn.crossEntropy(logits, labels);
  },
};

export default mlp;
