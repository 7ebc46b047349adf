// session.cc — createSession and the NativeSession object (write, read, step,
// stats, close). The N-API side of the executor, sharp-style:
//   - createSession parses the JS program once into plain structs (program.h),
//     validates it, opens the arenas and starts the stream threads;
//   - step() queues an AsyncWorker whose Execute() runs on a libuv thread and
//     touches only the SessionCore; the JS stats object is built in OnOK on the
//     main thread;
//   - every other method is synchronous on the main thread.
// Lifetime: SessionCore is shared by the JS wrapper and any queued step, so a
// step never outlives its state. close() (explicit, by garbage collection, or
// at environment teardown through a cleanup hook) waits for a running step,
// joins the threads, frees the arenas and removes the spill directory.
#define TIERCUT_WITH_NAPI 1
#include <cmath>
#include <memory>
#include <mutex>
#include <sstream>

#include "../exec/executor.h"
#include "../plan/program.h"
#include "../tiers/arena.h"
#include "exports.h"

namespace tiercut {

// ---------------------------------------------------------------------------
// the state a session's JS wrapper and its in-flight steps share

struct SessionCore {
  Program program;
  Arenas arenas;
  std::unique_ptr<Executor> executor;
  MemoryStats final_memory;  // memory stats frozen by close(), so stats() still answers
  std::mutex step_mu;        // held for a whole step; close() takes it, so it waits for the step
  bool closed = false;       // written under step_mu, on the main thread only
  bool hook_fired = false;   // main thread: the environment cleanup hook already closed us

  ~SessionCore() { close(); }

  void close() {
    std::lock_guard<std::mutex> lk(step_mu);
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

class StepWorker : public Napi::AsyncWorker {
 public:
  StepWorker(Napi::Env env, SessionWrap* owner, Napi::Object self, CoreHandle core, int64_t step, bool has_lr, double lr, bool skip_update)
      : Napi::AsyncWorker(env, "tiercut.step"), deferred_(Napi::Promise::Deferred::New(env)), owner_(owner),
        core_(std::move(core)), step_(step), has_lr_(has_lr), lr_(lr), skip_update_(skip_update) {
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
    if (!core_->executor->step(step_, has_lr_, lr_, &stats_, &err, skip_update_)) SetError(err);
  }

  void OnOK() override {
    owner_->step_settled();
    Napi::Env env = Env();
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
    o.Set("bytes", bytes);
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
    deferred_.Resolve(o);
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
  bool skip_update_;
  bool trace_ = false;  // return each instruction's start and end (set before Queue)
  StepStats stats_;
};

Napi::Value SessionWrap::step(const Napi::CallbackInfo& info) {
  check_open("session.step");
  int64_t step = read_int(info[0], "session.step: step", 1, 9007199254740991LL);
  bool has_lr = false, skip_update = false, trace = false;
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
      skip_update = sv.As<Napi::Boolean>().Value();
    }
  }
  StepWorker* w = new StepWorker(Env(), this, info.This().As<Napi::Object>(), core_, step, has_lr, lr, skip_update);
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
  if (!core->arenas.open(core->program, &err)) throw Napi::Error::New(env, err);
  core->executor = std::make_unique<Executor>(core->program, core->arenas);
  // hand the core to a new wrapper; the External deletes its holder when collected
  Napi::External<CoreHandle> ext = Napi::External<CoreHandle>::New(
      env, new CoreHandle(core), [](Napi::Env, CoreHandle* h) { delete h; });
  return session_ctor(env)->New({ext});
}

}  // namespace tiercut
