// nvme_store.h — the nvme tier: one preallocated file, read and written in
// blocks by an I/O backend (io_uring, or a pool of pread/pwrite threads).
//
// Merging (nvme_run.h): chunks of one transfer whose file ranges follow each
// other go as one vectored I/O.
//
// Settings are explicit (DeepSpeed aio style): queue_depth = the number of
// block I/Os in flight (io_uring: submission slots; threads: I/O threads);
// block_bytes = the largest single I/O. A request [offset, offset + n) is cut
// into chunks at multiples of block_bytes in file offsets, so two chunks of one
// request never share a 4096-byte block.
//
// Backends (nvme_uring.h, nvme_threads.h): io_uring when the addon was built
// with liburing (binding.gyp, native/tiers/uring_flags.sh) and
// io_uring_queue_init succeeds at open; otherwise the thread pool. The
// environment variable TIERCUT_NVME_IO=uring|threads forces one; forcing
// uring where it is unavailable fails open() with the reason.
//
// O_DIRECT: the file is opened with O_DIRECT when the file system accepts it.
// A chunk whose file range and memory are both 4096-aligned goes straight
// between the caller's memory and the file (zero copy); any other chunk passes
// through a staging buffer of block_bytes aligned to 4096 (one per I/O slot):
// the I/O covers whole 4096-byte blocks and the bytes move by memcpy. A staged
// write whose ends are not block-aligned reads the edge blocks first
// (read-modify-write) — except the tail when the request owns its tail
// (`owns_tail`, below): then the tail block is written whole, the bytes after
// the request zero, and nothing is read. Write requests are serialised so that
// two writes never modify one edge block at once (the executor issues them
// from one stream anyway). When open(O_DIRECT) fails with EINVAL (tmpfs, some
// overlay file systems) the store falls back to buffered I/O straight on the
// caller's memory and says so in note().
//
// Tail ownership: with owns_block_tails (set when every buffer of the arena
// starts on a 4096-byte boundary — compiler/schedule/arena.ts pads the nvme
// tier so), the bytes between the end of a request that starts on a boundary
// and the next boundary belong to no other buffer: any other buffer starting
// there would have to start at a boundary inside the block, and there is none.
//
// The file is sized up to a multiple of 4096 and reserved with posix_fallocate
// at open, so a full disk fails at open, not mid-step. Every request checks
// that the file still has a name (a spill file removed during the run is an
// error, not a silent private file) and reports a short read as such.
// Messages start with "nvme tier: ".
//
// Thread-safety: read() and write() from any number of threads (each backend
// serialises what it must); open/close not concurrent with anything.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tiercut {

struct NvmeSettings {
  int32_t queue_depth = 8;            // I/Os in flight; 1..64
  int64_t block_bytes = 1 << 20;      // multiple of 4096; 4096..64 MiB
  bool owns_block_tails = false;      // see "Tail ownership" above
};

constexpr int64_t kNvmeAlign = 4096;

enum NvmeBackendKind : int32_t { NVME_IO_THREADS = 0, NVME_IO_URING = 1 };
const char* nvme_backend_name(NvmeBackendKind k);  // "threads", "io_uring"

// Whether the io_uring backend was compiled in and the kernel lets this
// process make a ring; *why says why not ("" when it can).
bool nvme_uring_available(std::string* why);

// The open file as the backends see it.
struct NvmeFile {
  int fd = -1;
  bool direct = false;
  int64_t file_bytes = 0;
  std::string path;
  // blocks read only to keep their other bytes (read-modify-write of a staged
  // write); counted so that tests and reports can show when it happens
  mutable std::atomic<int64_t> edge_reads{0};
  // I/Os issued, and chunks that went in an I/O of an earlier chunk (nvme_run.h)
  mutable std::atomic<int64_t> ios{0};
  mutable std::atomic<int64_t> merged_chunks{0};
  // "nvme tier: <call> <path> at offset <at>: "
  std::string where(const char* call, int64_t at) const;
};

// One request of a batch (NvmeStore::transfer): [offset, offset + n) of the file to / from mem.
struct NvmeRequest {
  int64_t offset = 0;
  uint8_t* mem = nullptr;
  int64_t n = 0;
};

// One chunk of a request: the file range [begin, end) and the caller memory for it.
struct NvmeChunk {
  bool is_write = false;
  bool owns_tail = false;             // write: may write [end, align_up(end)) whole
  int64_t begin = 0, end = 0;
  uint8_t* mem = nullptr;
  int32_t request = 0;                // index of its request in the batch
};

// One I/O of a transfer (nvme_run.h): chunks [first, first + count), their
// extents file-contiguous, as one (vectored) I/O of [at, at + len).
struct NvmeRun {
  int32_t first = 0, count = 0;
  int64_t at = 0, len = 0;
};

// The one I/O that serves a chunk: [at, at + len) of the file to / from buf.
struct NvmeIo {
  int64_t at = 0, len = 0;
  uint8_t* buf = nullptr;             // caller memory (zero copy, buffered) or the staging buffer
  bool staged = false;
};

