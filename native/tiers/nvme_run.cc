// nvme_run.cc — cutting a transfer's chunks into runs, and one run's I/O (see nvme_run.h).
#include "nvme_run.h"

#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tiercut {

std::vector<NvmeRun> nvme_merge_runs(const NvmeFile& f, const std::vector<NvmeChunk>& chunks, int64_t block_bytes, bool merge) {
  std::vector<NvmeRun> runs;
  for (int32_t i = 0; i < (int32_t)chunks.size(); i++) {
    int64_t at = 0, len = 0;
    nvme_chunk_extent(f, chunks[(size_t)i], &at, &len);
    if (merge && !runs.empty()) {
      NvmeRun& r = runs.back();
      if (r.at + r.len == at && r.len + len <= block_bytes && r.count < kNvmeMaxRunChunks) {
        r.count++;
        r.len += len;
        continue;
      }
    }
    runs.push_back(NvmeRun{i, 1, at, len});
  }
  return runs;
}

bool nvme_run_begin(const NvmeFile& f, const std::vector<NvmeChunk>& chunks, const NvmeRun& run, uint8_t* staging, NvmeRunIo* io,
                    std::string* err) {
  io->at = run.at;
  io->len = run.len;
  io->parts.assign((size_t)run.count, NvmeIo{});
  io->iov.clear();
  for (int32_t k = 0; k < run.count; k++) {
    const NvmeChunk& c = chunks[(size_t)(run.first + k)];
    int64_t at = 0, len = 0;
    nvme_chunk_extent(f, c, &at, &len);
    NvmeIo& part = io->parts[(size_t)k];
    if (!nvme_chunk_begin(f, c, staging ? staging + (at - run.at) : nullptr, &part, err)) return false;
    if (!io->iov.empty() && (uint8_t*)io->iov.back().iov_base + io->iov.back().iov_len == part.buf) io->iov.back().iov_len += (size_t)part.len;
    else io->iov.push_back(iovec{part.buf, (size_t)part.len});
  }
  f.ios++;
  f.merged_chunks += run.count - 1;
  return true;
}

void nvme_run_end(const std::vector<NvmeChunk>& chunks, const NvmeRun& run, const NvmeRunIo& io) {
  for (int32_t k = 0; k < run.count; k++) nvme_chunk_end(chunks[(size_t)(run.first + k)], io.parts[(size_t)k]);
}

const char* nvme_run_call(bool is_write, const NvmeRunIo& io) {
  if (io.iov.size() > 1) return is_write ? "pwritev" : "preadv";
  return is_write ? "pwrite" : "pread";
}

bool nvme_full_iov(const NvmeFile& f, bool is_write, const std::vector<struct iovec>& iov, int64_t skip, int64_t at, std::string* why) {
  if (iov.size() == 1) return nvme_full_io(f, is_write, (uint8_t*)iov[0].iov_base + skip, (int64_t)iov[0].iov_len - skip, at + skip, why);
  std::vector<struct iovec> v(iov);
  int64_t total = 0;
  for (const iovec& x : v) total += (int64_t)x.iov_len;
  size_t i = 0;
  // drops the first `n` bytes of v[i..]
  auto advance = [&](int64_t n) {
    while (n > 0 && i < v.size()) {
      const int64_t take = std::min(n, (int64_t)v[i].iov_len);
      v[i].iov_base = (uint8_t*)v[i].iov_base + take;
      v[i].iov_len -= (size_t)take;
      n -= take;
      if (v[i].iov_len == 0) i++;
    }
  };
  advance(skip);
  int64_t done = skip;
  while (done < total) {
    const int cnt = (int)std::min<size_t>(v.size() - i, IOV_MAX);
    ssize_t r = is_write ? ::pwritev(f.fd, &v[i], cnt, (off_t)(at + done)) : ::preadv(f.fd, &v[i], cnt, (off_t)(at + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) { *why = std::strerror(errno); return false; }
    if (r == 0) {
      *why = is_write ? std::string("no bytes written") : nvme_short_read(f, done, total);
      return false;
    }
    done += r;
    advance(r);
  }
  return true;
}

bool nvme_run_sync(const NvmeFile& f, const std::vector<NvmeChunk>& chunks, const NvmeRun& run, uint8_t* staging, std::string* err) {
  const bool is_write = chunks[(size_t)run.first].is_write;
  NvmeRunIo io;
  if (!nvme_run_begin(f, chunks, run, staging, &io, err)) return false;
  std::string why;
  if (!nvme_full_iov(f, is_write, io.iov, 0, io.at, &why)) {
    *err = f.where(nvme_run_call(is_write, io), io.at) + why;
    return false;
  }
  nvme_run_end(chunks, run, io);
  return true;
}

}  // namespace tiercut
