#!/bin/sh
# tools/cuda_emu/build.sh - the cuda plugin (engine/cuda/) built for the
# host against the emulation here, so that its code runs where there is
# no GPU:
#   sh tools/cuda_emu/build.sh build/emu/stalelab-cuda.so
#   STALELAB_CUDA_PLUGIN=$PWD/build/emu/stalelab-cuda.so CK_TIMEOUT_MULTIPLIER=20 \
#       build/tests/test_parity
# (slow: a CUDA thread is a fiber; the "ops" and "gpt" cases take minutes).
# The launches `k<<<grid, block, shm, stream>>>(args)` are rewritten as
# LAUNCH(k, grid, block, ...)(args); nothing else of the source changes.
set -e
out=${1:-build/emu/stalelab-cuda.so}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
gen=$(dirname "$out")/emu-src
mkdir -p "$gen"
for f in backend_cuda.cu kernels.cuh; do
	perl -pe 's/(\w+)<<<(.*?)>>>\(/LAUNCH(\1, \2)(/g' "$root/engine/cuda/$f" >"$gen/$f"
done
${CXX:-g++} -std=c++17 -O1 -g -fPIC -shared -ffp-contract=off -Wall -Wno-unused-function \
	-I"$here" -I"$gen" -I"$root/engine/nn" -x c++ "$gen/backend_cuda.cu" -x none \
	"$here/emu.cc" -o "$out"
echo "$out: the cuda plugin on the host emulation"
