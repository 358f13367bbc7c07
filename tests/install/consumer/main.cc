// chronoq-consumer: a program built against an installed chronoq, as a user
// builds one (tests/install/install_test.sh): the installed headers and
// library only, found with find_package(chronoq CONFIG) or pkg-config.
//
//   chronoq-consumer DIR
//
// Opens an engine on a SQLite store in DIR, enqueues a task, claims it,
// acknowledges it and reads it back; prints "ok" and exits 0 when each step
// did what it should, else names the step and exits 1.
#include <chrono>
#include <iostream>
#include <string>

#include "chronoq/engine.h"
#include "chronoq/status.h"
#include "chronoq/task.h"
#include "chronoq/time.h"

namespace {

int Fail(const std::string& step, const chronoq::Status& s) {
  std::cerr << "chronoq-consumer: " << step << ": " << s.ToString() << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: chronoq-consumer DIR\n";
    return 2;
  }
  chronoq::EngineOptions options;
  options.store = "sqlite:" + std::string(argv[1]) + "/chronoq.db";
  auto engine = chronoq::Engine::Open(options);
  if (!engine.ok()) return Fail("open", engine.status());

  chronoq::TaskSpec spec;
  spec.queue = "installed";
  spec.id = "consumer:1";
  spec.payload = R"({"from":"an installed chronoq"})";
  auto task = (*engine)->Enqueue(spec);
  if (!task.ok()) return Fail("enqueue", task.status());

  auto leases = (*engine)->Claim("installed", 1, std::chrono::seconds(30));
  if (!leases.ok()) return Fail("claim", leases.status());
  if (leases->size() != 1 || (*leases)[0].id != "consumer:1") {
    return Fail("claim", chronoq::Status::Internal("expected consumer:1, got " +
                                                   std::to_string(leases->size()) + " leases"));
  }
  if (chronoq::Status s = (*engine)->Ack("consumer:1", (*leases)[0].token); !s.ok()) {
    return Fail("ack", s);
  }
  auto done = (*engine)->Get("consumer:1");
  if (!done.ok()) return Fail("get", done.status());
  if (done->state != chronoq::TaskState::kSucceeded) {
    return Fail("get", chronoq::Status::Internal("state " +
                                                 std::string(chronoq::TaskStateName(done->state))));
  }
  // A free function of the public API too, not only the Engine's virtuals.
  auto lease = chronoq::ParseDuration("30s");
  if (!lease.ok() || *lease != std::chrono::seconds(30)) {
    return Fail("ParseDuration", lease.status());
  }
  std::cout << "ok: " << done->id << " " << chronoq::TaskStateName(done->state) << " at "
            << chronoq::FormatTime(done->updated_at) << "\n";
  return 0;
}
