#!/usr/bin/env bash
# Installs what the Ruby gem's tests need from Debian's packages (only what is missing) and runs the
# whole Minitest suite: golden vectors, codecs, HTTP client, README examples.
set -euo pipefail
cd "$(dirname "$0")"

need=()
if ! command -v ruby >/dev/null 2>&1; then
  need+=(ruby ruby-msgpack ruby-google-protobuf)
else
  ruby -e 'require "msgpack"' >/dev/null 2>&1 || need+=(ruby-msgpack)
  ruby -e 'require "google/protobuf"' >/dev/null 2>&1 || need+=(ruby-google-protobuf)
fi
if ((${#need[@]})); then
  echo "ruby/ci.sh: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# Minitest comes with Debian's Ruby (libruby); ruby-minitest only if a trimmed Ruby lacks it.
if ! ruby -e 'require "minitest"' >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ruby-minitest >/dev/null
fi
ruby --version

ruby -W:no-experimental -Ilib -Itest -e 'Dir["test/*_test.rb"].sort.each { |f| require File.expand_path(f) }' -- "$@"
# the per-token/sparse decode bench: every body it times decodes to TEI's JSON, bit for bit (a small batch)
ruby ../bench/ruby/tokens.rb --check
