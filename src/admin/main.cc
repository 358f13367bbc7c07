// chronoq-admin: see admin/admin.h.
#include <iostream>
#include <string>
#include <vector>

#include "admin/admin.h"
#include <unistd.h>

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  return chronoq::admin::RunAdmin(
      args, {.out = std::cout, .err = std::cerr, .err_is_terminal = isatty(STDERR_FILENO) == 1});
}
