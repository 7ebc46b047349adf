// thread_pool.cc — see thread_pool.h.
#include "thread_pool.h"

namespace tiercut {

ThreadPool& ThreadPool::shared() {
  static ThreadPool* pool = [] {
    unsigned hw = std::thread::hardware_concurrency();
    return new ThreadPool(hw > 1 ? (int)hw - 1 : 0);
  }();
  return *pool;
}

ThreadPool::ThreadPool(int workers) {
  for (int w = 1; w <= workers; w++) workers_.emplace_back(&ThreadPool::worker_main, this, w);
  for (std::thread& t : workers_) t.detach();  // never joined: see the header
}

void ThreadPool::worker_main(int w) {
  int64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* fn;
    {
      std::unique_lock<std::mutex> lk(mu_);
      start_cv_.wait(lk, [&] { return generation_ != seen && w <= participants_; });
      seen = generation_;
      fn = fn_;
    }
    (*fn)(w);
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (--running_ == 0) done_cv_.notify_all();
    }
  }
}

void ThreadPool::run(int threads, const std::function<void(int)>& fn) {
  if (threads < 1) threads = 1;
  if (threads > max_threads()) threads = max_threads();
  if (threads == 1) { fn(0); return; }
  std::lock_guard<std::mutex> job(job_mu_);
  {
    std::lock_guard<std::mutex> lk(mu_);
    fn_ = &fn;
    participants_ = threads - 1;
    running_ = threads - 1;
    generation_++;
  }
  start_cv_.notify_all();
  fn(0);
  std::unique_lock<std::mutex> lk(mu_);
  done_cv_.wait(lk, [&] { return running_ == 0; });
  participants_ = 0;
}

}  // namespace tiercut
