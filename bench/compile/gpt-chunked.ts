// bench/compile's two-chunk GPT: models/gpt.ts with each block's attention and
// MLP as two parallel halves (heads 0..NH/2 and NH/2..NH; hidden units 0..2C
// and 2C..4C), their outputs summed before the bias. The same function as
// models/gpt.ts (its weights permuted and sliced: fc0.w is fc.w's first 2C
// columns, proj0.w mlp.proj.w's first 2C rows, qkv0.w the q, k and v columns
// of the first half of the heads), with every large parameter group in two,
// so the partitioner can rest half a layer's weights on each tier. It
// measures what splitting groups into chunks (issue 5) would give before the
// compiler does it itself: `node bench/compile/chunks.mjs` (docs/BENCHMARKS.md,
// forty-ninth session). Its presets: tiny, gpt3-6.7b and gpt3-13b.
import type { Dsl, Model, PresetBase, Tensor } from 'tiercut/dsl';

interface GptConfig extends PresetBase {
  vocab: number;
  layers: number;
  heads: number;
  channels: number;
}

/** Chunks per attention and per MLP (4 was slower on every cell tried: docs/BENCHMARKS.md). */
const K = 2;
function block(nn: Dsl, x: Tensor, cfg: GptConfig): Tensor {
  const C = cfg.channels;
  const std = 0.02;
  const projStd = 0.02 / Math.sqrt(2 * cfg.layers);
  const h1 = nn.layerNorm(x, nn.param('ln1.w', [C], { constant: 1 }), nn.param('ln1.b', [C], { constant: 0 }));
  const attn = nn.scope('attn', () => {
    let out: Tensor | undefined;
    for (let k = 0; k < K; k++) {
      const qkv = nn.add(nn.matmul(h1, nn.param(`qkv${k}.w`, [C, (3 * C) / K], { normal: std })), nn.param(`qkv${k}.b`, [(3 * C) / K], { constant: 0 }));
      const y = nn.causalAttention(qkv, cfg.heads / K);
      const o = nn.matmul(y, nn.param(`proj${k}.w`, [C / K, C], { normal: projStd }));
      out = out ? nn.add(out, o) : o;
    }
    return nn.add(out!, nn.param('proj.b', [C], { constant: 0 }));
  });
  x = nn.add(x, attn);
  const h2 = nn.layerNorm(x, nn.param('ln2.w', [C], { constant: 1 }), nn.param('ln2.b', [C], { constant: 0 }));
  const mlp = nn.scope('mlp', () => {
    let out: Tensor | undefined;
    for (let k = 0; k < K; k++) {
      const f = nn.gelu(nn.add(nn.matmul(h2, nn.param(`fc${k}.w`, [C, (4 * C) / K], { normal: std })), nn.param(`fc${k}.b`, [(4 * C) / K], { constant: 0 })));
      const o = nn.matmul(f, nn.param(`proj${k}.w`, [(4 * C) / K, C], { normal: projStd }));
      out = out ? nn.add(out, o) : o;
    }
    return nn.add(out!, nn.param('proj.b', [C], { constant: 0 }));
  });
  return nn.add(x, mlp);
}

const gpt: Model<GptConfig> = {
  presets: {
    // (the ones chunks.mjs and test/models/chunked.test.ts use, as models/gpt.ts has them; a DSL model imports no other)
    tiny: { vocab: 96, layers: 2, heads: 4, channels: 32, batch: 4, seq: 16 },
    'gpt3-6.7b': { vocab: 50257, layers: 32, heads: 32, channels: 4096, batch: 1, seq: 2048 },
    'gpt3-13b': { vocab: 50257, layers: 40, heads: 40, channels: 5120, batch: 1, seq: 2048 },
  },
  build(nn, cfg) {
    const { batch: B, seq: T, vocab: V, channels: C } = cfg;
    const tokens = nn.input('tokens', [B, T], 'i32');
    const targets = nn.input('targets', [B, T], 'i32');
    const wte = nn.param('wte', [V, C], { normal: 0.02 });
    // (one position row per token of --seq: a shorter --seq has fewer parameters than the preset, and
    // a checkpoint's wpe of the model's full context loads only at that seq)
    const wpe = nn.param('wpe', [T, C], { normal: 0.01 });
    let x = nn.add(nn.embedding(tokens, wte), wpe);
    for (let l = 0; l < cfg.layers; l++) x = nn.scope(`h.${l}`, () => block(nn, x, cfg));
    x = nn.layerNorm(x, nn.param('lnf.w', [C], { constant: 1 }), nn.param('lnf.b', [C], { constant: 0 }));
    const logits = nn.matmul(x, wte, { transB: true });
    return nn.crossEntropy(logits, targets);
  },
};

export default gpt;
