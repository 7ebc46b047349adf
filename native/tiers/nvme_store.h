// nvme_store.h — the nvme tier: one preallocated file read and written in
// blocks by a pool of I/O threads.
//
// Settings are explicit (DeepSpeed aio style): queue_depth = the number of I/O
// threads, hence of pread/pwrite calls in flight; block_bytes = the largest
// single pread/pwrite. A request [offset, offset + n) is cut at multiples of
// block_bytes in file offsets, so two chunks of one request never share a
// 4096-byte block.
//
// O_DIRECT: the file is opened with O_DIRECT when the file system accepts it;
// each I/O thread then owns a staging buffer of block_bytes aligned to 4096
// (posix_memalign), every pread/pwrite covers whole 4096-byte blocks, and the
// bytes move between the staging buffer and the caller's memory by memcpy. A
// write whose ends are not block-aligned reads the edge blocks first
// (read-modify-write); write requests are serialised so that two writes never
// modify one edge block at once (the executor issues them from one stream
// anyway). When open(O_DIRECT) fails with EINVAL (tmpfs and some overlay file
// systems) the store falls back to buffered pread/pwrite straight on the
// caller's memory and says so in note().
//
// The file is sized up to a multiple of 4096 and reserved with posix_fallocate
// at open, so a full disk fails at open, not mid-step. Every request checks
// that the file still has a name (a spill file removed during the run is an
// error, not a silent private file) and reports a short read as such.
// Messages start with "nvme tier: ".
//
// Thread-safety: read() from any number of threads; write() from any number
// (serialised inside); open/close not concurrent with anything.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tiercut {

struct NvmeSettings {
  int32_t queue_depth = 8;            // I/O threads; 1..64
  int64_t block_bytes = 1 << 20;      // multiple of 4096; 4096..64 MiB
};

constexpr int64_t kNvmeAlign = 4096;

class NvmeStore {
 public:
  NvmeStore() = default;
  ~NvmeStore() { close(); }
  NvmeStore(const NvmeStore&) = delete;
  NvmeStore& operator=(const NvmeStore&) = delete;

  // Creates `path` (O_EXCL), sizes and reserves it, starts the I/O threads.
  // `direct`: try O_DIRECT first. On failure removes what it made.
  bool open(const std::string& path, int64_t bytes, const NvmeSettings& s, bool direct, std::string* err);
  // Joins the threads, closes and unlinks the file. Idempotent.
  void close();

  bool read(int64_t offset, void* dst, int64_t n, std::string* err);
  bool write(int64_t offset, const void* src, int64_t n, std::string* err);

  bool is_open() const { return fd_ >= 0; }
  bool direct() const { return direct_; }
  const std::string& note() const { return note_; }
  const std::string& path() const { return path_; }
  const NvmeSettings& settings() const { return settings_; }

 private:
  struct Request {
    bool is_write = false;
    uint8_t* mem = nullptr;           // caller memory for [offset, offset + n)
    int64_t offset = 0;
    int32_t pending = 0;              // chunks not yet finished (under mu_)
    std::string error;                // the first chunk error (under mu_)
  };
  struct Chunk {
    Request* req;
    int64_t begin, end;               // file offsets
  };

  void worker(int32_t index);
  bool run_chunk(const Chunk& c, uint8_t* staging, std::string* err);
  bool submit(bool is_write, int64_t offset, uint8_t* mem, int64_t n, std::string* err);
  bool check_linked(std::string* err) const;
  std::string where(const char* call, int64_t at) const;

  int fd_ = -1;
  bool direct_ = false;
  int64_t file_bytes_ = 0;
  std::string path_, note_;
  NvmeSettings settings_;

  std::vector<std::thread> threads_;
  std::vector<uint8_t*> staging_;     // per thread, direct mode only
  std::mutex mu_;                     // guards queue_, stop_, Request::pending/error
  std::condition_variable work_cv_, done_cv_;
  std::deque<Chunk> queue_;
  bool stop_ = false;
  std::mutex write_mu_;               // one write request at a time
};

}  // namespace tiercut
