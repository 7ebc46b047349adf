// calibrate.cc — measurements of this machine for `tiercut hw calibrate` and
// bench/runtime (all synchronous; they block the calling thread):
//   hostBandwidth  single-thread memcpy between two host blocks (the emulated
//                  h2d / d2h copy) and a stream triad a = b + s*c (the memory
//                  bandwidth one kernel on one stream thread sees)
//   nvmeBench      the nvme store (native/tiers/nvme_store.h) writing then
//                  reading a file in a directory, with explicit queue depth,
//                  block size and request size; optionally checking every byte
//   nvmeLatency    time per small request, each direction alone and both at once
//   nvmeBatch      time per batch of k small requests handed to the store at once
//                  (NvmeStore::transfer, as the executor hands over ready copies),
//                  reads and writes in flight together, for several k
//   nvmeBackends   which nvme I/O backends this build and kernel can use
#define TIERCUT_WITH_NAPI 1
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../plan/program.h"
#include "../tiers/nvme_store.h"
#include "exports.h"

namespace tiercut {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

Napi::Object options(const Napi::CallbackInfo& info, const char* fn) {
  if (info.Length() < 1 || !info[0].IsObject() || info[0].IsArray())
    throw Napi::TypeError::New(info.Env(), std::string(fn) + ": expected an options object, got " +
                                               (info.Length() < 1 ? std::string("nothing") : describe_value(info[0])));
  return info[0].As<Napi::Object>();
}

int64_t opt_int(const Napi::Object& o, const char* fn, const char* field, int64_t def, int64_t lo, int64_t hi) {
  Napi::Value v = o.Get(field);
  if (v.IsUndefined()) return def;
  return read_int(v, std::string(fn) + ": " + field, lo, hi);
}

struct Block {
  uint8_t* p = nullptr;
  explicit Block(int64_t bytes) {
    if (posix_memalign((void**)&p, (size_t)kNvmeAlign, (size_t)bytes) != 0) p = nullptr;
  }
  ~Block() { std::free(p); }
};

// The NvmeStore settings of a probe: queueDepth, blockBytes (a multiple of
// 4096); every request owns its blocks unless the caller says otherwise.
NvmeSettings probe_settings(const Napi::Object& o, const char* fn) {
  NvmeSettings s;
  s.queue_depth = (int32_t)opt_int(o, fn, "queueDepth", s.queue_depth, 1, 64);
  s.block_bytes = opt_int(o, fn, "blockBytes", s.block_bytes, kNvmeAlign, 64 << 20);
  if (s.block_bytes % kNvmeAlign != 0)
    throw Napi::RangeError::New(o.Env(), std::string(fn) + ": blockBytes: expected a multiple of 4096, got " + std::to_string(s.block_bytes));
  s.owns_block_tails = true;
  return s;
}

// The probe's file: <dir>/tiercut-nvme-<what>-<pid>.bin, dir from its options.
std::string probe_path(const Napi::Object& o, const char* fn, const char* what) {
  Napi::Value dv = o.Get("dir");
  if (!dv.IsString()) throw Napi::TypeError::New(o.Env(), std::string(fn) + ": dir: expected a string, got " + describe_value(dv));
  std::string path = dv.As<Napi::String>().Utf8Value();
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path + "/tiercut-nvme-" + what + "-" + std::to_string((long long)::getpid()) + ".bin";
}

}  // namespace

// hostBandwidth({ bytes?, repeats? }) -> { copyBytesPerSec, triadBytesPerSec }
// Best of `repeats` passes; bytes per array (default 64 MiB).
Napi::Value host_bandwidth_js(const Napi::CallbackInfo& info) {
  Napi::Object o = options(info, "hostBandwidth");
  const int64_t bytes = opt_int(o, "hostBandwidth", "bytes", 64 << 20, 4096, (int64_t)1 << 34) / 4 * 4;
  const int64_t repeats = opt_int(o, "hostBandwidth", "repeats", 5, 1, 1000);
  Block a(bytes), b(bytes), c(bytes);
  if (!a.p || !b.p || !c.p) throw Napi::Error::New(info.Env(), "hostBandwidth: cannot allocate 3 x " + std::to_string(bytes) + " bytes");
  std::memset(a.p, 1, (size_t)bytes);
  std::memset(b.p, 2, (size_t)bytes);
  std::memset(c.p, 3, (size_t)bytes);
  double best_copy = 1e30, best_triad = 1e30;
  const int64_t n = bytes / 4;
  float* fa = (float*)a.p; const float* fb = (const float*)b.p; const float* fc = (const float*)c.p;
  volatile float sink = 0;
  for (int64_t r = 0; r < repeats; r++) {
    Clock::time_point t0 = Clock::now();
    std::memcpy(a.p, b.p, (size_t)bytes);
    best_copy = std::min(best_copy, since(t0));
    const float s = 1.0f + (float)r * 1e-7f;
    t0 = Clock::now();
    for (int64_t i = 0; i < n; i++) fa[i] = fb[i] + s * fc[i];
    best_triad = std::min(best_triad, since(t0));
    sink = sink + fa[r % n];
  }
  Napi::Object out = Napi::Object::New(info.Env());
  out.Set("copyBytesPerSec", (double)bytes / best_copy);       // bytes copied per second
  out.Set("triadBytesPerSec", 3.0 * (double)bytes / best_triad);  // bytes touched per second
  return out;
}

