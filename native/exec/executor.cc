// executor.cc — stream threads, events, one step (see executor.h).
#include "executor.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>

#include "../adam/cpu_adam.h"
#include "collective.h"
#include "half.h"
#include "spin.h"

namespace tiercut {

using Clock = std::chrono::steady_clock;
static double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// ---------------------------------------------------------------------------
// construction: prepare each instruction once, start one thread per busy stream

// adam goes to the fused kernel when its operands are what the compiler emits:
// fp32 p, m, v updated in place (outputs 0..2 are inputs 0, 2, 3), a gradient in
// fp32, fp16 or bf16, an optional fp16/bf16 copy of p, all of one length. Anything
// else keeps the generic path (widen, run_op, round), which also reports its errors.
static bool fused_adam_types(const Program& p, const Instruction& ins, int32_t* grad_type, int32_t* half_type) {
  const OpCall& c = ins.call;
  if (c.kind != OP_ADAM || ins.inputs.size() != 4 || (ins.outputs.size() != 3 && ins.outputs.size() != 4)) return false;
  if (ins.outputs[0] != ins.inputs[0] || ins.outputs[1] != ins.inputs[2] || ins.outputs[2] != ins.inputs[3]) return false;
  if (c.iattr[0] != 0 && c.iattr[0] != 1) return false;
  auto tensor = [&](int32_t buffer) -> const TensorSpec& { return p.tensors[p.buffers[buffer].tensor]; };
  const int64_t n = tensor(ins.inputs[0]).numel;
  for (int32_t b : ins.inputs)
    if (tensor(b).numel != n) return false;
  for (int j : {0, 2, 3})
    if (tensor(ins.inputs[j]).dtype != DT_F32) return false;
  switch (tensor(ins.inputs[1]).dtype) {
    case DT_F32: *grad_type = ADAM_GRAD_F32; break;
    case DT_F16: *grad_type = ADAM_GRAD_F16; break;
    case DT_BF16: *grad_type = ADAM_GRAD_BF16; break;
    default: return false;
  }
  *half_type = ADAM_HALF_NONE;
  if (ins.outputs.size() == 4) {
    const TensorSpec& h = tensor(ins.outputs[3]);
    if (h.numel != n) return false;
    if (h.dtype == DT_F16) *half_type = ADAM_HALF_F16;
    else if (h.dtype == DT_BF16) *half_type = ADAM_HALF_BF16;
    else return false;
  }
  return true;
}

// A reshape of fp32 into fp16/bf16 storage of the same length between host
// arenas: the cast that makes param16 from master32. Returns its AdamHalfType,
// ADAM_HALF_NONE when the instruction is anything else.
static int32_t half_cast_type(const Program& p, const Instruction& ins) {
  if (ins.call.kind != OP_RESHAPE || ins.inputs.size() != 1 || ins.outputs.size() != 1) return ADAM_HALF_NONE;
  const BufferSpec& a = p.buffers[ins.inputs[0]];
  const BufferSpec& b = p.buffers[ins.outputs[0]];
  const TensorSpec& x = p.tensors[a.tensor];
  const TensorSpec& y = p.tensors[b.tensor];
  if (a.tier == TIER_NVME || b.tier == TIER_NVME || x.dtype != DT_F32 || x.numel != y.numel) return ADAM_HALF_NONE;
  if (y.dtype == DT_F16) return ADAM_HALF_F16;
  if (y.dtype == DT_BF16) return ADAM_HALF_BF16;
  return ADAM_HALF_NONE;
}

// Elements per wake-up of a follower (512 KiB of fp16): a copy following its
// producer's tiles, an adam following its gradient's copy down; simulate.ts's FOLLOW_CHUNK.
constexpr int64_t kFollowChunk = 1 << 18;

static bool overlaps(const BufferSpec& a, const BufferSpec& b) {
  return a.tier == b.tier && a.offset_bytes < b.offset_bytes + b.size_bytes && b.offset_bytes < a.offset_bytes + a.size_bytes;
}

// Two kinds of copies learn something from what they carry (second pass of the
// constructor, once all instructions are prepared):
//  - the copy that delivers a fused adam's gradient (the last writer of the
//    gradient buffer before the adam, waited on by it, a host-to-host memory
//    copy) checks the gradient for inf/NaN as it copies: the adam then skips its
//    own check pass, which would read the gradient a second time. Where the
//    copy brings the gradient down from the GPU and shares no bytes with the
//    adam's other operands, the adam follows it chunk by chunk instead: the
//    copy checks the whole gradient first (on a GPU, a pass where the backward
//    pass left it), so the adam knows the verdict before it takes anything and
//    a non-finite gradient still leaves p, m, v and p16 untouched, then moves
//    it chunk by chunk; the adam starts once the copy has begun and updates
//    each tile once its gradient is there (execute_grad_copy_ahead,
//    execute_fused_adam).
//  - a copy of the half-precision output of a fused adam or of a half cast,
//    waited on for that output, follows its producer tile by tile: it starts
//    when its other waits are done and moves each finished tile while later
//    tiles are still being computed (ZeRO-Offload's tiled copy overlap). Only
//    when the copy's destination shares no bytes with the producer's operands,
//    so starting early cannot disturb the producer.
void Executor::prepare_arrivals() {
  const Program& p = p_;
  const size_t n = p.instructions.size();
  std::vector<int32_t> last_writer(p.buffers.size(), -1);
  int32_t producers = 0;
  auto host_copy = [&](const Instruction& ins) {
    return ins.kind == INSTR_COPY && p.buffers[ins.inputs[0]].tier != TIER_NVME && p.buffers[ins.outputs[0]].tier != TIER_NVME &&
           !overlaps(p.buffers[ins.inputs[0]], p.buffers[ins.outputs[0]]);
  };
  auto waits_on = [&](const Instruction& ins, int32_t w) { return std::find(ins.waits.begin(), ins.waits.end(), w) != ins.waits.end(); };
  for (size_t id = 0; id < n; id++) {
    const Instruction& ins = p.instructions[id];
    Prepared& pr = prepared_[id];
    if (pr.fused_adam) {
      const int32_t w = last_writer[ins.inputs[1]];
      if (w >= 0 && waits_on(ins, w) && host_copy(p.instructions[w]) && prepared_[w].check_grad_type < 0 &&
          p.buffers[p.instructions[w].inputs[0]].size_bytes == p.buffers[ins.inputs[1]].size_bytes) {
        prepared_[w].check_grad_type = pr.adam_grad_type;
        pr.grad_checked_by = w;
        bool clear = prepared_[w].link == LINK_D2H;
        const BufferSpec& g = p.buffers[ins.inputs[1]];
        for (size_t j = 0; j < ins.inputs.size(); j++) clear = clear && (j == 1 || !overlaps(g, p.buffers[ins.inputs[j]]));
        for (int32_t b : ins.outputs) clear = clear && !overlaps(g, p.buffers[b]);
        if (clear) {
          pr.follows = w;
          prepared_[w].progress = producers++;
        }
      }
    }
    if (host_copy(ins)) {
      const int32_t src = ins.inputs[0];
      const int32_t w = last_writer[src];
      const Prepared* wp = w >= 0 ? &prepared_[w] : nullptr;
      const bool half_out = wp && ((wp->fused_adam && wp->adam_half_type != ADAM_HALF_NONE && p.instructions[w].outputs[3] == src) ||
                                   wp->half_cast_type != ADAM_HALF_NONE);
      bool clear = half_out && waits_on(ins, w);
      if (clear) {
        const BufferSpec& dst = p.buffers[ins.outputs[0]];
        for (int32_t b : p.instructions[w].inputs) clear = clear && !overlaps(dst, p.buffers[b]);
        for (int32_t b : p.instructions[w].outputs) clear = clear && !overlaps(dst, p.buffers[b]);
      }
      if (clear) {
        pr.follows = w;
        if (prepared_[w].progress < 0) prepared_[w].progress = producers++;
      }
    }
    for (int32_t b : ins.outputs) last_writer[b] = (int32_t)id;
  }
  progress_.reset(new TileProgress[(size_t)std::max(producers, 1)]);
  for (int32_t k = 0; k < producers; k++) progress_[k].ex = this;
}

Executor::Executor(const Program& p, const Arenas& arenas, ring::Communicator* comm)
    : p_(p), arenas_(arenas), comm_(comm), epoch_(Clock::now()) {
  size_t n = p.instructions.size();
  start_.assign(n, 0);
  end_.assign(n, 0);
  prepared_.assign(n, Prepared());
  done_gen_.reset(new std::atomic<int64_t>[n]);
  for (size_t i = 0; i < n; i++) done_gen_[i].store(0);
  spin_ns_ = spin_limit_ns();
  live_.assign(p.buffers.size(), 0);

  for (size_t id = 0; id < n; id++) {
    const Instruction& ins = p.instructions[id];
    Prepared& pr = prepared_[id];
    streams_[ins.stream].instructions.push_back((int32_t)id);

    if (ins.kind == INSTR_COPY) {
      int32_t from = p.buffers[ins.inputs[0]].tier, to = p.buffers[ins.outputs[0]].tier;
      if (from == TIER_NVME) pr.link = LINK_NVME_READ;
      else if (to == TIER_NVME) pr.link = LINK_NVME_WRITE;
      else if (from == TIER_CPU && to == TIER_GPU) pr.link = LINK_H2D;
      else if (from == TIER_GPU && to == TIER_CPU) pr.link = LINK_D2H;
      else if (from == TIER_CPU && to == TIER_CPU) pr.link = LINK_CPU_TO_CPU;
      pr.nvme_batchable = pr.link == LINK_NVME_READ || pr.link == LINK_NVME_WRITE;
      continue;
    }
    if (ins.kind != INSTR_RUN) continue;
    pr.delayed_adam = ins.call.kind == OP_ADAM && ins.call.iattr[2] == 1;
    if (fused_adam_types(p, ins, &pr.adam_grad_type, &pr.adam_half_type)) {
      pr.fused_adam = true;
      continue;
    }
    if ((pr.half_cast_type = half_cast_type(p, ins)) != ADAM_HALF_NONE) continue;

    // fp16/bf16 operands get a float copy in the stream's scratch; an output that
    // is also an input (adam's in-place p, m, v) shares the input's copy
    pr.in_scratch.assign(ins.inputs.size(), -1);
    pr.out_scratch.assign(ins.outputs.size(), -1);
    auto slot_for = [&](int32_t buffer, bool is_input) -> int64_t {
      const BufferSpec& b = p.buffers[buffer];
      const TensorSpec& t = p.tensors[b.tensor];
      if (t.dtype != DT_F16 && t.dtype != DT_BF16) return -1;
      for (HalfOperand& h : pr.halves) {
        if (h.buffer != buffer) continue;
        if (is_input) h.widen = true; else h.narrow = true;
        return h.scratch_offset;
      }
      HalfOperand h{buffer, pr.scratch_floats, t.numel, t.dtype == DT_BF16 ? ADAM_HALF_BF16 : ADAM_HALF_F16, is_input, !is_input};
      pr.scratch_floats += (t.numel + 15) / 16 * 16;  // keep every copy 64-byte aligned
      pr.halves.push_back(h);
      return h.scratch_offset;
    };
    for (size_t j = 0; j < ins.inputs.size(); j++) pr.in_scratch[j] = slot_for(ins.inputs[j], true);
    for (size_t j = 0; j < ins.outputs.size(); j++) pr.out_scratch[j] = slot_for(ins.outputs[j], false);
    StreamState& st = streams_[ins.stream];
    if ((int64_t)st.scratch.size() < pr.scratch_floats) st.scratch.resize((size_t)pr.scratch_floats);
  }

  if (!adam_select_isa("", &adam_isa_, &adam_isa_error_)) adam_isa_ = AdamIsa::scalar;
  grad_verdict_.reset(new std::atomic<int64_t>[n]);
  for (size_t i = 0; i < n; i++) grad_verdict_[i].store(0);
  prepare_arrivals();

  for (int32_t s = 0; s < kStreamCount; s++) {
    if (streams_[s].instructions.empty()) continue;
    active_streams_.push_back(s);
    if (lead_stream_ < 0) lead_stream_ = s;  // runs on the caller of step()
    else streams_[s].thread = std::thread(&Executor::stream_main, this, s);
  }
  solo_ = active_streams_.size() == 1;
}

Executor::~Executor() { stop(); }

void Executor::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (int32_t s : active_streams_)
    if (streams_[s].thread.joinable()) streams_[s].thread.join();
}