// Shared by the backends. nvme_chunk_begin: plans the chunk's I/O; for a staged
// write, reads the edge blocks it must keep and copies the bytes into staging.
// nvme_chunk_end: after the I/O, copies a staged read out of staging.
bool nvme_chunk_begin(const NvmeFile& f, const NvmeChunk& c, uint8_t* staging, NvmeIo* io, std::string* err);
void nvme_chunk_end(const NvmeChunk& c, const NvmeIo& io);
// pread/pwrite of exactly [at, at + n), retrying partial transfers; a read that
// reaches the end of the file is a short read. *why: the OS error or the short read.
bool nvme_full_io(const NvmeFile& f, bool is_write, uint8_t* p, int64_t n, int64_t at, std::string* why);
// "short read: got <got> of <n> bytes (end of file at …)"
std::string nvme_short_read(const NvmeFile& f, int64_t got, int64_t n);

// Per-request completion of one transfer (NvmeStore::transfer's on_done).
// The backend calls chunk_done(request) on the thread that called run(), once
// for each chunk that finished without error, and never after the transfer's
// first error. Requests are reported in order: request r as soon as it and
// every request before it are whole, so a caller that completes them as they
// are reported keeps its own order (the executor's stream order).
struct NvmeProgress {
  std::vector<int32_t> pending;                 // per request: its chunks not yet done
  int32_t reported = 0;                         // requests [0, reported) were reported
  std::function<void(int32_t request)> on_done;
  void flush() {
    while (reported < (int32_t)pending.size() && pending[(size_t)reported] == 0) on_done(reported++);
  }
  void chunk_done(int32_t request) {
    pending[(size_t)request]--;
    flush();
  }
};

class NvmeBackend {
 public:
  virtual ~NvmeBackend() = default;
  // Runs every chunk (all reads or all writes, of one or more requests that
  // touch disjoint memory and, for writes, disjoint 4096-byte blocks of the
  // file) as the I/Os `runs` names (nvme_run.h: each run one I/O; runs cover
  // the chunks in order); the first failure is returned in *err, the request of
  // its run's first chunk in *failed_request, and the runs not yet started are
  // skipped. progress (may be null): see NvmeProgress; a run's chunks are
  // reported together when its I/O is complete.
  virtual bool run(const std::vector<NvmeChunk>& chunks, const std::vector<NvmeRun>& runs, NvmeProgress* progress, std::string* err,
                   int32_t* failed_request) = 0;
  virtual NvmeBackendKind kind() const = 0;
};

class NvmeStore {
 public:
  NvmeStore() = default;
  ~NvmeStore() { close(); }
  NvmeStore(const NvmeStore&) = delete;
  NvmeStore& operator=(const NvmeStore&) = delete;

  // Creates `path` (O_EXCL), sizes and reserves it, starts the backend.
  // `direct`: try O_DIRECT first. On failure removes what it made.
  bool open(const std::string& path, int64_t bytes, const NvmeSettings& s, bool direct, std::string* err);
  // Stops the backend, closes and unlinks the file. Idempotent.
  void close();

  bool read(int64_t offset, void* dst, int64_t n, std::string* err);
  bool write(int64_t offset, const void* src, int64_t n, std::string* err);
  // Several requests in one go, their chunks in flight together (up to the
  // queue depth): what the executor uses for consecutive ready copies of one
  // nvme stream, so that small transfers overlap their latencies. The caller
  // guarantees the disjointness run() needs. *failed_request: the request
  // that failed (on false). on_done (optional): called on this thread with
  // each request index, in order, as soon as that request and every one
  // before it are done (NvmeProgress); never for the failed request or any
  // after it. The last request is reported too, before transfer returns.
  bool transfer(bool is_write, const std::vector<NvmeRequest>& reqs, std::string* err, int32_t* failed_request,
                const std::function<void(int32_t)>& on_done = nullptr);

  bool is_open() const { return file_.fd >= 0; }
  bool direct() const { return file_.direct; }
  NvmeBackendKind backend() const { return backend_ ? backend_->kind() : NVME_IO_THREADS; }
  const std::string& note() const { return note_; }
  const std::string& path() const { return file_.path; }
  const NvmeSettings& settings() const { return settings_; }
  // Edge blocks read before writes (read-modify-write) since open.
  int64_t edge_reads() const { return file_.edge_reads.load(); }
  // I/Os issued since open, and chunks that rode in the I/O of an earlier one (nvme_run.h).
  int64_t ios() const { return file_.ios.load(); }
  int64_t merged_chunks() const { return file_.merged_chunks.load(); }
  bool merges() const { return merge_; }

 private:
  bool add_chunks(bool is_write, const NvmeRequest& r, int32_t index, std::vector<NvmeChunk>* chunks, std::string* err) const;
  bool check_linked(std::string* err) const;
  bool start_backend(std::string* err);

  NvmeFile file_;
  std::string note_;
  NvmeSettings settings_;
  bool merge_ = true;                 // TIERCUT_NVME_MERGE != "0" (nvme_run.h)
  std::unique_ptr<NvmeBackend> backend_;
  std::mutex write_mu_;               // one write request at a time
};

}  // namespace tiercut
