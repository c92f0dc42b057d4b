#!/usr/bin/env bash
# One device call on the H200 for the whole-program, API and model work (issues 12, 13,
# 16): every `gpu`-marked test but the FlashAttention matrix of bench/h200_run.sh
# (end-to-end programs, host programs, thread kernels, torch.compile / CUDA graphs),
# compute-sanitizer memcheck and racecheck over every end-to-end case, the kernel cache
# timed in new processes (bench/compile.py --cache --launch), and the performance
# model's calibration timings (bench/model_measure.py). Logs under $OUT.
#   carry: .whl (pyptx, lark: ../shared/tools/gpu_wheels.sh) and .shared (a copy of
#          ../shared/corpus and seeds: the device gets the working tree only)
#   usage: STEPS=tests,sanitize,cache,model bash bench/h200_check.sh
set -u
STEPS=${STEPS:-tests,sanitize,cache,model}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
[[ -d .shared ]] && export CHOREO_SHARED=$PWD/.shared
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || echo "[warn] editable install failed"
# $PWD on PYTHONPATH shadows the editable install's package-dir mapping of lowering/ and
# grammar/ (choreo_py.lowering, choreo_py.grammar): link them in where it does
python3 -c "import choreo_py.lowering" 2>/dev/null || { ln -sfn ../lowering choreo_py/lowering; ln -sfn ../grammar choreo_py/grammar; }
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, choreo_py; print(torch.__version__, torch.cuda.get_device_name(), choreo_py.__file__)"
t0=$(date +%s)
if [[ $STEPS == *tests* ]]; then
  timeout -s KILL 300 python3 -m pytest -o addopts=-q -p no:cacheprovider -rs -m gpu tests \
    --ignore=tests/test_sm90_gpu.py 2>&1 | tee "$OUT/gpu_tests.log" | tail -n 40
  echo "[time] tests $(( $(date +%s) - t0 )) s"
fi
if [[ $STEPS == *sanitize* ]]; then
  for tool in memcheck racecheck; do
    timeout -s KILL 150 compute-sanitizer --tool $tool --report-api-errors no \
      python3 tests/test_end2end_gpu.py 2>&1 | tee "$OUT/sanitize_$tool.log" | grep -v "^ok" | tail -n 12
    echo "[$tool] $(grep -c '^ok' "$OUT/sanitize_$tool.log") cases ok"
  done
  echo "[time] sanitizer $(( $(date +%s) - t0 )) s"
fi
if [[ $STEPS == *cache* ]]; then
  timeout -s KILL 200 python3 bench/compile.py --cache --launch --repeat 3 --target sm_90a \
    2>&1 | tee "$OUT/cache.log" | tail -n 14
  echo "[time] cache $(( $(date +%s) - t0 )) s"
fi
if [[ $STEPS == *model* ]]; then
  timeout -s KILL 300 python3 bench/model_measure.py --out "$OUT/measure.json" 2>&1 | tee "$OUT/model.log" | tail -n 20
  echo "[time] model $(( $(date +%s) - t0 )) s"
fi
echo "[time] total $(( $(date +%s) - t0 )) s"
