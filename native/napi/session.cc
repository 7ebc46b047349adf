// session.cc — createSession and the NativeSession object (write, read, step,
// stats, close). The N-API side of the executor, sharp-style:
//   - createSession parses the JS program once into plain structs (program.h),
//     validates it, opens the arenas and starts the stream threads;
//   - step() queues an AsyncWorker whose Execute() runs on a libuv thread and
//     touches only the SessionCore; the JS stats object is built in OnOK on the
//     main thread;
//   - every other method is synchronous on the main thread.
// Sequence parallelism: createRingGroup(ranks, timeoutMs) makes a ThreadGroup;
// createSession(program, { group, rank }) makes one rank of it (its executor
// gets a ThreadComm; without a group, a ring of one). The ranks of a group step
// together through stepGroup(sessions, step, opts): one AsyncWorker whose
// Execute() runs the P executors' steps on P threads of their own, so P
// collective steps never wait for slots of the libuv pool (4 threads by
// default: with P >= 4 ranks each stepped by its own AsyncWorker, queued ranks
// would leave the running ones waiting for messages until their timeout).
// Lifetime: SessionCore is shared by the JS wrapper and any queued step, so a
// step never outlives its state. close() (explicit, by garbage collection, or
// at environment teardown through a cleanup hook) waits for a running step,
// joins the threads, frees the arenas and removes the spill directory.
#define TIERCUT_WITH_NAPI 1
#include <cmath>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "../exec/executor.h"
#include "../plan/program.h"
#include "../ring/comm_threads.h"
#include "../tiers/arena.h"
#include "exports.h"

namespace tiercut {

// ---------------------------------------------------------------------------
// the state a session's JS wrapper and its in-flight steps share

struct SessionCore {
  Program program;
  Arenas arenas;
  std::shared_ptr<ring::ThreadGroup> group;  // the ring this session is a rank of (a ring of one by default)
  std::unique_ptr<ring::ThreadComm> comm;    // outlives executor (declared before it)
  std::unique_ptr<Executor> executor;
  MemoryStats final_memory;  // memory stats frozen by close(), so stats() still answers
  std::mutex step_mu;        // held for a whole step; close() takes it, so it waits for the step
  bool closed = false;       // written under step_mu, on the main thread only
  bool hook_fired = false;   // main thread: the environment cleanup hook already closed us

  ~SessionCore() { close(); }

  void close() {
    // a step in flight on a ring of ranks: the ring is stopped first, so that
    // every rank leaves the step at its next wait (close had waited for the
    // whole group step: at P = 128 a Ctrl-C took half a minute). A session of
    // one rank makes no ring waits: its step runs to its end, as before.
    std::unique_lock<std::mutex> lk(step_mu, std::try_to_lock);
    if (!lk.owns_lock()) {
      if (comm && comm->size() > 1) comm->abort("the session was closed during the step");
      lk.lock();
    }
    if (closed) return;
    closed = true;
    if (executor) {
      final_memory = executor->memory_stats();
      executor.reset();  // joins the stream threads
    }
    arenas.close();      // frees memory, removes <spillDir>/tiercut-<pid>-<n>/
  }
};

static void cleanup_hook(SessionCore* core) {
  core->hook_fired = true;
  core->close();
}

using CoreHandle = std::shared_ptr<SessionCore>;
using CleanupHandle = Napi::Env::CleanupHook<void (*)(SessionCore*), SessionCore>;

// ---------------------------------------------------------------------------
// the JS object

class SessionWrap : public Napi::ObjectWrap<SessionWrap> {
 public:
  static Napi::Function define(Napi::Env env) {
    return DefineClass(env, "NativeSession",
                       {InstanceMethod<&SessionWrap::write>("write"), InstanceMethod<&SessionWrap::read>("read"),
                        InstanceMethod<&SessionWrap::step>("step"), InstanceMethod<&SessionWrap::stats>("stats"),
                        InstanceMethod<&SessionWrap::info>("info"), InstanceMethod<&SessionWrap::close>("close")});
  }

  explicit SessionWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<SessionWrap>(info) {
    if (info.Length() < 1 || !info[0].IsExternal())
      throw Napi::TypeError::New(info.Env(), "NativeSession: construct sessions with createSession(program)");
    core_ = *info[0].As<Napi::External<CoreHandle>>().Data();
    hook_ = info.Env().AddCleanupHook(cleanup_hook, core_.get());
  }

