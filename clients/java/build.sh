#!/usr/bin/env bash
# Compiles the Java client and its tests with javac into OUT (never the source tree) and runs the
# JUnit 5 tests against a chronoqd ($CHRONOQD, default build/dev/src/server/chronoqd).
# Usage: build.sh OUT_DIR [extra console-launcher args, e.g. --select-class dev.chronoq.LockTest]
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 OUT_DIR [junit console launcher args]" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$1"; shift
jars=/usr/share/java
cp="$jars/jackson-databind.jar:$jars/jackson-core.jar:$jars/jackson-annotations.jar"
launcher="$jars/junit-platform-console-standalone.jar"
for f in "$jars/jackson-databind.jar" "$jars/jackson-core.jar" "$jars/jackson-annotations.jar" "$launcher"; do
  [ -f "$f" ] || { echo "missing $f (apt-get install libjackson2-databind-java junit5)" >&2; exit 2; }
done
rm -rf "$out/classes" "$out/test-classes"
mkdir -p "$out/classes" "$out/test-classes"
javac --release 17 -Xlint:all,-serial -Werror -encoding UTF-8 -d "$out/classes" -cp "$cp" \
  $(find "$here/src/main/java" -name '*.java')
javac --release 17 -encoding UTF-8 -d "$out/test-classes" -cp "$cp:$out/classes:$launcher" \
  $(find "$here/src/test/java" "$here/examples/spring-purge/src" -name '*.java' 2>/dev/null)
args=("$@")
if [ ${#args[@]} -eq 0 ]; then args=(--scan-class-path); fi
exec java -Djava.util.logging.config.file=/dev/null -jar "$launcher" \
  --class-path "$out/classes:$out/test-classes:$cp" \
  --disable-banner --disable-ansi-colors --details=tree --fail-if-no-tests "${args[@]}"
