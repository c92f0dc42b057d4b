#!/usr/bin/env bash
# One device call on the H200: GPU correctness tests, compute-sanitizer on small
# launches, then the FlashAttention timings (bench/attention.py), logs under $OUT.
#   carry: .whl (pyptx, lark: /work/shared/tools/gpu_wheels.sh) and .ref (the reference build)
#   usage: bash bench/h200_run.sh [extra arguments for bench/attention.py]
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu \
  --format=csv | tee "$OUT/gpu.txt"
t0=$(date +%s)
# A kernel that hangs is killed with its process (the tests first run the persistent kernel).
export CHOREO_GPU_RESULTS=$OUT/gpu_results.json
timeout -s KILL 100 python3 -m pytest -q -p no:cacheprovider tests/test_sm90_gpu.py \
  -k "persistent" 2>&1 | tail -n 30 | tee "$OUT/gpu_tests_persistent.log"
rc_p=${PIPESTATUS[0]}
timeout -s KILL 240 python3 -m pytest -q -p no:cacheprovider tests/test_sm90_gpu.py \
  -k "not persistent" 2>&1 | tail -n 30 | tee "$OUT/gpu_tests_others.log"
echo "[time] tests $(( $(date +%s) - t0 )) s; persistent rc=$rc_p"
if [[ $rc_p -eq 0 ]]; then
  for tool in memcheck racecheck; do
    timeout -s KILL 120 compute-sanitizer --tool $tool --report-api-errors no \
      python3 tests/test_sm90_gpu.py sanitize 2>&1 | tail -n 8 | tee "$OUT/sanitize_$tool.log"
  done
  echo "[time] sanitizer $(( $(date +%s) - t0 )) s"
fi
extra=()
[[ $rc_p -eq 0 ]] || extra=(--no-persistent)
timeout -s KILL 420 python3 bench/attention.py --out "$OUT/RESULTS.md" "${extra[@]}" "$@" \
  2>&1 | tee "$OUT/bench.log" | grep -v "^\[ref\] \[" | tail -n 60
echo "[time] total $(( $(date +%s) - t0 )) s"
