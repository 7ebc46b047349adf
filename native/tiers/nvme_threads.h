// nvme_threads.h — the portable nvme backend: queue_depth I/O threads, each
// with its own staging buffer (O_DIRECT only), taking runs (nvme_run.h) from
// one queue and running each with one pread/pwrite, or preadv/pwritev for a
// run of several chunks (nvme_run_sync). A request waits for its runs; a
// failed run makes the request's remaining runs skip.
#pragma once
#include <memory>
#include <string>

#include "nvme_store.h"

namespace tiercut {

// The file must outlive the backend. Fails only when a staging buffer cannot be allocated.
std::unique_ptr<NvmeBackend> make_threads_backend(const NvmeFile& f, const NvmeSettings& s, std::string* err);

}  // namespace tiercut
