// spin.h — bounded spinning before blocking.
//
// On a VM an idle vCPU halts; waking a thread blocked on a futex (or on an
// io_uring completion) then costs an inter-processor interrupt and a VM entry:
// 50-150 µs measured here (`hw calibrate`, executor wake-up), against ~3 µs
// while the vCPUs are busy. The runtime's waits are mostly short (a kernel on
// another stream, one NVMe request), so a waiter first polls for up to
// spin_limit_ns() — yielding the CPU on every poll, so that a runnable thread
// (a kernel it may be waiting for) always gets it — and only then blocks.
// TIERCUT_SPIN_US sets the limit in microseconds (default 200; 0 = block at
// once), read once per process.
#pragma once
#include <sched.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>

namespace tiercut {

inline int64_t spin_limit_ns() {
  static const int64_t ns = [] {
    const char* v = std::getenv("TIERCUT_SPIN_US");
    if (!v || !*v) return (int64_t)200000;
    char* end = nullptr;
    long long us = std::strtoll(v, &end, 10);
    return (end && *end == '\0' && us >= 0 && us <= 1000000) ? (int64_t)us * 1000 : (int64_t)200000;
  }();
  return ns;
}

// Polls ready() until it is true (returns true) or limit_ns pass (returns false).
template <class Ready>
inline bool spin_until(Ready ready, int64_t limit_ns) {
  if (ready()) return true;
  if (limit_ns <= 0) return false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(limit_ns);
  for (;;) {
    sched_yield();
    if (ready()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
  }
}

}  // namespace tiercut