// ---------------------------------------------------------------------------
// one step

bool Executor::step(int64_t step, bool has_lr, double lr, StepStats* stats, std::string* err, int skip_update, int64_t delayed_step) {
  *stats = StepStats();
  Clock::time_point t0 = Clock::now();
  stats->step_start_seconds = seconds_between(epoch_, t0);
  int64_t gen;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_) { *err = "the session is closed"; return false; }
    abort_ = false;
    error_.clear();
    step_number_ = step;
    has_lr_ = has_lr;
    lr_ = lr;
    skip_update_ = skip_update;
    delayed_step_ = delayed_step < 0 ? step : delayed_step;
    for (int32_t s : active_streams_) {
      StreamState& st = streams_[s];
      st.busy_seconds = 0;
      st.count = 0;
      st.ring_bytes = 0;
      st.ring_workspace = 0;
      for (int k = 0; k < LINK_COUNT; k++) st.link_bytes[k] = 0;
    }
    running_ = (int32_t)active_streams_.size();
    gen = gen_ = ++generation_;
  }
  start_cv_.notify_all();
  // the lead stream runs here, while the stream threads run the others
  if (lead_stream_ >= 0) {
    run_stream(lead_stream_, gen);
    std::lock_guard<std::mutex> lk(mu_);
    running_--;
  }
  spin_until([&] { return running_.load(std::memory_order_acquire) == 0; }, spin_ns_);
  {
    std::unique_lock<std::mutex> lk(mu_);
    finish_cv_.wait(lk, [&] { return running_ == 0; });

    stats->seconds = seconds_between(t0, Clock::now());
    for (int32_t s : active_streams_) {
      const StreamState& st = streams_[s];
      stats->stream_busy_seconds[s] = st.busy_seconds;
      stats->stream_instructions[s] = st.count;
      for (int k = 0; k < LINK_COUNT; k++) stats->link_bytes[k] += st.link_bytes[k];
      stats->ring_sent_bytes += st.ring_bytes;
      stats->ring_workspace_bytes = std::max(stats->ring_workspace_bytes, st.ring_workspace);
    }
    stats->start_seconds = start_;
    stats->end_seconds = end_;
    if (abort_) { *err = error_; return false; }
    extents_known_ = true;
  }
  return true;
}

