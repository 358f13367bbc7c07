#!/usr/bin/env bash
# Installs the Debian packages chronoq builds and tests with. Idempotent: it
# asks apt only for what is missing. Without root it prints the one command to run.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  # `make deb` and its test (tests/install): dpkg-shlibdeps and file for CPack's
  # DEB generator, systemd-analyze to verify the unit.
  dpkg-dev file systemd
  # clang builds the ASan+UBSan configuration `make test` runs (the Makefile
  # says why); its sanitizer runtimes are a package of their own.
  clang libclang-rt-14-dev
  libsqlite3-dev nlohmann-json3-dev libhowardhinnant-date-dev tzdata
  libspdlog-dev libfmt-dev libcli11-dev libboost-dev libssl-dev
  # chronoqd's config file (TOML): toml++ 3.3 in bookworm.
  libtomlplusplus-dev
  # simdjson: chronoqd reads task bodies without a JSON document (src/server/task_bodies.h).
  libsimdjson-dev
  # Abseil's B-tree: the engine's window of tasks due soon (src/timer/window.h).
  libabsl-dev
  # jemalloc: chronoqd's and chronoq-bench's allocator (cmake/ChronoqHelpers.cmake).
  libjemalloc-dev
  # The TLS tests make a throwaway CA with the openssl command (tests/support/make-test-certs.sh).
  openssl
  libgtest-dev libgmock-dev libbenchmark-dev
  # The PostgreSQL store: libpq to build it, the server (15) to test it
  # (scripts/pg-cluster.sh starts throwaway clusters).
  libpq-dev postgresql
  # The Python client and the OpenAPI spec test (clients/python, tests/openapi).
  python3 python3-pytest python3-jsonschema python3-yaml mypy python3-django
  # `pip install ./clients/python` offline (its test installs it into a temporary directory).
  python3-pip python3-setuptools
  # The Go client's tests (clients/go: standard library only).
  golang-go
  # The Java client's tests (clients/java: javac, Jackson, JUnit 5 from Debian).
  default-jdk-headless libjackson2-databind-java junit5
  # The dashboard's browser tests (tests/server/ui): headless Chromium driven by
  # Selenium; a font for readable screenshots.
  chromium chromium-driver python3-selenium fonts-dejavu-core
)
# clang-format / clang-tidy are only needed for `make format` and `make lint`.
if [[ ${1:-} == --dev ]]; then packages+=(clang-format clang-tidy); fi
# `make soak` draws its plots with gnuplot (bench/soak): not needed by `make test`.
if [[ ${1:-} == soak ]]; then packages+=(gnuplot-nox); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0

if [[ $(id -u) -ne 0 ]]; then
  echo "chronoq needs these Debian packages; run:" >&2
  echo "  sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
