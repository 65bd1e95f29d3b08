#!/bin/bash
# The prepared device check (issue 37), for a machine with a GPU, in at most 5 minutes:
#   1. installs the wheels carried in gpu/whl (hydra-core, omegaconf, antlr4, ... and the project;
#      made beforehand, where the package index is reachable, by shared/gpu/prepare.sh);
#   2. puts this checkout's own code first on PYTHONPATH (a copy laid out as the installed
#      package), so a wheel of the project older than the checkout tests nothing stale;
#   3. prints the GPUs (nvidia-smi) and the versions (Python, NumPy, CuPy, CUDA);
#   4. runs the gpu tests: pytest -m gpu, 4 workers, stopped in time to leave the rest room;
#   5. runs benchmarks/gpu_run.py and the sync-count probe benchmarks/sync_count.py where they
#      exist (each reports its result as the last line it prints);
#   6. prints one table: the GPU, the versions, the test counts and the scripts' results.
# Usage, from the checkout's root: bash benchmarks/gpu_check.sh
# Full logs go to $OUT when it is set (the device tool returns them), else to a new /tmp folder.
# Exit status 0 when gpu tests ran and all passed, and every script that ran exited 0; else 1.
# GPU_CHECK_SECONDS (default 300) sets the time budget, PYTHON (default python3) the Python.
set -u
START=$SECONDS
BUDGET=${GPU_CHECK_SECONDS:-300}
PY=${PYTHON:-python3}
cd "$(dirname "$0")/.." || exit 2
LOGS=${OUT:-$(mktemp -d /tmp/gpu_check.XXXXXX)}
mkdir -p "$LOGS"
ROWS=()
STATUS=0
row() { ROWS+=("| $1 | $2 |"); }
left() { echo $((BUDGET - (SECONDS - START))); }
say() { echo "gpu_check: $*"; }