// nvmeBench({ dir, bytes?, queueDepth?, blockBytes?, requestBytes?, direct?, verify?, offsetBytes? })
//   -> { writeBytesPerSec, readBytesPerSec, direct, backend, note, file, mismatches }
// Writes `bytes` (default 256 MiB) in requests of requestBytes (default 64 MiB)
// from one host block, then reads them back; the file is removed. The host
// block is 4096-aligned plus offsetBytes (default 0; other values exercise the
// staged path). verify: each request is filled with a pattern of its file
// offset before it is written and checked after it is read back (the times
// then include that work); mismatches counts the wrong bytes. The store owns
// its block tails when requestBytes is a multiple of 4096 (every request then
// starts on a block boundary). Backend: TIERCUT_NVME_IO, as for a session.
Napi::Value nvme_bench_js(const Napi::CallbackInfo& info) {
  const char* fn = "nvmeBench";
  Napi::Object o = options(info, fn);
  const std::string path = probe_path(o, fn, "bench");
  const int64_t bytes = opt_int(o, fn, "bytes", 256 << 20, 1, (int64_t)1 << 40);
  const int64_t request = opt_int(o, fn, "requestBytes", 64 << 20, 1, (int64_t)1 << 34);
  NvmeSettings s = probe_settings(o, fn);
  Napi::Value direct_v = o.Get("direct");
  const bool direct = direct_v.IsUndefined() ? true : direct_v.ToBoolean().Value();
  const bool verify = o.Get("verify").ToBoolean().Value();
  const int64_t shift = opt_int(o, fn, "offsetBytes", 0, 0, kNvmeAlign - 1);

  const int64_t req = std::min(request, bytes);
  s.owns_block_tails = req % kNvmeAlign == 0;
  Block block(req + shift);
  if (!block.p) throw Napi::Error::New(info.Env(), std::string(fn) + ": cannot allocate " + std::to_string(req) + " bytes");
  uint8_t* host = block.p + shift;
  // byte i of the file holds pattern(i): a misplaced block reads back wrong
  auto pattern = [](int64_t i) { return (uint8_t)((i * 131 + (i >> 12) * 7 + 7) & 0xff); };
  auto fill = [&](int64_t off, int64_t n) { for (int64_t i = 0; i < n; i++) host[i] = pattern(off + i); };
  int64_t mismatches = 0;
  fill(0, req);

  NvmeStore store;
  std::string err;
  if (!store.open(path, bytes, s, direct, &err)) throw Napi::Error::New(info.Env(), std::string(fn) + ": " + err);
  Clock::time_point t0 = Clock::now();
  for (int64_t off = 0; off < bytes && err.empty(); off += req) {
    const int64_t n = std::min(req, bytes - off);
    if (verify) fill(off, n);
    if (!store.write(off, host, n, &err)) break;
  }
  double write_s = since(t0);
  t0 = Clock::now();
  for (int64_t off = 0; off < bytes && err.empty(); off += req) {
    const int64_t n = std::min(req, bytes - off);
    if (verify) std::memset(host, 0, (size_t)n);
    if (!store.read(off, host, n, &err)) break;
    if (verify)
      for (int64_t i = 0; i < n; i++) mismatches += host[i] != pattern(off + i);
  }
  double read_s = since(t0);
  bool was_direct = store.direct();
  const char* backend = nvme_backend_name(store.backend());
  const int64_t edge_reads = store.edge_reads();
  std::string note = store.note();
  store.close();
  if (!err.empty()) throw Napi::Error::New(info.Env(), std::string(fn) + ": " + err);
  Napi::Object out = Napi::Object::New(info.Env());
  out.Set("writeBytesPerSec", (double)bytes / write_s);
  out.Set("readBytesPerSec", (double)bytes / read_s);
  out.Set("direct", was_direct);
  out.Set("backend", backend);
  out.Set("note", note);
  out.Set("mismatches", (double)mismatches);
  out.Set("edgeReads", (double)edge_reads);
  out.Set("file", path);
  return out;
}

