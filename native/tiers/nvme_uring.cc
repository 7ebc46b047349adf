// nvme_uring.cc — the io_uring backend (see nvme_uring.h).
#include "nvme_uring.h"

#ifndef TIERCUT_HAVE_LIBURING
#define TIERCUT_HAVE_LIBURING 0
#endif

#if TIERCUT_HAVE_LIBURING
#include <liburing.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "../exec/spin.h"
#include "nvme_run.h"
#endif

namespace tiercut {

#if !TIERCUT_HAVE_LIBURING

bool nvme_uring_available(std::string* why) {
  *why = "the native addon was built without liburing (install liburing-dev and rebuild)";
  return false;
}

std::unique_ptr<NvmeBackend> make_uring_backend(const NvmeFile&, const NvmeSettings&, std::string* why) {
  nvme_uring_available(why);
  return nullptr;
}

#else

static std::string errno_text(int e) { return std::string(std::strerror(e)); }

bool nvme_uring_available(std::string* why) {
  struct io_uring ring;
  int rc = io_uring_queue_init(1, &ring, 0);
  if (rc < 0) { *why = "io_uring_queue_init: " + errno_text(-rc); return false; }
  io_uring_queue_exit(&ring);
  why->clear();
  return true;
}

namespace {

class UringBackend : public NvmeBackend {
 public:
  UringBackend(const NvmeFile& f, const NvmeSettings& s) : f_(f), s_(s) {}
  ~UringBackend() override;
  bool start(std::string* why);
  bool run(const std::vector<NvmeChunk>& chunks, const std::vector<NvmeRun>& runs, NvmeProgress* progress, std::string* err,
           int32_t* failed_request) override;
  NvmeBackendKind kind() const override { return NVME_IO_URING; }

 private:
  struct Ring {
    std::mutex mu;                    // one request at a time
    struct io_uring ring;
    bool ready = false;
    bool broken = false;              // a submit/wait failed: in-flight state unknown
    std::vector<uint8_t*> staging;    // per slot, direct mode only
  };
  struct Slot {
    const NvmeRun* run = nullptr;
    NvmeRunIo io;                     // its iovecs live here until the completion
  };

