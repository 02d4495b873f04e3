#!/usr/bin/env bash
# After new results: the charts (results/<gpu>/charts/*.png, when matplotlib is installed) and every
# generated table in LOG.md and the day READMEs, in one command.
#   scripts/refresh_docs.sh [results/h100]
set -euo pipefail
cd "$(dirname "$0")/.."
python3 scripts/charts.py "${1:-results/h100}"
python3 scripts/gen_log.py
