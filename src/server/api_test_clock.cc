// GET and POST /v1/test/clock: the server's time, moved by a test.
//
// Served only when chronoqd runs on a ManualClock (`chronoqd --test-clock`,
// or a C++ test's fake clock); otherwise 404, as if the endpoint did not
// exist. The clients' tests use it to expire leases, lapse lock waits and
// make tasks due without sleeping: they move the server's time and the
// engine acts on it before the answer comes back.
#include <algorithm>

#include "codec/json_codec.h"
#include "common/manual_clock.h"
#include "server/api.h"

namespace chronoq::server {
namespace {

// {"now":T,"waits":[T,...]}: the instant, and the deadlines the server's
// threads wait for, earliest first (none for those waiting only to be told),
// so that a test knows when a claim or lock wait has started.
std::string ClockBody(const ManualClock& clock) {
  std::vector<Timestamp> deadlines = clock.Deadlines();
  std::sort(deadlines.begin(), deadlines.end());
  std::string out = "{\"now\":";
  AppendTime(out, clock.Now());
  out += ",\"waits\":[";
  bool first = true;
  for (Timestamp t : deadlines) {
    if (t == kForever) continue;
    if (!first) out += ',';
    first = false;
    AppendTime(out, t);
  }
  out += "]}";
  return out;
}

Status NoTestClock() {
  return Status::NotFound(
      "this chronoqd keeps real time: /v1/test/clock is served only with --test-clock");
}

}  // namespace

void Api::GetTestClock(const Respond& respond) {
  if (test_clock_ == nullptr) return respond(ErrorResponse(NoTestClock()));
  respond(JsonResponse(200, ClockBody(*test_clock_)));
}

// {"advance_ms":N} or {"now":T}: time only moves forward. Answers once the
// engine has acted on the new time (Engine::Sync: due tasks handed out,
// lapsed leases and locks freed, waits that ran out answered).
void Api::MoveTestClock(const std::string& body, const Respond& respond) {
  if (test_clock_ == nullptr) return respond(ErrorResponse(NoTestClock()));
  Result<Json> json = ParseBody(body);
  if (!json.ok()) return respond(ErrorResponse(json.status()));
  ObjectReader r(*json);
  std::optional<Duration> advance;
  std::optional<Timestamp> now;
  Status s = r.Millis("advance_ms", advance);
  if (s.ok()) s = r.Time("now", now);
  if (s.ok()) s = r.Finish();
  if (s.ok() && advance.has_value() == now.has_value()) {
    s = Status::InvalidArgument("advance_ms", "give advance_ms or now, one of them");
  } else if (s.ok() && advance && *advance < Duration::zero()) {
    s = Status::InvalidArgument("advance_ms", "must be 0 or more: time only moves forward");
  } else if (s.ok() && now && *now < test_clock_->Now()) {
    s = Status::InvalidArgument("now", "is before the clock's time: time only moves forward");
  }
  if (!s.ok()) return respond(ErrorResponse(s));
  if (advance) {
    test_clock_->Advance(*advance);
  } else {
    test_clock_->Set(*now);
  }
  run_blocking_([this, respond] {
    engine_.Sync();
    respond(JsonResponse(200, ClockBody(*test_clock_)));
  });
}

}  // namespace chronoq::server
