#!/usr/bin/env bash
# The whole check: lint, types, layering contract, then the test suite (kernel tests need root).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1
echo "== ruff"
.venv/bin/ruff check magw tests benchmarks
echo "== mypy --strict magw"
.venv/bin/mypy
echo "== import-linter (the core stays pure)"
.venv/bin/lint-imports
echo "== pytest"
exec .venv/bin/pytest -q -p no:cacheprovider "$@"
