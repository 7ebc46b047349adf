// program.cc — parse a NativeProgram from JS into plain structs, and validate it.
//
// Takes: the JS object built by runtime/session.ts (contract in runtime/binding.ts).
// Gives: a Program whose every cross-reference has been checked (see program.h)
//        and whose run instructions carry a ready OpCall (shapes, attributes).
// Cost: O(tensors + buffers + ops + instructions + total operands), plus a sort
//        of the persistent buffers of each tier for the overlap check.
#define TIERCUT_WITH_NAPI 1
#include "program.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace tiercut {

// ---------------------------------------------------------------------------
// names

const char* tier_name(int32_t tier) {
  static const char* names[] = {"gpu", "cpu", "nvme"};
  return (tier >= 0 && tier < kTierCount) ? names[tier] : "?";
}

const char* stream_name(int32_t stream) {
  static const char* names[] = {"gpu", "cpu", "h2d", "d2h", "nvmeRead", "nvmeWrite"};
  return (stream >= 0 && stream < kStreamCount) ? names[stream] : "?";
}

const char* op_kind_name(int32_t kind) {
  static const char* names[] = {
      "matmul", "add", "mul", "gelu", "layernorm", "softmax", "causalAttention", "embedding",
      "crossEntropy", "reshape", "transpose", "matmulGradA", "matmulGradB", "sumToShape",
      "geluBackward", "layernormBackward", "softmaxBackward", "causalAttentionBackward",
      "embeddingBackward", "crossEntropyBackward", "fill", "adam",
      // added for ONNX import
      "sub", "div", "affine", "powScalar", "unary", "unaryBackward", "where", "expand", "unbroadcast",
      "slice", "sliceBackward", "concat", "bmm", "logSoftmax", "logSoftmaxBackward", "cast",
      // added for the model zoo
      "rmsNorm", "rmsNormBackward", "silu", "siluBackward", "rope", "attention", "attentionBackward",
      // added for CNNs
      "conv2d", "conv2dGradInput", "conv2dGradWeight", "batchNorm", "batchNormBackward", "batchNormRunning",
      "maxPool2d", "maxPool2dBackward", "avgPool2d", "avgPool2dBackward",
      // added for sequence parallelism
      "ringAttention", "ringAttentionBackward", "allReduce"};
  static_assert(sizeof(names) / sizeof(names[0]) == OP_KIND_COUNT, "one name per op kind");
  return (kind >= 0 && kind < OP_KIND_COUNT) ? names[kind] : "?";
}

const char* dtype_name(int32_t dtype) {
  static const char* names[] = {"f32", "f16", "bf16", "i32", "i64", "f64"};
  return (dtype >= 0 && dtype <= DT_F64) ? names[dtype] : "?";
}

int64_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case DT_F32: return 4;
    case DT_F16: return 2;
    case DT_BF16: return 2;
    case DT_I32: return 4;
    case DT_I64: return 8;
    case DT_F64: return 8;
    default: return 0;
  }
}

// ---------------------------------------------------------------------------
// operand signature of each op kind (mirrors the table in kernels/dispatch.h)

struct OpSignature {
  int32_t n_in;
  int32_t n_out_min, n_out_max;
  uint32_t int_inputs;  // bit i set: input i is int32 (ids, targets); all others are float
};

