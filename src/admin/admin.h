// chronoq-admin: operations on a stopped chronoq's store, run next to
// chronoqd. One command so far:
//
//   chronoq-admin copy --from sqlite:./data/chronoq.db --to postgresql://chronoq@db/jobs
//
// copies everything one store holds into another, empty one (admin/copy.h),
// with a progress bar on stderr, then compares the row counts of both and
// prints them. docs/OPERATIONS.md, "Moving from SQLite to PostgreSQL", gives
// the whole procedure.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace chronoq::admin {

inline constexpr int kExitOk = 0;
// The copy failed, was refused, or its counts differ.
inline constexpr int kExitFailed = 1;
// A bad command line or store URL.
inline constexpr int kExitUsage = 2;

struct AdminIo {
  std::ostream& out;  // the summary
  std::ostream& err;  // progress and errors
  bool err_is_terminal = false;
};

// Runs chronoq-admin with `args` (without the program's name).
int RunAdmin(const std::vector<std::string>& args, const AdminIo& io);

}  // namespace chronoq::admin
