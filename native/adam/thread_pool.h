// thread_pool.h — one process-wide pool of worker threads, shared by the CPU
// Adam kernel and whoever else in the runtime needs data parallelism on the host.
//
// Takes: a job fn(worker) and how many threads should run it.
// Gives: fn called once on each of `threads` threads (the calling thread is
//        worker 0, pool threads are workers 1..threads-1); run() returns when
//        every call has returned.
// Keeps true:
//   - the worker threads are created once, on the first shared() call
//     (hardware_concurrency - 1 of them), and never per job; they sleep on a
//     condition variable between jobs
//   - jobs from different calling threads (the executor's cpu stream, a JS
//     cpuAdamStep) are serialised by a mutex: one job at a time
//   - fn must not throw (the kernels it runs report errors by value)
// The pool is never destroyed (a leaked singleton): joining threads from a
// static destructor during Node's exit is not worth the risk; idle workers own
// nothing.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tiercut {

class ThreadPool {
 public:
  // The shared pool; created on first use.
  static ThreadPool& shared();

  // Workers + the caller: the most threads a job can use.
  int max_threads() const { return (int)workers_.size() + 1; }

  // Runs fn(w) for w = 0 .. threads-1, w = 0 on the calling thread; threads is
  // clamped to [1, max_threads()]. Blocks until all calls returned.
  void run(int threads, const std::function<void(int)>& fn);

 private:
  explicit ThreadPool(int workers);
  void worker_main(int w);

  std::vector<std::thread> workers_;
  std::mutex job_mu_;                  // one job at a time
  std::mutex mu_;                      // guards the fields below
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int)>* fn_ = nullptr;
  int64_t generation_ = 0;
  int participants_ = 0;               // pool workers 1..participants_ take part
  int running_ = 0;
};

}  // namespace tiercut