  ~SessionWrap() override { shut(Env()); }

  void step_settled() { steps_in_flight_--; }
  void step_queued() { steps_in_flight_++; }
  const CoreHandle& core() const { return core_; }
  // for stepGroup: throws like step() on a closed or busy session
  void check_steppable(const char* method) { check_open(method); check_idle(method); }

 private:
  void shut(Napi::Env env) {
    if (!core_) return;
    core_->close();
    if (!core_->hook_fired && !hook_.IsEmpty()) hook_.Remove(env);
    hook_ = CleanupHandle();
  }

  void check_open(const char* method) {
    if (!core_ || core_->closed) throw Napi::Error::New(Env(), std::string(method) + ": the session is closed");
  }

  void check_idle(const char* method) {
    if (steps_in_flight_ > 0)
      throw Napi::Error::New(Env(), std::string(method) + ": a step is running; await its promise first");
  }

  int32_t read_buffer_id(const Napi::CallbackInfo& info, const char* method) {
    std::string field = std::string(method) + ": buffer";
    if (core_->program.buffers.empty()) throw Napi::RangeError::New(Env(), field + ": the program has no buffers");
    return (int32_t)read_int(info[0], field, 0, (int64_t)core_->program.buffers.size() - 1);
  }

  // write(buffer, data): copies data's bytes into the buffer
  Napi::Value write(const Napi::CallbackInfo& info) {
    check_open("session.write");
    check_idle("session.write");
    int32_t id = read_buffer_id(info, "session.write");
    const BufferSpec& b = core_->program.buffers[id];
    Napi::Value v = info[1];
    const uint8_t* data = nullptr;
    size_t len = 0;
    if (v.IsTypedArray()) {
      Napi::TypedArray ta = v.As<Napi::TypedArray>();
      data = (const uint8_t*)ta.ArrayBuffer().Data() + ta.ByteOffset();
      len = ta.ByteLength();
    } else if (v.IsDataView()) {
      Napi::DataView dv = v.As<Napi::DataView>();
      data = (const uint8_t*)dv.ArrayBuffer().Data() + dv.ByteOffset();
      len = dv.ByteLength();
    } else {
      throw Napi::TypeError::New(Env(), "session.write: data: expected an ArrayBufferView (a typed array or DataView), got " +
                                            describe_value(v));
    }
    if ((int64_t)len != b.size_bytes) {
      std::ostringstream os;
      os << "session.write: data: expected " << b.size_bytes << " bytes (buffer " << id << "), got " << len;
      throw Napi::RangeError::New(Env(), os.str());
    }
    std::string err;
    if (!core_->arenas.write(b.tier, b.offset_bytes, data, b.size_bytes, &err))
      throw Napi::Error::New(Env(), "session.write: buffer " + std::to_string(id) + ": " + err);
    core_->executor->note_written(id);
    return Env().Undefined();
  }

  // read(buffer): a Uint8Array copy of the buffer's bytes
  Napi::Value read(const Napi::CallbackInfo& info) {
    check_open("session.read");
    check_idle("session.read");
    int32_t id = read_buffer_id(info, "session.read");
    const BufferSpec& b = core_->program.buffers[id];
    Napi::Uint8Array out = Napi::Uint8Array::New(Env(), (size_t)b.size_bytes);
    std::string err;
    if (!core_->arenas.read(b.tier, b.offset_bytes, out.Data(), b.size_bytes, &err))
      throw Napi::Error::New(Env(), "session.read: buffer " + std::to_string(id) + ": " + err);
    core_->executor->note_read(id);
    return out;
  }

  Napi::Value step(const Napi::CallbackInfo& info);

  // stats(): peak bytes per tier over the session so far
  Napi::Value stats(const Napi::CallbackInfo& info) {
    if (!core_) throw Napi::Error::New(Env(), "session.stats: the session is closed");
    MemoryStats m = core_->closed ? core_->final_memory : core_->executor->memory_stats();
    Napi::Env env = Env();
    Napi::Array peak = Napi::Array::New(env, kTierCount), live = Napi::Array::New(env, kTierCount);
    for (uint32_t t = 0; t < kTierCount; t++) {
      peak.Set(t, Napi::Number::New(env, (double)m.peak_bytes[t]));
      live.Set(t, Napi::Number::New(env, (double)m.peak_live_bytes[t]));
    }
    Napi::Object o = Napi::Object::New(env);
    o.Set("peakBytes", peak);
    o.Set("peakLiveBytes", live);
    return o;
  }

