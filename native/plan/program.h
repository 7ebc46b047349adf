// program.h — the runtime's view of one training step: plain structs, parsed
// once from the JS object that runtime/binding.ts hands to createSession, then
// validated. Nothing after createSession touches JS values; the executor works
// only on these structs (the "baton" of sharp-style bindings).
//
// Glossary (as in docs/DESIGN.md):
//   tier        0 = gpu, 1 = cpu, 2 = nvme; each tier is one arena of bytes
//   buffer      a byte range [offsetBytes, offsetBytes + sizeBytes) of one arena
//               holding one tensor
//   instruction one entry of the step; its index is its "time". Each stream runs
//               its own instructions in increasing index order; `waits` lists
//               earlier instructions (of any stream) that must finish first.
//   persistent  a buffer no free instruction ever frees
//
// What validate_program keeps true (so that a step can never crash or deadlock):
//   - 3 tiers, arenaBytes <= capacityBytes
//   - nvme.queueDepth in 1..64, nvme.blockBytes a multiple of 4096 in 4 KiB..64 MiB
//   - every buffer fits its tier's arena, is aligned to its element size and
//     holds exactly numel x element-size bytes
//   - every instruction's stream, kind, op and buffers exist; copies are between
//     equal-sized buffers and never nvme -> nvme; run operands live on gpu or cpu
//     and have a dtype the executor can hand to a kernel
//   - every wait points to an earlier instruction (=> no deadlock: the lowest
//     unfinished instruction can always start)
//   - no two persistent buffers of one tier overlap
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "../kernels/dispatch.h"
#include "../tiers/nvme_store.h"

namespace tiercut {

constexpr int kTierCount = 3;
enum Tier : int32_t { TIER_GPU = 0, TIER_CPU = 1, TIER_NVME = 2 };

constexpr int kStreamCount = 6;
enum Stream : int32_t {
  STREAM_GPU = 0, STREAM_CPU = 1, STREAM_H2D = 2, STREAM_D2H = 3, STREAM_NVME_READ = 4, STREAM_NVME_WRITE = 5
};

enum InstrKind : int32_t { INSTR_RUN = 0, INSTR_COPY = 1, INSTR_FREE = 2 };

const char* tier_name(int32_t tier);      // "gpu", "cpu", "nvme"
const char* stream_name(int32_t stream);  // "gpu", "cpu", "h2d", "d2h", "nvmeRead", "nvmeWrite"
const char* op_kind_name(int32_t kind);   // "matmul", "crossEntropy", ... (the IR's names)
const char* dtype_name(int32_t dtype);    // "f32", "f16", ...
int64_t dtype_size(int32_t dtype);        // bytes per element; 0 for an unknown dtype

struct TierSpec {
  int64_t capacity_bytes = 0;
  int64_t arena_bytes = 0;
};

struct TensorSpec {
  std::string name;         // optional; used in error messages and traces
  int32_t dtype = DT_F32;
  int32_t rank = 0;
  int64_t shape[kMaxRank] = {0};
  int64_t numel = 1;
};

struct BufferSpec {
  int32_t tensor = 0;
  int32_t tier = 0;
  int64_t offset_bytes = 0;
  int64_t size_bytes = 0;
  bool persistent = true;   // derived: false when some free instruction frees it
};

struct OpSpec {
  int32_t kind = 0;
  int32_t n_iattr = 0, n_fattr = 0;
  int64_t iattr[8] = {0};
  double fattr[8] = {0};
};

struct Instruction {
  int32_t stream = 0;
  int32_t kind = INSTR_RUN;
  int32_t op = -1;
  std::vector<int32_t> inputs, outputs, waits;
  // run instructions only: the kernel call with kind, attributes and shapes
  // filled; data pointers are filled by the executor at each step.
  OpCall call;
};

struct Program {
  TierSpec tiers[kTierCount];
  std::string spill_dir;
  NvmeSettings nvme;        // I/O threads and block size of the nvme store
  bool nvme_direct = true;  // try O_DIRECT (falls back to buffered on EINVAL)
  std::vector<TensorSpec> tensors;
  std::vector<BufferSpec> buffers;
  std::vector<OpSpec> ops;
  std::vector<Instruction> instructions;
};

// Checks everything listed at the top of this file, derives BufferSpec::persistent
// and builds Instruction::call. On failure returns false with a message naming the
// field ("program.buffers[7]: offset 4096 + size 512 exceeds the gpu arena (4352 bytes)").
bool validate_program(Program* p, std::string* err);

}  // namespace tiercut

// Parsing from JS lives behind the N-API include so that the executor and the
// kernels never see napi.h.
#ifdef TIERCUT_WITH_NAPI
#include <napi.h>
namespace tiercut {
// Reads a NativeProgram object (runtime/binding.ts) into *p. Throws Napi::Error
// naming the field on anything malformed; does not validate cross-references.
void parse_program(const Napi::Value& value, Program* p);

// Field readers shared by the other N-API glue. `field` is the path used in messages.
int64_t read_int(const Napi::Value& v, const std::string& field, int64_t lo, int64_t hi);
double read_number(const Napi::Value& v, const std::string& field);
std::string describe_value(const Napi::Value& v);   // "a string", "-2", "undefined", ...
}  // namespace tiercut
#endif
