// fuzz_query: the API's query strings (server/api.h: ForEachQueryParam and
// the helpers the listings use) and task ids (core/validate.h,
// common/task_id.h). The input is a query string, the part of a target after
// '?'; its decoded values and the input itself are tried as task ids.
//
// Checked: every parameter handed on is one '&'-separated piece with a key
// without '&' or '='; an accepted integer lies in its range and reads back
// from its decimal form; a generated id is exactly the form of its seq and
// is never a valid client-chosen id; errors are InvalidArgument (naming the
// parameter, which may be the empty key of "=x").
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/check.h"
#include "common/task_id.h"
#include "core/validate.h"
#include "server/api.h"

namespace chronoq::fuzz {
namespace {

void CheckRefusal(const Status& status) {
  if (status.ok()) return;
  CHRONOQ_CHECK(status.code() == StatusCode::kInvalidArgument,
                "a refused query parameter or id is InvalidArgument");
}

void CheckTaskId(std::string_view id) {
  CheckRefusal(ValidateTaskId(id));
  CheckRefusal(ValidateTaskRef(id));
  if (ValidateTaskId(id).ok()) {
    CHRONOQ_CHECK(ValidateTaskRef(id).ok(), "a valid task id is a valid task reference");
  }
  if (std::optional<int64_t> seq = ParseGeneratedId(id)) {
    CHRONOQ_CHECK(*seq >= 0, "a generated id's seq is not negative");
    CHRONOQ_CHECK(FormatGeneratedId(*seq) == id, "a generated id has one spelling");
    CHRONOQ_CHECK(!ValidateTaskId(id).ok(), "a client may not choose a generated id");
  }
}

void CheckIntParam(std::string_view value) {
  constexpr int kMin = 1, kMax = 1000;  // a listing's limit
  Result<int> n = server::ParseIntParam("limit", value, kMin, kMax);
  CheckRefusal(n.status());
  if (!n.ok()) return;
  CHRONOQ_CHECK(*n >= kMin && *n <= kMax, "an accepted integer parameter is in its range");
  Result<int> again = server::ParseIntParam("limit", std::to_string(*n), kMin, kMax);
  CHRONOQ_CHECK(again.ok() && *again == *n, "an integer parameter reads back from its decimal");
}

}  // namespace
}  // namespace chronoq::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chronoq;
  using namespace chronoq::fuzz;
  const std::string_view query(reinterpret_cast<const char*>(data), size);
  const size_t pieces = static_cast<size_t>(std::count(query.begin(), query.end(), '&')) + 1;

  size_t handed_on = 0;
  const Status walked =
      server::ForEachQueryParam(query, [&](std::string_view key, std::string value) -> Status {
        ++handed_on;
        CHRONOQ_CHECK(key.find_first_of("&=") == std::string_view::npos,
                      "a query key holds no '&' or '='");
        CheckIntParam(value);
        CheckTaskId(value);
        return {};
      });
  CheckRefusal(walked);
  CHRONOQ_CHECK(handed_on <= pieces, "at most one parameter per '&'-separated piece");

  std::optional<std::string> queue;
  int limit = 100;
  std::string cursor;
  CheckRefusal(server::ForEachListParam(query, queue, limit, cursor));
  CheckRefusal(server::ParseOnlyIntParam(query, "count", 10).status());

  CheckIntParam(query);
  CheckTaskId(query);
  return 0;
}
