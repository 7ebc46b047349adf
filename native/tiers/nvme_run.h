// nvme_run.h — file-contiguous chunks of one transfer as one I/O.
//
// A chunk's I/O covers its *extent* in the file: [begin, end) straight on the
// caller's memory (zero copy, or buffered I/O), or, staged, the whole
// 4096-byte blocks around it (nvme_store.h). nvme_merge_runs cuts the chunk
// list of one transfer into *runs*: consecutive chunks (in request order)
// whose extents follow each other in the file without a gap or an overlap,
// up to block_bytes in all and kNvmeMaxRunChunks chunks, become one vectored
// I/O (preadv/pwritev, io_uring readv/writev) of [at, at + len). The memory
// is not contiguous: each chunk is one iovec (staged chunks sit in one
// staging buffer at their offset within the run, so neighbouring staged
// chunks share an iovec). Plans from this compiler put a parameter's state
// (p, m, v) next to each other in the file (compiler/schedule/arena.ts) and the
// executor hands its reads / write-backs to the store together, so they go as
// one request instead of three.
//
// A run is done or failed as a whole: the backends report its chunks done, in
// order, when its I/O is complete, and a failed run names its first chunk's
// request (no chunk of it is reported). TIERCUT_NVME_MERGE=0 (read at open)
// turns merging off: one run per chunk, as before (for side-by-side runs).
#pragma once
#include <sys/uio.h>

#include <cstdint>
#include <string>
#include <vector>

#include "nvme_store.h"

namespace tiercut {

constexpr int32_t kNvmeMaxRunChunks = 64;

// The extent of chunk c's I/O in the file (see above; nvme_chunk_begin plans the same).
void nvme_chunk_extent(const NvmeFile& f, const NvmeChunk& c, int64_t* at, int64_t* len);

// Runs covering chunks in order; one run per chunk when !merge.
std::vector<NvmeRun> nvme_merge_runs(const NvmeFile& f, const std::vector<NvmeChunk>& chunks, int64_t block_bytes, bool merge);

// The planned I/O of one run.
struct NvmeRunIo {
  int64_t at = 0, len = 0;
  std::vector<NvmeIo> parts;          // per chunk of the run (nvme_chunk_begin)
  std::vector<struct iovec> iov;      // the parts' memory in file order, neighbours joined
};

// Plans run's I/O (staged chunks at staging + their offset in the run; staged
// writes read their edge blocks and copy in, as nvme_chunk_begin).
bool nvme_run_begin(const NvmeFile& f, const std::vector<NvmeChunk>& chunks, const NvmeRun& run, uint8_t* staging, NvmeRunIo* io,
                    std::string* err);
// After the I/O: copies staged reads out.
void nvme_run_end(const std::vector<NvmeChunk>& chunks, const NvmeRun& run, const NvmeRunIo& io);
// preadv/pwritev of exactly the iovecs' bytes at `at`, the first `skip` bytes
// of them already done, retrying partial transfers; a read that reaches the
// end of the file is a short read (nvme_full_io's message).
bool nvme_full_iov(const NvmeFile& f, bool is_write, const std::vector<struct iovec>& iov, int64_t skip, int64_t at, std::string* why);
// "pread"/"preadv"/"pwrite"/"pwritev" for messages: the v when the run has more than one iovec.
const char* nvme_run_call(bool is_write, const NvmeRunIo& io);
// Runs the whole run synchronously (the thread pool's worker): begin, I/O, end.
bool nvme_run_sync(const NvmeFile& f, const std::vector<NvmeChunk>& chunks, const NvmeRun& run, uint8_t* staging, std::string* err);

}  // namespace tiercut
