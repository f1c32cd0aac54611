#!/usr/bin/env bash
# fmt.sh — fix what the formatters of scripts/lint.sh can fix (gofmt, go mod
# tidy, pgindent, ruff, perltidy), then report what is left.
set -euo pipefail
exec "$(dirname "$0")/lint.sh" --fix