  // info(): how the nvme tier is served (on an open session)
  Napi::Value info(const Napi::CallbackInfo& info) {
    check_open("session.info");
    Napi::Env env = Env();
    Napi::Object o = Napi::Object::New(env);
    const Arena& nv = core_->arenas.tier[TIER_NVME];
    o.Set("nvmeFile", nv.path);
    o.Set("nvmeDirect", nv.store ? nv.store->direct() : false);
    o.Set("nvmeBackend", nv.store ? nvme_backend_name(nv.store->backend()) : "");
    o.Set("nvmeEdgeReads", nv.store ? (double)nv.store->edge_reads() : 0.0);
    o.Set("nvmeIos", nv.store ? (double)nv.store->ios() : 0.0);
    o.Set("nvmeMergedChunks", nv.store ? (double)nv.store->merged_chunks() : 0.0);
    o.Set("nvmeNote", core_->arenas.nvme_note());
    o.Set("nvmeQueueDepth", (double)core_->program.nvme.queue_depth);
    o.Set("nvmeBlockBytes", (double)core_->program.nvme.block_bytes);
    return o;
  }

  // close(): idempotent; waits for a running step
  Napi::Value close(const Napi::CallbackInfo& info) {
    shut(info.Env());
    return info.Env().Undefined();
  }

  CoreHandle core_;
  CleanupHandle hook_;
  int32_t steps_in_flight_ = 0;  // main thread only: queued or running steps
};

// ---------------------------------------------------------------------------
// step(step, opts): the only asynchronous method

// A step's stats as the JS object runtime/binding.ts declares (StepStats).
static Napi::Object stats_to_js(Napi::Env env, const StepStats& stats_, bool trace_) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("seconds", stats_.seconds);
    Napi::Array busy = Napi::Array::New(env, kStreamCount), count = Napi::Array::New(env, kStreamCount);
    for (uint32_t s = 0; s < kStreamCount; s++) {
      busy.Set(s, Napi::Number::New(env, stats_.stream_busy_seconds[s]));
      count.Set(s, Napi::Number::New(env, (double)stats_.stream_instructions[s]));
    }
    o.Set("streamBusySeconds", busy);
    o.Set("streamInstructions", count);
    Napi::Object bytes = Napi::Object::New(env);
    bytes.Set("h2d", (double)stats_.link_bytes[LINK_H2D]);
    bytes.Set("d2h", (double)stats_.link_bytes[LINK_D2H]);
    bytes.Set("nvmeRead", (double)stats_.link_bytes[LINK_NVME_READ]);
    bytes.Set("nvmeWrite", (double)stats_.link_bytes[LINK_NVME_WRITE]);
    bytes.Set("cpuToCpu", (double)stats_.link_bytes[LINK_CPU_TO_CPU]);
    bytes.Set("ringSent", (double)stats_.ring_sent_bytes);
    o.Set("bytes", bytes);
    o.Set("ringWorkspaceBytes", (double)stats_.ring_workspace_bytes);
    if (trace_) {
      size_t n = stats_.start_seconds.size();
      Napi::Float64Array start = Napi::Float64Array::New(env, n), end = Napi::Float64Array::New(env, n);
      for (size_t i = 0; i < n; i++) { start[i] = stats_.start_seconds[i]; end[i] = stats_.end_seconds[i]; }
      Napi::Object t = Napi::Object::New(env);
      t.Set("stepStartSeconds", stats_.step_start_seconds);
      t.Set("startSeconds", start);
      t.Set("endSeconds", end);
      o.Set("trace", t);
    }
    return o;
}


class StepWorker : public Napi::AsyncWorker {
 public:
  StepWorker(Napi::Env env, SessionWrap* owner, Napi::Object self, CoreHandle core, int64_t step, bool has_lr, double lr, int skip_update,
             int64_t delayed_step)
      : Napi::AsyncWorker(env, "tiercut.step"), deferred_(Napi::Promise::Deferred::New(env)), owner_(owner),
        core_(std::move(core)), step_(step), has_lr_(has_lr), lr_(lr), skip_update_(skip_update), delayed_step_(delayed_step) {
    self_ = Napi::Persistent(self);  // keeps the session object (and owner_) alive until we settle
  }

