# The two commands a newcomer needs: `make run` and `make test`.
# Everything else is for developers. Build trees live under build/.

JOBS ?= $(shell nproc)
CMAKE_COMMON := -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON

.PHONY: deps release-config release deb run run-postgres demo test asan-config asan tsan-build tsan stress fuzz bench soak format format-check lint clean

deps:
	@scripts/install-deps.sh

release-config: deps
	cmake -S . -B build/release $(CMAKE_COMMON) -DCMAKE_BUILD_TYPE=Release

release: release-config
	cmake --build build/release -j $(JOBS)

# The Debian packages of a Release build, in build/release: chronoq (chronoqd,
# chronoq, chronoq-admin, libchronoq.so, the systemd unit chronoqd.service,
# /etc/chronoq/chronoqd.toml) and chronoq-dev (headers, libchronoq.a, the CMake
# package, chronoq.pc). Builds only what they hold (chronoq_installable).
# docs/OPERATIONS.md, "Installing the Debian package".
deb: release-config
	cmake --build build/release -j $(JOBS) --target chronoq_installable
	cd build/release && cpack -G DEB
	@ls -l build/release/*.deb

# chronoqd on the embedded SQLite default: data in ./data, 127.0.0.1:7070.
# Builds only what it runs: the server and the CLI.
run: release-config
	cmake --build build/release -j $(JOBS) --target chronoqd chronoq_cli_main
	./build/release/src/server/chronoqd --data ./data --listen 127.0.0.1:7070

# chronoqd on PostgreSQL: a throwaway cluster in ./data/pg (scripts/pg-cluster.sh),
# chronoqd on it in the foreground at 127.0.0.1:7070. Ctrl-C stops chronoqd,
# then the cluster, and removes ./data/pg with everything in it.
run-postgres: release-config
	cmake --build build/release -j $(JOBS) --target chronoqd chronoq_cli_main
	scripts/pg-cluster.sh start ./data/pg
	trap : INT TERM; \
	  ./build/release/src/server/chronoqd --store "$$(cat ./data/pg/url)" --listen 127.0.0.1:7070; \
	  scripts/pg-cluster.sh stop ./data/pg

# The embedded engine's demo (no server), on ./data/demo.
demo: release-config
	cmake --build build/release -j $(JOBS) --target chronoq-demo
	./build/release/examples/chronoq-demo --data ./data/demo

# The CI configuration: Debug, ASan+UBSan, warnings as errors, every test.
# Built with clang: at -O0 with the sanitizers it compiles this tree in 60% of
# GCC's time (8 against 13 minutes on 2 cores, docs/TESTING.md), and the tests
# run faster too; Release builds keep the default compiler (GCC). The
# benchmarks are left out (no test runs them; `make bench` builds them in
# Release): at -O0 with the sanitizers they were a minute of the build.
ASAN_COMPILERS := -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
asan-config: deps
	cmake -S . -B build/asan $(CMAKE_COMMON) $(ASAN_COMPILERS) -DCMAKE_BUILD_TYPE=Debug \
	  -DCHRONOQ_SANITIZE="address;undefined" -DCHRONOQ_WERROR=ON -DCHRONOQ_BUILD_BENCH=OFF

asan: asan-config
	cmake --build build/asan -j $(JOBS)

# Every test case has a ctest timeout of its own (cmake/ChronoqHelpers.cmake).
# Tests labelled stress (too long for every run) are left to `make stress`.
# CI keeps the tail of the output: on a failure, why each test failed comes last.
test: asan
	cd build/asan && ctest -LE '^stress$$' --output-on-failure -j $(JOBS) \
	  || { python3 ../../scripts/ctest-failures.py . ; exit 1; }

tsan-build: deps
	cmake -S . -B build/tsan $(CMAKE_COMMON) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCHRONOQ_SANITIZE=thread -DCHRONOQ_WERROR=ON
	cmake --build build/tsan -j $(JOBS)

tsan: tsan-build
	cd build/tsan && TSAN_OPTIONS=halt_on_error=1 ctest -LE '^stress$$' --output-on-failure -j $(JOBS)

# The end-to-end and crash tests STRESS_REPEAT times over (until one fails),
# under ASan+UBSan and then TSan: "passes every time", measured
# (docs/TESTING.md). First, once under ASan, the tests labelled stress (the
# whole storage-fault sweep).
STRESS_REPEAT ?= 30
stress: asan tsan-build
	cd build/asan && ctest -L '^stress$$' --output-on-failure -j $(JOBS)
	cd build/asan && ctest -L 'e2e|crash' --repeat until-fail:$(STRESS_REPEAT) \
	  --output-on-failure -j $(JOBS)
	cd build/tsan && TSAN_OPTIONS=halt_on_error=1 ctest -L 'e2e|crash' \
	  --repeat until-fail:$(STRESS_REPEAT) --output-on-failure -j $(JOBS)

# The libFuzzer harnesses of tests/fuzz/, FUZZ_SECONDS each, in a tree of
# their own: every library there is coverage-instrumented (fuzzer-no-link),
# so the fuzzer sees into the code under test; -O1 for speed, without NDEBUG
# so CHRONOQ_DCHECKs stay on. Only the harnesses are built. Each one's corpus
# grows in build/fuzz/corpus/<harness> from the checked-in seeds; a crash
# fails the target, naming the harness and the input (build/fuzz/artifacts/).
# `make test` runs each harness 5 s (ctest -L fuzz). FUZZ_RUNS=N stops each
# harness after N inputs (FUZZ_SECONDS=0: no time limit); FUZZ_HARNESSES
# picks harness binaries.
FUZZ_SECONDS ?= 60
FUZZ_RUNS ?= -1
fuzz: deps
	cmake -S . -B build/fuzz $(CMAKE_COMMON) $(ASAN_COMPILERS) -DCMAKE_BUILD_TYPE=Debug \
	  -DCMAKE_CXX_FLAGS_DEBUG="-g -O1" -DCHRONOQ_SANITIZE="address;undefined;fuzzer-no-link" \
	  -DCHRONOQ_BUILD_BENCH=OFF
	cmake --build build/fuzz -j $(JOBS) --target chronoq_fuzzers
	tests/fuzz/run-fuzzers.sh --seconds $(FUZZ_SECONDS) --runs $(FUZZ_RUNS) --work build/fuzz \
	  $(or $(FUZZ_HARNESSES),build/fuzz/tests/fuzz/fuzz_*)

# Runs the load generator on the embedded engine, then against chronoqd over
# HTTP; see docs/BENCHMARKS.md.
bench: release
	./build/release/bench/chronoq-bench --workload all --target embedded --dir build/bench-data
	./build/release/bench/chronoq-bench --workload all --target http --dir build/bench-data

# The soak test (bench/soak, docs/TESTING.md "Soak"): the Release chronoqd
# under a steady mixed load for DURATION (90s, 10m, 1h), SIGKILLed and
# restarted every KILL_EVERY (0: never), sampled every 10 s; the CSV, the plot
# and report.md go to build/soak/<UTC timestamp>/, and a failed verdict fails
# the target. SANITIZED=1 runs the ASan+UBSan chronoqd of build/asan instead, at
# half the load and without kills, and stops it with SIGTERM so that
# LeakSanitizer reports; its report must be empty. Not part of `make test`.
DURATION ?= 10m
KILL_EVERY ?= $(if $(SANITIZED),0,10m)
SOAK_LOAD ?= $(if $(SANITIZED),0.5,1)
SOAK_TREE := $(if $(SANITIZED),asan,release)
soak: $(if $(SANITIZED),asan-config,release-config)
	@scripts/install-deps.sh soak
	cmake --build build/$(SOAK_TREE) -j $(JOBS) --target chronoqd
	python3 bench/soak/soak.py --chronoqd build/$(SOAK_TREE)/src/server/chronoqd \
	  --duration $(DURATION) --kill-every $(KILL_EVERY) --load $(SOAK_LOAD) \
	  $(if $(SANITIZED),--sanitized) --out build/soak/$$(date -u +%Y%m%dT%H%M%SZ)

SOURCES = $(shell git ls-files '*.cc' '*.h')

format:
	clang-format -i $(SOURCES)

format-check:
	clang-format --dry-run -Werror $(SOURCES)

# clang-tidy on the files changed against main (or all with ALL=1).
lint: asan
	@files="$$( [ -n "$(ALL)" ] && git ls-files '*.cc' || git diff --name-only main -- '*.cc')"; \
	  [ -z "$$files" ] || clang-tidy -p build/asan --quiet $$files

clean:
	rm -rf build
