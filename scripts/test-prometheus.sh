#!/usr/bin/env bash
# Checks the Prometheus deployment files: the scrape config, the alerting rules, and the rules'
# unit tests (deploy/prometheus/alerts_test.yml). Exits non-zero on the first failure.
# Usage: scripts/test-prometheus.sh   (needs promtool: apt-get install prometheus)
set -euo pipefail

dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../deploy/prometheus" && pwd)"
promtool="${PROMTOOL:-promtool}"
if ! command -v "$promtool" >/dev/null 2>&1; then
  echo "test-prometheus: promtool not found (install the prometheus package or set PROMTOOL); skipped" >&2
  exit 77  # CTest: skipped (SKIP_RETURN_CODE), not passed
fi

cd "$dir"
echo "== promtool check config prometheus.yml"
"$promtool" check config prometheus.yml
echo "== promtool check rules alerts.yml"
"$promtool" check rules alerts.yml
echo "== promtool test rules alerts_test.yml"
"$promtool" test rules alerts_test.yml
echo "test-prometheus: all checks passed"