  Napi::Promise promise() { return deferred_.Promise(); }
  void set_trace(bool trace) { trace_ = trace; }

  // libuv thread: no N-API here
  void Execute() override {
    std::lock_guard<std::mutex> lk(core_->step_mu);
    if (core_->closed) {
      SetError("session.step: the session was closed before step " + std::to_string(step_) + " ran");
      return;
    }
    std::string err;
    if (!core_->executor->step(step_, has_lr_, lr_, &stats_, &err, skip_update_, delayed_step_)) SetError(err);
  }

  void OnOK() override {
    owner_->step_settled();
    deferred_.Resolve(stats_to_js(Env(), stats_, trace_));
  }

  void OnError(const Napi::Error& e) override {
    owner_->step_settled();
    deferred_.Reject(e.Value());
  }

 private:
  Napi::Promise::Deferred deferred_;
  Napi::ObjectReference self_;
  SessionWrap* owner_;
  CoreHandle core_;
  int64_t step_;
  bool has_lr_;
  double lr_;
  int skip_update_;
  int64_t delayed_step_;
  bool trace_ = false;  // return each instruction's start and end (set before Queue)
  StepStats stats_;
};

Napi::Value SessionWrap::step(const Napi::CallbackInfo& info) {
  check_open("session.step");
  if (core_->group->size() > 1)
    throw Napi::Error::New(Env(), "session.step: this session is rank " + std::to_string(core_->comm->rank()) + " of a ring of " +
                                      std::to_string(core_->group->size()) + "; step all ranks together with stepGroup");
  int64_t step = read_int(info[0], "session.step: step", 1, 9007199254740991LL);
  bool has_lr = false, trace = false;
  int skip_update = Executor::SKIP_NONE;
  int64_t delayed_step = -1;  // the delayed updates' step number: as `step`
  double lr = 0;
  if (info.Length() > 1 && !info[1].IsUndefined()) {
    if (!info[1].IsObject() || info[1].IsArray())
      throw Napi::TypeError::New(Env(), "session.step: opts: expected an object or undefined, got " + describe_value(info[1]));
    Napi::Value tv = info[1].As<Napi::Object>().Get("trace");
    if (!tv.IsUndefined()) {
      if (!tv.IsBoolean()) throw Napi::TypeError::New(Env(), "session.step: opts.trace: expected a boolean, got " + describe_value(tv));
      trace = tv.As<Napi::Boolean>().Value();
    }
    Napi::Value lv = info[1].As<Napi::Object>().Get("lr");
    if (!lv.IsUndefined()) {
      lr = read_number(lv, "session.step: opts.lr");
      if (!std::isfinite(lr)) throw Napi::RangeError::New(Env(), "session.step: opts.lr: expected a finite number, got " + describe_value(lv));
      has_lr = true;
    }
    Napi::Value sv = info[1].As<Napi::Object>().Get("skipUpdate");
    if (!sv.IsUndefined()) {
      if (!sv.IsBoolean()) throw Napi::TypeError::New(Env(), "session.step: opts.skipUpdate: expected a boolean, got " + describe_value(sv));
      if (sv.As<Napi::Boolean>().Value()) skip_update = Executor::SKIP_ALL;
    }
    Napi::Value ov = info[1].As<Napi::Object>().Get("onlyDelayed");
    if (!ov.IsUndefined()) {
      if (!ov.IsBoolean()) throw Napi::TypeError::New(Env(), "session.step: opts.onlyDelayed: expected a boolean, got " + describe_value(ov));
      if (ov.As<Napi::Boolean>().Value()) {
        if (skip_update == Executor::SKIP_ALL) throw Napi::TypeError::New(Env(), "session.step: opts.onlyDelayed and opts.skipUpdate together");
        skip_update = Executor::SKIP_UNDELAYED;
      }
    }
    Napi::Value dv = info[1].As<Napi::Object>().Get("delayedStep");
    if (!dv.IsUndefined()) delayed_step = read_int(dv, "session.step: opts.delayedStep", 0, 9007199254740991LL);
  }
  StepWorker* w = new StepWorker(Env(), this, info.This().As<Napi::Object>(), core_, step, has_lr, lr, skip_update, delayed_step);
  w->set_trace(trace);
  Napi::Promise p = w->promise();
  w->Queue();
  steps_in_flight_++;
  return p;
}

