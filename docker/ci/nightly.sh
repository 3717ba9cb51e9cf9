#!/usr/bin/env bash
# A nightly regression job, for any CI system: run the scenario (with repeats), compare with the last good runs
# in the history, write Markdown and JUnit (the comparison and every threshold), push to a Pushgateway when one
# is set, add the runs to the history (flagged when compare found a regression, so they never become the
# baseline by themselves).
#
#   HARNESS_ENDPOINT   the endpoint to test (empty: the bundled simulator)
#   OPENAI_API_KEY     its key, if it needs one (read from the environment, never printed)
#   HARNESS_SCENARIO   default scenarios/nightly.yaml      HARNESS_REPEAT    default 3 (1 works; 3 judges best)
#   HARNESS_OUT        default reports/nightly             HARNESS_HISTORY   default reports/history.sqlite
#   HARNESS_BASELINE   how many last good runs make the baseline (default 3)
#   PUSHGATEWAY_URL    push the night's figures there (optional); BRANCH labels it (default main)
#   HARNESS            the command (default: harness)
#
# The history file is all a later night needs: it keeps what compare reads, so on ephemeral CI runners cache
# only HARNESS_HISTORY. Run folders land in $HARNESS_OUT/<night>/ and may be deleted.
#
# Exit, the worst outcome first: 130 stopped; 2 bad input; 3 harness error (or a run that wrote nothing);
# 4 nothing succeeded; 99 a threshold broke or compare found a regression; 5 compare could not judge (the
# client limited a run: untrusted; or every metric inconclusive); 0 all well. Outputs: $HARNESS_OUT/compare.md and compare.junit.xml.
set -euo pipefail
read -r -a HARNESS <<< "${HARNESS:-harness}"
SCENARIO="${HARNESS_SCENARIO:-scenarios/nightly.yaml}"
REPEAT="${HARNESS_REPEAT:-3}"
OUT="${HARNESS_OUT:-reports/nightly}"
DB="${HARNESS_HISTORY:-reports/history.sqlite}"
BASELINE="${HARNESS_BASELINE:-3}"
night="$OUT/$(date -u +%Y%m%dT%H%M%SZ)-$$"
mkdir -p "$night"
rm -f "$OUT/compare.md" "$OUT/compare.junit.xml"  # never leave last night's verdict behind

args=(run "$SCENARIO" --repeat "$REPEAT" --reports-dir "$night" --progress lines)
if [ -n "${HARNESS_ENDPOINT:-}" ]; then args+=(--endpoint "$HARNESS_ENDPOINT"); fi
if [ -n "${PUSHGATEWAY_URL:-}" ]; then
    args+=(--pushgateway "$PUSHGATEWAY_URL" --pushgateway-job nightly --pushgateway-label "branch=${BRANCH:-main}")
fi
run_status=0
"${HARNESS[@]}" "${args[@]}" || run_status=$?

# What this night wrote: one folder (a run, or with --repeat N > 1 a folder of N runs). Anything else is an
# error, never a green night.
shopt -s nullglob
written=("$night"/*/)
shopt -u nullglob
if [ "${#written[@]}" -ne 1 ]; then
    echo "nightly: harness run wrote ${#written[@]} run folders in $night (exit $run_status): nothing compared" >&2
    exit $(( run_status != 0 ? run_status : 3 ))
fi
current="${written[0]%/}"

compare_status=0
if [ "$run_status" != 130 ]; then
    "${HARNESS[@]}" compare --baseline-from-history "$BASELINE" --start-baseline --db "$DB" "$current" \
        --junit "$OUT/compare.junit.xml" --markdown "$OUT/compare.md" || compare_status=$?
fi
# Only a run that compared clean (or started the history) may become a baseline by itself; a regression, or a
# run compare could not judge for another reason, waits for `harness history accept`.
case "$compare_status" in
    0|5) flag=() ;;
    99) flag=(--flag "regression found by harness compare ($night)") ;;
    *) flag=(--flag "not compared (harness compare exited $compare_status)") ;;
esac
"${HARNESS[@]}" history add "$current" --db "$DB" "${flag[@]}"

# The worst outcome wins: a stop or bad input before a regression, a regression before an untrusted verdict.
for code in 130 2 3 4 99 5; do
    if [ "$run_status" = "$code" ] || [ "$compare_status" = "$code" ]; then exit "$code"; fi
done
exit $(( run_status != 0 ? run_status : compare_status ))
