#!/usr/bin/env bash
# install.consumer (tests/install/CMakeLists.txt): installs the build tree into
# a temporary prefix with `cmake --install BUILD --prefix DIR`, checks what is
# there (and what libchronoq.so exports), then builds the program of
# consumer/ against it twice, as a user would: with find_package(chronoq
# CONFIG) (shared and static library) and with pkg-config (shared and static),
# and runs each build: open an engine on a temporary SQLite store, enqueue,
# claim, ack, read back.
#
#   install_test.sh BUILD_DIR LIBDIR SOVERSION VERSION CXX "SANITIZER_FLAGS"
#
# In a sanitized tree libchronoq's objects are instrumented, so the programs
# are compiled and linked with the same sanitizer flags (the last argument).
set -euo pipefail

build=$1 libdir=$2 soversion=$3 version=$4 cxx=$5 flags=$6
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/chronoq-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

step() { echo "== [${SECONDS}s] $*"; }
fail() {
  echo "install_test: FAIL: $*" >&2
  exit 1
}
# Runs a built consumer on a store of its own; it must print "ok".
run_consumer() {
  local program=$1 data=$tmp/data-$(basename "$1")
  mkdir -p "$data"
  local out
  out=$("$program" "$data" 2>&1) || fail "$program failed: $out"
  [[ $out == ok:* ]] || fail "$program printed: $out"
  echo "$out"
}

step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "cmake --install failed"; }
for f in bin/chronoqd bin/chronoq bin/chronoq-admin include/chronoq/engine.h \
  "$libdir/libchronoq.a" "$libdir/libchronoq.so" "$libdir/libchronoq.so.$soversion" \
  "$libdir/cmake/chronoq/chronoqConfig.cmake" "$libdir/cmake/chronoq/chronoqTargets.cmake" \
  "$libdir/pkgconfig/chronoq.pc"; do
  [[ -e $prefix/$f ]] || fail "the install has no $f"
done
# The service files have absolute Debian paths: only the package installs them.
if grep -E '/etc/|/lib/systemd' "$tmp/install.log"; then
  fail "a plain install (no --component) installed the service files"
fi

step "libchronoq.so: soname and exports"
so=$prefix/$libdir/libchronoq.so.$soversion
grep -q "SONAME.*\[libchronoq.so.$soversion\]" <<<"$(readelf -d "$so")" ||
  fail "the soname of $so is not libchronoq.so.$soversion: $(readelf -d "$so" | grep SONAME)"
nm -D --defined-only -C "$so" | cut -d' ' -f3- >"$tmp/exports"
grep -qx 'chronoq::Engine::Open(chronoq::EngineOptions)' "$tmp/exports" ||
  fail "libchronoq.so does not export chronoq::Engine::Open"
# Every exported symbol names chronoq (no std, nlohmann, fmt or sqlite code),
# and every chronoq name in them is declared by a public header: an internal
# class (Core, SqliteStore, ...) exported would fail here.
grep -v 'chronoq::' "$tmp/exports" >"$tmp/foreign" || true
if [[ -s $tmp/foreign ]]; then
  head -5 "$tmp/foreign"
  fail "libchronoq.so exports $(wc -l <"$tmp/foreign") symbols outside namespace chronoq (above)"
fi
grep -oE 'chronoq::[A-Za-z_][A-Za-z_0-9]*' "$tmp/exports" | sort -u | while read -r name; do
  grep -qw -- "${name#chronoq::}" "$prefix"/include/chronoq/*.h ||
    fail "libchronoq.so exports $name, which no public header declares"
done
echo "$(wc -l <"$tmp/exports") symbols exported, all public"
# A public header without the pragma would leave its functions hidden.
for h in "$prefix"/include/chronoq/*.h; do
  grep -q '^#pragma GCC visibility push(default)' "$h" ||
    fail "$h lacks '#pragma GCC visibility push(default)':" \
      "libchronoq.so would hide what it declares"
done

step "find_package(chronoq CONFIG): shared and static"
cmake -S "$here/consumer" -B "$tmp/cmake" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" >"$tmp/cmake.log" 2>&1 ||
  { cat "$tmp/cmake.log"; fail "configuring the consumer failed"; }
grep -q "chronoq_DIR: $prefix/" "$tmp/cmake.log" ||
  fail "find_package found another chronoq: $(grep chronoq_DIR "$tmp/cmake.log")"
cmake --build "$tmp/cmake" >"$tmp/build.log" 2>&1 ||
  { cat "$tmp/build.log"; fail "building the consumer failed"; }
loads=$(ldd "$tmp/cmake/chronoq-consumer")
grep -q "libchronoq.so.$soversion => $prefix/" <<<"$loads" ||
  fail "chronoq-consumer does not load the installed libchronoq.so: $(grep chronoq <<<"$loads")"
if ldd "$tmp/cmake/chronoq-consumer-static" | grep chronoq; then
  fail "chronoq-consumer-static loads libchronoq.so"
fi
run_consumer "$tmp/cmake/chronoq-consumer"
run_consumer "$tmp/cmake/chronoq-consumer-static"

step "pkg-config chronoq: shared and static"
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
[[ $(pkg-config --modversion chronoq) == "$version" ]] ||
  fail "pkg-config --modversion chronoq is $(pkg-config --modversion chronoq), not $version"
mkdir "$tmp/pc"
# shellcheck disable=SC2046,SC2086  # flags are lists of words
"$cxx" -std=c++20 $flags $(pkg-config --cflags chronoq) "$here/consumer/main.cc" \
  -o "$tmp/pc/shared" $(pkg-config --libs chronoq) \
  -Wl,-rpath,"$(pkg-config --variable=libdir chronoq)" || fail "pkg-config --libs: link failed"
# shellcheck disable=SC2046,SC2086
"$cxx" -std=c++20 $flags $(pkg-config --cflags chronoq) "$here/consumer/main.cc" \
  -o "$tmp/pc/static" $(pkg-config --static --libs chronoq | sed 's/-lchronoq\b/-l:libchronoq.a/') ||
  fail "pkg-config --static --libs: link failed"
run_consumer "$tmp/pc/shared"
run_consumer "$tmp/pc/static"
echo "install_test: all passed in ${SECONDS}s"
