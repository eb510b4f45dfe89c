#!/bin/sh
# tests/gpu.sh - the cuda backend on a machine with an NVIDIA GPU, in one
# run of under 5 minutes: build the binary and the plugin, say which
# device answers, run the parity suite (every op against ref, the
# transformer's sequence ops too, a training step per model and a GPT's,
# a virtual-clock run per rule and a GPT run) and the backend suite (the
# plugin's own check), then `make bench-gpu` (samples/s per model at batch
# 64 and 256 against the cpu backend in the same run, the fraction of the
# device's FP32 peak, the server's update time, 1, 8 and 64 workers; the
# two GPTs on text:webster with tokens/s), a GPT's time per node, and a
# memory check of a ResNet's and a GPT's run.
# Everything it prints is also kept in $OUT/gpu.txt when OUT is set (the
# device tool's output folder). It changes no device setting.
#   tests/gpu.sh [BUILD_DIR]      (default build; SECONDS_PER=2 per figure;
#                                 PREBUILT=1 to run binaries carried in;
#                                 SANITIZE=0 to skip compute-sanitizer)
build=${1:-build}
secs=${SECONDS_PER:-2}
log=${OUT:-${TMPDIR:-/tmp}}/gpu.txt
: >"$log" 2>/dev/null || log=/dev/null
say() { echo "$@" | tee -a "$log"; }
run() { "$@" 2>&1 | tee -a "$log"; }
fail=0

say "== gpu.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
if command -v nvidia-smi >/dev/null 2>&1; then
	run nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
else
	say "gpu.sh: no nvidia-smi here (the plugin's own check below says what it finds)"
fi

say "== build ($build)"
if ! command -v nvcc >/dev/null 2>&1; then
	say "gpu.sh: nvcc not found: the plugin cannot be built here"
	[ -f "$build/stalelab-cuda.so" ] || { say "gpu.sh: and $build/stalelab-cuda.so is not there"; exit 1; }
	say "gpu.sh: using the plugin already in $build"
fi
# the packages are there already on a prepared machine; make deps only
# when one is missing (it needs the network). PREBUILT=1: the binaries in
# $build were built elsewhere and carried here (a GPU machine without our
# -dev packages); nothing is built
if [ "${PREBUILT:-0}" = 1 ]; then
	for f in stalelab stalelab-cuda.so tests/test_parity tests/test_parity_runs tests/test_backend; do
		[ -x "$build/$f" ] || { say "gpu.sh: PREBUILT=1 but $build/$f is missing"; exit 1; }
	done
	say "gpu.sh: using the binaries in $build as they are (PREBUILT=1)"
elif ! make -s BUILD="$build" all "$build/tests/test_parity" "$build/tests/test_parity_runs" \
	"$build/tests/test_backend" \
	>>"$log" 2>&1; then
	say "gpu.sh: the build failed (the end of its output):"
	tail -n 20 "$log"
	exit 1
fi
ls -l "$build/stalelab-cuda.so" | tee -a "$log"

say "== the plugin's check"
export STALELAB_CUDA_PLUGIN="$PWD/$build/stalelab-cuda.so"
if ! "$build/stalelab" run --device cuda -m logreg -d synthetic:256 --steps 2 --eval-every 0 \
	-l /dev/null >>"$log" 2>&1; then
	say "gpu.sh: the cuda backend does not run here:"
	tail -n 3 "$log"
	exit 1
fi
say "gpu.sh: a two-step run on cuda passed"
if ! "$build/stalelab" run --device cuda -m gpt:L2-H2-E16-T32 -d synthetic-text:20000 --steps 2 \
	--eval-every 0 -l /dev/null >>"$log" 2>&1; then
	say "gpu.sh: a GPT does not run on cuda:"
	tail -n 3 "$log"
	fail=1
else
	say "gpu.sh: a two-step GPT run on cuda passed"
fi

say "== parity: every op against ref, a step per model, a run per rule"
# FP32 as written: no TF32 behind the tests' back
NVIDIA_TF32_OVERRIDE=0 run "$build/tests/test_parity" || fail=1
NVIDIA_TF32_OVERRIDE=0 run "$build/tests/test_parity_runs" || fail=1
say "== parity again, every convolution in bands of one output row (a 64-float column cap)"
STALELAB_CUDA_CONV_FLOATS=64 NVIDIA_TF32_OVERRIDE=0 run "$build/tests/test_parity" || fail=1
STALELAB_CUDA_CONV_FLOATS=64 NVIDIA_TF32_OVERRIDE=0 run "$build/tests/test_parity_runs" || fail=1
run "$build/tests/test_backend" || fail=1

say "== make bench-gpu"
# what `make bench-gpu` runs, without make's rebuild check
run "$build/stalelab" bench --device cuda -b 64,256 -S "$secs" || fail=1
say "== the residual net (resnet20, 28x28x1), each node's time at batch 128"
run "$build/stalelab" bench --device cuda -m resnet20 -b 128 -L -S "$secs" || fail=1
say "== the GPT (gpt:L6-H6-E384-T256 on text:webster), each node's time at batch 64"
run "$build/stalelab" bench --device cuda -m gpt:L6-H6-E384-T256 -d text:webster -b 64 -L \
	-S "$secs" || fail=1

# the PyTorch twin on the same GPU, FP32 (no TF32), batch 128, where the
# machine's python3 has torch with CUDA
if python3 -c 'import torch, numpy; assert torch.cuda.is_available()' 2>/dev/null; then
	say "== PyTorch's ResNet-20 on the same GPU, batch 128, FP32, 2 epochs"
	run python3 bench/peers/torch_fmnist.py --device cuda --model resnet20 --batch 128 \
		--epochs 2 --lr 0.05 --momentum 0.9 || fail=1
else
	say "gpu.sh: no python3 with CUDA torch here: the PyTorch comparison is skipped"
fi

# a memory checker over a short residual-net run, where one works (it
# does on some GPU machines' runtimes and not on others: it says so)
if command -v compute-sanitizer >/dev/null 2>&1 && [ "${SANITIZE:-1}" = 1 ]; then
	say "== compute-sanitizer (memcheck): resnet:8 with adam, 3 steps"
	if run timeout 180 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 \
		"$build/stalelab" run --device cuda -m resnet:8 -d synthetic:512 --steps 3 \
		--optimizer adam --clip 1 --eval-every 0 -l /dev/null; then
		say "gpu.sh: memcheck clean"
	else
		say "gpu.sh: memcheck found errors (above), or could not run here"
		fail=1
	fi
	say "== compute-sanitizer (memcheck): gpt:L2-H2-E16-T32 with adam, 3 steps"
	if run timeout 180 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 9 \
		"$build/stalelab" run --device cuda -m gpt:L2-H2-E16-T32 -d synthetic-text:20000 \
		--steps 3 --optimizer adam --clip 1 --eval-every 0 -l /dev/null; then
		say "gpu.sh: memcheck clean"
	else
		say "gpu.sh: memcheck found errors (above), or could not run here"
		fail=1
	fi
fi

if [ $fail = 0 ]; then say "gpu.sh: passed"; else say "gpu.sh: FAILED"; fi
exit $fail
