#!/usr/bin/env bash
# Builds the reference compiler's output for the seed (.ref/croq_fa/gen/flash_atten_causal.zc.cu)
# as a shared library, so bench/attention.py can time its kernel in the same process, on the
# same tensors and with the same timing methods as every other implementation.
#   bash bench/ref_lib.sh [REF_DIR [OUT_DIR]]   ->  OUT_DIR/libcroq_fa.so (OUT_DIR: REF_DIR/lib)
# The kernel and its host code are the reference's, unchanged but for two things: its launch
# goes to the caller's stream (so the call can be captured in a CUDA graph), and its `main`
# (the reference's own harness) is renamed out of the way. The C entry point is below.
set -euo pipefail
REF=${1:-$(dirname "$0")/../.ref/croq_fa}
REF=$(cd "$REF" && pwd)
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
LIB=${2:-$REF/lib}
mkdir -p "$LIB"
SRC="$LIB/croq_fa_lib.cu"
{
  echo '#include <cuda_runtime.h>'
  echo 'static cudaStream_t croq_fa_stream = 0;'
  sed -e 's/196608 + (128 - 1)>>>/196608 + (128 - 1), croq_fa_stream>>>/' \
      -e 's/^int main() {/static int croq_fa_harness_main() {/' \
      "$REF/gen/flash_atten_causal.zc.cu"
  cat <<'CU'
extern "C" int croq_fa_causal(void* q, void* k, void* v, void* o, int b, int s, int h,
                              void* stream) {
  croq_fa_stream = (cudaStream_t)stream;
  const size_t B = b, S = s, H = h, D = 128;
  flash_atten(choreo::make_spanview<choreo::bf16, 4>((choreo::bf16*)q, {B, S, H, D}),
              choreo::make_spanview<choreo::bf16, 4>((choreo::bf16*)k, {B, S, H, D}),
              choreo::make_spanview<choreo::bf16, 4>((choreo::bf16*)v, {B, S, H, D}),
              choreo::make_spanview<choreo::bf16, 4>((choreo::bf16*)o, {B, S, H, D}));
  return (int)cudaGetLastError();
}
CU
} > "$SRC"
grep -q "croq_fa_stream>>>" "$SRC" || { echo "ref_lib.sh: the launch line was not found" >&2; exit 1; }
# The driver library, for cuTensorMapEncodeTiled: linked where one is found (as
# build_and_run.sh looks for it); else the caller loads libcuda.so.1 globally first.
LIBCUDA=()
for f in /usr/local/nvidia/lib64/libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so.1 \
         /usr/lib64/libcuda.so.1 "$(dirname "$(dirname "$(readlink -f "$NVCC")")")/lib64/stubs/libcuda.so"; do
  if [[ -f "$f" ]]; then LIBCUDA=(-Xlinker "$f"); break; fi
done
# The reference compiler's nvcc flags (build_and_run.sh), plus -shared.
"$NVCC" -gencode arch=compute_90a,code=sm_90a -std=c++17 -DCUTLASS_ENABLE_TENSOR_CORE_MMA=1 \
  -D__CHOREO_TARGET_CUTE__ -O3 -D__USE_CUDA_TYPE__ --use_fast_math --expt-relaxed-constexpr \
  -I"$REF/gen" -I"$REF/cutlass/include" -shared -Xcompiler -fPIC \
  "$SRC" -o "$LIB/libcroq_fa.so" "${LIBCUDA[@]}"
echo "built $LIB/libcroq_fa.so"
