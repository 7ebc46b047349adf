// comm_mpi.h — the MPI backend of the ring communicator (Open MPI), for ranks
// that are processes started by `mpirun -np P node ...`. Compiled only into
// build/Release/tiercut_ring_mpi.node (never into tiercut_native.node), so the
// normal addon neither links libmpi nor initialises MPI.
//
// MpiComm works on MPI_COMM_WORLD (no MPI_Comm_dup: a blocking collective
// without a timeout) with MPI_ERRORS_RETURN (an MPI error becomes a CommError,
// not an abort); the ring's tags (0 .. 2P+1) belong to it. wait() polls MPI_Test with a
// deadline (backing off to 1 ms sleeps), so a peer that stops answering gives
// "rank 3: timed out after 2000 ms waiting to receive K/V block of rank 2 (step
// 1) from rank 2" instead of a hang. progress() tests every open request so
// large (rendezvous) transfers move while the kernel computes; Open MPI has no
// asynchronous progress thread by default.
// abort() prints the reason and calls MPI_Abort on MPI_COMM_WORLD: mpirun then
// ends every rank and exits non-zero.
#pragma once
#include <memory>
#include <vector>

#include "comm.h"

namespace tiercut::ring {

// MPI_Init_thread (FUNNELED) once per process, after making libmpi's symbols
// global (Open MPI's plugins need them; node loads addons RTLD_LOCAL). Returns
// {rank, size} of MPI_COMM_WORLD. Throws CommError when MPI fails to start.
std::pair<int, int> mpi_start();
// MPI_Finalize if started and not yet finalized. Never throws.
void mpi_stop();
[[noreturn]] void mpi_abort_world(const std::string& why, int code);

class MpiComm : public Communicator {
 public:
  explicit MpiComm(int timeout_ms);  // requires mpi_start()
  ~MpiComm() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int timeout_ms() const override { return timeout_ms_; }
  void set_timeout_ms(int ms) { timeout_ms_ = ms; }
  const char* backend() const override { return "mpi"; }
  Request isend(const void* data, size_t bytes, int peer, int tag, const std::string& what) override;
  Request irecv(void* data, size_t bytes, int peer, int tag, const std::string& what) override;
  void wait(Request& request) override;
  void progress() override;
  void abort(const std::string& why) override;

  struct Pending;

 private:
  void* comm_;  // MPI_Comm (kept opaque so this header needs no mpi.h)
  int rank_ = 0, size_ = 1, timeout_ms_;
  std::vector<std::weak_ptr<Pending>> open_;
};

}  // namespace tiercut::ring