static const OpSignature kSignatures[OP_KIND_COUNT] = {
    {2, 1, 1, 0},      // matmul
    {2, 1, 1, 0},      // add
    {2, 1, 1, 0},      // mul
    {1, 1, 1, 0},      // gelu
    {3, 3, 3, 0},      // layernorm: y, mean, rstd
    {1, 1, 1, 0},      // softmax
    {1, 2, 2, 0},      // causalAttention: y, att
    {2, 1, 1, 1u},     // embedding: ids, table
    {2, 1, 1, 2u},     // crossEntropy: logits, targets
    {1, 1, 1, 0},      // reshape
    {1, 1, 1, 0},      // transpose
    {2, 1, 1, 0},      // matmulGradA
    {2, 1, 1, 0},      // matmulGradB
    {1, 1, 1, 0},      // sumToShape
    {2, 1, 1, 0},      // geluBackward
    {5, 3, 3, 0},      // layernormBackward
    {2, 1, 1, 0},      // softmaxBackward
    {3, 1, 1, 0},      // causalAttentionBackward
    {2, 1, 1, 1u},     // embeddingBackward: ids, dy
    {3, 1, 1, 2u},     // crossEntropyBackward: logits, targets, dloss
    {0, 1, 1, 0},      // fill
    {4, 3, 4, 0},      // adam: p, g, m, v -> p, m, v [, p16]
    // added for ONNX import
    {2, 1, 1, 0},      // sub
    {2, 1, 1, 0},      // div
    {1, 1, 1, 0},      // affine
    {1, 1, 1, 0},      // powScalar
    {1, 1, 1, 0},      // unary
    {3, 1, 1, 0},      // unaryBackward: x, y, dy
    {3, 1, 1, 0},      // where: cond, a, b
    {1, 1, 1, 0},      // expand
    {1, 1, 1, 0},      // unbroadcast
    {1, 1, 1, 0},      // slice
    {1, 1, 1, 0},      // sliceBackward
    {-1, 1, 1, 0},     // concat: 1..8 inputs
    {2, 1, 1, 0},      // bmm
    {1, 1, 1, 0},      // logSoftmax
    {2, 1, 1, 0},      // logSoftmaxBackward
    {1, 1, 1, 1u},     // cast: x i32
    // added for the model zoo
    {2, 2, 2, 0},      // rmsNorm: x, w -> y, rstd
    {4, 2, 2, 0},      // rmsNormBackward: x, w, rstd, dy -> dx, dw
    {1, 1, 1, 0},      // silu
    {2, 1, 1, 0},      // siluBackward: x, dy
    {1, 1, 1, 0},      // rope
    {3, 2, 2, 0},      // attention: q, k, v -> y, lse
    {6, 3, 3, 0},      // attentionBackward: q, k, v, y, lse, dy -> dq, dk, dv
    // added for CNNs
    {3, 1, 1, 0},      // conv2d: x, w, b -> y
    {2, 1, 1, 0},      // conv2dGradInput: dy, w -> dx
    {2, 2, 2, 0},      // conv2dGradWeight: x, dy -> dw, db
    {3, 3, 3, 0},      // batchNorm: x, w, b -> y, mean, var
    {5, 3, 3, 0},      // batchNormBackward: x, w, mean, var, dy -> dx, dw, db
    {4, 2, 2, 0},      // batchNormRunning: run_mean, run_var, mean, var -> run_mean, run_var (in place)
    {1, 1, 1, 0},      // maxPool2d
    {2, 1, 1, 0},      // maxPool2dBackward: x, dy -> dx
    {1, 1, 1, 0},      // avgPool2d
    {1, 1, 1, 0},      // avgPool2dBackward: dy -> dx
    // added for sequence parallelism (collectives: the executor runs them with its communicator)
    {1, 2, 2, 0},      // ringAttention: qkv -> y, lse
    {4, 1, 1, 0},      // ringAttentionBackward: qkv, y, lse, dy -> dqkv
    {1, 1, 1, 0},      // allReduce: x -> mean over the ranks
};

// ---------------------------------------------------------------------------
// validation

template <typename... Args>
static std::string cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

static bool fail(std::string* err, const std::string& msg) {
  *err = msg;
  return false;
}

// Checks one operand list of an instruction: every id names a buffer.
static bool check_buffer_ids(const Program& p, const std::vector<int32_t>& ids, const std::string& field,
                             std::string* err) {
  for (size_t j = 0; j < ids.size(); j++) {
    int32_t b = ids[j];
    if (b < 0 || (size_t)b >= p.buffers.size())
      return fail(err, cat(field, "[", j, "]: buffer ", b, " does not exist (the program has ",
                           p.buffers.size(), " buffers)"));
  }
  return true;
}

