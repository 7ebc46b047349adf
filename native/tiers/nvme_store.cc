// nvme_store.cc — the nvme tier's file, the cutting of requests into chunks,
// the staging of one chunk, and the choice of backend (see nvme_store.h).
#include "nvme_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "nvme_run.h"
#include "nvme_threads.h"
#include "nvme_uring.h"

namespace tiercut {

static std::string errno_text(int e) { return std::string(std::strerror(e)); }
static int64_t align_down(int64_t x) { return x / kNvmeAlign * kNvmeAlign; }
static int64_t align_up(int64_t x) { return (x + kNvmeAlign - 1) / kNvmeAlign * kNvmeAlign; }
static bool aligned_ptr(const void* p) { return (uintptr_t)p % (uintptr_t)kNvmeAlign == 0; }

const char* nvme_backend_name(NvmeBackendKind k) { return k == NVME_IO_URING ? "io_uring" : "threads"; }

std::string NvmeFile::where(const char* call, int64_t at) const {
  return std::string("nvme tier: ") + call + " " + path + " at offset " + std::to_string(at) + ": ";
}

// ---------------------------------------------------------------------------
// the file

bool NvmeStore::open(const std::string& path, int64_t bytes, const NvmeSettings& s, bool direct, std::string* err) {
  close();
  settings_ = s;
  note_.clear();
  file_.path = path;
  file_.file_bytes = align_up(bytes);
  file_.edge_reads = 0;
  file_.ios = 0;
  file_.merged_chunks = 0;
  const char* merge_env = std::getenv("TIERCUT_NVME_MERGE");
  merge_ = !(merge_env && std::string(merge_env) == "0");
  int flags = O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC;
  file_.fd = direct ? ::open(path.c_str(), flags | O_DIRECT, 0600) : -1;
  if (file_.fd >= 0) {
    file_.direct = true;
  } else {
    int e = direct ? errno : 0;
    if (direct && e != EINVAL) {
      *err = "nvme tier: cannot create " + path + ": " + errno_text(e);
      file_.path.clear();
      return false;
    }
    if (direct) {
      ::unlink(path.c_str());  // some file systems create the file before refusing O_DIRECT
      note_ = "O_DIRECT not supported by the file system of " + path + " (EINVAL); using buffered I/O";
    } else {
      note_ = "buffered I/O (O_DIRECT not requested)";
    }
    file_.fd = ::open(path.c_str(), flags, 0600);
    if (file_.fd < 0) {
      *err = "nvme tier: cannot create " + path + ": " + errno_text(errno);
      file_.path.clear();
      return false;
    }
  }
  if (::ftruncate(file_.fd, (off_t)file_.file_bytes) != 0) {
    *err = "nvme tier: cannot size " + path + " to " + std::to_string(file_.file_bytes) + " bytes: " + errno_text(errno);
    close();
    return false;
  }
  // reserve the blocks now so that a full disk fails here, not mid-step;
  // file systems without fallocate keep the sparse file
  int rc = ::posix_fallocate(file_.fd, 0, (off_t)file_.file_bytes);
  if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) {
    *err = "nvme tier: cannot reserve " + std::to_string(file_.file_bytes) + " bytes for " + path + ": " + errno_text(rc);
    close();
    return false;
  }
  if (!start_backend(err)) {
    close();
    return false;
  }
  return true;
}

// TIERCUT_NVME_IO=uring|threads forces a backend; unset, io_uring when it works.
bool NvmeStore::start_backend(std::string* err) {
  const char* env = std::getenv("TIERCUT_NVME_IO");
  std::string want = env ? env : "";
  if (want != "" && want != "uring" && want != "threads") {
    *err = "nvme tier: TIERCUT_NVME_IO: expected 'uring' or 'threads', got '" + want + "'";
    return false;
  }
  if (want != "threads") {
    std::string why;
    backend_ = make_uring_backend(file_, settings_, &why);
    if (!backend_ && want == "uring") {
      *err = "nvme tier: TIERCUT_NVME_IO=uring but io_uring is unavailable: " + why;
      return false;
    }
  }
  if (!backend_) backend_ = make_threads_backend(file_, settings_, err);
  return backend_ != nullptr;
}

