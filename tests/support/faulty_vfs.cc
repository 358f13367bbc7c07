#include "support/faulty_vfs.h"

#include <array>
#include <cstddef>
#include <mutex>

#include <sqlite3.h>

namespace chronoq::test {
namespace {

// What the VFS counts and fails. One instance per process, like the VFS.
struct State {
  std::mutex mu;
  std::array<int64_t, 3> counts{};
  int64_t faults = 0;
  bool armed = false;
  VfsOp op = VfsOp::kRead;
  int64_t fire_at = 0;  // counts[op] at which the fault fires
  VfsFault fault = VfsFault::kIoError;
  bool sticky = false;
};

State& TheState() {
  static State state;
  return state;
}

sqlite3_vfs* base_vfs = nullptr;  // the default VFS, set once at registration

// A file of the faulty VFS: our header, then the default VFS's file object in
// the same allocation (szOsFile covers both).
struct FaultyFile {
  sqlite3_file base;
  sqlite3_file* real;
  bool counted;  // a database, WAL or journal file
};

sqlite3_file* Real(sqlite3_file* f) { return reinterpret_cast<FaultyFile*>(f)->real; }
bool Counted(sqlite3_file* f) { return reinterpret_cast<FaultyFile*>(f)->counted; }

int ErrorFor(VfsOp op, VfsFault fault) {
  if (fault == VfsFault::kDiskFull) return SQLITE_FULL;
  switch (op) {
    case VfsOp::kRead:
      return SQLITE_IOERR_READ;
    case VfsOp::kWrite:
      return SQLITE_IOERR_WRITE;
    case VfsOp::kSync:
      return SQLITE_IOERR_FSYNC;
  }
  return SQLITE_IOERR;
}

int Close(sqlite3_file* f) {
  sqlite3_file* real = Real(f);
  const int rc = real->pMethods != nullptr ? real->pMethods->xClose(real) : SQLITE_OK;
  f->pMethods = nullptr;
  return rc;
}

int Read(sqlite3_file* f, void* buf, int n, sqlite3_int64 off) {
  VfsFault fault;
  if (Counted(f)) {
    if (const int rc = FaultyVfs::Get().Next(VfsOp::kRead, &fault); rc != 0) return rc;
  }
  return Real(f)->pMethods->xRead(Real(f), buf, n, off);
}

int Write(sqlite3_file* f, const void* buf, int n, sqlite3_int64 off) {
  VfsFault fault;
  if (Counted(f)) {
    if (const int rc = FaultyVfs::Get().Next(VfsOp::kWrite, &fault); rc != 0) {
      // Torn: a prefix reached the disk before the error.
      if (fault == VfsFault::kShortWrite) Real(f)->pMethods->xWrite(Real(f), buf, n / 2, off);
      return rc;
    }
  }
  return Real(f)->pMethods->xWrite(Real(f), buf, n, off);
}

int Sync(sqlite3_file* f, int flags) {
  VfsFault fault;
  if (Counted(f)) {
    if (const int rc = FaultyVfs::Get().Next(VfsOp::kSync, &fault); rc != 0) return rc;
  }
  return Real(f)->pMethods->xSync(Real(f), flags);
}

// The rest only forward.
int Truncate(sqlite3_file* f, sqlite3_int64 size) {
  return Real(f)->pMethods->xTruncate(Real(f), size);
}
int FileSize(sqlite3_file* f, sqlite3_int64* size) {
  return Real(f)->pMethods->xFileSize(Real(f), size);
}
int Lock(sqlite3_file* f, int level) { return Real(f)->pMethods->xLock(Real(f), level); }
int Unlock(sqlite3_file* f, int level) { return Real(f)->pMethods->xUnlock(Real(f), level); }
int CheckReservedLock(sqlite3_file* f, int* out) {
  return Real(f)->pMethods->xCheckReservedLock(Real(f), out);
}
int FileControl(sqlite3_file* f, int op, void* arg) {
  return Real(f)->pMethods->xFileControl(Real(f), op, arg);
}
int SectorSize(sqlite3_file* f) { return Real(f)->pMethods->xSectorSize(Real(f)); }
int DeviceCharacteristics(sqlite3_file* f) {
  return Real(f)->pMethods->xDeviceCharacteristics(Real(f));
}
int ShmMap(sqlite3_file* f, int region, int size, int extend, void volatile** out) {
  return Real(f)->pMethods->xShmMap(Real(f), region, size, extend, out);
}
int ShmLock(sqlite3_file* f, int offset, int n, int flags) {
  return Real(f)->pMethods->xShmLock(Real(f), offset, n, flags);
}
void ShmBarrier(sqlite3_file* f) { Real(f)->pMethods->xShmBarrier(Real(f)); }
int ShmUnmap(sqlite3_file* f, int delete_flag) {
  return Real(f)->pMethods->xShmUnmap(Real(f), delete_flag);
}
int Fetch(sqlite3_file* f, sqlite3_int64 off, int n, void** out) {
  return Real(f)->pMethods->xFetch(Real(f), off, n, out);
}
int Unfetch(sqlite3_file* f, sqlite3_int64 off, void* p) {
  return Real(f)->pMethods->xUnfetch(Real(f), off, p);
}

const sqlite3_io_methods kMethods = {
    3,
    Close,
    Read,
    Write,
    Truncate,
    Sync,
    FileSize,
    Lock,
    Unlock,
    CheckReservedLock,
    FileControl,
    SectorSize,
    DeviceCharacteristics,
    ShmMap,
    ShmLock,
    ShmBarrier,
    ShmUnmap,
    Fetch,
    Unfetch,
};

int Open(sqlite3_vfs*, const char* name, sqlite3_file* f, int flags, int* out_flags) {
  auto* file = reinterpret_cast<FaultyFile*>(f);
  file->real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(f) + sizeof(FaultyFile));
  file->counted = (flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_WAL | SQLITE_OPEN_MAIN_JOURNAL)) != 0;
  f->pMethods = nullptr;
  const int rc = base_vfs->xOpen(base_vfs, name, file->real, flags, out_flags);
  // SQLite calls xClose only on a file whose pMethods is set.
  if (file->real->pMethods != nullptr) f->pMethods = &kMethods;
  return rc;
}

