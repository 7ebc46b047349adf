// comm.h — the ring communicator: point-to-point messages between the P ranks
// of one ring, the only thing ring attention needs from a transport.
//
// Backends (one class each, same contract):
//   ThreadComm  comm_threads.h  ranks are threads of one process (shared memory,
//                               one mutex + condition variable per group)
//   MpiComm     comm_mpi.h      ranks are processes under mpirun (Open MPI);
//                               compiled only into build/Release/tiercut_ring_mpi.node
//   (NCCL)      not implemented. The contract maps onto it directly: isend/irecv
//               become ncclSend/ncclRecv inside ncclGroupStart/End on a stream,
//               wait() becomes a cudaEvent query loop with the same deadline, and
//               the buffers become device pointers.
//
// Contract:
//   - isend/irecv start a transfer and return at once; the buffer must stay valid
//     (and, for isend, unchanged) until wait() on the returned request returns.
//   - Messages between one (source, destination, tag) triple arrive in order;
//     a receive matches only a send with the same tag, and the sizes must agree.
//   - wait() returns when the transfer is complete, or throws CommError after
//     timeout_ms() naming this rank, the peer and what was being moved. It also
//     throws when another rank of the group has failed (abort()).
//   - progress() lets a backend without an asynchronous progress engine (MPI's
//     large-message protocol) move data while the caller computes; the ring
//     kernels call it between tiles. It never blocks and never throws.
//   - A Communicator is used by one thread at a time (its rank's thread).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace tiercut::ring {

// Every communication failure: a timeout (names the peer), a size mismatch, an
// aborted group, an error from the transport.
class CommError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One transfer in progress. Backends keep their state behind `impl`.
struct Request {
  bool active = false;        // false: default-constructed or already waited on
  bool is_send = false;
  int peer = -1;
  int tag = 0;
  void* data = nullptr;       // irecv: where the bytes go; isend: the source (const)
  size_t bytes = 0;
  std::string what;           // for messages: "K/V block of rank 2 (step 1)"
  std::shared_ptr<void> impl;

  // An active request as every backend's isend/irecv starts it.
  static Request start(bool is_send, int peer, int tag, void* data, size_t bytes, const std::string& what) {
    Request r;
    r.active = true;
    r.is_send = is_send;
    r.peer = peer;
    r.tag = tag;
    r.data = data;
    r.bytes = bytes;
    r.what = what;
    return r;
  }
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int timeout_ms() const = 0;
  // "threads" | "mpi"
  virtual const char* backend() const = 0;

  virtual Request isend(const void* data, size_t bytes, int peer, int tag, const std::string& what) = 0;
  virtual Request irecv(void* data, size_t bytes, int peer, int tag, const std::string& what) = 0;
  virtual void wait(Request& request) = 0;
  virtual void progress() {}
  // Marks the whole group failed with `why` (this rank's error); other ranks'
  // waits then throw instead of running into their timeouts. Never throws.
  virtual void abort(const std::string& why) = 0;

  int next() const { return (rank() + 1) % size(); }
  int prev() const { return (rank() + size() - 1) % size(); }
};

}  // namespace tiercut::ring
