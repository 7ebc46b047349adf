// nvme_uring.h — the io_uring nvme backend (liburing), compiled in when
// binding.gyp finds liburing (TIERCUT_HAVE_LIBURING=1, native/tiers/uring_flags.sh).
//
// Two rings, one for reads and one for writes, so that the nvmeRead and
// nvmeWrite streams never wait for each other; a request holds its ring for its
// whole life (requests of one direction run one after another). Each ring has
// queue_depth entries and, in O_DIRECT mode, queue_depth staging buffers of
// block_bytes (one per slot). The calling thread itself keeps up to
// queue_depth I/Os submitted (one per run, nvme_run.h: read/write, or
// readv/writev for a run of several chunks), reaps completions (polling the completion
// queue for up to TIERCUT_SPIN_US before sleeping in the kernel, exec/spin.h),
// refills free slots and returns when every chunk is done: no I/O threads, no
// hand-offs. A completion
// with fewer bytes than asked is finished with pread/pwrite (which names a
// short read as such); an error names "io_uring read|write", the file, the
// offset and the OS error.
#pragma once
#include <memory>
#include <string>

#include "nvme_store.h"

namespace tiercut {

// nullptr with *why when the addon was built without liburing or the kernel
// refuses a ring (io_uring_queue_init fails: old kernel, seccomp, limits).
// The file must outlive the backend.
std::unique_ptr<NvmeBackend> make_uring_backend(const NvmeFile& f, const NvmeSettings& s, std::string* why);

}  // namespace tiercut
