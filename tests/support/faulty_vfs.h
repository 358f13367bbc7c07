// FaultyVfs: a SQLite VFS for tests that fails the k-th read, write or sync
// of a database with the error a failing disk gives.
//
// It is registered under its own name (kName, never the default) and wraps
// the default VFS (unix): every file it opens behaves exactly as the default's
// until the fault it is armed with fires. Only the files SQLite opens for a
// database are counted and failed: the main file, its WAL and its rollback
// journal (the -shm index is memory-mapped, not read or written through the
// VFS). A store opens it through SqliteOptions::vfs.
//
// A fault is armed for one kind of operation and fires on the k-th of them
// counted from Arm() (k = 1: the next one). Then either it fires once (a
// transient EIO: the disk works again at once) or it keeps failing every later
// operation of that kind until Disarm() (a full disk stays full).
//
// Thread-safe: the counters and the arming are shared by every connection
// and thread in the process; tests that use it run one workload at a time.
#pragma once

#include <cstdint>
#include <string>

namespace chronoq::test {

enum class VfsOp { kRead, kWrite, kSync };
inline constexpr VfsOp kVfsOps[] = {VfsOp::kRead, VfsOp::kWrite, VfsOp::kSync};

enum class VfsFault {
  kIoError,     // EIO: SQLITE_IOERR_READ, _WRITE or _FSYNC; nothing is done
  kDiskFull,    // ENOSPC: SQLITE_FULL; a write writes nothing
  kShortWrite,  // a torn write: the first half of the buffer reaches the
                // file, then SQLITE_IOERR_WRITE (writes only)
};

std::string ToString(VfsOp op);
std::string ToString(VfsFault fault);

class FaultyVfs {
 public:
  static constexpr const char* kName = "chronoq-faulty";

  // The process's one instance, registered with SQLite on first use.
  static FaultyVfs& Get();

  // Fails the k-th `op` from now on (k >= 1) with `fault`; with `sticky`,
  // every later `op` too until Disarm(). Replaces an earlier arming.
  void Arm(VfsOp op, int64_t k, VfsFault fault, bool sticky);
  // The disk works again.
  void Disarm();
  // Operations of each kind since the last ResetCounts() (failed ones too).
  int64_t count(VfsOp op) const;
  void ResetCounts();
  // Faults injected since the last ResetCounts().
  int64_t faults() const;

  // For the VFS's callbacks: counts one `op` and returns the SQLite error
  // code to fail it with, or 0 to let it through; *fault says how.
  int Next(VfsOp op, VfsFault* fault);

 private:
  FaultyVfs() = default;
};

}  // namespace chronoq::test
