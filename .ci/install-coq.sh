#!/usr/bin/env bash
# Install Debian's Coq and MathComp (used by `make proofs`, which `make test` runs) when coqc or
# MathComp's algebra library is missing. Idempotent and quiet: prints one line, or the tail of apt's
# log when it fails. Packages: coq (8.16), libcoq-mathcomp-ssreflect and libcoq-mathcomp-algebra (1.15).
set -euo pipefail
have_coq() { command -v coqc >/dev/null 2>&1 && [ -d "$(coqc -where 2>/dev/null)/user-contrib/mathcomp/algebra" ]; }
version() { coqc --version 2>/dev/null | head -n1; }
if have_coq; then
  echo "coq: already installed ($(version), MathComp in $(coqc -where)/user-contrib/mathcomp)"
  exit 0
fi
# shellcheck source=apt-install.sh
. "$(dirname "$0")/apt-install.sh"
apt_install coq coq libcoq-mathcomp-ssreflect libcoq-mathcomp-algebra
if ! have_coq; then
  echo "install-coq: apt-get succeeded but coqc with MathComp's algebra library is missing" >&2
  exit 1
fi
echo "coq: installed ($(version))"