void NvmeStore::close() {
  backend_.reset();  // joins threads / exits rings before the file goes
  if (file_.fd >= 0) { ::close(file_.fd); file_.fd = -1; }
  if (!file_.path.empty()) { ::unlink(file_.path.c_str()); file_.path.clear(); }
  file_.direct = false;
}

// A removed spill file is an error, not a silent private file; a truncated one
// would return zeros from its holes, so it is caught here too.
bool NvmeStore::check_linked(std::string* err) const {
  struct stat st;
  if (::fstat(file_.fd, &st) != 0) { *err = "nvme tier: fstat " + file_.path + ": " + errno_text(errno); return false; }
  if (st.st_nlink == 0) {
    *err = "nvme tier: the spill file " + file_.path + " was removed during the run (" + errno_text(ENOENT) + ")";
    return false;
  }
  if ((int64_t)st.st_size < file_.file_bytes) {
    *err = "nvme tier: the spill file " + file_.path + " is " + std::to_string((long long)st.st_size) +
           " bytes, expected " + std::to_string(file_.file_bytes) + " (it was truncated during the run)";
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// requests -> chunks

bool NvmeStore::read(int64_t offset, void* dst, int64_t n, std::string* err) {
  int32_t failed = 0;
  return transfer(false, {NvmeRequest{offset, (uint8_t*)dst, n}}, err, &failed);
}

bool NvmeStore::write(int64_t offset, const void* src, int64_t n, std::string* err) {
  int32_t failed = 0;
  return transfer(true, {NvmeRequest{offset, (uint8_t*)src, n}}, err, &failed);
}

bool NvmeStore::transfer(bool is_write, const std::vector<NvmeRequest>& reqs, std::string* err, int32_t* failed_request,
                         const std::function<void(int32_t)>& on_done) {
  std::unique_lock<std::mutex> wl(write_mu_, std::defer_lock);
  if (is_write) wl.lock();
  *failed_request = 0;
  if (file_.fd < 0) { *err = "nvme tier: the store is closed"; return false; }
  if (!check_linked(err)) return false;
  std::vector<NvmeChunk> chunks;
  for (size_t i = 0; i < reqs.size(); i++)
    if (!add_chunks(is_write, reqs[i], (int32_t)i, &chunks, err)) { *failed_request = (int32_t)i; return false; }
  if (chunks.empty()) {
    if (on_done) for (int32_t i = 0; i < (int32_t)reqs.size(); i++) on_done(i);
    return true;
  }
  const std::vector<NvmeRun> runs = nvme_merge_runs(file_, chunks, settings_.block_bytes, merge_);
  if (!on_done) return backend_->run(chunks, runs, nullptr, err, failed_request);
  // per-request completion: count each request's chunks; empty requests at
  // the front are done already
  NvmeProgress progress;
  progress.pending.assign(reqs.size(), 0);
  for (const NvmeChunk& c : chunks) progress.pending[(size_t)c.request]++;
  progress.on_done = on_done;
  progress.flush();
  if (!backend_->run(chunks, runs, &progress, err, failed_request)) return false;
  progress.flush();  // (nothing left: every chunk was reported)
  return true;
}

// Chunks end at multiples of block_bytes; when the request can go zero-copy
// (O_DIRECT, aligned start and memory) an unaligned end is split off into a
// chunk of its own so that only that last partial block is staged.
bool NvmeStore::add_chunks(bool is_write, const NvmeRequest& r, int32_t index, std::vector<NvmeChunk>* chunks, std::string* err) const {
  if (r.n <= 0) return true;
  if (r.offset < 0 || r.offset + r.n > file_.file_bytes) {
    *err = "nvme tier: range [" + std::to_string(r.offset) + ", " + std::to_string(r.offset + r.n) + ") is outside " + file_.path;
    return false;
  }
  const int64_t B = settings_.block_bytes, end = r.offset + r.n;
  const bool zero_copy = file_.direct && r.offset % kNvmeAlign == 0 && aligned_ptr(r.mem);
  const bool owns_tail = is_write && settings_.owns_block_tails && r.offset % kNvmeAlign == 0;
  for (int64_t b = r.offset; b < end;) {
    int64_t e = std::min(end, (b / B + 1) * B);
    if (zero_copy && e == end && e % kNvmeAlign != 0 && align_down(e) > b) e = align_down(e);
    chunks->push_back(NvmeChunk{is_write, owns_tail, b, e, r.mem + (b - r.offset), index});
    b = e;
  }
  return true;
}

// ---------------------------------------------------------------------------
// one chunk, shared by the backends

std::string nvme_short_read(const NvmeFile& f, int64_t got, int64_t n) {
  struct stat st;
  int64_t size = ::fstat(f.fd, &st) == 0 ? (int64_t)st.st_size : -1;
  return "short read: got " + std::to_string(got) + " of " + std::to_string(n) + " bytes (end of file at " + std::to_string(size) +
         " bytes, expected " + std::to_string(f.file_bytes) + "; the file was truncated)";
}

bool nvme_full_io(const NvmeFile& f, bool is_write, uint8_t* p, int64_t n, int64_t at, std::string* why) {
  int64_t done = 0;
  while (done < n) {
    ssize_t r = is_write ? ::pwrite(f.fd, p + done, (size_t)(n - done), (off_t)(at + done))
                         : ::pread(f.fd, p + done, (size_t)(n - done), (off_t)(at + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) { *why = errno_text(errno); return false; }
    if (r == 0) {
      *why = is_write ? std::string("no bytes written") : nvme_short_read(f, done, n);
      return false;
    }
    done += r;
  }
  return true;
}

// Straight on the caller's memory (buffered, or zero copy), else staged in whole blocks.
static bool chunk_is_direct(const NvmeFile& f, const NvmeChunk& c) {
  return !f.direct || (c.begin % kNvmeAlign == 0 && c.end % kNvmeAlign == 0 && aligned_ptr(c.mem));
}

void nvme_chunk_extent(const NvmeFile& f, const NvmeChunk& c, int64_t* at, int64_t* len) {
  if (chunk_is_direct(f, c)) { *at = c.begin; *len = c.end - c.begin; }
  else { *at = align_down(c.begin); *len = align_up(c.end) - *at; }
}

bool nvme_chunk_begin(const NvmeFile& f, const NvmeChunk& c, uint8_t* staging, NvmeIo* io, std::string* err) {
  const int64_t n = c.end - c.begin;
  const int64_t a0 = align_down(c.begin), a1 = align_up(c.end);
  if (chunk_is_direct(f, c)) {
    *io = NvmeIo{c.begin, n, c.mem, false};
    return true;
  }
  *io = NvmeIo{a0, a1 - a0, staging, true};
  if (!c.is_write) return true;
  std::string why;
  // the head block keeps the bytes before c.begin
  if (c.begin != a0) {
    f.edge_reads++;
    if (!nvme_full_io(f, false, staging, kNvmeAlign, a0, &why)) { *err = f.where("pread", a0) + why; return false; }
  }
  if (c.end != a1) {
    const int64_t tail = a1 - kNvmeAlign;
    if (c.owns_tail) {
      std::memset(staging + (c.end - a0), 0, (size_t)(a1 - c.end));  // padding nobody reads
    } else if (tail != a0 || c.begin == a0) {  // (a tail block that is also the head block was read above)
      f.edge_reads++;
      if (!nvme_full_io(f, false, staging + (tail - a0), kNvmeAlign, tail, &why)) { *err = f.where("pread", tail) + why; return false; }
    }
  }
  std::memcpy(staging + (c.begin - a0), c.mem, (size_t)n);
  return true;
}

void nvme_chunk_end(const NvmeChunk& c, const NvmeIo& io) {
  if (io.staged && !c.is_write) std::memcpy(c.mem, io.buf + (c.begin - io.at), (size_t)(c.end - c.begin));
}

}  // namespace tiercut
