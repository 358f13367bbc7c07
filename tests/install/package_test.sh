#!/usr/bin/env bash
# install.package (tests/install/CMakeLists.txt): makes the Debian packages of
# the build tree under test (cpack -G DEB, cmake/ChronoqPackage.cmake),
# installs them into this machine's root with dpkg -i, checks that every file
# is where it should be, that systemd-analyze accepts the unit and that the
# installed programs run, then purges them and checks nothing is left.
# Needs root (CI runs as root); refuses to run over an installed chronoq.
# The service is not started (the test machine may run no systemd): the
# installed chronoqd checks the installed config file with --check-config,
# which makes every check of start-up but listening and opening the store.
#
#   package_test.sh BUILD_DIR LIBDIR SOVERSION VERSION
set -euo pipefail

build=$1 libdir=$2 soversion=$3 version=$4
packages=(chronoq-dev chronoq)

step() { echo "== [${SECONDS}s] $*"; }
fail() {
  echo "package_test: FAIL: $*" >&2
  exit 1
}

if [[ $(id -u) -ne 0 ]]; then
  fail "needs root: it installs the chronoq packages into this machine's root with dpkg -i" \
    "and purges them afterwards (CI runs as root)"
fi
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  if [[ -n $status && $status != not-installed ]]; then
    fail "package $p is on this machine already ($status); the test would replace it:" \
      "dpkg --purge ${packages[*]} first"
  fi
done
files=(/usr/bin/chronoqd /usr/bin/chronoq /usr/bin/chronoq-admin
  "/usr/$libdir/libchronoq.so.$soversion" "/usr/$libdir/libchronoq.so" "/usr/$libdir/libchronoq.a"
  /usr/include/chronoq/engine.h "/usr/$libdir/cmake/chronoq/chronoqConfig.cmake"
  "/usr/$libdir/pkgconfig/chronoq.pc" /usr/share/doc/chronoq/README.md
  /lib/systemd/system/chronoqd.service /etc/chronoq/chronoqd.toml)
for f in "${files[@]}" /etc/chronoq; do
  [[ ! -e $f ]] || fail "$f exists, though no chronoq package is installed: remove it first"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/chronoq-package.XXXXXX")
# --force-unsafe-io: dpkg skips its fsyncs; a sanitized tree's packages hold
# about 600 MB, none of which must survive a power cut.
purge() { dpkg --force-unsafe-io --purge "${packages[@]}" >"$tmp/purge.log" 2>&1; }
cleanup() {
  purge || cat "$tmp/purge.log" >&2
  rm -rf "$tmp"
}
trap cleanup EXIT

step "cpack -G DEB ($build)"
# Uncompressed: the packages of a sanitized tree are large, and the test only
# installs them.
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp" \
  -D CPACK_DEBIAN_COMPRESSION_TYPE=none >"$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log"; fail "cpack failed"; }
arch=$(dpkg --print-architecture)
debs=("$tmp/chronoq_${version}_$arch.deb" "$tmp/chronoq-dev_${version}_$arch.deb")
for deb in "${debs[@]}"; do
  [[ -f $deb ]] || fail "cpack made no $deb: $(ls "$tmp")"
done
grep -q "chronoq (= $version)" <<<"$(dpkg-deb --field "${debs[1]}" Depends)" ||
  fail "chronoq-dev does not depend on chronoq (= $version)"

step "dpkg -i"
dpkg --force-unsafe-io -i "${debs[@]}" >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -i failed"; }
for f in "${files[@]}"; do
  [[ -e $f ]] || fail "the packages installed no $f"
done
[[ $(dpkg -S /usr/bin/chronoqd) == "chronoq: /usr/bin/chronoqd" ]] ||
  fail "/usr/bin/chronoqd is not chronoq's: $(dpkg -S /usr/bin/chronoqd)"
grep -q '^ /etc/chronoq/chronoqd.toml ' <<<"$(dpkg-query -W -f='${Conffiles}\n' chronoq)" ||
  fail "/etc/chronoq/chronoqd.toml is not a conffile: $(dpkg-query -W -f='${Conffiles}' chronoq)"

step "the unit"
unit=/lib/systemd/system/chronoqd.service
grep -qx 'ExecStart=/usr/bin/chronoqd --config /etc/chronoq/chronoqd.toml' "$unit" ||
  fail "$unit: ExecStart is $(grep ExecStart= "$unit")"
for directive in DynamicUser=yes StateDirectory=chronoq NoNewPrivileges=yes ProtectSystem=strict \
  ProtectHome=yes PrivateTmp=yes; do
  grep -qx "$directive" "$unit" || fail "$unit lacks $directive"
done
# systemd-analyze verify exits non-zero on an error, and prints a warning
# (an unknown directive, a bad value) without failing: both fail the test.
systemd-analyze verify "$unit" >"$tmp/verify.log" 2>&1 ||
  { cat "$tmp/verify.log"; fail "systemd-analyze verify $unit failed"; }
if grep chronoqd "$tmp/verify.log"; then
  fail "systemd-analyze verify $unit warned (above)"
fi

step "the installed programs"
for program in chronoqd chronoq chronoq-admin; do
  /usr/bin/$program --help >"$tmp/help.log" 2>&1 ||
    { cat "$tmp/help.log"; fail "$program --help failed"; }
done
/usr/bin/chronoqd --help >"$tmp/help.log" 2>&1
grep -q -- '--listen' "$tmp/help.log" || fail "chronoqd --help printed: $(cat "$tmp/help.log")"
# The unit's command line, checked: the package's config file is valid and
# is the one in effect (its data directory, not the default ./data).
/usr/bin/chronoqd --config /etc/chronoq/chronoqd.toml --check-config >"$tmp/check.log" 2>&1 ||
  { cat "$tmp/check.log"; fail "chronoqd --check-config refused the installed config"; }
grep -qx ok "$tmp/check.log" || fail "chronoqd --check-config printed: $(cat "$tmp/check.log")"
/usr/bin/chronoqd --config /etc/chronoq/chronoqd.toml --print-config >"$tmp/print.log" 2>&1 ||
  { cat "$tmp/print.log"; fail "chronoqd --print-config failed"; }
grep -q '^data = "/var/lib/chronoq" *# from: file:' "$tmp/print.log" ||
  fail "the installed config does not set the data directory: $(cat "$tmp/print.log")"
[[ $(PKG_CONFIG_PATH='' pkg-config --modversion chronoq) == "$version" ]] ||
  fail "pkg-config does not find the installed chronoq.pc"
grep -q "libchronoq.so.$soversion " <<<"$(ldconfig -p)" ||
  fail "ldconfig does not know libchronoq.so.$soversion"

step "dpkg --purge"
purge || { cat "$tmp/purge.log"; fail "dpkg --purge failed"; }
for f in "${files[@]}" /etc/chronoq; do
  [[ ! -e $f ]] || fail "$f is still there after dpkg --purge"
done
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ -z $status || $status == not-installed ]] || fail "$p is still known to dpkg: $status"
done
if grep -q "libchronoq.so" <<<"$(ldconfig -p)"; then
  fail "ldconfig still lists libchronoq after the purge"
fi
echo "package_test: all passed in ${SECONDS}s"
