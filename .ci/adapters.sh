#!/usr/bin/env bash
# Adapter stage of CI: every library adapter's tests and its example's --smoke run, each library set in its own
# virtual environment (their pins conflict: RLlib pins gymnasium==1.2.2, BenchMARL needs torchrl<0.12).
#
#   bash .ci/adapters.sh                 # all four: sb3 rllib torchrl benchmarl
#   bash .ci/adapters.sh rllib torchrl   # some of them
#
# In each .venv-NAME: torch==2.13.0 first (the CPU wheel on this machine's disk; an unpinned torch would pull a
# multi-GB CUDA build), then `pip install -e ".[NAME,dev]"` with torch held at that version by a constraint
# (BenchMARL's torchvision requirement would otherwise replace it), then pytest --run-slow
# on the adapter's tests and doctests, then `python examples/EXAMPLE.py --smoke` for each of its examples. Existing
# .venv-NAME folders are reused (a fresh clone has none). A smoke run must show learning: each of its
# "[label] test accuracy BEFORE -> AFTER" lines must gain at least MIN_GAIN. Exits non-zero if any step of any
# library fails; prints a summary table (time, and every smoke run's before -> after) at the end.
set -uo pipefail
cd "$(dirname "$0")/.."

TORCH="torch==2.13.0"
PYTHON="${PYTHON:-python3}"
MIN_GAIN="0.05"  # test accuracy a smoke run must gain, at its fixed seed
# ... except the RLAE examples that start at the mean vote: the best weighted vote of all (per_task_weights) is only
# 0.056 above it on bbh5, so a one-minute run cannot show 0.05; their smoke must not lose accuracy, and their slow
# tests (tests/adapters/test_*_weights.py) assert learning on toy8 (the accurate models weighted up)
declare -A MIN_GAIN_OF=(["torchrl rlae"]="-0.005" ["benchmarl mappo rlae"]="-0.005")
# BenchMARL's environment also runs the TorchRL adapter's tests: torchrl 0.11 there, the lower bound of the extra.
declare -A TESTS=(
    [sb3]="tests/adapters/test_sb3.py tests/adapters/test_sb3_weights.py tests/adapters/test_scenarios.py src/ensemble_env/adapters/sb3.py"
    [rllib]="tests/adapters/test_rllib.py tests/adapters/test_scenarios.py src/ensemble_env/adapters/rllib.py"
    [torchrl]="tests/adapters/test_torchrl.py tests/adapters/test_torchrl_weights.py tests/adapters/test_scenarios.py src/ensemble_env/adapters/torchrl.py"
    [benchmarl]="tests/adapters/test_benchmarl.py tests/adapters/test_benchmarl_weights.py tests/adapters/test_scenarios.py src/ensemble_env/adapters/benchmarl.py tests/adapters/test_torchrl.py tests/adapters/test_torchrl_weights.py"
)
declare -A EXAMPLE=(
    [sb3]="examples/sb3_ppo.py examples/sb3_rlae.py"
    [rllib]=examples/rllib_ppo.py
    [torchrl]="examples/torchrl_mappo.py examples/torchrl_rlae.py"
    [benchmarl]="examples/benchmarl_mappo.py examples/benchmarl_rlae.py"
)
libraries=("$@")
[ ${#libraries[@]} -eq 0 ] && libraries=(sb3 rllib torchrl benchmarl)

logs="$(mktemp -d)"
# SB3 makes a folder for its logger at every learn() without one (tempdir/SB3-DATE, left behind): keep them here
export SB3_LOGDIR="$logs/sb3-logger"
constraints="$logs/constraints.txt"
echo "$TORCH" >"$constraints"
summary=()
smoke=()
failed=0
stage_start=$SECONDS

# step NAME LOG COMMAND...: run COMMAND with its output in LOG; on failure show the end of LOG and record it.
step() {
    local name="$1" log="$2"
    shift 2
    if "$@" >"$log" 2>&1; then
        return 0
    fi
    echo "   FAILED: $name (last lines of $log):"
    grep -v "is ignored: it is neither a file nor a directory" "$log" | tail -n 40 | sed 's/^/   | /'
    return 1
}

for lib in "${libraries[@]}"; do
    if [ -z "${EXAMPLE[$lib]:-}" ]; then
        echo "unknown library '$lib': choose from ${!EXAMPLE[*]}" >&2
        exit 2
    fi
    venv=".venv-$lib"
    start=$SECONDS
    status=ok
    echo "== adapters/$lib: $venv"
    if [ ! -x "$venv/bin/python" ]; then
        step "create $venv" "$logs/$lib-venv.log" "$PYTHON" -m venv "$venv" || status=FAILED
        [ $status = ok ] && echo "*" >"$venv/.gitignore" # keep the environment out of git status
    fi
    if [ $status = ok ]; then
        echo "   install $TORCH, then -e .[$lib,dev]"
        step "install $TORCH" "$logs/$lib-torch.log" "$venv/bin/pip" install -q "$TORCH" &&
            step "install .[$lib,dev]" "$logs/$lib-install.log" \
                "$venv/bin/pip" install -q -c "$constraints" -e ".[$lib,dev]" || status=FAILED
    fi
    if [ $status = ok ]; then
        versions=$("$venv/bin/pip" list 2>/dev/null |
            grep -iE "^(torch|gymnasium|pettingzoo|stable.baselines3|sb3.contrib|supersuit|ray|torchrl|tensordict|benchmarl) " |
            awk '{printf "%s %s, ", $1, $2}')
        echo "   versions: ${versions%, }"
        install_seconds=$((SECONDS - start))
        echo "   pytest ${TESTS[$lib]}"
        # shellcheck disable=SC2086 # TESTS holds several paths
        if "$venv/bin/python" -m pytest -q --run-slow -p no:cacheprovider ${TESTS[$lib]} >"$logs/$lib-pytest.log" 2>&1; then
            tail -n 1 "$logs/$lib-pytest.log" | sed 's/^/   /'
        else
            status=FAILED
            echo "   FAILED: pytest (last lines):"
            tail -n 60 "$logs/$lib-pytest.log" | sed 's/^/   | /'
        fi
        for example in ${EXAMPLE[$lib]}; do
            echo "   python $example --smoke"
            example_log="$logs/$lib-$(basename "$example" .py).log"
            example_start=$SECONDS
            if "$venv/bin/python" "$example" --smoke >"$example_log" 2>&1; then
                grep -E "^\[[a-z]|^  (test|validation|before|after|best|mean|static|stacking|decider)" "$example_log" | sed 's/^/   /'
                echo "   (smoke run: $((SECONDS - example_start)) s)"
                gains=$(grep -E "^\[[a-z0-9 -]+\] test accuracy [0-9.]+ -> [0-9.]+" "$example_log" |
                    sed -E 's/^\[([^]]+)\] test accuracy ([0-9.]+) -> ([0-9.]+).*/\1: \2 -> \3/')
                if [ -z "$gains" ]; then
                    status=FAILED
                    echo "   FAILED: the smoke run printed no 'test accuracy BEFORE -> AFTER' line"
                fi
                while IFS= read -r gain; do
                    [ -z "$gain" ] && continue
                    smoke+=("$(printf '%-10s %s' "$lib" "$gain")")
                    min="${MIN_GAIN_OF[${gain%%:*}]:-$MIN_GAIN}"
                    if ! awk -v line="$gain" -v min="$min" 'BEGIN { n = split(line, f, " "); exit !(f[n] - f[n - 2] >= min) }'; then
                        status=FAILED
                        echo "   FAILED: $gain gains less than $min test accuracy"
                    fi
                done <<<"$gains"
            else
                status=FAILED
                echo "   FAILED: $example --smoke (last lines):"
                tail -n 40 "$example_log" | sed 's/^/   | /'
            fi
        done
    fi
    seconds=$((SECONDS - start))
    summary+=("$(printf '%-10s %-7s %5d s (install %s s)' "$lib" "$status" "$seconds" "${install_seconds:-?}")")
    [ $status = ok ] || failed=1
    unset install_seconds
done

echo "== adapters summary ($((SECONDS - stage_start)) s in all)"
printf '   %s\n' "${summary[@]}"
echo "   smoke runs, test accuracy before -> after training (fixed seed; each must gain >= $MIN_GAIN, the RLAE ones that start at the mean vote >= -0.005):"
[ ${#smoke[@]} -gt 0 ] && printf '   %s\n' "${smoke[@]}"
if [ $failed -ne 0 ]; then
    echo "adapters: FAILED (logs in $logs)" >&2
    exit 1
fi
rm -rf "$logs" # the logs are kept only for a failure
echo "adapters: all passed"
