// comm_threads.cc — ThreadGroup / ThreadComm / run_as_threads (see comm_threads.h).
#include "comm_threads.h"

#include <chrono>
#include <cstring>
#include <exception>
#include <thread>

namespace tiercut::ring {

struct ThreadGroup::Slot {
  const void* data;
  size_t bytes;
  bool taken = false;
};

ThreadGroup::ThreadGroup(int size, int timeout_ms) : size_(size), timeout_ms_(timeout_ms) {}

std::shared_ptr<ThreadGroup::Slot> ThreadGroup::publish(int src, int dst, int tag, const void* data, size_t bytes) {
  auto slot = std::make_shared<Slot>();
  slot->data = data;
  slot->bytes = bytes;
  {
    std::lock_guard<std::mutex> lk(mu_);
    boxes_[{src, dst, tag}].push_back(slot);
  }
  cv_.notify_all();
  return slot;
}

void ThreadGroup::throw_aborted(int rank) {
  throw CommError("rank " + std::to_string(rank) + ": stopped because rank " + std::to_string(failed_rank_) +
                  " failed: " + failed_why_);
}

void ThreadGroup::take(int src, int dst, int tag, void* data, size_t bytes, const std::string& what) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
  std::unique_lock<std::mutex> lk(mu_);
  auto key = std::make_tuple(src, dst, tag);
  for (;;) {
    if (failed_rank_ >= 0) throw_aborted(dst);
    auto it = boxes_.find(key);
    if (it != boxes_.end() && !it->second.empty()) {
      std::shared_ptr<Slot> slot = it->second.front();
      it->second.pop_front();
      if (it->second.empty()) boxes_.erase(it);
      if (slot->bytes != bytes) {
        // let the sender go, then fail: a size mismatch is a bug, not a transport error
        slot->taken = true;
        cv_.notify_all();
        throw CommError("rank " + std::to_string(dst) + ": " + what + " from rank " + std::to_string(src) + " has " +
                        std::to_string(slot->bytes) + " bytes, expected " + std::to_string(bytes));
      }
      // copy under the lock: the sender's buffer is valid until taken is set
      if (bytes > 0) std::memcpy(data, slot->data, bytes);
      slot->taken = true;
      cv_.notify_all();
      return;
    }
    if (cv_.wait_until(lk, deadline) == std::cv_status::timeout && std::chrono::steady_clock::now() >= deadline) {
      if (failed_rank_ >= 0) throw_aborted(dst);
      throw CommError("rank " + std::to_string(dst) + ": timed out after " + std::to_string(timeout_ms_) +
                      " ms waiting to receive " + what + " from rank " + std::to_string(src));
    }
  }
}

void ThreadGroup::await_taken(const std::shared_ptr<Slot>& slot, int src, const std::string& what) {
  (void)src;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
  std::unique_lock<std::mutex> lk(mu_);
  while (!slot->taken) {
    if (failed_rank_ >= 0) {
      // withdraw the slot so nobody copies from a buffer that is about to go away
      for (auto& [key, q] : boxes_)
        for (auto it = q.begin(); it != q.end(); ++it)
          if (*it == slot) { q.erase(it); break; }
      throw_aborted(src);
    }
    if (cv_.wait_until(lk, deadline) == std::cv_status::timeout && !slot->taken &&
        std::chrono::steady_clock::now() >= deadline) {
      for (auto& [key, q] : boxes_)
        for (auto it = q.begin(); it != q.end(); ++it)
          if (*it == slot) { q.erase(it); break; }
      throw CommError("rank " + std::to_string(src) + ": timed out after " + std::to_string(timeout_ms_) +
                      " ms waiting for " + what);
    }
  }
}

void ThreadGroup::abort(int rank, const std::string& why) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (failed_rank_ < 0) {
      failed_rank_ = rank;
      failed_why_ = why;
    }
  }
  cv_.notify_all();
}

std::pair<int, std::string> ThreadGroup::failure() {
  std::lock_guard<std::mutex> lk(mu_);
  return {failed_rank_, failed_why_};
}

Request ThreadComm::isend(const void* data, size_t bytes, int peer, int tag, const std::string& what) {
  Request r = Request::start(true, peer, tag, const_cast<void*>(data), bytes, what);
  r.impl = group_->publish(rank_, peer, tag, data, bytes);
  return r;
}

Request ThreadComm::irecv(void* data, size_t bytes, int peer, int tag, const std::string& what) {
  return Request::start(false, peer, tag, data, bytes, what);
}

void ThreadComm::wait(Request& r) {
  if (!r.active) return;
  r.active = false;
  if (r.is_send) {
    group_->await_taken(std::static_pointer_cast<ThreadGroup::Slot>(r.impl), rank_,
                        "rank " + std::to_string(r.peer) + " to receive " + r.what);
  } else {
    group_->take(r.peer, rank_, r.tag, r.data, r.bytes, r.what);
  }
}

void run_as_threads(int ranks, int timeout_ms, const std::function<void(Communicator&)>& body) {
  auto group = std::make_shared<ThreadGroup>(ranks, timeout_ms);
  std::vector<std::thread> threads;
  threads.reserve(ranks);
  for (int r = 0; r < ranks; r++) {
    threads.emplace_back([group, r, &body] {
      ThreadComm comm(group, r);
      try {
        body(comm);
      } catch (const std::exception& e) {
        std::string msg = e.what();
        // messages from the ring already start with "rank N:"
        if (msg.rfind("rank ", 0) != 0) msg = "rank " + std::to_string(r) + ": " + msg;
        group->abort(r, msg);
      } catch (...) {
        group->abort(r, "rank " + std::to_string(r) + ": unknown error");
      }
    });
  }
  for (auto& t : threads) t.join();
  auto [rank, why] = group->failure();
  if (rank >= 0) throw CommError(why);
}

}  // namespace tiercut::ring