int Delete(sqlite3_vfs*, const char* name, int sync_dir) {
  return base_vfs->xDelete(base_vfs, name, sync_dir);
}
int Access(sqlite3_vfs*, const char* name, int flags, int* out) {
  return base_vfs->xAccess(base_vfs, name, flags, out);
}
int FullPathname(sqlite3_vfs*, const char* name, int n, char* out) {
  return base_vfs->xFullPathname(base_vfs, name, n, out);
}
void* DlOpen(sqlite3_vfs*, const char* name) { return base_vfs->xDlOpen(base_vfs, name); }
void DlError(sqlite3_vfs*, int n, char* out) { base_vfs->xDlError(base_vfs, n, out); }
void (*DlSym(sqlite3_vfs*, void* lib, const char* sym))(void) {
  return base_vfs->xDlSym(base_vfs, lib, sym);
}
void DlClose(sqlite3_vfs*, void* lib) { base_vfs->xDlClose(base_vfs, lib); }
int Randomness(sqlite3_vfs*, int n, char* out) { return base_vfs->xRandomness(base_vfs, n, out); }
int Sleep(sqlite3_vfs*, int micros) { return base_vfs->xSleep(base_vfs, micros); }
int CurrentTime(sqlite3_vfs*, double* out) { return base_vfs->xCurrentTime(base_vfs, out); }
int GetLastError(sqlite3_vfs*, int n, char* out) {
  return base_vfs->xGetLastError(base_vfs, n, out);
}
int CurrentTimeInt64(sqlite3_vfs*, sqlite3_int64* out) {
  return base_vfs->xCurrentTimeInt64(base_vfs, out);
}

sqlite3_vfs the_vfs;

void Register() {
  base_vfs = sqlite3_vfs_find(nullptr);
  the_vfs = sqlite3_vfs{};
  the_vfs.iVersion = 2;
  the_vfs.szOsFile = static_cast<int>(sizeof(FaultyFile)) + base_vfs->szOsFile;
  the_vfs.mxPathname = base_vfs->mxPathname;
  the_vfs.zName = FaultyVfs::kName;
  the_vfs.xOpen = Open;
  the_vfs.xDelete = Delete;
  the_vfs.xAccess = Access;
  the_vfs.xFullPathname = FullPathname;
  the_vfs.xDlOpen = DlOpen;
  the_vfs.xDlError = DlError;
  the_vfs.xDlSym = DlSym;
  the_vfs.xDlClose = DlClose;
  the_vfs.xRandomness = Randomness;
  the_vfs.xSleep = Sleep;
  the_vfs.xCurrentTime = CurrentTime;
  the_vfs.xGetLastError = GetLastError;
  the_vfs.xCurrentTimeInt64 = CurrentTimeInt64;
  sqlite3_vfs_register(&the_vfs, /*makeDflt=*/0);
}

}  // namespace

std::string ToString(VfsOp op) {
  switch (op) {
    case VfsOp::kRead:
      return "read";
    case VfsOp::kWrite:
      return "write";
    case VfsOp::kSync:
      return "sync";
  }
  return "?";
}

std::string ToString(VfsFault fault) {
  switch (fault) {
    case VfsFault::kIoError:
      return "EIO";
    case VfsFault::kDiskFull:
      return "ENOSPC";
    case VfsFault::kShortWrite:
      return "short write";
  }
  return "?";
}

FaultyVfs& FaultyVfs::Get() {
  static FaultyVfs vfs;
  static std::once_flag registered;
  std::call_once(registered, [] {
    sqlite3_initialize();
    Register();
  });
  return vfs;
}

void FaultyVfs::Arm(VfsOp op, int64_t k, VfsFault fault, bool sticky) {
  State& s = TheState();
  std::lock_guard lock(s.mu);
  s.armed = true;
  s.op = op;
  s.fire_at = s.counts[static_cast<size_t>(op)] + k;
  s.fault = fault;
  s.sticky = sticky;
}

void FaultyVfs::Disarm() {
  State& s = TheState();
  std::lock_guard lock(s.mu);
  s.armed = false;
}

int64_t FaultyVfs::count(VfsOp op) const {
  State& s = TheState();
  std::lock_guard lock(s.mu);
  return s.counts[static_cast<size_t>(op)];
}

void FaultyVfs::ResetCounts() {
  State& s = TheState();
  std::lock_guard lock(s.mu);
  s.counts = {};
  s.faults = 0;
  s.armed = false;
}

int64_t FaultyVfs::faults() const {
  State& s = TheState();
  std::lock_guard lock(s.mu);
  return s.faults;
}

int FaultyVfs::Next(VfsOp op, VfsFault* fault) {
  State& s = TheState();
  std::lock_guard lock(s.mu);
  const int64_t n = ++s.counts[static_cast<size_t>(op)];
  if (!s.armed || s.op != op || n < s.fire_at) return 0;
  if (n > s.fire_at && !s.sticky) return 0;
  if (!s.sticky) s.armed = false;
  ++s.faults;
  *fault = s.fault;
  return ErrorFor(op, s.fault);
}

}  // namespace chronoq::test
