// BERT encoder (Devlin et al. 2019; as Hugging Face BertForMaskedLM): token +
// learned position + token-type embeddings and an embedding layer norm, L
// post-norm blocks of bidirectional self-attention and an exact (erf) GELU MLP,
// and the masked-LM head: a dense + GELU + layer-norm transform, then a decoder
// tied to the token embedding, with its own output bias.
//
// Training loss: mean cross-entropy over *all* positions of `targets` (the
// runtime has no ignore-index, so a masked-LM data set gives every position a
// target: the original token where unmasked). No padding mask (every sequence
// is full length), no pooler and no next-sentence head (they do not reach this
// loss). Parameter names and layouts are Hugging Face's (linear weights [out, in],
// applied with transB). Layer-norm eps 1e-12, as BERT.
// B = batch, T = sequence length, C = channels, NH = heads, F = MLP width,
// V = vocabulary, TT = token types (2)
import type { Dsl, Model, PresetBase, Tensor } from 'tiercut/dsl';

interface BertConfig extends PresetBase {
  vocab: number;
  layers: number;
  channels: number;
  heads: number;
  ffn: number;
}

const EPS = 1e-12;
const TOKEN_TYPES = 2;

function linear(nn: Dsl, x: Tensor, name: string, out: number, inp: number): Tensor {
  return nn.scope(name, () =>
    nn.add(nn.matmul(x, nn.param('weight', [out, inp], { normal: 0.02 }), { transB: true }), nn.param('bias', [out], { constant: 0 })));
}

function layerNorm(nn: Dsl, x: Tensor, name: string, C: number): Tensor {
  return nn.scope(name, () => nn.layerNorm(x, nn.param('weight', [C], { constant: 1 }), nn.param('bias', [C], { constant: 0 }), EPS));
}

function block(nn: Dsl, x: Tensor, cfg: BertConfig): Tensor {
  const { channels: C, heads: NH, ffn: F } = cfg;
  const attn = nn.scope('attention', () => {
    const y = nn.scope('self', () => {
      const q = linear(nn, x, 'query', C, C);
      const k = linear(nn, x, 'key', C, C);
      const v = linear(nn, x, 'value', C, C);
      return nn.attention(q, k, v, { heads: NH, causal: false });
    });
    return nn.scope('output', () => layerNorm(nn, nn.add(x, linear(nn, y, 'dense', C, C)), 'LayerNorm', C));
  });
  const h = nn.gelu(nn.scope('intermediate', () => linear(nn, attn, 'dense', F, C)), { erf: true });
  return nn.scope('output', () => layerNorm(nn, nn.add(attn, linear(nn, h, 'dense', C, F)), 'LayerNorm', C));
}

const bert: Model<BertConfig> = {
  presets: {
    tiny: { vocab: 96, layers: 2, channels: 32, heads: 4, ffn: 128, batch: 4, seq: 16 },
    'bert-base': { vocab: 30522, layers: 12, channels: 768, heads: 12, ffn: 3072, batch: 8, seq: 512 },
    'bert-large': { vocab: 30522, layers: 24, channels: 1024, heads: 16, ffn: 4096, batch: 1, seq: 512 },
  },
  build(nn, cfg) {
    const { batch: B, seq: T, vocab: V, channels: C } = cfg;
    const tokens = nn.input('tokens', [B, T], 'i32');
    const tokenTypes = nn.input('token_types', [B, T], 'i32');
    const targets = nn.input('targets', [B, T], 'i32');
    let wordEmbeddings!: Tensor;
    const x = nn.scope('bert', () => {
      let h = nn.scope('embeddings', () => {
        wordEmbeddings = nn.param('word_embeddings.weight', [V, C], { normal: 0.02 });
        // (one row per token of --seq, as GPT's wpe)
        const pos = nn.param('position_embeddings.weight', [T, C], { normal: 0.02 });
        const types = nn.param('token_type_embeddings.weight', [TOKEN_TYPES, C], { normal: 0.02 });
        const e = nn.add(nn.add(nn.embedding(tokens, wordEmbeddings), pos), nn.embedding(tokenTypes, types));
        return layerNorm(nn, e, 'LayerNorm', C);
      });
      for (let l = 0; l < cfg.layers; l++) h = nn.scope(`encoder.layer.${l}`, () => block(nn, h, cfg));
      return h;
    });
    const logits = nn.scope('cls.predictions', () => {
      const t = nn.scope('transform', () => layerNorm(nn, nn.gelu(linear(nn, x, 'dense', C, C), { erf: true }), 'LayerNorm', C));
      return nn.add(nn.matmul(t, wordEmbeddings, { transB: true }), nn.param('bias', [V], { constant: 0 }));
    });
    return nn.crossEntropy(logits, targets);
  },
};

export default bert;