// ---------------------------------------------------------------------------
// createSession(program)

static Napi::FunctionReference* session_ctor(Napi::Env env) { return env.GetInstanceData<Napi::FunctionReference>(); }

void init_session_class(Napi::Env env) {
  Napi::FunctionReference* ctor = new Napi::FunctionReference(Napi::Persistent(SessionWrap::define(env)));
  env.SetInstanceData<Napi::FunctionReference>(ctor);
}

Napi::Value create_session(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1) throw Napi::TypeError::New(env, "program: expected a NativeProgram object, got nothing");
  CoreHandle core = std::make_shared<SessionCore>();
  parse_program(info[0], &core->program);
  std::string err;
  if (!validate_program(&core->program, &err)) throw Napi::Error::New(env, err);
  int rank = 0;
  core->group = std::make_shared<ring::ThreadGroup>(1, 120000);
  if (info.Length() > 1 && !info[1].IsUndefined()) {
    if (!info[1].IsObject()) throw Napi::TypeError::New(env, "ring: expected { group, rank } or undefined, got " + describe_value(info[1]));
    Napi::Object r = info[1].As<Napi::Object>();
    Napi::Value h = r.Get("group");
    if (!h.IsObject() || !h.As<Napi::Object>().Get("handle").IsExternal())
      throw Napi::TypeError::New(env, "ring.group: expected a group from createRingGroup, got " + describe_value(h));
    core->group = *h.As<Napi::Object>().Get("handle").As<Napi::External<std::shared_ptr<ring::ThreadGroup>>>().Data();
    rank = (int)read_int(r.Get("rank"), "ring.rank", 0, core->group->size() - 1);
  }
  core->comm = std::make_unique<ring::ThreadComm>(core->group, rank);
  if (!core->arenas.open(core->program, &err)) throw Napi::Error::New(env, err);
  core->executor = std::make_unique<Executor>(core->program, core->arenas, core->comm.get());
  // hand the core to a new wrapper; the External deletes its holder when collected
  Napi::External<CoreHandle> ext = Napi::External<CoreHandle>::New(
      env, new CoreHandle(core), [](Napi::Env, CoreHandle* h) { delete h; });
  return session_ctor(env)->New({ext});
}

// ---------------------------------------------------------------------------
// createRingGroup(ranks, timeoutMs): the ThreadGroup the ranks of one ring share

Napi::Value create_ring_group(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int ranks = (int)read_int(info[0], "createRingGroup: ranks", 1, 1024);
  int timeout_ms = info.Length() > 1 && !info[1].IsUndefined() ? (int)read_int(info[1], "createRingGroup: timeoutMs", 1, 1 << 30) : 120000;
  auto* holder = new std::shared_ptr<ring::ThreadGroup>(std::make_shared<ring::ThreadGroup>(ranks, timeout_ms));
  Napi::Object o = Napi::Object::New(env);
  o.Set("ranks", ranks);
  o.Set("timeoutMs", timeout_ms);
  o.Set("handle", Napi::External<std::shared_ptr<ring::ThreadGroup>>::New(
                      env, holder, [](Napi::Env, std::shared_ptr<ring::ThreadGroup>* h) { delete h; }));
  return o;
}

// ---------------------------------------------------------------------------
// stepGroup(sessions, step, opts): one step of every rank of a ring, together

class GroupStepWorker : public Napi::AsyncWorker {
 public:
  GroupStepWorker(Napi::Env env, std::vector<SessionWrap*> owners, std::vector<CoreHandle> cores, int64_t step, bool trace)
      : Napi::AsyncWorker(env, "tiercut.stepGroup"), deferred_(Napi::Promise::Deferred::New(env)), owners_(std::move(owners)),
        cores_(std::move(cores)), step_(step), trace_(trace), stats_(cores_.size()) {
    for (SessionWrap* w : owners_) refs_.push_back(Napi::Persistent(w->Value()));
  }
  Napi::Promise promise() { return deferred_.Promise(); }

