// arena.cc — allocation of the tier arenas and byte I/O on them (see arena.h).
#include "arena.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace tiercut {

static std::string errno_text(int e) { return std::string(std::strerror(e)); }

// mkdir -p: creates `dir` and any missing parents, appending each directory
// it made to `made` (outermost first). Returns 0 or an errno.
static int make_dirs(const std::string& dir, std::vector<std::string>* made) {
  if (dir.empty()) return ENOENT;
  for (size_t pos = 1; pos <= dir.size(); pos++) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string part = dir.substr(0, pos);
    if (::mkdir(part.c_str(), 0777) == 0) made->push_back(part);
    else if (errno != EEXIST) return errno;
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return errno;
  return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

static std::atomic<int64_t> g_spill_counter{0};

bool Arenas::open(const Program& p, std::string* err) {
  for (int t = 0; t < kTierCount; t++) {
    tier[t] = Arena();
    tier[t].tier = t;
    tier[t].bytes = p.tiers[t].arena_bytes;
  }
  // gpu (emulated) and cpu: one aligned host block each
  for (int t = TIER_GPU; t <= TIER_CPU; t++) {
    if (tier[t].bytes == 0) continue;
    void* block = nullptr;
    // 4096-aligned, so that a cpu buffer at a 4096-aligned offset moves to and
    // from an O_DIRECT file without staging (nvme_store.h, zero copy)
    int rc = posix_memalign(&block, (size_t)kNvmeAlign, (size_t)tier[t].bytes);
    if (rc != 0) {
      *err = std::string("program.tiers[") + std::to_string(t) + "]: cannot allocate the " + tier_name(t) + " arena of " +
             std::to_string(tier[t].bytes) + " bytes: " + errno_text(rc);
      close();
      return false;
    }
    tier[t].host = (uint8_t*)block;
  }
  // nvme: <spillDir>/tiercut-<pid>-<n>/nvme.bin, preallocated
  Arena& nv = tier[TIER_NVME];
  if (nv.bytes > 0) {
    int rc = make_dirs(p.spill_dir, &nv.made_dirs);
    // (ENOENT: a part removed between its mkdir and the stat, by another session's close)
    for (int k = 0; rc == ENOENT && k < 8; k++) rc = make_dirs(p.spill_dir, &nv.made_dirs);
    if (rc != 0) {
      *err = "nvme tier: cannot create the spill directory " + p.spill_dir + ": " + errno_text(rc);
      close();
      return false;
    }
    std::string base = p.spill_dir;
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    for (int attempt = 0; attempt < 1000; attempt++) {
      std::string dir = base + "/tiercut-" + std::to_string((long long)::getpid()) + "-" +
                        std::to_string((long long)g_spill_counter.fetch_add(1));
      if (::mkdir(dir.c_str(), 0700) == 0) { nv.dir = dir; break; }
      // the spill directory gone since make_dirs: another session that had
      // made it removed it at its close (see close); made again, tried again
      if (errno == ENOENT && attempt < 999 && make_dirs(p.spill_dir, &nv.made_dirs) == 0) continue;
      if (errno != EEXIST) {
        *err = "nvme tier: cannot create the spill directory " + dir + ": " + errno_text(errno);
        close();
        return false;
      }
    }
    if (nv.dir.empty()) {
      *err = "nvme tier: cannot find a free tiercut-<pid>-<n> directory name in " + base;
      close();
      return false;
    }
    nv.path = nv.dir + "/nvme.bin";
    // every nvme buffer on a 4096-byte boundary (compiler/schedule/arena.ts
    // does so): a write may then pad its last block instead of reading it
    NvmeSettings s = p.nvme;
    s.owns_block_tails = true;
    for (const BufferSpec& b : p.buffers)
      if (b.tier == TIER_NVME && b.offset_bytes % kNvmeAlign != 0) s.owns_block_tails = false;
    nv.store = std::make_unique<NvmeStore>();
    if (!nv.store->open(nv.path, nv.bytes, s, p.nvme_direct, err)) {
      close();
      return false;
    }
  }
  return true;
}

void Arenas::close() {
  // the store first: it ends its I/O, which reads into and writes from the host arenas
  Arena& nv = tier[TIER_NVME];
  if (nv.store) { nv.store->close(); nv.store.reset(); }
  for (int t = TIER_GPU; t <= TIER_CPU; t++) {
    std::free(tier[t].host);
    tier[t].host = nullptr;
  }
  if (!nv.path.empty()) { ::unlink(nv.path.c_str()); nv.path.clear(); }
  if (!nv.dir.empty()) { ::rmdir(nv.dir.c_str()); nv.dir.clear(); }
  // and the spill directory's parts this session made, innermost first (rmdir
  // removes only an empty one: whatever else was put there stays)
  for (auto it = nv.made_dirs.rbegin(); it != nv.made_dirs.rend(); ++it) ::rmdir(it->c_str());
  nv.made_dirs.clear();
}

bool Arenas::read(int32_t t, int64_t offset, void* dst, int64_t n, std::string* err) const {
  const Arena& a = tier[t];
  if (t != TIER_NVME) {
    if (n > 0) std::memmove(dst, a.host + offset, (size_t)n);
    return true;
  }
  return a.store->read(offset, dst, n, err);
}

bool Arenas::write(int32_t t, int64_t offset, const void* src, int64_t n, std::string* err) const {
  const Arena& a = tier[t];
  if (t != TIER_NVME) {
    if (n > 0) std::memmove(a.host + offset, src, (size_t)n);
    return true;
  }
  return a.store->write(offset, src, n, err);
}

}  // namespace tiercut
