// executor.h — runs the instructions of one step on stream threads.
//
// Takes: a validated Program and its open Arenas (both outlive the Executor).
// Gives: step(), which runs every instruction exactly once, and the measured
//        StepStats; memory statistics over the session so far.
// Keeps true:
//   - the thread that calls step() runs the first stream that has instructions
//     (the gpu stream when it has any) itself; every other stream that has
//     instructions has one std::thread, created once by the constructor and
//     reused by every step. Each runs its stream's instructions in increasing
//     id order. (Waking a sleeping thread costs tens of microseconds on a VM;
//     a plan whose work is all on one stream then wakes none.)
//   - an instruction starts only when every instruction in its `waits` has
//     completed in the current step (events: a per-instruction "completed in
//     generation g" number, written under one mutex; a waiter polls it for up
//     to TIERCUT_SPIN_US before blocking, exec/spin.h, then sleeps on its
//     stream's own condition variable, which only a completion that satisfies
//     it, or an abort, signals: on 2 cores a wake-up for all streams at every
//     completion cost ~24 µs a hop round six streams, the targeted one ~6 µs). Because every
//     wait points to an earlier id, the lowest unfinished instruction can always
//     start, so a step cannot deadlock.
//   - the first error (kernel message, I/O error) aborts the step: every thread
//     stops at its next instruction boundary, step() returns false with
//     "instruction <id> (<stream>, <what>[ of tensor '<name>']): <message>", and the next
//     step starts clean.
//   - every instruction's start and end (steady_clock) are recorded in the
//     step's StepStats, for traces. A free that is ready when the instruction
//     before it on its stream completes completes with it (start = end = that
//     end): it is bookkeeping only, and a round of its own (two clock reads,
//     the completion) would cost more than the free itself.
//   - collective ops (ring attention, all-reduce; exec/collective.h) run with the
//     rank's Communicator; the first error of a step also aborts the
//     communicator's group, so the other ranks stop at once instead of waiting
//     for messages that will never come.
//   - nvme copies: a copy takes along the copies right after it on its
//     stream that are ready at that moment (same direction, disjoint memory;
//     up to kMaxNvmeBatch) and runs them as one NvmeStore::transfer, so
//     their requests overlap in the queue instead of paying one latency each.
//     The members share one start and one busy interval (the batch's), but
//     each completes as soon as its own request and those before it are done
//     (the store reports requests in order): its end time, its done mark,
//     the frees after it in the batch and the streams waiting on it happen
//     then, not when the whole batch is done. Stream order holds: a member
//     never completes before the one before it. A failing request stops the
//     run; no member from it on is reported done.
//   - tiles and arrivals (prepare_arrivals in executor.cc): a copy of a fused
//     adam's p16 output or of a master32 -> param16 cast, waiting on that
//     producer, follows it tile by tile (it waits for the producer's tile
//     progress instead of its completion; time asleep between tiles is not
//     busy time); the copy that delivers a fused adam's gradient checks it for
//     inf/NaN as it copies, and the adam skips its own check pass. A cast
//     f32 -> fp16/bf16 runs tiled on the shared pool (bits as half.h).
// Never calls N-API; touches only the Program, the Arenas, the Communicator and its own state.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../adam/cpu_adam.h"
#include "../plan/program.h"
#include "../ring/comm.h"
#include "../tiers/arena.h"

namespace tiercut {

// The most nvme copies one transfer takes (gather_nvme_batch).
constexpr int32_t kMaxNvmeBatch = 64;

// Byte counters per link, indices of StepStats::link_bytes.
enum Link : int32_t { LINK_H2D = 0, LINK_D2H = 1, LINK_NVME_READ = 2, LINK_NVME_WRITE = 3, LINK_CPU_TO_CPU = 4, LINK_COUNT = 5 };

struct StepStats {
  double seconds = 0;                                  // wall time of the step
  double stream_busy_seconds[kStreamCount] = {0};      // sum of instruction durations
  int64_t stream_instructions[kStreamCount] = {0};     // instructions completed
  int64_t link_bytes[LINK_COUNT] = {0};                // copies: cpu->gpu = h2d, gpu->cpu = d2h,
                                                       // nvme->host = nvmeRead, host->nvme = nvmeWrite,
                                                       // cpu->cpu = cpuToCpu (gpu->gpu is counted nowhere)
  // per instruction (index = id): when it started and ended in this step, in
  // seconds since the executor was made (steady_clock); for traces
  std::vector<double> start_seconds, end_seconds;
  double step_start_seconds = 0;                       // when this step began, same clock
  int64_t ring_sent_bytes = 0;                         // bytes this rank sent in collective ops
  int64_t ring_workspace_bytes = 0;                    // the largest one collective op's memory outside the arenas
};

struct MemoryStats {
  int64_t peak_bytes[kTierCount] = {0};       // max offset + size over every buffer touched so far
  int64_t peak_live_bytes[kTierCount] = {0};  // max of the sum of live buffer bytes
};

class Executor {
 public:
  // comm: this rank's communicator for collective ops (may be null: a program
  // without collectives); outlives the Executor.
  Executor(const Program& p, const Arenas& arenas, ring::Communicator* comm = nullptr);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs one step. `step` is the optimizer step number handed to adam (iattr[1]);
  // when has_lr, adam's fattr[0] becomes lr. Not reentrant: the caller runs one
  // step at a time. Returns false with *err set when the step was aborted.
  // skip_update: SKIP_NONE, or SKIP_ALL (every adam instruction completes
  // without touching anything), or SKIP_UNDELAYED (every adam but the delayed
  // ones: a DPU session applying its pending updates before a checkpoint).
  // delayed_step: the step number of the delayed updates (an adam whose op has
  // iattr[2] == 1: a DPU steady step's, which applies the previous step's
  // gradient); 0 skips them (the first steady step has no such gradient yet),
  // -1 gives them `step` like the others.
  enum SkipUpdate { SKIP_NONE = 0, SKIP_ALL = 1, SKIP_UNDELAYED = 2 };
  bool step(int64_t step, bool has_lr, double lr, StepStats* stats, std::string* err, int skip_update = SKIP_NONE, int64_t delayed_step = -1);

