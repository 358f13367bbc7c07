#!/usr/bin/env python3
"""Prints why the tests of the last ctest run failed, briefly, as the last
lines of `make test`'s output.

CI keeps only the tail of what `make test` printed; ctest's own tail names a
failed test but not its failure, which sits thousands of lines above. This
reads Testing/Temporary/LastTest.log and prints, for each test that did not
pass, its gtest failure lines (where, and the lines that say what), at most
`--lines` lines in all.

usage: ctest-failures.py BUILD_DIR [--lines N]
"""
import argparse
import pathlib
import re
import sys

# A gtest failure: "path:line: Failure" and what follows it up to a blank
# line or the next test's marker. Sanitizer reports and timeouts say their
# own first line.
FAILURE = re.compile(r": Failure$|^==\d+==ERROR|^SUMMARY: |runtime error:|gave up waiting")
END_OF_FAILURE = re.compile(r"^$|^\[ +(RUN|OK|FAILED) +\]|: Failure$")


def failed_tests(log: str):
    """Yields (name, result line, output lines) of each test that did not pass."""
    for block in log.split("\n" + "-" * 58 + "\n\n"):
        head = re.search(r"^\d+/\d+ Test: (.+)$", block, re.M)
        result = re.search(r"^Test (?!time)(\w+)", block, re.M)
        if not head or (result and result.group(1) == "Passed"):
            continue
        output = block.split("Output:\n" + "-" * 58 + "\n", 1)[-1]
        output = output.split("<end of output>", 1)[0]
        yield head.group(1), result.group(0) if result else "no result", output.splitlines()


def failure_lines(output):
    """The lines that say where and what, from a test's output."""
    out = []
    i = 0
    while i < len(output):
        if FAILURE.search(output[i]):
            out.append(output[i])
            i += 1
            while i < len(output) and not END_OF_FAILURE.search(output[i]) and len(out) < 40:
                out.append(output[i])
                i += 1
            continue
        i += 1
    return out or output[-8:]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("build_dir", type=pathlib.Path)
    parser.add_argument("--lines", type=int, default=24)
    args = parser.parse_args()
    log_path = args.build_dir / "Testing" / "Temporary" / "LastTest.log"
    try:
        log = log_path.read_text(errors="replace")
    except OSError as e:
        print(f"ctest-failures: cannot read {log_path}: {e}")
        return 0
    printed = []
    for name, result, output in failed_tests(log):
        printed.append(f"== {name}: {result}")
        printed.extend("   " + line[:300] for line in failure_lines(output))
    if not printed:
        return 0
    print("\nWhy the failed tests failed (from LastTest.log; whole outputs above):")
    for line in printed[: args.lines]:
        print(line)
    if len(printed) > args.lines:
        print(f"   ... {len(printed) - args.lines} more lines in {log_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
