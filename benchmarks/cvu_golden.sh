#!/usr/bin/env bash
# Decision tables of `belief decide` on a fitted belief for every CVU continuation and
# estimator, on fixed seeds: run before and after a change to CVU and `diff -r` the folders.
# Usage: benchmarks/cvu_golden.sh BELIEF.nc OUTDIR [SRC]   (SRC: a checkout to import belief
# from, default the current one; CONTINUATIONS: a subset of "one_step lookahead2 rollout")
set -euo pipefail
belief_nc=$1; out=$2; src=${3:-$PWD}
py=${PYTHON:-$PWD/.venv/bin/python}
mkdir -p "$out"
for cont in ${CONTINUATIONS:-one_step lookahead2 rollout}; do
  for est in auto psis regression; do
    name=${cont}_${est}
    extra=()
    [ "$cont" != one_step ] && extra=(--inner-outcomes 8)
    [ "$cont" = rollout ] && extra+=(--rollout-depth 2)
    (cd "$src" && PYTHONPATH="$src" nice -n 10 "$py" -m belief.cli decide "$belief_nc" \
        --continuation "$cont" "${extra[@]}" --cvu-estimator "$est" --seed 7 \
        --cvu-outcomes 128 --cvu-workers 1 --out "$out/$name" --wide) \
        > "$out/$name.stdout" 2>&1 || echo "exit $? for $name" >> "$out/$name.stdout"
  done
done