  // Bookkeeping for session.write / session.read (main thread, between steps).
  void note_written(int32_t buffer);
  void note_read(int32_t buffer);
  MemoryStats memory_stats();

  // Joins the stream threads. Idempotent; must not race with step().
  void stop();

 private:
  // How a run instruction's fp16/bf16 operands map into the stream's float scratch.
  struct HalfOperand {
    int32_t buffer;
    int64_t scratch_offset;  // in floats
    int64_t numel;
    AdamHalfType type;       // ADAM_HALF_F16 or ADAM_HALF_BF16
    bool widen;              // read by the op: widen before the call
    bool narrow;             // written by the op: round back after the call
  };
  struct Prepared {          // per instruction, built once
    std::vector<int64_t> in_scratch, out_scratch;  // scratch offset per operand, -1 = direct pointer
    std::vector<HalfOperand> halves;
    int64_t scratch_floats = 0;
    int32_t link = -1;       // copies: the Link counted, -1 for none
    bool nvme_batchable = false;  // a copy to or from nvme (see gather_nvme_batch)
    // adam with fp32 p, m, v updated in place: run by the fused CPU kernel
    // (native/adam) straight on the arena bytes, no scratch (see execute_fused_adam)
    bool fused_adam = false;
    int32_t adam_grad_type = 0;   // AdamGradType
    int32_t adam_half_type = 0;   // AdamHalfType; 0 = no p16 output
    // adam: the copy that delivers its gradient and checks it on the way
    // (-1: none; the adam's own check pass runs)
    int32_t grad_checked_by = -1;
    // a copy that delivers a fused adam's gradient between host arenas: copied
    // by adam_copy_grads_checked, its verdict kept in grad_verdict_ (AdamGradType; -1: plain copy)
    int32_t check_grad_type = -1;
    // reshape of fp32 into an fp16/bf16 buffer (master32 -> param16): run by
    // adam_half_copy over tiles on the shared pool (AdamHalfType; 0: not such a cast)
    int32_t half_cast_type = 0;
    // adam of a delayed update (its op's iattr[2] == 1): delayed_step_ applies
    bool delayed_adam = false;
    // a producer that another instruction follows (fused adam with a p16 output,
    // half cast, a gradient's copy down): index into progress_ (-1: none)
    int32_t progress = -1;
    // a copy that follows its producer tile by tile, or a fused adam that follows
    // its gradient's copy down chunk by chunk: the producer's id (-1: none); its
    // wait on the producer is replaced by the producer's progress
    int32_t follows = -1;
  };
  // Tile progress of one producer in the current step (see execute_following_copy).
  struct TileProgress {
    Executor* ex = nullptr;
    std::atomic<int64_t> gen{0};            // the step whose progress `elems` counts
    std::atomic<int64_t> elems{0};          // elements [0, elems) are final
    std::atomic<int64_t> want{INT64_MAX};   // a follower sleeps until elems >= want
  };
  struct StreamState {
    std::vector<int32_t> instructions;  // ids, increasing
    std::vector<float> scratch;         // widened fp16/bf16 operands
    std::thread thread;
    std::condition_variable cv;         // this stream blocked on a wait (under mu_)
    int32_t blocked_on = -1;            // the instruction whose waits it is blocked on; -1: not blocked
    double busy_seconds = 0;
    int64_t count = 0;
    int64_t link_bytes[LINK_COUNT] = {0};
    int64_t ring_bytes = 0;
    int64_t ring_workspace = 0;
    double idle_seconds = 0;            // of the current instruction: waiting inside it, not busy
  };