# 1. the carried wheels
if compgen -G "gpu/whl/*.whl" >/dev/null; then
    if "$PY" -m pip install -q --no-index --no-deps --no-compile gpu/whl/*.whl >"$LOGS/install.log" 2>&1; then
        row "wheels" "$(ls gpu/whl/*.whl | wc -l) installed from gpu/whl"
    else
        say "installing gpu/whl/*.whl failed; see install.log"
        tail -5 "$LOGS/install.log"
        row "wheels" "FAILED (install.log)"
        STATUS=1
    fi
else
    say "no wheels under gpu/whl (shared/gpu/prepare.sh makes them): installing nothing"
    row "wheels" "none in gpu/whl"
fi

# 2. this checkout's code, laid out as the installed package
PKG=$(mktemp -d /tmp/gpu_check_pkg.XXXXXX)
cp -r src/trainer_run "$PKG/trainer_run" && cp -r cli "$PKG/trainer_run/cli" \
    && cp -r configs "$PKG/trainer_run/configs" || { say "cannot copy the checkout's code"; exit 2; }
export PYTHONPATH="$PKG${PYTHONPATH:+:$PYTHONPATH}"

# 3. the GPUs and the versions
if command -v nvidia-smi >/dev/null 2>&1; then
    GPUS=$(nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader 2>&1 \
        | paste -sd ';' -)
else
    GPUS="nvidia-smi not found"
fi
say "gpus: $GPUS"
row "nvidia-smi" "$GPUS"
VERSIONS=$("$PY" - <<'EOF' 2>&1 | tail -1
import platform

import numpy

parts = [f"Python {platform.python_version()}", f"NumPy {numpy.__version__}"]
try:
    import cupy

    rt = cupy.cuda.runtime
    v = lambda n: f"{n // 1000}.{n % 1000 // 10}"  # noqa: E731
    parts += [f"CuPy {cupy.__version__}",
              f"CUDA runtime {v(rt.runtimeGetVersion())}, driver {v(rt.driverGetVersion())}"]
    for i in range(rt.getDeviceCount()):
        p = rt.getDeviceProperties(i)
        name = p.get(b"name", p.get("name", "?"))
        name = name.decode() if isinstance(name, bytes) else name
        parts.append(f"gpu:{i} {name} {p['totalGlobalMem'] / 1e9:.0f} GB")
except Exception as e:  # no CuPy, no driver, no device: said in the table
    parts.append(f"CuPy: {type(e).__name__}: {e}"[:120])
print(", ".join(parts))
EOF
)
say "versions: $VERSIONS"
row "versions" "$VERSIONS"

# 4. the gpu tests, stopped (SIGINT: pytest still reports) in time for what follows
RESERVE=10
[ -f benchmarks/gpu_run.py ] && RESERVE=$((RESERVE + 120))
[ -f benchmarks/sync_count.py ] && RESERVE=$((RESERVE + 30))
LIMIT=$(($(left) - RESERVE))
[ "$LIMIT" -lt 30 ] && LIMIT=30
say "pytest -m gpu, at most ${LIMIT}s"
T0=$SECONDS
# TRAINER_RUN_JIT=0: NumPy references take NumPy's array path (the same values), so no numba
# compiling eats the time
TRAINER_RUN_JIT=0 PYTHONUNBUFFERED=1 timeout -s INT -k 20 "$LIMIT" \
    "$PY" -m pytest -m gpu -q -p no:cacheprovider -n 4 -rfEs --tb=short --durations=15 \
    --continue-on-collection-errors --junitxml="$LOGS/junit.xml" 2>&1 | tee "$LOGS/pytest.log"
RC=${PIPESTATUS[0]}
COUNTS=$("$PY" - "$LOGS/junit.xml" "$LOGS/pytest.log" <<'EOF'
import collections
import re
import sys
import xml.etree.ElementTree as ET

try:
    root = ET.parse(sys.argv[1]).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    n = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    reasons = collections.Counter(s.get("message", "") for s in root.iter("skipped"))
    passed = n["tests"] - n["failures"] - n["errors"] - n["skipped"]
    text = (f"{passed} passed, {n['failures']} failed, {n['errors']} errors, "
            f"{n['skipped']} skipped")
    if reasons:
        text += " (" + "; ".join(f"{c} x {r[:80]}" for r, c in reasons.most_common(3)) + ")"
except (OSError, ET.ParseError, AttributeError):  # no report: the log's last counts
    lines = open(sys.argv[2], errors="replace").read().splitlines()
    found = [line for line in lines if re.search(r"\d+ (passed|failed|skipped|errors?)", line)]
    counts = re.search(r"(\d+) passed", found[-1]) if found else None
    passed = int(counts.group(1)) if counts else 0
    text = "no junit report; log: " + (found[-1].strip("= ") if found else "no counts")
print(passed)
print(text)
EOF
)
PASSED=$(head -1 <<<"$COUNTS")
TESTS=$(tail -1 <<<"$COUNTS")
case $RC in
    0) [ "$PASSED" = 0 ] && { TESTS="$TESTS; no gpu test ran"; STATUS=1; } ;;
    124) TESTS="$TESTS; stopped at ${LIMIT}s"; STATUS=1 ;;
    5) TESTS="$TESTS; no gpu test collected"; STATUS=1 ;;
    *) TESTS="$TESTS; pytest exit $RC"; STATUS=1 ;;
esac
row "gpu tests (pytest -m gpu)" "$TESTS in $((SECONDS - T0))s"

# 5. the scripts of the GPU work that exist: their last line is their result
script() {  # name, share of the time left (percent), label
    [ -f "benchmarks/$1" ] || return 0
    local limit=$(($(left) * $2 / 100 - 5)) t0=$SECONDS rc last
    [ "$limit" -lt 10 ] && limit=10
    say "benchmarks/$1, at most ${limit}s"
    PYTHONUNBUFFERED=1 timeout -s INT -k 10 "$limit" "$PY" "benchmarks/$1" >"$LOGS/${1%.py}.log" 2>&1
    rc=$?
    last=$(grep -v '^[[:space:]]*$' "$LOGS/${1%.py}.log" | tail -1)
    tail -20 "$LOGS/${1%.py}.log"
    [ "$rc" -ne 0 ] && STATUS=1
    row "$3" "${last:-no output} (exit $rc, $((SECONDS - t0))s)"
}
script gpu_run.py 66 "real runs (benchmarks/gpu_run.py)"
script sync_count.py 100 "device reads between log rows (benchmarks/sync_count.py)"

# 6. the table
{
    echo
    echo "| check | result |"
    echo "|---|---|"
    printf '%s\n' "${ROWS[@]}"
    VERDICT=$([ "$STATUS" -eq 0 ] && echo passed || echo FAILED)
    echo "| total | $((SECONDS - START))s, $VERDICT; logs in $LOGS |"
} | tee "$LOGS/summary.md"
rm -rf "$PKG"
exit "$STATUS"