void Executor::stream_main(int32_t s) {
  int64_t seen = 0;
  for (;;) {
    int64_t gen;
    {
      std::unique_lock<std::mutex> lk(mu_);
      start_cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      gen = seen = generation_;
    }
    run_stream(s, gen);
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (--running_ == 0) finish_cv_.notify_all();
    }
  }
}

// A copy that follows its producer tile by tile does not wait for the producer
// to complete (execute_following_copy waits for its tiles instead).
bool Executor::waits_done(int32_t id, int64_t gen) const {
  const int32_t follows = prepared_[id].follows;
  for (int32_t w : p_.instructions[id].waits)
    if (w != follows && done_gen_[w].load(std::memory_order_acquire) != gen) return false;
  return true;
}

void Executor::run_stream(int32_t s, int64_t gen) {
  StreamState& st = streams_[s];
  std::vector<int32_t> batch;
  bool started = false;  // the instruction at k was found ready (and noted) when the one before completed
  for (size_t k = 0; k < st.instructions.size();) {
    const int32_t id = st.instructions[k];
    batch.assign(1, id);
    if (started) {
      if (abort_.load(std::memory_order_acquire)) return;
      if (prepared_[id].nvme_batchable) {
        std::lock_guard<std::mutex> lk(mu_);
        gather_nvme_batch(st, k, gen, &batch);
      }
    } else {
      // poll first: a thread that blocks may take a long time to wake (exec/spin.h)
      spin_until([&] { return abort_.load(std::memory_order_acquire) || waits_done(id, gen); }, spin_ns_);
      std::unique_lock<std::mutex> lk(mu_);
      st.blocked_on = id;
      st.cv.wait(lk, [&] { return abort_ || waits_done(id, gen); });
      st.blocked_on = -1;
      if (abort_) return;
      note_start(id);
      // an nvme copy takes along the copies after it on its stream that are
      // ready now (see gather_nvme_batch)
      if (prepared_[id].nvme_batchable) gather_nvme_batch(st, k, gen, &batch);
    }
    k += batch.size();
    std::string msg;
    int32_t failed = id;
    Clock::time_point t0 = Clock::now();
    for (int32_t b : batch) start_[b] = seconds_between(epoch_, t0);
    size_t early = 0;  // batch[0, early) completed already, as their requests finished (execute_nvme_batch)
    bool ok = false;
    try {
      ok = batch.size() == 1 ? execute(s, id, &msg) : execute_nvme_batch(s, batch, gen, &early, &msg, &failed);
    } catch (const std::exception& e) {  // kernels never throw; this is for bad_alloc and the like
      msg = e.what();
    }
    Clock::time_point t1 = Clock::now();
    st.busy_seconds += seconds_between(t0, t1) - st.idle_seconds;  // a batch's members share one interval
    st.idle_seconds = 0;
    for (size_t i = early; i < batch.size(); i++) end_[batch[i]] = seconds_between(epoch_, t1);
    if (ok) st.count += (int64_t)(batch.size() - early);
    started = false;
    int32_t wake[kStreamCount];
    int32_t n_wake = 0;
    std::string first_error;  // set when this instruction is the step's first failure
    {
      // one stream: no other thread touches what mu_ guards during the step
      // (the caller of step() is this thread), so it needs no lock
      std::unique_lock<std::mutex> lk(mu_, std::defer_lock);
      if (!solo_) lk.lock();
      if (ok) {
        for (size_t i = early; i < batch.size(); i++) {
          const int32_t b = batch[i];
          done_gen_[b].store(gen, std::memory_order_release);
          if (prepared_[b].progress >= 0) progress_cv_.notify_all();  // its followers may take the rest
          if (p_.instructions[b].kind == INSTR_FREE) complete_free(b);
        }
        // frees right after it that are ready complete with it: bookkeeping
        // only, so no clock reads and no round of their own (a free costs
        // nothing else; a plan has about one per run instruction)
        while (k < st.instructions.size() && !abort_ && p_.instructions[st.instructions[k]].kind == INSTR_FREE &&
               waits_done(st.instructions[k], gen)) {
          const int32_t f = st.instructions[k++];
          start_[f] = end_[f] = end_[batch.back()];
          complete_free(f);
          done_gen_[f].store(gen, std::memory_order_release);
          st.count++;
        }
        // one lock for this completion and the next start, when the next is ready already
        if (k < st.instructions.size() && !abort_ && waits_done(st.instructions[k], gen)) {
          note_start(st.instructions[k]);
          started = true;
        }
      } else if (!abort_) {
        abort_ = true;
        error_ = describe(failed) + ": " + msg;
        first_error = error_;
        progress_cv_.notify_all();
      }
      if (!solo_) n_wake = streams_to_wake(s, gen, wake);
    }
    for (int32_t i = 0; i < n_wake; i++) streams_[wake[i]].cv.notify_one();
    // the other ranks would wait for this rank's messages until their timeout: stop them now
    if (!first_error.empty() && comm_ && comm_->size() > 1) comm_->abort("rank " + std::to_string(comm_->rank()) + ": " + first_error);
    if (!ok) return;
  }
}

