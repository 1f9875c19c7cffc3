#!/usr/bin/env bash
# Install Debian's Chromium (used by `make check-html` through Playwright) when /usr/bin/chromium
# is missing. Idempotent and quiet: prints one line, or the tail of apt's log when it fails.
# Playwright's own browser download is never used.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  echo "chromium: already installed ($(/usr/bin/chromium --version 2>/dev/null | head -n1))"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium; } >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "install-chromium: apt-get install chromium failed (see above)" >&2
  exit 1
fi
if [ ! -x /usr/bin/chromium ]; then
  echo "install-chromium: apt-get succeeded but /usr/bin/chromium is missing" >&2
  exit 1
fi
echo "chromium: installed ($(/usr/bin/chromium --version 2>/dev/null | head -n1))"
