// arena.h — the three tier arenas of a session: one block of bytes per tier.
//
//   gpu   emulated in host memory on a machine without CUDA: one allocation of
//         exactly arenaBytes, 4096-byte aligned. Its capacity is enforced by
//         validate_program (arenaBytes <= capacityBytes), not here.
//   cpu   one host allocation of arenaBytes, 4096-byte aligned (O_DIRECT
//         transfers of 4096-aligned buffers need no staging copy).
//   nvme  one preallocated file <spillDir>/tiercut-<pid>-<n>/nvme.bin of
//         arenaBytes bytes (rounded up to 4096), read and written by an
//         NvmeStore (nvme_store.h: O_DIRECT when the file system allows it,
//         io_uring or a pool of pread/pwrite threads with the program's queue
//         depth and block size; no pointer into it exists). When every nvme
//         buffer starts on a 4096-byte boundary the store may pad the last
//         block of a write (owns_block_tails) instead of reading it first. The file and its directory are
//         removed by close().
//
// An arena of 0 bytes allocates nothing (and, for nvme, creates no file).
// Thread-safety: host arenas are plain memory; pread/pwrite on one fd are safe
// from several threads at once. open/close are not concurrent with anything.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../plan/program.h"
#include "nvme_store.h"

namespace tiercut {

struct Arena {
  int32_t tier = 0;
  int64_t bytes = 0;
  uint8_t* host = nullptr;   // gpu, cpu: the block; nvme: nullptr
  std::unique_ptr<NvmeStore> store;  // nvme: the open file
  std::string dir, path;     // nvme: the session's spill directory and file
  std::vector<std::string> made_dirs;  // nvme: the parts of --spill-dir this session created (removed at close when empty)
};

struct Arenas {
  Arena tier[kTierCount];

  // Allocates / creates all three. On failure frees what was made and returns false with a message.
  bool open(const Program& p, std::string* err);
  // Frees memory, closes and removes the nvme file, its directory and the parts
  // of the spill directory it created (those left empty). Idempotent.
  void close();

  // Host pointer to offset `offset` of a gpu or cpu arena (never nvme).
  uint8_t* host_ptr(int32_t t, int64_t offset) const { return tier[t].host + offset; }

  // The nvme store's I/O mode ("" when there is no nvme arena).
  std::string nvme_note() const { return tier[TIER_NVME].store ? tier[TIER_NVME].store->note() : std::string(); }

  // Byte transfers between an arena range and host memory; any tier. Errors on
  // nvme start with "nvme tier: " and end with the OS error.
  bool read(int32_t t, int64_t offset, void* dst, int64_t n, std::string* err) const;
  bool write(int32_t t, int64_t offset, const void* src, int64_t n, std::string* err) const;
  // Several nvme requests at once (NvmeStore::transfer); *failed_request names the one that failed.
  // on_done: each request as soon as it and the ones before it are done (NvmeStore::transfer).
  bool nvme_transfer(bool is_write, const std::vector<NvmeRequest>& reqs, std::string* err, int32_t* failed_request,
                     const std::function<void(int32_t)>& on_done = nullptr) const {
    return tier[TIER_NVME].store->transfer(is_write, reqs, err, failed_request, on_done);
  }
};

}  // namespace tiercut