// mu_ held. The streams blocked on a wait that is now satisfied (or on
// anything, after an abort), into out[]; returns how many.
int32_t Executor::streams_to_wake(int32_t self, int64_t gen, int32_t* out) {
  int32_t n = 0;
  for (int32_t s : active_streams_) {
    const int32_t id = streams_[s].blocked_on;
    if (s != self && id >= 0 && (abort_ || waits_done(id, gen))) out[n++] = s;
  }
  return n;
}

// mu_ held. Appends to *batch (which holds st.instructions[k], an nvme copy
// whose waits are done) the instructions after it on the stream while they are
// nvme copies in the same direction, or frees, whose waits are done now, up to
// kMaxNvmeBatch, stopping at the first copy that would touch what an earlier
// member touches: host bytes (a read's destination) or, for writes, a
// 4096-byte block of the file. The copies then run as one NvmeStore::transfer:
// their small requests are in flight together instead of paying their
// latencies one after another. Each member completes as soon as its request
// and those before it are done (execute_nvme_batch), so the stream's order of
// completion holds (a free in the batch completes with the copy before it).
void Executor::gather_nvme_batch(const StreamState& st, size_t k, int64_t gen, std::vector<int32_t>* batch) {
  const int32_t first = st.instructions[k];
  const int32_t link = prepared_[first].link;
  auto ranges = [&](int32_t id, int64_t* h0, int64_t* h1, int32_t* htier, int64_t* f0, int64_t* f1) {
    const Instruction& ins = p_.instructions[id];
    const BufferSpec& src = p_.buffers[ins.inputs[0]];
    const BufferSpec& dst = p_.buffers[ins.outputs[0]];
    const BufferSpec& host = src.tier == TIER_NVME ? dst : src;
    const BufferSpec& file = src.tier == TIER_NVME ? src : dst;
    *htier = host.tier;
    *h0 = host.offset_bytes;
    *h1 = host.offset_bytes + host.size_bytes;
    *f0 = file.offset_bytes / kNvmeAlign * kNvmeAlign;
    *f1 = (file.offset_bytes + file.size_bytes + kNvmeAlign - 1) / kNvmeAlign * kNvmeAlign;
  };
  for (size_t j = k + 1; j < st.instructions.size() && batch->size() < (size_t)kMaxNvmeBatch; j++) {
    const int32_t id = st.instructions[j];
    const bool is_free = p_.instructions[id].kind == INSTR_FREE;
    if (!(is_free || (prepared_[id].nvme_batchable && prepared_[id].link == link)) || !waits_done(id, gen)) break;
    if (is_free) {
      note_start(id);
      batch->push_back(id);
      continue;
    }
    int64_t h0, h1, f0, f1;
    int32_t ht;
    ranges(id, &h0, &h1, &ht, &f0, &f1);
    bool clash = false;
    for (int32_t m : *batch) {
      if (p_.instructions[m].kind == INSTR_FREE) continue;
      int64_t mh0, mh1, mf0, mf1;
      int32_t mt;
      ranges(m, &mh0, &mh1, &mt, &mf0, &mf1);
      if (link == LINK_NVME_READ && mt == ht && h0 < mh1 && mh0 < h1) clash = true;
      if (link == LINK_NVME_WRITE && f0 < mf1 && mf0 < f1) clash = true;
    }
    if (clash) break;
    note_start(id);
    batch->push_back(id);
  }
}

