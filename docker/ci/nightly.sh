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
#   HARNESS_TRIES      runs in all when one cannot be judged or must confirm a regression (default 3)
#   PUSHGATEWAY_URL    push the night's figures there (optional); BRANCH labels it (default main)
#   HARNESS            the command (default: harness)
#
# The history file is all a later night needs: it keeps what compare reads, so on ephemeral CI runners cache
# only HARNESS_HISTORY. Run folders land in $HARNESS_OUT/<night>/ and may be deleted.
#
# A night ends in a verdict or a clear failure: a run compare could not judge (no figure judged, or there is no
# baseline yet and the client limited this run, so it cannot start one) is run again, up to HARNESS_TRIES
# runs in all (default 3); a regression is confirmed by running again before the night turns red (two flagged
# runs in a row: on A/A, with compare's family-wise 5%, a red night by chance is 0.05² = 1 in 400).
#
# Exit, the worst outcome first: 130 stopped; 2 bad input; 3 harness error (or a run that wrote nothing);
# 4 nothing succeeded; 99 a threshold broke or a confirmed regression; 5 no verdict after every try (every
# figure untrusted or inconclusive, or no run could start the baseline); 0 all well. Outputs: $HARNESS_OUT/compare.md and
# compare.junit.xml (of the last run compared).
set -euo pipefail
read -r -a HARNESS <<< "${HARNESS:-harness}"
SCENARIO="${HARNESS_SCENARIO:-scenarios/nightly.yaml}"
REPEAT="${HARNESS_REPEAT:-3}"
OUT="${HARNESS_OUT:-reports/nightly}"
DB="${HARNESS_HISTORY:-reports/history.sqlite}"
BASELINE="${HARNESS_BASELINE:-3}"
TRIES="${HARNESS_TRIES:-3}"
stamp="$(date -u +%Y%m%dT%H%M%SZ)-$$"
rm -f "$OUT/compare.md" "$OUT/compare.junit.xml"  # never leave last night's verdict behind

# One try: run into its own folder, compare with the history, add the runs to it. Sets run_status and
# compare_status; returns non-zero when the night must end here (the run wrote nothing usable).
try_once() {
    local night="$OUT/$stamp-$1"
    mkdir -p "$night"
    local args=(run "$SCENARIO" --repeat "$REPEAT" --reports-dir "$night" --progress lines)
    if [ -n "${HARNESS_ENDPOINT:-}" ]; then args+=(--endpoint "$HARNESS_ENDPOINT"); fi
    if [ -n "${PUSHGATEWAY_URL:-}" ]; then
        args+=(--pushgateway "$PUSHGATEWAY_URL" --pushgateway-job nightly --pushgateway-label "branch=${BRANCH:-main}")
    fi
    run_status=0
    "${HARNESS[@]}" "${args[@]}" || run_status=$?
    # What this try wrote: one folder (a run, or with --repeat N > 1 a folder of N runs). Anything else is an
    # error, never a green night.
    shopt -s nullglob
    local written=("$night"/*/)
    shopt -u nullglob
    if [ "${#written[@]}" -ne 1 ]; then
        echo "nightly: harness run wrote ${#written[@]} run folders in $night (exit $run_status): nothing compared" >&2
        compare_status=$(( run_status != 0 ? run_status : 3 ))
        return 1
    fi
    local current="${written[0]%/}"
    compare_status=0
    if [ "$run_status" != 130 ]; then
        "${HARNESS[@]}" compare --baseline-from-history "$BASELINE" --start-baseline --db "$DB" "$current" \
            --junit "$OUT/compare.junit.xml" --markdown "$OUT/compare.md" || compare_status=$?
    fi
    # Only a run that compared clean (or started the history) may become a baseline by itself; a regression,
    # or a run compare could not judge for another reason, waits for `harness history accept`.
    local flag=()
    case "$compare_status" in
        0|5) ;;
        99) flag=(--flag "regression found by harness compare ($night)") ;;
        *) flag=(--flag "not compared (harness compare exited $compare_status)") ;;
    esac
    "${HARNESS[@]}" history add "$current" --db "$DB" "${flag[@]}"
}

flagged=0
for try in $(seq 1 "$TRIES"); do
    try_once "$try" || break
    if [ "$run_status" = 130 ] || [ "$run_status" = 2 ] || [ "$run_status" = 3 ] || [ "$run_status" = 4 ]; then
        break  # stopped or broken: no second try says more
    fi
    if [ "$compare_status" = 99 ]; then
        if [ "$flagged" = 1 ]; then break; fi
        flagged=1
        echo "nightly: compare found a regression; running again to confirm it (try $((try + 1)) of $TRIES)" >&2
        continue
    fi
    if [ "$compare_status" = 5 ] && [ "$try" -lt "$TRIES" ]; then
        echo "nightly: compare could not judge this run (exit 5); running again (try $((try + 1)) of $TRIES)" >&2
        continue
    fi
    if [ "$flagged" = 1 ]; then
        echo "nightly: the regression of the try before was not confirmed (this try compared exit $compare_status)" >&2
    fi
    break
done

# The worst outcome wins: a stop or bad input before a regression, a regression before an untrusted verdict.
for code in 130 2 3 4 99 5; do
    if [ "$run_status" = "$code" ] || [ "$compare_status" = "$code" ]; then exit "$code"; fi
done
exit $(( run_status != 0 ? run_status : compare_status ))
