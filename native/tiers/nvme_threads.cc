// nvme_threads.cc — the pread/pwrite thread pool (see nvme_threads.h).
#include "nvme_threads.h"

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "nvme_run.h"

namespace tiercut {

namespace {

class ThreadsBackend : public NvmeBackend {
 public:
  ThreadsBackend(const NvmeFile& f, const NvmeSettings& s) : f_(f), s_(s) {}
  ~ThreadsBackend() override;
  bool start(std::string* err);
  bool run(const std::vector<NvmeChunk>& chunks, const std::vector<NvmeRun>& runs, NvmeProgress* progress, std::string* err,
           int32_t* failed_request) override;
  NvmeBackendKind kind() const override { return NVME_IO_THREADS; }

 private:
  struct Request {
    const std::vector<NvmeChunk>* chunks = nullptr;
    int32_t pending = 0;              // runs not yet finished (under mu_)
    std::string error;                // the first chunk error (under mu_)
    int32_t failed_request = 0;       // that chunk's request (under mu_)
    bool report = false;              // the caller wants each chunk as it finishes (NvmeProgress)
    std::vector<int32_t> finished;    // requests of chunks finished and not yet reported (under mu_)
  };
  struct Work {
    Request* req;
    const NvmeRun* run;
  };
  void worker(int32_t index);

  const NvmeFile& f_;
  NvmeSettings s_;
  std::vector<std::thread> threads_;
  std::vector<uint8_t*> staging_;     // per thread, direct mode only
  std::mutex mu_;                     // guards queue_, stop_, Request::pending/error
  std::condition_variable work_cv_, done_cv_;
  std::deque<Work> queue_;
  bool stop_ = false;
};

bool ThreadsBackend::start(std::string* err) {
  if (f_.direct) {
    for (int32_t i = 0; i < s_.queue_depth; i++) {
      void* block = nullptr;
      int rc = posix_memalign(&block, (size_t)kNvmeAlign, (size_t)s_.block_bytes);
      if (rc != 0) {
        *err = "nvme tier: cannot allocate a staging buffer of " + std::to_string(s_.block_bytes) + " bytes: " + std::strerror(rc);
        return false;
      }
      staging_.push_back((uint8_t*)block);
    }
  }
  for (int32_t i = 0; i < s_.queue_depth; i++) threads_.emplace_back(&ThreadsBackend::worker, this, i);
  return true;
}

ThreadsBackend::~ThreadsBackend() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
  for (uint8_t* b : staging_) std::free(b);
}

// The workers do the I/O, one run each; this thread waits, and with progress
// reports the chunks of each run as it finishes (outside mu_), until the first
// error or the last run.
bool ThreadsBackend::run(const std::vector<NvmeChunk>& chunks, const std::vector<NvmeRun>& runs, NvmeProgress* progress, std::string* err,
                         int32_t* failed_request) {
  Request req;
  req.chunks = &chunks;
  req.report = progress != nullptr;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const NvmeRun& r : runs) queue_.push_back(Work{&req, &r});
    req.pending = (int32_t)runs.size();
  }
  if (runs.size() == 1) work_cv_.notify_one(); else work_cv_.notify_all();
  std::unique_lock<std::mutex> lk(mu_);
  std::vector<int32_t> got;
  for (;;) {
    done_cv_.wait(lk, [&] { return req.pending == 0 || !req.error.empty() || !req.finished.empty(); });
    if (!req.error.empty()) break;  // report nothing more; wait for the workers below
    got.swap(req.finished);
    const bool all = req.pending == 0;
    if (!got.empty()) {
      lk.unlock();
      for (int32_t r : got) progress->chunk_done(r);
      got.clear();
      lk.lock();
    }
    if (all) break;
  }
  // the workers still hold &req until every run is accounted for
  done_cv_.wait(lk, [&] { return req.pending == 0; });
  if (!req.error.empty()) { *err = req.error; *failed_request = req.failed_request; return false; }
  return true;
}

void ThreadsBackend::worker(int32_t index) {
  uint8_t* staging = f_.direct ? staging_[index] : nullptr;
  for (;;) {
    Work w;
    {
      std::unique_lock<std::mutex> lk(mu_);
      work_cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ with nothing left
      w = queue_.front();
      queue_.pop_front();
      // a request that already failed skips its remaining chunks
      if (!w.req->error.empty()) {
        if (--w.req->pending == 0) done_cv_.notify_all();
        continue;
      }
    }
    const std::vector<NvmeChunk>& chunks = *w.req->chunks;
    const NvmeRun& run = *w.run;
    std::string msg;
    const bool ok = nvme_run_sync(f_, chunks, run, staging, &msg);
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (!ok && w.req->error.empty()) { w.req->error = msg; w.req->failed_request = chunks[(size_t)run.first].request; }
      if (ok && w.req->report)
        for (int32_t k = 0; k < run.count; k++) w.req->finished.push_back(chunks[(size_t)(run.first + k)].request);
      if (--w.req->pending == 0 || w.req->report) done_cv_.notify_all();
    }
  }
}

}  // namespace

std::unique_ptr<NvmeBackend> make_threads_backend(const NvmeFile& f, const NvmeSettings& s, std::string* err) {
  auto b = std::make_unique<ThreadsBackend>(f, s);
  if (!b->start(err)) return nullptr;
  return b;
}

}  // namespace tiercut