bool validate_program(Program* prog, std::string* err) {
  Program& p = *prog;

  // tiers
  for (int t = 0; t < kTierCount; t++) {
    const TierSpec& ts = p.tiers[t];
    std::string f = cat("program.tiers[", t, "]");
    if (ts.arena_bytes < 0 || ts.capacity_bytes < 0)
      return fail(err, cat(f, ": arenaBytes and capacityBytes must be >= 0"));
    if (ts.arena_bytes > ts.capacity_bytes)
      return fail(err, cat(f, ": arena ", ts.arena_bytes, " bytes exceeds capacity ", ts.capacity_bytes, " bytes"));
  }
  if (p.nvme.queue_depth < 1 || p.nvme.queue_depth > 64)
    return fail(err, cat("program.nvme.queueDepth: expected 1..64, got ", p.nvme.queue_depth));
  if (p.nvme.block_bytes < kNvmeAlign || p.nvme.block_bytes > (64 << 20) || p.nvme.block_bytes % kNvmeAlign != 0)
    return fail(err, cat("program.nvme.blockBytes: expected a multiple of 4096 from 4096 to 67108864, got ", p.nvme.block_bytes));
  if (p.tiers[TIER_NVME].arena_bytes > 0 && p.spill_dir.empty())
    return fail(err, "program.spillDir: expected a directory for the nvme arena (tiers[2].arenaBytes > 0), got an empty string");

  // tensors
  for (size_t i = 0; i < p.tensors.size(); i++) {
    TensorSpec& t = p.tensors[i];
    if (dtype_size(t.dtype) == 0)
      return fail(err, cat("program.tensors[", i, "].dtype: expected 0..5 (f32 f16 bf16 i32 i64 f64), got ", t.dtype));
    t.numel = 1;
    for (int d = 0; d < t.rank; d++) {
      if (t.shape[d] < 0) return fail(err, cat("program.tensors[", i, "].shape[", d, "]: expected >= 0, got ", t.shape[d]));
      if (t.shape[d] > 0 && t.numel > ((int64_t)1 << 50) / t.shape[d])
        return fail(err, cat("program.tensors[", i, "].shape: more than 2^50 elements"));
      t.numel *= t.shape[d];
    }
  }

  // buffers
  for (size_t i = 0; i < p.buffers.size(); i++) {
    BufferSpec& b = p.buffers[i];
    std::string f = cat("program.buffers[", i, "]");
    if (b.tensor < 0 || (size_t)b.tensor >= p.tensors.size())
      return fail(err, cat(f, ".tensor: tensor ", b.tensor, " does not exist (the program has ", p.tensors.size(), " tensors)"));
    if (b.tier < 0 || b.tier >= kTierCount)
      return fail(err, cat(f, ".tier: expected 0 (gpu), 1 (cpu) or 2 (nvme), got ", b.tier));
    const TensorSpec& t = p.tensors[b.tensor];
    int64_t esize = dtype_size(t.dtype);
    if (b.size_bytes != t.numel * esize)
      return fail(err, cat(f, ".sizeBytes: expected ", t.numel * esize, " (", t.numel, " elements of ",
                           dtype_name(t.dtype), " for tensor ", b.tensor, "), got ", b.size_bytes));
    if (b.offset_bytes < 0) return fail(err, cat(f, ".offsetBytes: expected >= 0, got ", b.offset_bytes));
    if (b.offset_bytes % esize != 0)
      return fail(err, cat(f, ".offsetBytes: ", b.offset_bytes, " is not a multiple of the element size (",
                           esize, " bytes for ", dtype_name(t.dtype), ")"));
    int64_t arena = p.tiers[b.tier].arena_bytes;
    if (b.offset_bytes + b.size_bytes > arena)
      return fail(err, cat(f, ": offset ", b.offset_bytes, " + size ", b.size_bytes, " exceeds the ",
                           tier_name(b.tier), " arena (", arena, " bytes)"));
    b.persistent = true;
  }

  // ops
  for (size_t i = 0; i < p.ops.size(); i++) {
    const OpSpec& o = p.ops[i];
    if (o.kind < 0 || o.kind >= OP_KIND_COUNT)
      return fail(err, cat("program.ops[", i, "].kind: expected 0..", OP_KIND_COUNT - 1, ", got ", o.kind));
    if (o.n_iattr > 8 || o.n_fattr > 8)
      return fail(err, cat("program.ops[", i, "]: at most 8 iattr and 8 fattr, got ", o.n_iattr, " and ", o.n_fattr));
    for (int a = 0; a < o.n_fattr; a++)
      if (!std::isfinite(o.fattr[a]))
        return fail(err, cat("program.ops[", i, "].fattr[", a, "]: expected a finite number, got ", o.fattr[a]));
  }

  // instructions
  for (size_t i = 0; i < p.instructions.size(); i++) {
    Instruction& ins = p.instructions[i];
    std::string f = cat("program.instructions[", i, "]");
    if (ins.stream < 0 || ins.stream >= kStreamCount)
      return fail(err, cat(f, ".stream: expected 0..5 (gpu cpu h2d d2h nvmeRead nvmeWrite), got ", ins.stream));
    if (ins.kind < INSTR_RUN || ins.kind > INSTR_FREE)
      return fail(err, cat(f, ".kind: expected 0 (run), 1 (copy) or 2 (free), got ", ins.kind));
    for (size_t w = 0; w < ins.waits.size(); w++) {
      int32_t id = ins.waits[w];
      if (id < 0 || (size_t)id >= i)
        return fail(err, cat(f, ".waits[", w, "]: ", id, " is not an earlier instruction"));
    }
    if (!check_buffer_ids(p, ins.inputs, f + ".inputs", err)) return false;
    if (!check_buffer_ids(p, ins.outputs, f + ".outputs", err)) return false;

    if (ins.kind == INSTR_RUN) {
      if (ins.op < 0 || (size_t)ins.op >= p.ops.size())
        return fail(err, cat(f, ".op: op ", ins.op, " does not exist (the program has ", p.ops.size(), " ops)"));
      const OpSpec& o = p.ops[ins.op];
      const OpSignature& sig = kSignatures[o.kind];
      if (sig.n_in < 0 ? (ins.inputs.empty() || ins.inputs.size() > 8) : (int32_t)ins.inputs.size() != sig.n_in)
        return fail(err, cat(f, ".inputs: ", op_kind_name(o.kind), " takes ", sig.n_in < 0 ? std::string("1..8") : std::to_string(sig.n_in), " inputs, got ", ins.inputs.size()));
      if ((int32_t)ins.outputs.size() < sig.n_out_min || (int32_t)ins.outputs.size() > sig.n_out_max)
        return fail(err, cat(f, ".outputs: ", op_kind_name(o.kind), " gives ", sig.n_out_min,
                             sig.n_out_min == sig.n_out_max ? "" : cat(" or ", sig.n_out_max), " outputs, got ",
                             ins.outputs.size()));
      OpCall& c = ins.call;
      c = OpCall();
      c.kind = o.kind;
      c.n_in = (int32_t)ins.inputs.size();
      c.n_out = (int32_t)ins.outputs.size();
      for (int a = 0; a < 8; a++) { c.iattr[a] = o.iattr[a]; c.fattr[a] = o.fattr[a]; }
      for (int side = 0; side < 2; side++) {
        const std::vector<int32_t>& ids = side == 0 ? ins.inputs : ins.outputs;
        for (size_t j = 0; j < ids.size(); j++) {
          const BufferSpec& b = p.buffers[ids[j]];
          const TensorSpec& t = p.tensors[b.tensor];
          std::string of = cat(f, side == 0 ? ".inputs[" : ".outputs[", j, "]");
          if (b.tier == TIER_NVME)
            return fail(err, cat(of, ": buffer ", ids[j], " is on nvme; ops read and write only gpu or cpu buffers"));
          bool want_int = side == 0 && ((sig.int_inputs >> j) & 1u);
          if (want_int && t.dtype != DT_I32)
            return fail(err, cat(of, ": ", op_kind_name(o.kind), " expects i32 here, buffer ", ids[j], " is ", dtype_name(t.dtype)));
          if (!want_int && t.dtype != DT_F32 && t.dtype != DT_F16 && t.dtype != DT_BF16)
            return fail(err, cat(of, ": ", op_kind_name(o.kind), " expects f32, f16 or bf16 here, buffer ", ids[j], " is ",
                                 dtype_name(t.dtype)));
          TensorView& v = side == 0 ? c.in[j] : c.out[j];
          v.rank = t.rank;
          for (int d = 0; d < t.rank; d++) v.shape[d] = t.shape[d];
        }
      }
    } else if (ins.kind == INSTR_COPY) {
      if (ins.op != -1) return fail(err, cat(f, ".op: expected -1 for a copy, got ", ins.op));
      if (ins.inputs.size() != 1 || ins.outputs.size() != 1)
        return fail(err, cat(f, ": a copy takes one input and one output buffer, got ", ins.inputs.size(), " and ",
                             ins.outputs.size()));
      const BufferSpec& src = p.buffers[ins.inputs[0]];
      const BufferSpec& dst = p.buffers[ins.outputs[0]];
      if (src.size_bytes != dst.size_bytes)
        return fail(err, cat(f, ": copy from buffer ", ins.inputs[0], " (", src.size_bytes, " bytes) to buffer ",
                             ins.outputs[0], " (", dst.size_bytes, " bytes): sizes differ"));
      if (src.tier == TIER_NVME && dst.tier == TIER_NVME)
        return fail(err, cat(f, ": copy from nvme to nvme (buffers ", ins.inputs[0], " -> ", ins.outputs[0],
                             "); every nvme transfer goes through a host buffer"));
    } else {
      if (ins.op != -1) return fail(err, cat(f, ".op: expected -1 for a free, got ", ins.op));
      if (ins.inputs.size() != 1 || !ins.outputs.empty())
        return fail(err, cat(f, ": a free takes one input buffer and no outputs, got ", ins.inputs.size(), " and ",
                             ins.outputs.size()));
      p.buffers[ins.inputs[0]].persistent = false;
    }
  }

  // persistent buffers of one tier must not overlap (transient ones are checked
  // against liveness by the TypeScript plan verifier before this)
  for (int t = 0; t < kTierCount; t++) {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < p.buffers.size(); i++)
      if (p.buffers[i].tier == t && p.buffers[i].persistent && p.buffers[i].size_bytes > 0) ids.push_back((int32_t)i);
    std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
      const BufferSpec& x = p.buffers[a]; const BufferSpec& y = p.buffers[b];
      return x.offset_bytes != y.offset_bytes ? x.offset_bytes < y.offset_bytes : a < b;
    });
    for (size_t k = 1; k < ids.size(); k++) {
      const BufferSpec& a = p.buffers[ids[k - 1]];
      const BufferSpec& b = p.buffers[ids[k]];
      if (a.offset_bytes + a.size_bytes > b.offset_bytes)
        return fail(err, cat("program.buffers[", ids[k], "]: bytes [", b.offset_bytes, ", ", b.offset_bytes + b.size_bytes,
                             ") of the ", tier_name(t), " arena overlap buffer ", ids[k - 1], " [", a.offset_bytes, ", ",
                             a.offset_bytes + a.size_bytes, "), and neither is ever freed"));
    }
  }
  return true;
}

