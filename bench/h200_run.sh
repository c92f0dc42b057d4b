#!/usr/bin/env bash
# One device call on the H200: GPU correctness tests, compute-sanitizer on small
# launches, Nsight Compute counters, then the FlashAttention timings
# (bench/attention.py); logs under $OUT.
#   carry: .whl (pyptx, lark: /work/shared/tools/gpu_wheels.sh) and .ref (the reference build)
#   usage: STEPS=tests,sanitize,ncu,bench VARIANTS=unpaired,tile-major [ONLY='S=8192 causal'] bash bench/h200_run.sh
#   STEPS=family [FA4=1]: the attention family's GPU tests and bench rows (--rows family)
set -u
STEPS=${STEPS:-tests,sanitize,bench}
VARIANTS=${VARIANTS:-}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
# lowering/ and grammar/ are choreo_py.lowering and choreo_py.grammar by pyproject's
# package-dir: with no install here, link them into the package
python3 -c "import choreo_py.lowering" 2>/dev/null || { ln -sfn ../lowering choreo_py/lowering; ln -sfn ../grammar choreo_py/grammar; }
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu \
  --format=csv | tee "$OUT/gpu.txt"
t0=$(date +%s)
rc_p=0
if [[ $STEPS == *tests* ]]; then
  # A kernel that hangs is killed with its process (the persistent kernel's tests run first).
  export CHOREO_GPU_RESULTS=$OUT/gpu_results.json
  timeout -s KILL 160 python3 -m pytest -o addopts=-q -p no:cacheprovider tests/test_sm90_gpu.py \
    -k "persistent" 2>&1 | tail -n 30 | tee "$OUT/gpu_tests_persistent.log"
  rc_p=${PIPESTATUS[0]}
  timeout -s KILL 240 python3 -m pytest -o addopts=-q -p no:cacheprovider tests/test_sm90_gpu.py \
    -k "not persistent" 2>&1 | tail -n 30 | tee "$OUT/gpu_tests_others.log"
  echo "[time] tests $(( $(date +%s) - t0 )) s; persistent rc=$rc_p"
fi
if [[ $STEPS == *sanitize* && $rc_p -eq 0 ]]; then
  for tool in memcheck racecheck; do
    timeout -s KILL 120 compute-sanitizer --tool $tool --report-api-errors no \
      python3 tests/test_sm90_gpu.py sanitize 2>&1 | tail -n 8 | tee "$OUT/sanitize_$tool.log"
  done
  echo "[time] sanitizer $(( $(date +%s) - t0 )) s"
fi
if [[ $STEPS == *ncu* && $rc_p -eq 0 ]]; then
  metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
  metrics+=,lts__t_sector_hit_rate.pct,sm__cycles_active.avg,sm__cycles_active.max
  metrics+=,sm__cycles_elapsed.max,sm__cycles_elapsed.avg.per_second
  timeout -s KILL 150 ncu --clock-control none -k 'regex:flash_atten|sdpa|fmha|cudnn' \
    --metrics "$metrics" --csv python3 bench/ncu_fa.py --variants "$VARIANTS" \
    > "$OUT/ncu.csv" 2> "$OUT/ncu.err"
  echo "[ncu] rc=$? $(grep -c . "$OUT/ncu.csv") lines; $(tail -n 2 "$OUT/ncu.err")"
  echo "[time] ncu $(( $(date +%s) - t0 )) s"
fi
if [[ $STEPS == *bench* ]]; then
  extra=(--variants "$VARIANTS" --only "${ONLY:-}")
  [[ $rc_p -eq 0 ]] || extra=(--no-persistent)
  timeout -s KILL 420 python3 bench/attention.py --out "$OUT/RESULTS.md" "${extra[@]}" \
    2>&1 | tee "$OUT/bench.log" | grep -v "^\[ref\] \[" | tail -n 75
fi
if [[ $STEPS == *family* ]]; then
  timeout -s KILL 240 python3 -m pytest -o addopts=-q -p no:cacheprovider tests/test_attn_family.py -m gpu \
    2>&1 | tail -n 30 | tee "$OUT/gpu_tests_family.log"
  timeout -s KILL 400 python3 bench/attention.py --rows family --out "$OUT/RESULTS_family.md" \
    ${FA4:+--fa4} 2>&1 | tee "$OUT/bench_family.log" | tail -n 40
  echo "[time] family $(( $(date +%s) - t0 )) s"
fi
echo "[time] total $(( $(date +%s) - t0 )) s"