  // libuv thread: P threads run the P executors' steps at once (no N-API here)
  void Execute() override {
    const size_t P = cores_.size();
    std::vector<std::unique_lock<std::mutex>> locks;
    for (const CoreHandle& c : cores_) locks.emplace_back(c->step_mu);  // sessions are distinct: no lock-order cycle
    for (size_t r = 0; r < P; r++)
      if (cores_[r]->closed) { SetError("stepGroup: rank " + std::to_string(r) + "'s session was closed before step " + std::to_string(step_) + " ran"); return; }
    std::vector<std::string> errs(P);
    std::vector<char> ok(P, 1);
    auto run = [&](size_t r) { ok[r] = cores_[r]->executor->step(step_, false, 0, &stats_[r], &errs[r]); };
    std::vector<std::thread> threads;
    for (size_t r = 1; r < P; r++) threads.emplace_back(run, r);
    run(0);
    for (std::thread& t : threads) t.join();
    // the cause, not the follow-on failures: the first rank that aborted the group
    auto [rank, why] = cores_[0]->group->failure();
    if (rank >= 0) { SetError(why); return; }
    for (size_t r = 0; r < P; r++)
      if (!ok[r]) { SetError("rank " + std::to_string(r) + ": " + errs[r]); return; }
  }

  void OnOK() override {
    for (SessionWrap* w : owners_) w->step_settled();
    Napi::Env env = Env();
    Napi::Array out = Napi::Array::New(env, stats_.size());
    for (size_t r = 0; r < stats_.size(); r++) out.Set((uint32_t)r, stats_to_js(env, stats_[r], trace_));
    deferred_.Resolve(out);
  }

  void OnError(const Napi::Error& e) override {
    for (SessionWrap* w : owners_) w->step_settled();
    deferred_.Reject(e.Value());
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::vector<SessionWrap*> owners_;
  std::vector<Napi::ObjectReference> refs_;  // keep every session object alive until we settle
  std::vector<CoreHandle> cores_;
  int64_t step_;
  bool trace_;
  std::vector<StepStats> stats_;
};

Napi::Value step_group(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsArray()) throw Napi::TypeError::New(env, "stepGroup: sessions: expected an array of sessions, one per rank in rank order");
  Napi::Array arr = info[0].As<Napi::Array>();
  const uint32_t P = arr.Length();
  if (P < 1) throw Napi::RangeError::New(env, "stepGroup: sessions: expected at least one session");
  Napi::FunctionReference* ctor = session_ctor(env);
  std::vector<SessionWrap*> owners;
  std::vector<CoreHandle> cores;
  for (uint32_t r = 0; r < P; r++) {
    Napi::Value v = arr.Get(r);
    std::string field = "stepGroup: sessions[" + std::to_string(r) + "]";
    if (!v.IsObject() || !v.As<Napi::Object>().InstanceOf(ctor->Value())) throw Napi::TypeError::New(env, field + ": expected a session from createSession, got " + describe_value(v));
    SessionWrap* w = SessionWrap::Unwrap(v.As<Napi::Object>());
    w->check_steppable(field.c_str());
    const CoreHandle& c = w->core();
    if (!cores.empty() && c->group != cores[0]->group) throw Napi::Error::New(env, field + ": belongs to another ring group than sessions[0]");
    if (c->comm->rank() != (int)r) throw Napi::Error::New(env, field + ": is rank " + std::to_string(c->comm->rank()) + ", expected rank " + std::to_string(r) + " (sessions in rank order)");
    owners.push_back(w);
    cores.push_back(c);
  }
  if ((int)P != cores[0]->group->size())
    throw Napi::RangeError::New(env, "stepGroup: sessions: the ring has " + std::to_string(cores[0]->group->size()) + " ranks, got " + std::to_string(P) + " sessions");
  int64_t step = read_int(info[1], "stepGroup: step", 1, 9007199254740991LL);
  bool trace = false;
  if (info.Length() > 2 && !info[2].IsUndefined()) {
    if (!info[2].IsObject()) throw Napi::TypeError::New(env, "stepGroup: opts: expected an object or undefined, got " + describe_value(info[2]));
    Napi::Value tv = info[2].As<Napi::Object>().Get("trace");
    if (!tv.IsUndefined()) {
      if (!tv.IsBoolean()) throw Napi::TypeError::New(env, "stepGroup: opts.trace: expected a boolean, got " + describe_value(tv));
      trace = tv.As<Napi::Boolean>().Value();
    }
  }
  GroupStepWorker* w = new GroupStepWorker(env, owners, cores, step, trace);
  Napi::Promise p = w->promise();
  w->Queue();
  for (SessionWrap* o : owners) o->step_queued();
  return p;
}

}  // namespace tiercut