// ---------------------------------------------------------------------------
// parsing from JS

std::string describe_value(const Napi::Value& v) {
  switch (v.Type()) {
    case napi_undefined: return "undefined";
    case napi_null: return "null";
    case napi_boolean: return v.As<Napi::Boolean>().Value() ? "true" : "false";
    case napi_number: { std::ostringstream os; os << v.As<Napi::Number>().DoubleValue(); return os.str(); }
    case napi_string: return "a string";
    case napi_function: return "a function";
    case napi_bigint: return "a bigint";
    case napi_object:
      if (v.IsArray()) return "an array";
      if (v.IsTypedArray()) return "a typed array";
      return "an object";
    default: return "a value of another type";
  }
}

double read_number(const Napi::Value& v, const std::string& field) {
  if (!v.IsNumber()) throw Napi::TypeError::New(v.Env(), field + ": expected a number, got " + describe_value(v));
  return v.As<Napi::Number>().DoubleValue();
}

int64_t read_int(const Napi::Value& v, const std::string& field, int64_t lo, int64_t hi) {
  double d = read_number(v, field);
  if (!std::isfinite(d) || d != std::floor(d) || d < (double)lo || d > (double)hi) {
    std::ostringstream os;
    os << field << ": expected an integer in [" << lo << ", " << hi << "], got " << describe_value(v);
    throw Napi::RangeError::New(v.Env(), os.str());
  }
  return (int64_t)d;
}

