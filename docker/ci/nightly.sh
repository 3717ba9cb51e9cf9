#!/usr/bin/env bash
# A nightly regression job, for any CI system: run the scenario with repeats, compare with the last good runs
# in the history, write JUnit and Markdown, push to a Pushgateway when one is set, add the runs to the history.
#
#   HARNESS_ENDPOINT   the endpoint to test (empty: the bundled simulator)
#   OPENAI_API_KEY     its key, if it needs one (read from the environment, never printed)
#   HARNESS_SCENARIO   default scenarios/nightly.yaml      HARNESS_REPEAT    default 3
#   HARNESS_OUT        default reports/nightly             HARNESS_HISTORY   default reports/history.sqlite
#   HARNESS_BASELINE   how many last good runs make the baseline (default 3)
#   PUSHGATEWAY_URL    push each run's summary there (optional); BRANCH labels it (default main)
#
# Exit: 0 all well; 99 a threshold broke or compare found a regression; 2 bad input; 130 stopped; 3/4 as
# `harness run` says. Outputs in $HARNESS_OUT: the runs, compare.md, compare.junit.xml.
set -uo pipefail
HARNESS="${HARNESS:-harness}"
SCENARIO="${HARNESS_SCENARIO:-scenarios/nightly.yaml}"
REPEAT="${HARNESS_REPEAT:-3}"
OUT="${HARNESS_OUT:-reports/nightly}"
DB="${HARNESS_HISTORY:-reports/history.sqlite}"
BASELINE="${HARNESS_BASELINE:-3}"
mkdir -p "$OUT"

args=(run "$SCENARIO" --repeat "$REPEAT" --reports-dir "$OUT" --progress lines)
[ -n "${HARNESS_ENDPOINT:-}" ] && args+=(--endpoint "$HARNESS_ENDPOINT")
[ -n "${PUSHGATEWAY_URL:-}" ] && args+=(--pushgateway "$PUSHGATEWAY_URL" --pushgateway-job nightly \
                                        --pushgateway-label "branch=${BRANCH:-main}")
run_status=0
$HARNESS "${args[@]}" || run_status=$?
current=$(ls -1td "$OUT"/*-x"$REPEAT" 2>/dev/null | head -1)
if [ -z "$current" ]; then
    echo "nightly: no runs were written (harness run exited $run_status)" >&2
    exit "$run_status"
fi

compare_status=0
name=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run"]["scenario"])' "$current/run-1/summary.json")
if [ -f "$DB" ] && $HARNESS history show --db "$DB" --scenario "$name" | grep -q '^✓'; then
    $HARNESS compare --baseline-from-history "$BASELINE" --db "$DB" "$current" \
        --junit "$OUT/compare.junit.xml" --markdown "$OUT/compare.md" || compare_status=$?
else
    echo "nightly: no good run of $name in $DB yet: this run starts the baseline" | tee "$OUT/compare.md"
fi
$HARNESS history add "$current" --db "$DB"

# The worst outcome wins: a stop or bad input before a regression, a regression before success.
for code in 130 2 3 4 99; do
    if [ "$run_status" = "$code" ] || [ "$compare_status" = "$code" ]; then exit "$code"; fi
done
exit $(( run_status != 0 ? run_status : compare_status ))