// nvmeBackends() -> { threads: true, uring: boolean, uringWhy: string, default: "io_uring" | "threads" }
// uring: built with liburing and io_uring_queue_init works here; uringWhy says
// why not. default: what a store opened now uses (TIERCUT_NVME_IO applied).
Napi::Value nvme_backends_js(const Napi::CallbackInfo& info) {
  std::string why;
  const bool uring = nvme_uring_available(&why);
  const char* env = std::getenv("TIERCUT_NVME_IO");
  const std::string want = env ? env : "";
  Napi::Object out = Napi::Object::New(info.Env());
  out.Set("threads", true);
  out.Set("uring", uring);
  out.Set("uringWhy", why);
  out.Set("default", want == "threads" || !uring ? "threads" : "io_uring");
  return out;
}

// nvmeLatency({ dir, requests?, requestBytes?, queueDepth?, blockBytes? })
//   -> { readSeconds, writeSeconds, mixedReadSeconds, mixedWriteSeconds, backend, direct }
// Mean seconds per request of requestBytes (default 4096; `requests` of them,
// default 256, at consecutive block-aligned offsets from 4096-aligned memory):
// reads alone, writes alone, then reads and writes at once from two threads on
// two halves of one file (what a plan with state on NVMe does: its nvmeRead and
// nvmeWrite streams share the disk). The file is removed.
Napi::Value nvme_latency_js(const Napi::CallbackInfo& info) {
  const char* fn = "nvmeLatency";
  Napi::Object o = options(info, fn);
  const std::string path = probe_path(o, fn, "latency");
  const int64_t n = opt_int(o, fn, "requests", 256, 1, 1 << 20);
  const int64_t req = opt_int(o, fn, "requestBytes", 4096, 1, 64 << 20);
  const NvmeSettings s = probe_settings(o, fn);
  const int64_t stride = (req + kNvmeAlign - 1) / kNvmeAlign * kNvmeAlign;  // every request owns its blocks
  const int64_t half = n * stride;
  Block rbuf(stride), wbuf(stride);
  if (!rbuf.p || !wbuf.p) throw Napi::Error::New(info.Env(), std::string(fn) + ": cannot allocate " + std::to_string(stride) + " bytes");
  std::memset(wbuf.p, 7, (size_t)stride);
  NvmeStore store;
  std::string err;
  if (!store.open(path, 2 * half, s, true, &err)) throw Napi::Error::New(info.Env(), std::string(fn) + ": " + err);
  // requests [0, n) of one half of the file; seconds per request, or -1 on error (*e set)
  auto pass = [&](bool is_write, int64_t base, std::string* e) -> double {
    Clock::time_point t0 = Clock::now();
    for (int64_t i = 0; i < n; i++) {
      bool ok = is_write ? store.write(base + i * stride, wbuf.p, req, e) : store.read(base + i * stride, rbuf.p, req, e);
      if (!ok) return -1;
    }
    return since(t0) / (double)n;
  };
  std::string e1, e2;
  double w_alone = pass(true, half, &e1);         // (also fills the half the mixed reads read)
  double r_alone = w_alone < 0 ? -1 : pass(false, half, &e1);
  double mixed_r = -1, mixed_w = -1;
  if (e1.empty()) {
    std::thread reader([&] { mixed_r = pass(false, half, &e2); });
    mixed_w = pass(true, 0, &e1);
    reader.join();
  }
  const bool was_direct = store.direct();
  const char* backend = nvme_backend_name(store.backend());
  store.close();
  if (!e1.empty() || !e2.empty()) throw Napi::Error::New(info.Env(), std::string(fn) + ": " + (e1.empty() ? e2 : e1));
  Napi::Object out = Napi::Object::New(info.Env());
  out.Set("readSeconds", r_alone);
  out.Set("writeSeconds", w_alone);
  out.Set("mixedReadSeconds", mixed_r);
  out.Set("mixedWriteSeconds", mixed_w);
  out.Set("backend", backend);
  out.Set("direct", was_direct);
  return out;
}

