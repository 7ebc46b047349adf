// LLaMA decoder (Touvron et al. 2023; as Hugging Face LlamaForCausalLM): token
// embedding, L pre-norm blocks of grouped-query causal self-attention with
// rotary position embeddings and a SwiGLU MLP, a final RMS norm and an untied
// output head. Loss: mean cross-entropy of the next token.
//
// Parameter names and layouts are Hugging Face's (`model.layers.0.self_attn.q_proj.weight`,
// linear weights stored [out, in] and applied with transB), and RoPE uses the
// rotate-half layout HF uses, so a checkpoint saved by tiercut loads into
// LlamaForCausalLM as is. No biases anywhere (as LLaMA).
// B = batch, T = sequence length, C = channels, NH = heads, KVH = key/value
// heads (grouped-query attention when KVH < NH), hs = C / NH, F = MLP width,
// V = vocabulary
//
// Presets: llama2-* use seq 4096 (their training context), llama3-405b seq 8192
// (its pre-training context before long-context extension); batch 1. RoPE
// theta 10000 (llama2) and 500000 (llama3, without llama3.1's long-context
// frequency scaling). RMSNorm eps 1e-5 (the published HF configs of llama2 and
// llama3); the tiny preset uses 1e-6 (LLaMA 1's value) so both paths are used.
import type { Dsl, Model, PresetBase, Tensor } from 'tiercut/dsl';

interface LlamaConfig extends PresetBase {
  vocab: number;
  layers: number;
  channels: number;
  heads: number;
  kvHeads: number;
  ffn: number;
  ropeTheta: number;
  normEps: number;
}

function block(nn: Dsl, x: Tensor, cfg: LlamaConfig): Tensor {
  const { channels: C, heads: NH, kvHeads: KVH, ffn: F } = cfg;
  const hs = C / NH;
  const w = (name: string, out: number, inp: number) => nn.param(`${name}.weight`, [out, inp], { normal: 0.02 });
  const linear = (x: Tensor, name: string, out: number, inp: number) => nn.matmul(x, w(name, out, inp), { transB: true });
  const h1 = nn.rmsNorm(x, nn.param('input_layernorm.weight', [C], { constant: 1 }), cfg.normEps);
  const attn = nn.scope('self_attn', () => {
    const q = nn.rope(linear(h1, 'q_proj', NH * hs, C), NH, cfg.ropeTheta);
    const k = nn.rope(linear(h1, 'k_proj', KVH * hs, C), KVH, cfg.ropeTheta);
    const v = linear(h1, 'v_proj', KVH * hs, C);
    const y = nn.attention(q, k, v, { heads: NH, kvHeads: KVH, causal: true });
    return linear(y, 'o_proj', C, NH * hs);
  });
  x = nn.add(x, attn);
  const h2 = nn.rmsNorm(x, nn.param('post_attention_layernorm.weight', [C], { constant: 1 }), cfg.normEps);
  const mlp = nn.scope('mlp', () => {
    // SwiGLU: w2(silu(w1 x) * w3 x), with HF's names gate = w1, up = w3, down = w2
    const gate = nn.silu(linear(h2, 'gate_proj', F, C));
    const up = linear(h2, 'up_proj', F, C);
    return linear(nn.mul(gate, up), 'down_proj', C, F);
  });
  return nn.add(x, mlp);
}

const llama: Model<LlamaConfig> = {
  presets: {
    tiny: { vocab: 96, layers: 2, channels: 32, heads: 4, kvHeads: 2, ffn: 64, ropeTheta: 10000, normEps: 1e-6, batch: 4, seq: 16 },
    'llama2-7b': { vocab: 32000, layers: 32, channels: 4096, heads: 32, kvHeads: 32, ffn: 11008, ropeTheta: 10000, normEps: 1e-5, batch: 1, seq: 4096 },
    'llama2-13b': { vocab: 32000, layers: 40, channels: 5120, heads: 40, kvHeads: 40, ffn: 13824, ropeTheta: 10000, normEps: 1e-5, batch: 1, seq: 4096 },
    'llama2-70b': { vocab: 32000, layers: 80, channels: 8192, heads: 64, kvHeads: 8, ffn: 28672, ropeTheta: 10000, normEps: 1e-5, batch: 1, seq: 4096 },
    'llama3-405b': { vocab: 128256, layers: 126, channels: 16384, heads: 128, kvHeads: 8, ffn: 53248, ropeTheta: 500000, normEps: 1e-5, batch: 1, seq: 8192 },
  },
  build(nn, cfg) {
    const { batch: B, seq: T, vocab: V, channels: C } = cfg;
    const tokens = nn.input('tokens', [B, T], 'i32');
    const targets = nn.input('targets', [B, T], 'i32');
    const x = nn.scope('model', () => {
      let h = nn.embedding(tokens, nn.param('embed_tokens.weight', [V, C], { normal: 0.02 }));
      for (let l = 0; l < cfg.layers; l++) h = nn.scope(`layers.${l}`, () => block(nn, h, cfg));
      return nn.rmsNorm(h, nn.param('norm.weight', [C], { constant: 1 }), cfg.normEps);
    });
    const logits = nn.matmul(x, nn.param('lm_head.weight', [V, C], { normal: 0.02 }), { transB: true });
    return nn.crossEntropy(logits, targets);
  },
};

export default llama;
