// nvme_store.cc — the nvme tier's file and its I/O threads (see nvme_store.h).
#include "nvme_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace tiercut {

static std::string errno_text(int e) { return std::string(std::strerror(e)); }
static int64_t align_down(int64_t x) { return x / kNvmeAlign * kNvmeAlign; }
static int64_t align_up(int64_t x) { return (x + kNvmeAlign - 1) / kNvmeAlign * kNvmeAlign; }

bool NvmeStore::open(const std::string& path, int64_t bytes, const NvmeSettings& s, bool direct, std::string* err) {
  close();
  settings_ = s;
  path_ = path;
  file_bytes_ = align_up(bytes);
  int flags = O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC;
  fd_ = direct ? ::open(path.c_str(), flags | O_DIRECT, 0600) : -1;
  if (fd_ >= 0) {
    direct_ = true;
  } else {
    int e = direct ? errno : 0;
    if (direct && e != EINVAL) {
      *err = "nvme tier: cannot create " + path + ": " + errno_text(e);
      path_.clear();
      return false;
    }
    if (direct) {
      ::unlink(path.c_str());  // some file systems create the file before refusing O_DIRECT
      note_ = "O_DIRECT not supported by the file system of " + path + " (EINVAL); using buffered I/O";
    } else {
      note_ = "buffered I/O (O_DIRECT not requested)";
    }
    fd_ = ::open(path.c_str(), flags, 0600);
    if (fd_ < 0) {
      *err = "nvme tier: cannot create " + path + ": " + errno_text(errno);
      path_.clear();
      return false;
    }
  }
  if (::ftruncate(fd_, (off_t)file_bytes_) != 0) {
    *err = "nvme tier: cannot size " + path + " to " + std::to_string(file_bytes_) + " bytes: " + errno_text(errno);
    close();
    return false;
  }
  // reserve the blocks now so that a full disk fails here, not mid-step;
  // file systems without fallocate keep the sparse file
  int rc = ::posix_fallocate(fd_, 0, (off_t)file_bytes_);
  if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) {
    *err = "nvme tier: cannot reserve " + std::to_string(file_bytes_) + " bytes for " + path + ": " + errno_text(rc);
    close();
    return false;
  }
  if (direct_) {
    for (int32_t i = 0; i < s.queue_depth; i++) {
      void* block = nullptr;
      rc = posix_memalign(&block, (size_t)kNvmeAlign, (size_t)s.block_bytes);
      if (rc != 0) {
        *err = "nvme tier: cannot allocate a staging buffer of " + std::to_string(s.block_bytes) + " bytes: " + errno_text(rc);
        close();
        return false;
      }
      staging_.push_back((uint8_t*)block);
    }
  }
  stop_ = false;
  for (int32_t i = 0; i < s.queue_depth; i++) threads_.emplace_back(&NvmeStore::worker, this, i);
  return true;
}

void NvmeStore::close() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
  for (uint8_t* b : staging_) std::free(b);
  staging_.clear();
  if (fd_ >= 0) { ::close(fd_); fd_ = -1; }
  if (!path_.empty()) { ::unlink(path_.c_str()); path_.clear(); }
  direct_ = false;
}

std::string NvmeStore::where(const char* call, int64_t at) const {
  return std::string("nvme tier: ") + call + " " + path_ + " at offset " + std::to_string(at) + ": ";
}

bool NvmeStore::check_linked(std::string* err) const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) { *err = "nvme tier: fstat " + path_ + ": " + errno_text(errno); return false; }
  if (st.st_nlink == 0) {
    *err = "nvme tier: the spill file " + path_ + " was removed during the run (" + errno_text(ENOENT) + ")";
    return false;
  }
  return true;
}

bool NvmeStore::read(int64_t offset, void* dst, int64_t n, std::string* err) {
  return submit(false, offset, (uint8_t*)dst, n, err);
}

bool NvmeStore::write(int64_t offset, const void* src, int64_t n, std::string* err) {
  std::lock_guard<std::mutex> lk(write_mu_);
  return submit(true, offset, (uint8_t*)src, n, err);
}

