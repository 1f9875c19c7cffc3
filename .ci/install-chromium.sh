#!/usr/bin/env bash
# Install Debian's Chromium (used by `make check-html` through Playwright) when /usr/bin/chromium
# is missing. Idempotent and quiet: prints one line, or the tail of apt's log when it fails.
# Playwright's own browser download is never used.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  echo "chromium: already installed ($(/usr/bin/chromium --version 2>/dev/null | head -n1))"
  exit 0
fi
# shellcheck source=apt-install.sh
. "$(dirname "$0")/apt-install.sh"
apt_install chromium chromium
if [ ! -x /usr/bin/chromium ]; then
  echo "install-chromium: apt-get succeeded but /usr/bin/chromium is missing" >&2
  exit 1
fi
echo "chromium: installed ($(/usr/bin/chromium --version 2>/dev/null | head -n1))"