// The members of an nvme batch as one transfer (mu_ not held). Takes the
// batch (its first member a copy); gives *completed: how many members, from
// the front, were completed here while the transfer ran. A copy's request
// done (the store reports them in order) completes that copy and the frees
// after it in the batch at once (complete_members), so a stream waiting on
// the first read of a batch starts when that read is done, not when the
// batch is. The last copy and the frees after it are left to the caller,
// which completes them with one lock together with its next start. On
// failure the members from the failed copy on are not completed.
bool Executor::execute_nvme_batch(int32_t s, const std::vector<int32_t>& batch, int64_t gen, size_t* completed, std::string* msg,
                                  int32_t* failed) {
  StreamState& st = streams_[s];
  const int32_t link = prepared_[batch[0]].link;
  std::vector<NvmeRequest> reqs;
  reqs.reserve(batch.size());
  std::vector<int32_t> copies;  // the members with I/O, in order (reqs[i] is copies[i])
  std::vector<size_t> at;       // at[i]: copies[i]'s position in the batch
  for (size_t i = 0; i < batch.size(); i++) {
    const int32_t id = batch[i];
    const Instruction& ins = p_.instructions[id];
    if (ins.kind == INSTR_FREE) continue;
    copies.push_back(id);
    at.push_back(i);
    const BufferSpec& src = p_.buffers[ins.inputs[0]];
    const BufferSpec& dst = p_.buffers[ins.outputs[0]];
    if (link == LINK_NVME_READ) reqs.push_back(NvmeRequest{src.offset_bytes, arenas_.host_ptr(dst.tier, dst.offset_bytes), src.size_bytes});
    else reqs.push_back(NvmeRequest{dst.offset_bytes, arenas_.host_ptr(src.tier, src.offset_bytes), src.size_bytes});
  }
  // request r done: complete the members up to the next copy (the frees after copies[r])
  auto on_done = [&](int32_t r) {
    if ((size_t)r + 1 >= copies.size()) return;  // the last copy: the caller's
    st.link_bytes[link] += reqs[(size_t)r].n;
    const size_t to = at[(size_t)r + 1];
    complete_members(s, batch, *completed, to, gen);
    *completed = to;
  };
  int32_t bad = 0;
  if (!arenas_.nvme_transfer(link == LINK_NVME_WRITE, reqs, msg, &bad, on_done)) {
    *failed = copies[(size_t)std::max(0, std::min(bad, (int32_t)copies.size() - 1))];
    return false;
  }
  st.link_bytes[link] += reqs.back().n;
  return true;
}

// Completes batch[from, to) now (mu_ not held; takes it): their end time, done
// marks and frees, the stream's count, and the streams blocked on any of them
// woken. What run_stream does for an instruction that completes, less the
// next start (the batch is still running).
void Executor::complete_members(int32_t s, const std::vector<int32_t>& batch, size_t from, size_t to, int64_t gen) {
  if (from >= to) return;
  StreamState& st = streams_[s];
  const double t = seconds_between(epoch_, Clock::now());
  int32_t wake[kStreamCount];
  int32_t n_wake = 0;
  {
    std::unique_lock<std::mutex> lk(mu_, std::defer_lock);
    if (!solo_) lk.lock();
    for (size_t i = from; i < to; i++) {
      const int32_t b = batch[i];
      end_[b] = t;
      done_gen_[b].store(gen, std::memory_order_release);
      if (prepared_[b].progress >= 0) progress_cv_.notify_all();
      if (p_.instructions[b].kind == INSTR_FREE) complete_free(b);
    }
    st.count += (int64_t)(to - from);
    if (!solo_) n_wake = streams_to_wake(s, gen, wake);
  }
  for (int32_t i = 0; i < n_wake; i++) streams_[wake[i]].cv.notify_one();
}

// "instruction 57 (gpu, run crossEntropy)", "instruction 3 (h2d, copy cpu -> gpu)"
std::string Executor::describe(int32_t id) const {
  const Instruction& ins = p_.instructions[id];
  std::string what;
  if (ins.kind == INSTR_RUN) what = std::string("run ") + op_kind_name(p_.ops[ins.op].kind);
  else if (ins.kind == INSTR_COPY)
    what = std::string("copy ") + tier_name(p_.buffers[ins.inputs[0]].tier) + " -> " + tier_name(p_.buffers[ins.outputs[0]].tier);
  else what = "free";
  // the tensor (when the program names it): a copy's or free's buffer, a run's first output
  int32_t buffer = ins.kind == INSTR_RUN ? (ins.outputs.empty() ? -1 : ins.outputs[0]) : ins.inputs[0];
  if (buffer >= 0) {
    const std::string& name = p_.tensors[p_.buffers[buffer].tensor].name;
    if (!name.empty()) what += " of tensor '" + name + "'";
  }
  return "instruction " + std::to_string(id) + " (" + stream_name(ins.stream) + ", " + what + ")";
}

