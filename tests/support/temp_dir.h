// TempDir: a fresh, empty directory per use, removed at destruction. The
// scratch place of tests that write files (a SQLite store, a chronoqd data
// directory).
#pragma once

#include <atomic>
#include <filesystem>
#include <string>
#include <system_error>

#include <unistd.h>

namespace chronoq::test {

class TempDir {
 public:
  TempDir() : TempDir(std::filesystem::temp_directory_path()) {}
  // A directory under `parent` (e.g. /dev/shm, for a test that fsyncs often).
  explicit TempDir(const std::filesystem::path& parent) {
    static std::atomic<int> counter{0};
    path_ =
        parent / ("chronoq-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace chronoq::test
