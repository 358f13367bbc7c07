// OwnPgCluster: a PostgreSQL cluster of the test's own (scripts/pg-cluster.sh),
// for the tests that crash and restart PostgreSQL; the shared cluster of
// ctest's `postgres` fixture must never be restarted under the other tests.
// Stopped and removed when the object goes, whatever happened.
//
//   test::OwnPgCluster pg;
//   ASSERT_THAT(pg.Start(), IsOk());
//   ... chronoqd --store pg.Url() ...
//   ASSERT_THAT(pg.Crash(), IsOk());     // pg_ctl stop -m immediate
//   ASSERT_THAT(pg.Restart(), IsOk());
//
// The test target must define CHRONOQ_SOURCE_DIR (where scripts/ is).
#pragma once

#include <chrono>
#include <fstream>
#include <string>

#include "chronoq/status.h"

#include "common/subprocess.h"
#include "support/temp_dir.h"

#ifndef CHRONOQ_SOURCE_DIR
#error "CHRONOQ_SOURCE_DIR (for scripts/pg-cluster.sh) must be defined for the test target"
#endif

namespace chronoq::test {

class OwnPgCluster {
 public:
  OwnPgCluster() = default;
  OwnPgCluster(const OwnPgCluster&) = delete;
  OwnPgCluster& operator=(const OwnPgCluster&) = delete;
  ~OwnPgCluster() {
    if (started_) Script("stop").IgnoreError();
  }

  Status Start() {
    CHRONOQ_RETURN_IF_ERROR(Script("start"));
    started_ = true;
    return {};
  }
  // Stops the server at once, as a power loss would (pg_ctl stop -m immediate).
  Status Crash() { return Script("crash"); }
  Status Restart() { return Script("restart"); }
  // The cluster's postgresql:// URL (valid once Start() succeeded).
  std::string Url() const {
    std::ifstream in(dir_.File("pg/url"));
    std::string line;
    std::getline(in, line);
    return line;
  }

 private:
  Status Script(const char* command) {
    SpawnOptions o;
    o.argv = {CHRONOQ_SOURCE_DIR "/scripts/pg-cluster.sh", command, dir_.File("pg")};
    Result<Subprocess::Completed> done =
        Subprocess::Run(o, std::chrono::steady_clock::now() + std::chrono::seconds(120));
    if (!done.ok()) return done.status();
    if (done->code != 0) {
      return Status::Internal(std::string("pg-cluster.sh ") + command + ": " +
                              Subprocess::DescribeExit(done->code) + ": " + done->err);
    }
    return {};
  }

  TempDir dir_;
  bool started_ = false;
};

}  // namespace chronoq::test