// ---------------------------------------------------------------------------
// one instruction (mu_ not held)

bool Executor::execute(int32_t s, int32_t id, std::string* msg) {
  const Instruction& ins = p_.instructions[id];
  const Prepared& pr = prepared_[id];
  StreamState& st = streams_[s];

  if (ins.kind == INSTR_FREE) return true;  // bookkeeping only, done by the caller

  if (ins.kind == INSTR_COPY) {
    if (pr.follows >= 0) return execute_following_copy(s, id, msg);
    const BufferSpec& src = p_.buffers[ins.inputs[0]];
    const BufferSpec& dst = p_.buffers[ins.outputs[0]];
    if (pr.check_grad_type >= 0 && pr.progress >= 0) return execute_grad_copy_ahead(s, id);
    if (pr.check_grad_type >= 0) {  // a gradient on its way to its adam: checked as it is copied
      const int64_t numel = p_.tensors[src.tensor].numel;
      const bool finite = adam_copy_grads_checked(arenas_.host_ptr(dst.tier, dst.offset_bytes), arenas_.host_ptr(src.tier, src.offset_bytes),
                                                  numel, (AdamGradType)pr.check_grad_type, adam_isa_);
      grad_verdict_[id].store(finite ? gen_ : -gen_, std::memory_order_release);
      if (pr.link >= 0) st.link_bytes[pr.link] += src.size_bytes;
      return true;
    }
    bool ok = dst.tier != TIER_NVME
                  ? arenas_.read(src.tier, src.offset_bytes, arenas_.host_ptr(dst.tier, dst.offset_bytes), src.size_bytes, msg)
                  : arenas_.write(dst.tier, dst.offset_bytes, arenas_.host_ptr(src.tier, src.offset_bytes), src.size_bytes, msg);
    if (ok && pr.link >= 0) st.link_bytes[pr.link] += src.size_bytes;
    return ok;
  }

  if (ins.call.kind == OP_ADAM && (skip_update_ == SKIP_ALL || (skip_update_ == SKIP_UNDELAYED && !pr.delayed_adam) || (pr.delayed_adam && delayed_step_ < 1))) return true;
  if (pr.fused_adam) return execute_fused_adam(id, msg);
  if (pr.half_cast_type != ADAM_HALF_NONE) return execute_half_cast(id, msg);

  // run: point the views at the arenas (or at the widened float copies)
  OpCall call = ins.call;
  float* scratch = st.scratch.data();
  for (size_t j = 0; j < ins.inputs.size(); j++) {
    const BufferSpec& b = p_.buffers[ins.inputs[j]];
    call.in[j].data = pr.in_scratch[j] >= 0 ? (void*)(scratch + pr.in_scratch[j]) : (void*)arenas_.host_ptr(b.tier, b.offset_bytes);
  }
  for (size_t j = 0; j < ins.outputs.size(); j++) {
    const BufferSpec& b = p_.buffers[ins.outputs[j]];
    call.out[j].data = pr.out_scratch[j] >= 0 ? (void*)(scratch + pr.out_scratch[j]) : (void*)arenas_.host_ptr(b.tier, b.offset_bytes);
  }
  for (const HalfOperand& h : pr.halves) {
    if (!h.widen) continue;  // pure outputs are fully overwritten by the kernel
    const BufferSpec& b = p_.buffers[h.buffer];
    adam_half_widen((const uint16_t*)arenas_.host_ptr(b.tier, b.offset_bytes), scratch + h.scratch_offset, h.numel, h.type, adam_isa_);
  }
  if (call.kind == OP_ADAM) {
    call.iattr[1] = pr.delayed_adam ? delayed_step_ : step_number_;  // fixed for the whole step, as has_lr_, lr_
    if (has_lr_) call.fattr[0] = lr_;
  }
  if (is_collective(call.kind)) {
    if (!comm_) { *msg = std::string(op_kind_name(call.kind)) + ": no communicator (the session was not made as a rank of a ring)"; return false; }
    const int span = collective_tag_span(comm_->size());
    const int tag_base = (ins.op % (INT32_MAX / span - 1)) * span;  // one tag range per op id
    CollectiveStats cs;
    bool ok = run_collective(*comm_, call, tag_base, &cs, msg);
    st.ring_bytes += cs.sent_bytes;
    st.ring_workspace = std::max(st.ring_workspace, cs.workspace_bytes);
    if (!ok) return false;
  } else if (!run_op<float>(call, msg)) {
    return false;
  }
  for (const HalfOperand& h : pr.halves) {
    if (!h.narrow) continue;
    const BufferSpec& b = p_.buffers[h.buffer];
    adam_half_round(scratch + h.scratch_offset, (uint16_t*)arenas_.host_ptr(b.tier, b.offset_bytes), h.numel, h.type, adam_isa_);
  }
  return true;
}