  const NvmeFile& f_;
  NvmeSettings s_;
  Ring rings_[2];                     // [0] reads, [1] writes
};

bool UringBackend::start(std::string* why) {
  for (Ring& r : rings_) {
    int rc = io_uring_queue_init((unsigned)s_.queue_depth, &r.ring, 0);
    if (rc < 0) { *why = "io_uring_queue_init: " + errno_text(-rc); return false; }
    r.ready = true;
    if (!f_.direct) continue;
    for (int32_t i = 0; i < s_.queue_depth; i++) {
      void* block = nullptr;
      rc = posix_memalign(&block, (size_t)kNvmeAlign, (size_t)s_.block_bytes);
      if (rc != 0) { *why = "cannot allocate a staging buffer of " + std::to_string(s_.block_bytes) + " bytes: " + errno_text(rc); return false; }
      r.staging.push_back((uint8_t*)block);
    }
  }
  return true;
}

UringBackend::~UringBackend() {
  for (Ring& r : rings_) {
    if (r.ready) io_uring_queue_exit(&r.ring);
    for (uint8_t* b : r.staging) std::free(b);
  }
}

bool UringBackend::run(const std::vector<NvmeChunk>& chunks, const std::vector<NvmeRun>& runs, NvmeProgress* progress, std::string* err,
                       int32_t* failed_request) {
  if (runs.empty()) return true;
  const bool is_write = chunks[0].is_write;
  Ring& r = rings_[is_write ? 1 : 0];
  std::lock_guard<std::mutex> lk(r.mu);
  if (r.broken) { *err = "nvme tier: the io_uring ring failed earlier in this run"; return false; }

  std::vector<Slot> slots((size_t)s_.queue_depth);
  std::vector<int32_t> free_slots;
  for (int32_t k = s_.queue_depth - 1; k >= 0; k--) free_slots.push_back(k);
  std::string first;  // the first error; once set nothing new is submitted
  size_t next = 0;
  int32_t inflight = 0;     // requests prepared and not yet reaped (those still to submit among them)
  int32_t unsubmitted = 0;  // prepared in the submission queue, not yet taken by the kernel
  int32_t idle_tries = 0;   // submits refused (EAGAIN/EBUSY) with nothing in the kernel to wait for
  const NvmeRun* done_run = nullptr;  // a run reaped last round, reported after the slots are refilled
  for (;;) {
    // fill every free slot with the next run
    int32_t queued = 0;
    while (first.empty() && next < runs.size() && !free_slots.empty()) {
      int32_t k = free_slots.back();
      Slot& s = slots[(size_t)k];
      s.run = &runs[next];
      if (!nvme_run_begin(f_, chunks, *s.run, r.staging.empty() ? nullptr : r.staging[(size_t)k], &s.io, &first)) {
        *failed_request = chunks[(size_t)s.run->first].request;
        break;
      }
      next++;
      free_slots.pop_back();
      struct io_uring_sqe* sqe = io_uring_get_sqe(&r.ring);  // never null: queue_depth entries, <= queue_depth in flight
      const struct iovec* v = s.io.iov.data();
      if (s.io.iov.size() > 1 && is_write) io_uring_prep_writev(sqe, f_.fd, v, (unsigned)s.io.iov.size(), (__u64)s.io.at);
      else if (s.io.iov.size() > 1) io_uring_prep_readv(sqe, f_.fd, v, (unsigned)s.io.iov.size(), (__u64)s.io.at);
      else if (is_write) io_uring_prep_write(sqe, f_.fd, v->iov_base, (unsigned)s.io.len, (__u64)s.io.at);
      else io_uring_prep_read(sqe, f_.fd, v->iov_base, (unsigned)s.io.len, (__u64)s.io.at);
      io_uring_sqe_set_data(sqe, (void*)(uintptr_t)k);
      queued++;
      inflight++;
      unsubmitted++;
    }
    // submit what the queue holds: a partial submit leaves the rest for the
    // next round (they had waited forever: wait_cqe submits nothing); EAGAIN
    // and EBUSY (no kernel memory, completions to reap first) are retried
    // after a completion, or after a pause when nothing is in the kernel; any
    // other error drops the unsubmitted ones and drains those in the kernel
    // before returning (they had read into, and written from, memory the
    // caller then reused or freed)
    if (unsubmitted > 0) {
      int rc;
      do rc = io_uring_submit(&r.ring); while (rc == -EINTR);
      if (rc > 0) {
        unsubmitted -= rc < unsubmitted ? rc : unsubmitted;
        idle_tries = 0;
      } else if ((rc == 0 || rc == -EAGAIN || rc == -EBUSY) && (inflight > unsubmitted || ++idle_tries < 1000)) {
        // (nothing in the kernel to wait for: submit again after a pause)
        if (inflight == unsubmitted) { std::this_thread::sleep_for(std::chrono::milliseconds(1)); continue; }
      } else {
        r.broken = true;
        if (first.empty()) {
          first = "nvme tier: io_uring_submit for " + f_.path + ": " + (rc < 0 ? errno_text(-rc) : std::string("the kernel took none of the requests"));
          *failed_request = chunks[(size_t)runs[next > 0 ? next - 1 : 0].first].request;
        }
        inflight -= unsubmitted;  // (never reach the kernel: the ring is not used again)
        unsubmitted = 0;
      }
    }
    // report the run reaped last round (its chunks, in order) now that its slot
    // is busy again (the caller's bookkeeping then overlaps the I/O instead of
    // delaying it)
    if (done_run && first.empty())
      for (int32_t c = 0; c < done_run->count; c++) progress->chunk_done(chunks[(size_t)(done_run->first + c)].request);
    done_run = nullptr;
    if (inflight == 0) break;
    // poll the completion queue first (exec/spin.h: a thread asleep in the
    // kernel wakes slowly on a VM), then block
    struct io_uring_cqe* cqe = nullptr;
    int rc = -EAGAIN;
    spin_until([&] { return (rc = io_uring_peek_cqe(&r.ring, &cqe)) == 0; }, spin_limit_ns());
    if (rc != 0) do rc = io_uring_wait_cqe(&r.ring, &cqe); while (rc == -EINTR);
    if (rc < 0) {
      // (nothing can be reaped: the ring is torn down here, which ends what is in the kernel before it returns)
      r.broken = true;
      io_uring_queue_exit(&r.ring);
      r.ready = false;
      *err = "nvme tier: io_uring_wait_cqe for " + f_.path + ": " + errno_text(-rc);
      return false;
    }
    const int32_t k = (int32_t)(uintptr_t)io_uring_cqe_get_data(cqe);
    const int res = cqe->res;
    io_uring_cqe_seen(&r.ring, cqe);
    inflight--;
    free_slots.push_back(k);
    const Slot& s = slots[(size_t)k];
    if (!first.empty()) continue;  // draining after an error
    std::string why;
    const bool vectored = s.io.iov.size() > 1;
    if (res < 0 && res != -EAGAIN && res != -EINTR) {
      const char* call = is_write ? (vectored ? "io_uring writev" : "io_uring write") : (vectored ? "io_uring readv" : "io_uring read");
      first = f_.where(call, s.io.at) + errno_text(-res);
      *failed_request = chunks[(size_t)s.run->first].request;
      continue;
    }
    // a short or retryable completion: finish the rest with pread(v)/pwrite(v)
    const int64_t done = res < 0 ? 0 : res;
    if (done < s.io.len && !nvme_full_iov(f_, is_write, s.io.iov, done, s.io.at, &why)) {
      first = f_.where(nvme_run_call(is_write, s.io), s.io.at + done) + why;
      *failed_request = chunks[(size_t)s.run->first].request;
      continue;
    }
    nvme_run_end(chunks, *s.run, s.io);
    if (progress) done_run = s.run;
  }
  if (!first.empty()) { *err = first; return false; }
  return true;
}

}  // namespace

std::unique_ptr<NvmeBackend> make_uring_backend(const NvmeFile& f, const NvmeSettings& s, std::string* why) {
  auto b = std::make_unique<UringBackend>(f, s);
  if (!b->start(why)) return nullptr;
  return b;
}

#endif

}  // namespace tiercut