bool NvmeStore::submit(bool is_write, int64_t offset, uint8_t* mem, int64_t n, std::string* err) {
  if (fd_ < 0) { *err = "nvme tier: the store is closed"; return false; }
  if (n <= 0) return true;
  if (offset < 0 || offset + n > file_bytes_) {
    *err = "nvme tier: range [" + std::to_string(offset) + ", " + std::to_string(offset + n) + ") is outside " + path_;
    return false;
  }
  if (!check_linked(err)) return false;
  Request req;
  req.is_write = is_write;
  req.mem = mem;
  req.offset = offset;
  const int64_t B = settings_.block_bytes;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (int64_t b = offset; b < offset + n;) {
      int64_t e = std::min(offset + n, (b / B + 1) * B);
      queue_.push_back(Chunk{&req, b, e});
      req.pending++;
      b = e;
    }
  }
  work_cv_.notify_all();
  std::unique_lock<std::mutex> lk(mu_);
  done_cv_.wait(lk, [&] { return req.pending == 0; });
  if (!req.error.empty()) { *err = req.error; return false; }
  return true;
}

void NvmeStore::worker(int32_t index) {
  uint8_t* staging = direct_ ? staging_[index] : nullptr;
  for (;;) {
    Chunk c;
    {
      std::unique_lock<std::mutex> lk(mu_);
      work_cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ with nothing left
      c = queue_.front();
      queue_.pop_front();
      // a request that already failed skips its remaining chunks
      if (!c.req->error.empty()) {
        if (--c.req->pending == 0) done_cv_.notify_all();
        continue;
      }
    }
    std::string msg;
    bool ok = run_chunk(c, staging, &msg);
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (!ok && c.req->error.empty()) c.req->error = msg;
      if (--c.req->pending == 0) done_cv_.notify_all();
    }
  }
}

// pread/pwrite of exactly [at, at + n) into / from p, retrying partial transfers.
// A read that hits the end of file is a short read.
static bool full_io(int fd, bool is_write, uint8_t* p, int64_t n, int64_t at, int64_t file_bytes, std::string* why) {
  int64_t done = 0;
  while (done < n) {
    ssize_t r = is_write ? ::pwrite(fd, p + done, (size_t)(n - done), (off_t)(at + done))
                         : ::pread(fd, p + done, (size_t)(n - done), (off_t)(at + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) { *why = errno_text(errno); return false; }
    if (r == 0) {
      if (is_write) { *why = "no bytes written"; return false; }
      struct stat st;
      int64_t size = ::fstat(fd, &st) == 0 ? (int64_t)st.st_size : -1;
      *why = "short read: got " + std::to_string(done) + " of " + std::to_string(n) + " bytes (end of file at " +
             std::to_string(size) + " bytes, expected " + std::to_string(file_bytes) + "; the file was truncated)";
      return false;
    }
    done += r;
  }
  return true;
}

bool NvmeStore::run_chunk(const Chunk& c, uint8_t* staging, std::string* err) {
  const Request& r = *c.req;
  uint8_t* mem = r.mem + (c.begin - r.offset);
  const int64_t n = c.end - c.begin;
  std::string why;
  if (!direct_) {
    if (full_io(fd_, r.is_write, mem, n, c.begin, file_bytes_, &why)) return true;
    *err = where(r.is_write ? "pwrite" : "pread", c.begin) + why;
    return false;
  }
  const int64_t a0 = align_down(c.begin), a1 = align_up(c.end);
  if (!r.is_write) {
    if (!full_io(fd_, false, staging, a1 - a0, a0, file_bytes_, &why)) { *err = where("pread", a0) + why; return false; }
    std::memcpy(mem, staging + (c.begin - a0), (size_t)n);
    return true;
  }
  // write: read the partial edge blocks first, then patch and write whole blocks
  if (c.begin != a0 && !full_io(fd_, false, staging, kNvmeAlign, a0, file_bytes_, &why)) {
    *err = where("pread", a0) + why;
    return false;
  }
  if (c.end != a1 && (a1 - kNvmeAlign != a0 || c.begin == a0) &&
      !full_io(fd_, false, staging + (a1 - kNvmeAlign - a0), kNvmeAlign, a1 - kNvmeAlign, file_bytes_, &why)) {
    *err = where("pread", a1 - kNvmeAlign) + why;
    return false;
  }
  std::memcpy(staging + (c.begin - a0), mem, (size_t)n);
  if (!full_io(fd_, true, staging, a1 - a0, a0, file_bytes_, &why)) { *err = where("pwrite", a0) + why; return false; }
  return true;
}

}  // namespace tiercut
