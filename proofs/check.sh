#!/usr/bin/env bash
# make proofs: compile the Coq/MathComp proofs in this folder and check that every main theorem is
# "Closed under the global context" (no axiom, no admitted lemma, no section hypothesis left over).
# The theorems checked are the `Print Assumptions` lines of Assumptions.v. When coqc is missing and
# apt-get can be used as root, .ci/install-coq.sh installs Debian's coq and MathComp first.
set -euo pipefail
cd "$(dirname "$0")"
HINT="install Coq 8.16 and MathComp 1.15 with: sudo bash .ci/install-coq.sh   (Debian/Ubuntu: apt-get install coq libcoq-mathcomp-ssreflect libcoq-mathcomp-algebra)"

have_coq() { command -v coqc >/dev/null 2>&1 && [ -d "$(coqc -where 2>/dev/null)/user-contrib/mathcomp/algebra" ]; }
if ! have_coq; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    bash ../.ci/install-coq.sh || true  # on failure it prints apt's log; the line below says what to do
  fi
  if ! have_coq; then
    echo "make proofs: coqc with MathComp not found; $HINT" >&2
    exit 2
  fi
fi

# No escape hatches in the sources (comments included, to keep the check simple).
if grep -nwE 'Admitted|admit|Axiom|Axioms|Parameter|Parameters|Conjecture' ./*.v; then
  echo "make proofs: the lines above use Admitted/admit/Axiom/Parameter/Conjecture" >&2
  exit 1
fi

FLAGS=(-Q . Dobrushin -w -notation-overridden,-ambiguous-paths)
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
for f in Dobrushin.v Rollout.v Assumptions.v; do
  if ! coqc "${FLAGS[@]}" "$f" >"$log" 2>&1; then
    cat "$log" >&2
    echo "make proofs: coqc failed on proofs/$f" >&2
    exit 1
  fi
  [ "$f" = Assumptions.v ] && cp "$log" assumptions.out
done

# Every `Print Assumptions NAME.` must print exactly "Closed under the global context", and nothing else.
expected=$(grep -c '^Print Assumptions ' Assumptions.v)
closed=$(grep -cx 'Closed under the global context' assumptions.out || true)
others=$(grep -vcx 'Closed under the global context' assumptions.out || true)
if [ "$expected" -lt 1 ] || [ "$closed" -ne "$expected" ] || [ "$others" -ne 0 ]; then
  cat assumptions.out >&2
  echo "make proofs: $closed of $expected theorems are closed under the global context (see above)" >&2
  exit 1
fi
echo "proofs: $(coqc --version | head -n1 | sed 's/The Coq Proof Assistant, //'); $expected theorems closed under the global context:" \
     "$(sed -n 's/^Print Assumptions \(.*\)\.$/\1/p' Assumptions.v | tr '\n' ' ')"
