// chronoq: the command-line client of chronoqd. See cli/commands.h.
#include <iostream>

#include "cli/commands.h"

int main(int argc, char** argv) { return chronoq::cli::RunCli(argc, argv, std::cout, std::cerr); }