static Napi::Object read_object(const Napi::Value& v, const std::string& field) {
  if (!v.IsObject() || v.IsArray())
    throw Napi::TypeError::New(v.Env(), field + ": expected an object, got " + describe_value(v));
  return v.As<Napi::Object>();
}

static Napi::Array read_array(const Napi::Value& v, const std::string& field, uint32_t max_len) {
  if (!v.IsArray()) throw Napi::TypeError::New(v.Env(), field + ": expected an array, got " + describe_value(v));
  Napi::Array a = v.As<Napi::Array>();
  if (a.Length() > max_len)
    throw Napi::RangeError::New(v.Env(), cat(field, ": expected at most ", max_len, " entries, got ", a.Length()));
  return a;
}

static std::vector<int32_t> read_int_list(const Napi::Value& v, const std::string& field) {
  Napi::Array a = read_array(v, field, 1u << 30);
  std::vector<int32_t> out(a.Length());
  for (uint32_t i = 0; i < a.Length(); i++)
    out[i] = (int32_t)read_int(a.Get(i), cat(field, "[", i, "]"), INT32_MIN, INT32_MAX);
  return out;
}

static const int64_t kMaxSafe = 9007199254740991LL;  // 2^53 - 1, Number.MAX_SAFE_INTEGER

void parse_program(const Napi::Value& value, Program* p) {
  Napi::Object o = read_object(value, "program");

  Napi::Array tiers = read_array(o.Get("tiers"), "program.tiers", 1u << 30);
  if (tiers.Length() != kTierCount)
    throw Napi::RangeError::New(o.Env(), cat("program.tiers: expected 3 tiers (gpu, cpu, nvme), got ", tiers.Length()));
  for (uint32_t t = 0; t < kTierCount; t++) {
    std::string f = cat("program.tiers[", t, "]");
    Napi::Object to = read_object(tiers.Get(t), f);
    p->tiers[t].capacity_bytes = read_int(to.Get("capacityBytes"), f + ".capacityBytes", 0, kMaxSafe);
    p->tiers[t].arena_bytes = read_int(to.Get("arenaBytes"), f + ".arenaBytes", 0, kMaxSafe);
  }

  Napi::Value sd = o.Get("spillDir");
  if (sd.IsUndefined()) p->spill_dir = "";
  else if (sd.IsString()) p->spill_dir = sd.As<Napi::String>().Utf8Value();
  else throw Napi::TypeError::New(o.Env(), "program.spillDir: expected a string, got " + describe_value(sd));

  Napi::Value nv = o.Get("nvme");
  if (!nv.IsUndefined()) {
    Napi::Object no = read_object(nv, "program.nvme");
    if (!no.Get("queueDepth").IsUndefined())
      p->nvme.queue_depth = (int32_t)read_int(no.Get("queueDepth"), "program.nvme.queueDepth", INT32_MIN, INT32_MAX);
    if (!no.Get("blockBytes").IsUndefined())
      p->nvme.block_bytes = read_int(no.Get("blockBytes"), "program.nvme.blockBytes", -kMaxSafe, kMaxSafe);
    Napi::Value d = no.Get("direct");
    if (!d.IsUndefined()) {
      if (!d.IsBoolean()) throw Napi::TypeError::New(o.Env(), "program.nvme.direct: expected a boolean, got " + describe_value(d));
      p->nvme_direct = d.As<Napi::Boolean>().Value();
    }
  }

  Napi::Array tensors = read_array(o.Get("tensors"), "program.tensors", 1u << 30);
  p->tensors.assign(tensors.Length(), TensorSpec());
  for (uint32_t i = 0; i < tensors.Length(); i++) {
    std::string f = cat("program.tensors[", i, "]");
    Napi::Object to = read_object(tensors.Get(i), f);
    TensorSpec& t = p->tensors[i];
    t.dtype = (int32_t)read_int(to.Get("dtype"), f + ".dtype", 0, 5);
    Napi::Value name = to.Get("name");
    if (name.IsString()) t.name = name.As<Napi::String>().Utf8Value();
    else if (!name.IsUndefined()) throw Napi::TypeError::New(o.Env(), f + ".name: expected a string, got " + describe_value(name));
    Napi::Array shape = read_array(to.Get("shape"), f + ".shape", kMaxRank);
    t.rank = (int32_t)shape.Length();
    for (uint32_t d = 0; d < shape.Length(); d++) t.shape[d] = read_int(shape.Get(d), cat(f, ".shape[", d, "]"), 0, kMaxSafe);
  }

  Napi::Array buffers = read_array(o.Get("buffers"), "program.buffers", 1u << 30);
  p->buffers.assign(buffers.Length(), BufferSpec());
  for (uint32_t i = 0; i < buffers.Length(); i++) {
    std::string f = cat("program.buffers[", i, "]");
    Napi::Object bo = read_object(buffers.Get(i), f);
    BufferSpec& b = p->buffers[i];
    b.tensor = (int32_t)read_int(bo.Get("tensor"), f + ".tensor", INT32_MIN, INT32_MAX);
    b.tier = (int32_t)read_int(bo.Get("tier"), f + ".tier", INT32_MIN, INT32_MAX);
    b.offset_bytes = read_int(bo.Get("offsetBytes"), f + ".offsetBytes", -kMaxSafe, kMaxSafe);
    b.size_bytes = read_int(bo.Get("sizeBytes"), f + ".sizeBytes", 0, kMaxSafe);
  }

  Napi::Array ops = read_array(o.Get("ops"), "program.ops", 1u << 30);
  p->ops.assign(ops.Length(), OpSpec());
  for (uint32_t i = 0; i < ops.Length(); i++) {
    std::string f = cat("program.ops[", i, "]");
    Napi::Object oo = read_object(ops.Get(i), f);
    OpSpec& op = p->ops[i];
    op.kind = (int32_t)read_int(oo.Get("kind"), f + ".kind", INT32_MIN, INT32_MAX);
    Napi::Array ia = read_array(oo.Get("iattr"), f + ".iattr", 8);
    Napi::Array fa = read_array(oo.Get("fattr"), f + ".fattr", 8);
    op.n_iattr = (int32_t)ia.Length();
    op.n_fattr = (int32_t)fa.Length();
    for (uint32_t a = 0; a < ia.Length(); a++) op.iattr[a] = read_int(ia.Get(a), cat(f, ".iattr[", a, "]"), -kMaxSafe, kMaxSafe);
    for (uint32_t a = 0; a < fa.Length(); a++) op.fattr[a] = read_number(fa.Get(a), cat(f, ".fattr[", a, "]"));
  }

  Napi::Array instrs = read_array(o.Get("instructions"), "program.instructions", 1u << 30);
  p->instructions.assign(instrs.Length(), Instruction());
  for (uint32_t i = 0; i < instrs.Length(); i++) {
    std::string f = cat("program.instructions[", i, "]");
    Napi::Object io = read_object(instrs.Get(i), f);
    Instruction& ins = p->instructions[i];
    ins.stream = (int32_t)read_int(io.Get("stream"), f + ".stream", INT32_MIN, INT32_MAX);
    ins.kind = (int32_t)read_int(io.Get("kind"), f + ".kind", INT32_MIN, INT32_MAX);
    ins.op = (int32_t)read_int(io.Get("op"), f + ".op", INT32_MIN, INT32_MAX);
    ins.inputs = read_int_list(io.Get("inputs"), f + ".inputs");
    ins.outputs = read_int_list(io.Get("outputs"), f + ".outputs");
    ins.waits = read_int_list(io.Get("waits"), f + ".waits");
  }
}

}  // namespace tiercut