  void stream_main(int32_t s);
  void run_stream(int32_t s, int64_t gen);
  bool execute(int32_t s, int32_t id, std::string* msg);
  bool execute_fused_adam(int32_t id, std::string* msg);
  bool execute_half_cast(int32_t id, std::string* msg);
  bool execute_following_copy(int32_t s, int32_t id, std::string* msg);
  bool execute_grad_copy_ahead(int32_t s, int32_t id);
  struct ChunkedCopy { const uint8_t* from; uint8_t* to; int64_t n, esize, bytes; };
  ChunkedCopy chunked_copy(int32_t id) const;
  // an adam following its gradient's copy down: what its tile waits read
  struct Arrival { Executor* ex; int32_t copy; int64_t n; };
  static bool wait_arrival(void* ctx, int64_t end);
  void begin_progress(int32_t id);                   // a producer starts: its progress is 0 in this step
  int64_t available_elems(int32_t producer, int64_t n) const;
  static void on_tile_done(void* ctx, const AdamTileEvent& e);
  void prepare_arrivals();                           // grad_checked_by, check_grad_type, follows, progress
  void gather_nvme_batch(const StreamState& st, size_t k, int64_t gen, std::vector<int32_t>* batch);  // mu_ held
  bool execute_nvme_batch(int32_t s, const std::vector<int32_t>& batch, int64_t gen, size_t* completed, std::string* msg, int32_t* failed);
  void complete_members(int32_t s, const std::vector<int32_t>& batch, size_t from, size_t to, int64_t gen);  // mu_ not held
  std::string describe(int32_t id) const;
  bool waits_done(int32_t id, int64_t gen) const;   // mu_ not needed (atomics)
  void note_start(int32_t id);                       // mu_ held: liveness and extents
  void complete_free(int32_t id);                    // mu_ held: a free's buffer is no longer live
  void touch(int32_t buffer);                        // mu_ held
  void make_live(int32_t buffer);                    // mu_ held
  int32_t streams_to_wake(int32_t self, int64_t gen, int32_t* out);  // mu_ held

  const Program& p_;
  const Arenas& arenas_;
  ring::Communicator* comm_;
  std::chrono::steady_clock::time_point epoch_;       // construction; the trace clock's zero
  std::vector<double> start_, end_;                   // per instruction, this step (written by its stream)
  std::vector<Prepared> prepared_;
  StreamState streams_[kStreamCount];
  std::vector<int32_t> active_streams_;
  int32_t lead_stream_ = -1;           // run by the caller of step(); -1 when there are no instructions
  bool solo_ = false;                  // one active stream: its completions need no lock (run_stream)

  int64_t spin_ns_ = 0;                // spin_limit_ns() (exec/spin.h): poll before blocking

  std::mutex mu_;                      // guards everything below
  std::condition_variable start_cv_;   // a new generation (step) or stop
  // (a stream blocked on its next instruction's waits sleeps on its own
  // StreamState::cv; whoever completes what it waits for, or aborts, wakes it
  // alone: no thundering herd on a 2-core machine)
  std::condition_variable finish_cv_;  // running_ reached 0
  int64_t generation_ = 0;             // internal step counter; never repeats
  // per instruction: last generation it completed in. Written under mu_ (release),
  // also read without it (acquire) by a waiter that polls before blocking.
  std::unique_ptr<std::atomic<int64_t>[]> done_gen_;
  std::atomic<int32_t> running_{0};    // streams still in the current step (written under mu_)
  bool stop_ = false;
  std::atomic<bool> abort_{false};     // written under mu_
  std::string error_;
  std::condition_variable progress_cv_;  // a producer's tiles reached a follower's `want`, it completed, or abort
  std::unique_ptr<TileProgress[]> progress_;
  // per instruction: a gradient-checking copy's verdict, gen (finite) or -gen
  // (inf/NaN) of the step it ran in
  std::unique_ptr<std::atomic<int64_t>[]> grad_verdict_;
  AdamIsa adam_isa_ = AdamIsa::scalar;  // TIERCUT_ADAM_ISA or the best path (for copies and casts)
  std::string adam_isa_error_;          // non-empty: TIERCUT_ADAM_ISA is invalid (adam and casts fail with it)
  int64_t gen_ = 0;                     // the current step's generation, for the stream threads
  int64_t step_number_ = 1;
  bool has_lr_ = false;
  double lr_ = 0;
  int skip_update_ = SKIP_NONE;
  int64_t delayed_step_ = 1;

  bool extents_known_ = false;         // a step ran every instruction: mem_.peak_bytes is final (note_start)
  std::vector<uint8_t> live_;          // per buffer
  int64_t live_bytes_[kTierCount] = {0};
  MemoryStats mem_;
};

}  // namespace tiercut