// The fused CPU Adam on the arena bytes: the gradient read in its own storage
// type, the p16 copy written directly as half. Every path of the kernel gives the
// bits of the scalar reference (native/kernels/adam.cc), so a plan gives the same
// numbers whichever stream or tier runs its update. Non-finite gradients fail
// the instruction and leave p, m, v and p16 untouched (the runtime has no loss
// scaler yet to skip the step instead).
bool Executor::execute_fused_adam(int32_t id, std::string* msg) {
  const Instruction& ins = p_.instructions[id];
  const Prepared& pr = prepared_[id];
  const OpCall& c = ins.call;
  const int64_t step = pr.delayed_adam ? delayed_step_ : step_number_;  // fixed for the whole step, as has_lr_, lr_
  if (step < 1) { *msg = "adam: step (iattr[1]) is " + std::to_string(step) + ", expected >= 1"; return false; }
  auto host = [&](int32_t buffer) { const BufferSpec& b = p_.buffers[buffer]; return arenas_.host_ptr(b.tier, b.offset_bytes); };
  AdamTensors t;
  t.p = (float*)host(ins.inputs[0]);
  t.g = (const void*)host(ins.inputs[1]);
  t.m = (float*)host(ins.inputs[2]);
  t.v = (float*)host(ins.inputs[3]);
  t.g_type = (AdamGradType)pr.adam_grad_type;
  t.half_type = (AdamHalfType)pr.adam_half_type;
  t.half = t.half_type != ADAM_HALF_NONE ? (uint16_t*)host(ins.outputs[3]) : nullptr;
  t.n = p_.tensors[p_.buffers[ins.inputs[0]].tensor].numel;
  AdamHyper hp;
  hp.lr = has_lr_ ? lr_ : c.fattr[0];
  hp.beta1 = c.fattr[1];
  hp.beta2 = c.fattr[2];
  hp.eps = c.fattr[3];
  hp.weight_decay = c.fattr[4];
  hp.adamw = c.iattr[0] == 1;
  hp.step = step;
  if (!adam_isa_error_.empty()) { *msg = "adam: " + adam_isa_error_; return false; }
  const char* nonfinite = "adam: the gradient has an inf or NaN; parameters and moments left unchanged";
  AdamRunOptions run;
  run.isa = adam_isa_;
  Arrival arrival{this, pr.follows, t.n};
  if (pr.follows >= 0) {
    // following the gradient's copy down: once it has begun, its verdict on the
    // whole gradient is known (waited for here, not in the pool: until the
    // copy begins, its gradient may still wait for work that needs the pool)
    Clock::time_point w0 = Clock::now();
    const bool begun = wait_arrival(&arrival, std::min<int64_t>(t.n, 1));
    streams_[ins.stream].idle_seconds += seconds_between(w0, Clock::now());
    if (!begun) { *msg = "stopped: the step was aborted"; return false; }
    if (grad_verdict_[pr.follows].load(std::memory_order_acquire) == -gen_) { *msg = nonfinite; return false; }
    run.check_finite = false;
    run.wait_tile = &Executor::wait_arrival;
    run.wait_ctx = &arrival;
  } else if (pr.grad_checked_by >= 0) {  // the copy that brought the gradient checked it
    const int64_t verdict = grad_verdict_[pr.grad_checked_by].load(std::memory_order_acquire);
    if (verdict == -gen_) { *msg = nonfinite; return false; }
    run.check_finite = verdict != gen_;
  }
  if (pr.progress >= 0) {
    begin_progress(id);
    run.on_tile = &Executor::on_tile_done;
    run.ctx = &progress_[pr.progress];
  }
  AdamResult result;
  cpu_adam_step(t, hp, run, &result);
  if (!result.finite) { *msg = nonfinite; return false; }
  if (result.stopped) { *msg = "stopped: the step was aborted"; return false; }
  return true;
}

// Blocks until the gradient's elements [0, end) have landed in this step; false
// when the step aborts first. Called by the adam's pool workers before each tile.
bool Executor::wait_arrival(void* ctx, int64_t end) {
  const Arrival* a = (const Arrival*)ctx;
  Executor* ex = a->ex;
  if (ex->available_elems(a->copy, a->n) >= end) return true;
  std::unique_lock<std::mutex> lk(ex->mu_);
  ex->progress_cv_.wait(lk, [&] { return ex->abort_ || ex->available_elems(a->copy, a->n) >= end; });
  return ex->available_elems(a->copy, a->n) >= end;
}

// A copy's source and destination, its elements, their size and its bytes: what
// the two copies moved chunk by chunk (above and below) take.
Executor::ChunkedCopy Executor::chunked_copy(int32_t id) const {
  const Instruction& ins = p_.instructions[id];
  const BufferSpec& src = p_.buffers[ins.inputs[0]];
  const BufferSpec& dst = p_.buffers[ins.outputs[0]];
  const int64_t n = p_.tensors[src.tensor].numel;
  return {arenas_.host_ptr(src.tier, src.offset_bytes), arenas_.host_ptr(dst.tier, dst.offset_bytes), n, n > 0 ? src.size_bytes / n : 0, src.size_bytes};
}

// The copy down of a gradient whose update follows it (prepare_arrivals): the
// whole gradient checked first and the verdict published, then the bytes
// moved chunk by chunk, each chunk published to the update as it lands.
bool Executor::execute_grad_copy_ahead(int32_t s, int32_t id) {
  const Prepared& pr = prepared_[id];
  const ChunkedCopy c = chunked_copy(id);
  const bool finite = adam_grads_finite(c.from, c.n, (AdamGradType)pr.check_grad_type, adam_isa_);
  grad_verdict_[id].store(finite ? gen_ : -gen_, std::memory_order_release);
  begin_progress(id);  // after the verdict: an update that sees this step's progress sees its verdict
  TileProgress& tp = progress_[pr.progress];
  for (int64_t done = 0; done < c.n;) {
    const int64_t end = std::min(c.n, done + kFollowChunk);
    std::memcpy(c.to + done * c.esize, c.from + done * c.esize, (size_t)((end - done) * c.esize));
    tp.elems.store(end);
    done = end;
    std::lock_guard<std::mutex> lk(mu_);
    progress_cv_.notify_all();
  }
  if (pr.link >= 0) streams_[s].link_bytes[pr.link] += c.bytes;
  return true;
}

