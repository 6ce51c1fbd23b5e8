#!/usr/bin/env bash
# densewire Java: build and test every library module (core, jackson, arrow, client, conformance: golden vectors
# and README examples; fuzz: a short Jazzer run of every decoder, -Dfuzz.executions=N per target, 3000 by default).
# Installs a JDK 17 and Maven from Debian if missing; Maven downloads from Maven Central.
# bench/java is built against the modules just installed, and its per-token/sparse decode bench runs its
# --check (a small batch through every decoder, bit for bit with TEI's JSON); the JMH benchmarks themselves and the
# long fuzz runs (bench/fuzz/RESULTS-java.md) are not run here.
set -euo pipefail
cd "$(dirname "$0")"

need_apt=()
command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 || need_apt+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
java -version 2>&1 | sed -n 1p
mvn -v 2>/dev/null | sed -n 1p

# The fuzz targets' seed corpus is the golden vectors: it must match them.
if command -v python3 >/dev/null 2>&1; then
  python3 densewire-fuzz/seeds.py --check
fi

# Sequential build (the machine has 2 cores shared with other builds); surefire forks one JVM per module.
status=0
mvn -B -ntp -Dstyle.color=never clean verify "$@" || status=$?

# bench/java builds (JMH benches, TokenDecode, PgCopyIngest) and TokenDecode --check passes: the bodies the
# per-token/sparse bench times decode to what TEI's JSON holds (typescript/ci.sh and ruby/ci.sh do the same).
# bench/java resolves densewire-core/-jackson/-arrow (and their parent POM) from the local repository: install
# the ones just built.
if [ "$status" -eq 0 ]; then
  echo "== bench/java: package, TokenDecode --check"
  mvn -B -ntp -q -Dstyle.color=never install -DskipTests -pl densewire-core,densewire-jackson,densewire-arrow -am \
    || status=$?
fi
if [ "$status" -eq 0 ]; then
  mvn -B -ntp -q -Dstyle.color=never -f ../bench/java/pom.xml clean package || status=$?
  if [ "$status" -eq 0 ]; then
    java --add-opens=java.base/java.nio=ALL-UNNAMED -cp ../bench/java/target/benchmarks.jar \
      dev.densewire.bench.TokenDecode --check || status=$?
  fi
fi

# One closing line over every module's surefire reports.
total=0; failed=0; skipped=0
for f in */target/surefire-reports/TEST-*.xml; do
  [ -e "$f" ] || continue
  line=$(grep -m1 '<testsuite ' "$f")
  t=$(sed -E 's/.* tests="([0-9]+)".*/\1/' <<<"$line")
  fl=$(sed -E 's/.* failures="([0-9]+)".*/\1/' <<<"$line")
  er=$(sed -E 's/.* errors="([0-9]+)".*/\1/' <<<"$line")
  sk=$(sed -E 's/.* skipped="([0-9]+)".*/\1/' <<<"$line")
  total=$((total + t)); failed=$((failed + fl + er)); skipped=$((skipped + sk))
done
echo
echo "java: $((total - failed - skipped)) passed, $failed failed, $skipped skipped"
if [ "$total" -eq 0 ] && [ "$status" -eq 0 ]; then
  echo "no tests ran" >&2
  exit 1
fi
exit "$status"
