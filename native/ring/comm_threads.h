// comm_threads.h — the threads backend of the ring communicator: P ranks are
// P threads of one process sharing one ThreadGroup.
//
// A send is a rendezvous, as MPI's large-message protocol: isend publishes the
// sender's pointer, the receiver's wait() copies straight out of it (one copy,
// no buffer in between) and marks the send complete; the sender's wait()
// returns once the receiver has copied. So a rank's buffer is "in flight" from
// isend to the end of wait(), exactly as with MPI, and no hidden memory grows
// with the message size.
//
// Failure: run_as_threads() calls abort() on the group when a rank throws; every
// other rank's wait() then throws at once, and run_as_threads() rethrows the
// first rank's error (the cause), not the follow-on ones.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "comm.h"

namespace tiercut::ring {

class ThreadGroup {
 public:
  ThreadGroup(int size, int timeout_ms);
  int size() const { return size_; }
  int timeout_ms() const { return timeout_ms_; }

  struct Slot;  // one published send
  std::shared_ptr<Slot> publish(int src, int dst, int tag, const void* data, size_t bytes);
  void take(int src, int dst, int tag, void* data, size_t bytes, const std::string& what);  // receiver
  void await_taken(const std::shared_ptr<Slot>& slot, int src, const std::string& what);    // sender
  void abort(int rank, const std::string& why);
  // The first abort's rank and message; rank -1 when none.
  std::pair<int, std::string> failure();

 private:
  [[noreturn]] void throw_aborted(int rank);
  const int size_;
  const int timeout_ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::tuple<int, int, int>, std::deque<std::shared_ptr<Slot>>> boxes_;
  int failed_rank_ = -1;
  std::string failed_why_;
};

class ThreadComm : public Communicator {
 public:
  ThreadComm(std::shared_ptr<ThreadGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  int timeout_ms() const override { return group_->timeout_ms(); }
  const char* backend() const override { return "threads"; }
  Request isend(const void* data, size_t bytes, int peer, int tag, const std::string& what) override;
  Request irecv(void* data, size_t bytes, int peer, int tag, const std::string& what) override;
  void wait(Request& request) override;
  void abort(const std::string& why) override { group_->abort(rank_, why); }

 private:
  std::shared_ptr<ThreadGroup> group_;
  int rank_;
};

// Runs body(comm) on `ranks` threads, one ThreadComm each, and joins them all.
// Throws CommError / std::runtime_error with the first failing rank's message
// ("rank 2: ..."); never returns before every thread has ended.
void run_as_threads(int ranks, int timeout_ms, const std::function<void(Communicator&)>& body);

}  // namespace tiercut::ring