// master32 -> param16 over tiles on the shared pool (bit for bit half.h's
// rounding, which the generic path would use), reporting tiles to followers.
bool Executor::execute_half_cast(int32_t id, std::string* msg) {
  if (!adam_isa_error_.empty()) { *msg = "reshape: " + adam_isa_error_; return false; }
  const Instruction& ins = p_.instructions[id];
  const Prepared& pr = prepared_[id];
  const BufferSpec& a = p_.buffers[ins.inputs[0]];
  const BufferSpec& b = p_.buffers[ins.outputs[0]];
  AdamRunOptions run;
  run.isa = adam_isa_;
  // the pool's threads only from the cpu stream: another stream would queue
  // behind the cpu stream's updates for the pool (one job at a time)
  if (ins.stream != STREAM_CPU) run.threads = 1;
  if (pr.progress >= 0) {
    begin_progress(id);
    run.on_tile = &Executor::on_tile_done;
    run.ctx = &progress_[pr.progress];
  }
  adam_half_copy((const float*)arenas_.host_ptr(a.tier, a.offset_bytes), (uint16_t*)arenas_.host_ptr(b.tier, b.offset_bytes),
                 p_.tensors[a.tensor].numel, (AdamHalfType)pr.half_cast_type, run);
  return true;
}

// ---------------------------------------------------------------------------
// tile progress: a producer publishes how many leading elements are final; a
// copy that follows it moves them as they come

void Executor::begin_progress(int32_t id) {
  TileProgress& tp = progress_[prepared_[id].progress];
  tp.elems.store(0);
  tp.gen.store(gen_);  // after elems: a follower that sees this step's gen sees this step's elems
}

// Called by the kernel, in tile order, from a pool thread.
void Executor::on_tile_done(void* ctx, const AdamTileEvent& e) {
  TileProgress* tp = (TileProgress*)ctx;
  tp->elems.store(e.end);  // seq_cst with the load of `want` below and the follower's store of it: no lost wake-up
  if (e.end >= tp->want.load()) {
    std::lock_guard<std::mutex> lk(tp->ex->mu_);
    tp->ex->progress_cv_.notify_all();
  }
}

// Elements of the producer's output that are final in the current step.
int64_t Executor::available_elems(int32_t producer, int64_t n) const {
  if (done_gen_[producer].load(std::memory_order_acquire) == gen_) return n;  // also a skipped update
  const TileProgress& tp = progress_[prepared_[producer].progress];
  return tp.gen.load() == gen_ ? std::min(n, tp.elems.load()) : 0;
}

// The copy of a producer's half-precision output, tile by tile: each range of
// final elements is copied as soon as it is there; in between the stream sleeps
// until at least kFollowChunk more elements (or the rest) are final, the
// producer completes, or the step aborts. The time asleep is not busy time.
bool Executor::execute_following_copy(int32_t s, int32_t id, std::string* msg) {
  StreamState& st = streams_[s];
  const int32_t producer = prepared_[id].follows;
  const ChunkedCopy c = chunked_copy(id);
  TileProgress& tp = progress_[prepared_[producer].progress];
  int64_t copied = 0;
  while (copied < c.n) {
    const int64_t ready = available_elems(producer, c.n);
    if (ready > copied) {
      std::memcpy(c.to + copied * c.esize, c.from + copied * c.esize, (size_t)((ready - copied) * c.esize));
      copied = ready;
      continue;
    }
    Clock::time_point w0 = Clock::now();
    {
      std::unique_lock<std::mutex> lk(mu_);
      tp.want.store(std::min(c.n, copied + kFollowChunk));
      progress_cv_.wait(lk, [&] { return abort_ || available_elems(producer, c.n) >= tp.want.load(); });
      tp.want.store(INT64_MAX);
    }
    st.idle_seconds += seconds_between(w0, Clock::now());
    if (abort_) { *msg = "stopped: the step was aborted"; return false; }
  }
  if (prepared_[id].link >= 0) st.link_bytes[prepared_[id].link] += c.bytes;
  return true;
}

// ---------------------------------------------------------------------------
// memory bookkeeping (mu_ held unless said otherwise)

void Executor::touch(int32_t buffer) {
  const BufferSpec& b = p_.buffers[buffer];
  mem_.peak_bytes[b.tier] = std::max(mem_.peak_bytes[b.tier], b.offset_bytes + b.size_bytes);
}

void Executor::make_live(int32_t buffer) {
  if (live_[buffer]) return;
  const BufferSpec& b = p_.buffers[buffer];
  live_[buffer] = 1;
  live_bytes_[b.tier] += b.size_bytes;
  mem_.peak_live_bytes[b.tier] = std::max(mem_.peak_live_bytes[b.tier], live_bytes_[b.tier]);
}

void Executor::complete_free(int32_t id) {
  const int32_t b = p_.instructions[id].inputs[0];
  if (!live_[b]) return;
  live_[b] = 0;
  live_bytes_[p_.buffers[b].tier] -= p_.buffers[b].size_bytes;
}

void Executor::note_start(int32_t id) {
  const Instruction& ins = p_.instructions[id];
  if (ins.kind == INSTR_FREE) return;
  if (extents_known_) {  // every buffer an instruction touches was touched in a whole step already
    for (int32_t b : ins.outputs) make_live(b);
    return;
  }
  for (int32_t b : ins.inputs) touch(b);
  for (int32_t b : ins.outputs) { touch(b); make_live(b); }
}

void Executor::note_written(int32_t buffer) {
  std::lock_guard<std::mutex> lk(mu_);
  touch(buffer);
  make_live(buffer);
}

void Executor::note_read(int32_t buffer) {
  std::lock_guard<std::mutex> lk(mu_);
  touch(buffer);
}

MemoryStats Executor::memory_stats() {
  std::lock_guard<std::mutex> lk(mu_);
  return mem_;
}

}  // namespace tiercut
