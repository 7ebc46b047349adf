// comm_mpi.cc — MpiComm (see comm_mpi.h).
#include "comm_mpi.h"

#if TIERCUT_HAVE_MPI

#define OMPI_SKIP_MPICXX 1
#include <dlfcn.h>
#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <thread>

namespace tiercut::ring {

struct MpiComm::Pending {
  MPI_Request req = MPI_REQUEST_NULL;
  bool done = false;
  int64_t got_bytes = -1;  // a receive's size, once done
};

// MPI_Test; on completion records done and (receives) the size that arrived.
static int test_pending(MpiComm::Pending* p) {
  int flag = 0;
  MPI_Status status;
  int rc = MPI_Test(&p->req, &flag, &status);
  if (rc == MPI_SUCCESS && flag) {
    p->done = true;
    int count = 0;
    if (MPI_Get_count(&status, MPI_BYTE, &count) == MPI_SUCCESS) p->got_bytes = count;
  }
  return rc;
}

static std::string mpi_error_text(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(buf, len);
}

std::pair<int, int> mpi_start() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // Promote libmpi to RTLD_GLOBAL so the MCA components Open MPI dlopens can
    // resolve its symbols.
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(&MPI_Init_thread), &info) && info.dli_fname)
      dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) throw CommError("MPI_Init_thread failed: " + mpi_error_text(rc));
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return {rank, size};
}

void mpi_stop() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

void mpi_abort_world(const std::string& why, int code) {
  std::fprintf(stderr, "%s\n", why.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this is for the type system
}

MpiComm::MpiComm(int timeout_ms) : timeout_ms_(timeout_ms) {
  // MPI_COMM_WORLD itself, not a duplicate: MPI_Comm_dup is a blocking
  // collective with no timeout, so one rank that never arrives would hang the
  // others before the first timed wait.
  MPI_Comm* c = new MPI_Comm(MPI_COMM_WORLD);
  MPI_Comm_set_errhandler(*c, MPI_ERRORS_RETURN);
  MPI_Comm_rank(*c, &rank_);
  MPI_Comm_size(*c, &size_);
  comm_ = c;
}

MpiComm::~MpiComm() { delete static_cast<MPI_Comm*>(comm_); }

static void count_type(size_t bytes, int* count, MPI_Datatype* type, const std::string& what) {
  // floats when possible (4x the reach of MPI's int count)
  size_t n = bytes % 4 == 0 ? bytes / 4 : bytes;
  *type = bytes % 4 == 0 ? MPI_FLOAT : MPI_BYTE;
  if (n > size_t(INT_MAX)) throw CommError(what + ": " + std::to_string(bytes) + " bytes is more than one MPI message holds");
  *count = int(n);
}

Request MpiComm::isend(const void* data, size_t bytes, int peer, int tag, const std::string& what) {
  Request r = Request::start(true, peer, tag, const_cast<void*>(data), bytes, what);
  auto p = std::make_shared<Pending>();
  int count;
  MPI_Datatype type;
  count_type(bytes, &count, &type, what);
  int rc = MPI_Isend(data, count, type, peer, tag, *static_cast<MPI_Comm*>(comm_), &p->req);
  if (rc != MPI_SUCCESS)
    throw CommError("rank " + std::to_string(rank_) + ": sending " + what + " to rank " + std::to_string(peer) +
                    " failed: " + mpi_error_text(rc));
  open_.push_back(p);
  r.impl = p;
  return r;
}

Request MpiComm::irecv(void* data, size_t bytes, int peer, int tag, const std::string& what) {
  Request r = Request::start(false, peer, tag, data, bytes, what);
  auto p = std::make_shared<Pending>();
  int count;
  MPI_Datatype type;
  count_type(bytes, &count, &type, what);
  int rc = MPI_Irecv(data, count, type, peer, tag, *static_cast<MPI_Comm*>(comm_), &p->req);
  if (rc != MPI_SUCCESS)
    throw CommError("rank " + std::to_string(rank_) + ": receiving " + what + " from rank " + std::to_string(peer) +
                    " failed: " + mpi_error_text(rc));
  open_.push_back(p);
  r.impl = p;
  return r;
}

void MpiComm::wait(Request& r) {
  if (!r.active) return;
  r.active = false;
  auto p = std::static_pointer_cast<Pending>(r.impl);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
  int sleep_us = 0;
  while (!p->done) {
    int rc = test_pending(p.get());
    if (rc != MPI_SUCCESS)
      throw CommError("rank " + std::to_string(rank_) + ": " + (r.is_send ? "sending " : "receiving ") + r.what +
                      (r.is_send ? " to rank " : " from rank ") + std::to_string(r.peer) + " failed: " + mpi_error_text(rc));
    if (p->done) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      // the request stays pending: the caller aborts the job (MPI_Cancel of a
      // matched send is not portable)
      throw CommError("rank " + std::to_string(rank_) + ": timed out after " + std::to_string(timeout_ms_) + " ms " +
                      (r.is_send ? "waiting for rank " + std::to_string(r.peer) + " to receive " + r.what
                                 : "waiting to receive " + r.what + " from rank " + std::to_string(r.peer)));
    }
    if (sleep_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    else std::this_thread::yield();
    sleep_us = sleep_us == 0 ? 20 : (sleep_us >= 1000 ? 1000 : sleep_us * 2);
  }
  if (!r.is_send && p->got_bytes >= 0 && size_t(p->got_bytes) != r.bytes)
    throw CommError("rank " + std::to_string(rank_) + ": " + r.what + " from rank " + std::to_string(r.peer) + " has " +
                    std::to_string(p->got_bytes) + " bytes, expected " + std::to_string(r.bytes));
}

void MpiComm::progress() {
  size_t keep = 0;
  for (size_t i = 0; i < open_.size(); i++) {
    auto p = open_[i].lock();
    if (!p || p->done) continue;
    test_pending(p.get());  // errors resurface in wait()
    if (!p->done) open_[keep++] = open_[i];
  }
  open_.resize(keep);
}

void MpiComm::abort(const std::string& why) { mpi_abort_world(why, 1); }

}  // namespace tiercut::ring

#endif  // TIERCUT_HAVE_MPI