// nvmeBatch({ dir, sizes?, requests?, requestBytes?, queueDepth?, blockBytes? })
//   -> { sizes: number[], readSeconds: number[], writeSeconds: number[], backend, direct }
// For each k in sizes (default [1, 2, 4, 8, 16, 32]; each 1..64): mean seconds per
// batch of k requests of requestBytes (default 4096) handed to the store in one
// NvmeStore::transfer, about `requests` requests per k and direction (default
// 256, at least 4 batches), a reader thread and a writer thread at once on two
// halves of one file (the regime of a plan's nvmeRead and nvmeWrite streams).
// Every request has its own block-aligned file range and its own 4096-aligned
// memory (as the executor's batches, whose members touch disjoint bytes); the
// file ranges are one block apart, so that the store does not merge them into
// one I/O (native/tiers/nvme_run.h): this prices separate requests.
// The file is removed.
Napi::Value nvme_batch_js(const Napi::CallbackInfo& info) {
  const char* fn = "nvmeBatch";
  Napi::Object o = options(info, fn);
  const std::string path = probe_path(o, fn, "batch");
  std::vector<int64_t> sizes = {1, 2, 4, 8, 16, 32};
  Napi::Value sv = o.Get("sizes");
  if (!sv.IsUndefined()) {
    if (!sv.IsArray() || sv.As<Napi::Array>().Length() == 0)
      throw Napi::TypeError::New(info.Env(), std::string(fn) + ": sizes: expected a non-empty array of batch sizes, got " + describe_value(sv));
    Napi::Array a = sv.As<Napi::Array>();
    sizes.clear();
    for (uint32_t i = 0; i < a.Length(); i++) sizes.push_back(read_int(a.Get(i), std::string(fn) + ": sizes[" + std::to_string(i) + "]", 1, 64));
  }
  const int64_t n = opt_int(o, fn, "requests", 256, 1, 1 << 20);
  const int64_t req = opt_int(o, fn, "requestBytes", 4096, 1, 1 << 20);
  const NvmeSettings s = probe_settings(o, fn);
  const int64_t stride = (req + kNvmeAlign - 1) / kNvmeAlign * kNvmeAlign;
  const int64_t kmax = *std::max_element(sizes.begin(), sizes.end());
  const int64_t fstride = stride + kNvmeAlign;  // (the gap: no merging)
  const int64_t half = kmax * fstride;
  Block rmem(kmax * stride), wmem(kmax * stride);
  if (!rmem.p || !wmem.p) throw Napi::Error::New(info.Env(), std::string(fn) + ": cannot allocate 2 x " + std::to_string(kmax * stride) + " bytes");
  std::memset(wmem.p, 7, (size_t)(kmax * stride));
  NvmeStore store;
  std::string err;
  if (!store.open(path, 2 * half, s, true, &err)) throw Napi::Error::New(info.Env(), std::string(fn) + ": " + err);
  // rounds batches of k requests over [base, base + k * fstride); mean seconds per batch, -1 on error
  auto pass = [&](bool is_write, int64_t base, int64_t k, int64_t rounds, std::string* e) -> double {
    std::vector<NvmeRequest> reqs;
    uint8_t* mem = is_write ? wmem.p : rmem.p;
    for (int64_t i = 0; i < k; i++) reqs.push_back(NvmeRequest{base + i * fstride, mem + i * stride, req});
    int32_t failed = 0;
    Clock::time_point t0 = Clock::now();
    for (int64_t r = 0; r < rounds; r++)
      if (!store.transfer(is_write, reqs, e, &failed)) return -1;
    return since(t0) / (double)rounds;
  };
  std::string e1, e2;
  if (pass(true, half, kmax, 1, &e1) < 0) {  // fill the half the reads read
    store.close();
    throw Napi::Error::New(info.Env(), std::string(fn) + ": " + e1);
  }
  std::vector<double> rs, ws;
  for (int64_t k : sizes) {
    const int64_t rounds = std::max<int64_t>(4, (n + k - 1) / k);
    double r = -1, w = -1;
    std::thread reader([&] { r = pass(false, half, k, rounds, &e2); });
    w = pass(true, 0, k, rounds, &e1);
    reader.join();
    if (!e1.empty() || !e2.empty()) break;
    rs.push_back(r);
    ws.push_back(w);
  }
  const bool was_direct = store.direct();
  const char* backend = nvme_backend_name(store.backend());
  store.close();
  if (!e1.empty() || !e2.empty()) throw Napi::Error::New(info.Env(), std::string(fn) + ": " + (e1.empty() ? e2 : e1));
  Napi::Env env = info.Env();
  Napi::Array ks = Napi::Array::New(env, sizes.size()), ra = Napi::Array::New(env, rs.size()), wa = Napi::Array::New(env, ws.size());
  for (size_t i = 0; i < sizes.size(); i++) ks.Set((uint32_t)i, (double)sizes[i]);
  for (size_t i = 0; i < rs.size(); i++) { ra.Set((uint32_t)i, rs[i]); wa.Set((uint32_t)i, ws[i]); }
  Napi::Object out = Napi::Object::New(env);
  out.Set("sizes", ks);
  out.Set("readSeconds", ra);
  out.Set("writeSeconds", wa);
  out.Set("backend", backend);
  out.Set("direct", was_direct);
  return out;
}

}  // namespace tiercut
