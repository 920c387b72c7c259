#!/usr/bin/env bash
# The fuzz suites' long mode: every reader of outside data meets CASES cases (default
# 100,000) of random and mutated input. CI runs the same suites with 256 cases each.
#
#   scripts/fuzz-long.sh [CASES]
#
# Each suite prints its test results; a panic, an error without a place or an
# allocation over its bound fails the suite and the script.
set -euo pipefail
cd "$(dirname "$0")/.."
cases=${1:-100000}
suites="
pmlab-trace fuzz
pmlab-cache fuzz_flags
pmlab-spine fuzz
pmlab-native fuzz
pmlab-model fuzz_config
pmlab-fscheck fuzz_volume
pmlab-fs proto_fuzz
pmlab-tx decoders
pmlab-vas fuzz_registry
pmlab-samjmp fuzz
pmlab-kvjmp fuzz_header
"
echo "$suites" | while read -r package suite; do
  [ -n "$package" ] || continue
  echo "== $package $suite: $cases cases per property"
  start=$(date +%s)
  PROPTEST_CASES=$cases cargo test --release -q -p "$package" --test "$suite" 2>&1 | grep -E '^test |test result'
  echo "   $(( $(date +%s) - start )) s"
done
