// nvme_threads.h — the portable nvme backend: queue_depth I/O threads, each
// with its own staging buffer (O_DIRECT only), taking chunks from one queue and
// running each with one pread/pwrite (nvme_full_io). A request waits for its
// chunks; a failed chunk makes the request's remaining chunks skip.
#pragma once
#include <memory>
#include <string>

#include "nvme_store.h"

namespace tiercut {

// The file must outlive the backend. Fails only when a staging buffer cannot be allocated.
std::unique_ptr<NvmeBackend> make_threads_backend(const NvmeFile& f, const NvmeSettings& s, std::string* err);

}  // namespace tiercut
