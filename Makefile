# stalelab - asynchronous data-parallel training test-bed.
# Targets: deps all run test bench asan valgrind fuzz clean (see README.md).

CC      ?= cc
BUILD   ?= build
OPT     ?= -O2
PKGS    := openblas check jansson zlib libmicrohttpd nanomsg ncursesw
# pkg-config is asked when a recipe needs the flags (recursive '='), not when
# this file is parsed: on a fresh machine `make run` installs the packages
# first (make deps), and only then are the flags there to read.
PKGCONFIG = $(shell pkg-config $(1) openblas jansson zlib libmicrohttpd nanomsg 2>/dev/null)
# ncursesw's flags only for tui/ (its cflags set _XOPEN_SOURCE)
NCURSES   = $(shell pkg-config $(1) ncursesw 2>/dev/null)
CFLAGS_BASE = -std=c11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
	-Wmissing-prototypes -Wformat=2 -D_GNU_SOURCE -pthread \
	$(call PKGCONFIG,--cflags)
CFLAGS  ?= $(OPT) -g
ALL_CFLAGS = $(CFLAGS_BASE) $(CFLAGS) $(EXTRA_CFLAGS) -Iengine/base -Iengine/nn -Iengine/data -Iengine/ps -Iengine/ps/rules -Iengine/run -Iengine/wire -Iengine/worker -Iengine/cluster -Idaemon $(DAEMON_INC) -Itui -Itests
LDLIBS  = $(call PKGCONFIG,--libs) $(call NCURSES,--libs) -lm -pthread
CHECK_LIBS = $(shell pkg-config --libs check 2>/dev/null)

ENGINE_SRC := $(wildcard engine/*/*.c engine/ps/rules/*.c engine/nn/ops/*.c)
# daemon/: main.c (dispatch) and a folder per concern (docs/architecture.md)
DAEMON_SRC := $(wildcard daemon/*.c daemon/*/*.c)
DAEMON_INC := $(patsubst %/,-I%,$(sort $(dir $(wildcard daemon/*/*.h))))
TUI_SRC    := $(wildcard tui/*.c)
TEST_SRC   := $(wildcard tests/test_*.c)

ENGINE_OBJ := $(ENGINE_SRC:%.c=$(BUILD)/%.o)
# the terminal UI (stalelab tui): a bus client, nothing from engine/ or daemon/
TUI_OBJ    := $(TUI_SRC:%.c=$(BUILD)/%.o)
# the dashboard's files, embedded into the binary (see "The dashboard" below)
WEB_OBJ    := $(BUILD)/gen/web_assets.o
DAEMON_OBJ := $(DAEMON_SRC:%.c=$(BUILD)/%.o) $(WEB_OBJ)
# daemon objects without main.o, for tests that drive the daemon's modules
DAEMON_LIB_OBJ := $(filter-out $(BUILD)/daemon/main.o,$(DAEMON_OBJ))
TEST_BIN   := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

DEPS_STAMP := $(BUILD)/.deps-ok
APT_PKGS := build-essential pkg-config libopenblas-dev libmicrohttpd-dev \
	libncurses-dev libnanomsg-dev check zlib1g-dev libjansson-dev \
	dataset-fashion-mnist dict-gcide curl python3 chromium clang libclang-rt-14-dev tmux gnuplot-nox \
	openmpi-bin iproute2

.PHONY: cuda-plugin all deps run test unit integration bench bench-gpu results results-quick bench-compare bench-accuracy asan valgrind fuzz \
	fuzz-build fuzz-bins install install-files uninstall clean help

all: $(BUILD)/stalelab cuda-plugin

help:
	@echo "make deps           install the Debian packages (apt-get; quick when present)"
	@echo "make / make all     build build/stalelab (the dashboard embedded; npm ci in web/ first)"
	@echo "make run            the daemon on the default run, http://127.0.0.1:8470"
	@echo "                    (make run PORT=9000 ARGS=\"--demo\" for another port, flags)"
	@echo "make test           Check suites and integration tests (with the dashboard's browser test)"
	@echo "make bench          throughput vs the PyTorch peer, the daemon under load"
	@echo "make bench-gpu      the cuda backend against the cpu one (a GPU machine; tests/gpu.sh)"
	@echo "make results        the seeds' results reproduced: docs/results.md, docs/results/ (under 60 min;\n                    RESNET_FULL=1 adds Dai's grid of ResNet-20 to 56: hours)"
	@echo "make results-quick  the same experiments, small: checks only (part of make test)"
	@echo "make bench-compare  this engine vs an earlier commit's (BASE=rev), side by side"
	@echo "make bench-accuracy accuracy per epoch vs the PyTorch peer"
	@echo "make asan           the tests under ASan+UBSan"
	@echo "make valgrind       the unit suites under memcheck (cases tagged slow left out)"
	@echo "make fuzz           each libFuzzer harness (tests/fuzz/*_fuzz.c) for FUZZ_SECONDS (60)"
	@echo "make install        PREFIX=/usr/local DESTDIR=: binary, man page, docs, systemd unit"
	@echo "make clean"

# Install the Debian packages we need; quick when everything is present.
deps:
	@missing=""; for p in $(APT_PKGS); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
	if [ -n "$$missing" ]; then \
		echo "deps: installing$$missing"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get update -qq && apt-get install -y -qq $$missing >/dev/null || exit 1; \
	fi

# The CPU kernels: let the vectorizer use its full cost model (-O2 alone
# only vectorizes loops with no remainder).
KERNEL_CFLAGS := -fvect-cost-model=dynamic
$(BUILD)/engine/nn/backend_cpu.o $(BUILD)/engine/nn/backend_cpu_conv.o \
	$(BUILD)/engine/nn/backend_cpu_norm.o \
	$(BUILD)/engine/nn/backend_cpu_seq.o: ALL_CFLAGS += $(KERNEL_CFLAGS)
# The direct convolutions: each tap a fused multiply-add where the ISA has it.
$(BUILD)/engine/nn/backend_cpu_conv.o: ALL_CFLAGS += -ffp-contract=fast
# The reference backend and the ops it shares with cpu: no fused
# multiply-add, whatever CFLAGS say, so its results are the same bits on
# every x86-64 CPU.
REF_CFLAGS := -ffp-contract=off
$(BUILD)/engine/nn/backend_ref.o $(BUILD)/engine/nn/backend_ref_seq.o: ALL_CFLAGS += $(REF_CFLAGS)
$(BUILD)/engine/nn/backend_host.o: ALL_CFLAGS += $(REF_CFLAGS)
# demo's DCT: vectorised, and the same bits on every x86-64 CPU
$(BUILD)/engine/ps/dct.o: ALL_CFLAGS += $(KERNEL_CFLAGS) $(REF_CFLAGS)
# ncursesw's wide-character calls (mvaddnwstr, cchar_t) need this defined
$(BUILD)/tui/%.o: ALL_CFLAGS += $(call NCURSES,--cflags) -D_XOPEN_SOURCE_EXTENDED

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

# The dashboard: web/*.{html,js,css} and uPlot (npm, pinned in
# web/package-lock.json, installed into web/node_modules by `npm ci` when it
# is missing or older than the lock file) become one generated C file.
WEB_SRC    := $(wildcard web/*.html web/*.js web/*.css web/*.svg)
UPLOT_DIR  := web/node_modules/uplot/dist
NPM_STAMP  := web/node_modules/.stalelab-npm-ci
WEB_ASSETS := /=web/index.html $(foreach f,$(filter-out web/index.html,$(WEB_SRC)),/ui/$(notdir $(f))=$(f)) \
	/ui/vendor/uPlot.iife.min.js=$(UPLOT_DIR)/uPlot.iife.min.js \
	/ui/vendor/uPlot.min.css=$(UPLOT_DIR)/uPlot.min.css

NPM ?= npm
$(NPM_STAMP): web/package.json web/package-lock.json
	@command -v $(NPM) >/dev/null 2>&1 || { echo "$(NPM) not found: the dashboard needs npm to install uPlot into web/node_modules (run 'make deps', which installs npm and chromium)" >&2; exit 1; }
	cd web && $(NPM) ci --no-audit --no-fund --loglevel=error
	@touch $@

$(BUILD)/gen/web_assets.c: tools/embed_web.py $(WEB_SRC) $(NPM_STAMP)
	@mkdir -p $(dir $@)
	python3 tools/embed_web.py $@ $(WEB_ASSETS)

$(WEB_OBJ): $(BUILD)/gen/web_assets.c daemon/serve/web.h
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/stalelab: $(ENGINE_OBJ) $(DAEMON_OBJ) $(TUI_OBJ)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

# The cuda backend: the plugin stalelab-cuda.so (engine/cuda/), built where
# nvcc is found, even on a machine with no GPU; it links the CUDA runtime
# statically and cuBLAS shared (found through its rpath), never the driver
# library, so it loads anywhere and says itself whether it can run. The
# binary links no CUDA library and looks for the plugin beside itself,
# then in PLUGIN_DIR.
NVCC       ?= $(shell command -v nvcc 2>/dev/null)
CUDA_SO    := $(BUILD)/stalelab-cuda.so
CUDA_SRC   := $(wildcard engine/cuda/*.cu engine/cuda/*.cuh)
CUDA_LIB    = $(dir $(realpath $(NVCC)))../lib64
NVCC_FLAGS := -O2 -std=c++17 -shared --Werror all-warnings \
	-Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra,-Werror \
	-gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=sm_80 \
	-gencode arch=compute_75,code=compute_75 -Iengine/nn
PLUGIN_DIR  = $(PREFIX)/lib/stalelab
$(BUILD)/engine/nn/backend.o: ALL_CFLAGS += -DSL_PLUGIN_DIR='"$(PLUGIN_DIR)"'
ifneq ($(NVCC),)
cuda-plugin: $(CUDA_SO)
$(CUDA_SO): $(CUDA_SRC) engine/nn/backend.h engine/nn/backend_plugin.h
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -o $@ engine/cuda/backend_cuda.cu -lcublas -Xlinker -rpath,$(CUDA_LIB)
else
cuda-plugin:
	@echo "nvcc not found: the cuda plugin (stalelab-cuda.so) is skipped; the cpu and ref backends are built"
endif

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(ENGINE_OBJ) $(DAEMON_LIB_OBJ) $(TUI_OBJ)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(CHECK_LIBS) $(LDLIBS)

# The daemon on the default run (Fashion-MNIST MLP, 4 workers, asgd, mixed
# delays), HTTP API on http://127.0.0.1:8470 until Ctrl-C.
PORT ?= 8470
ARGS ?=
run: deps
	@$(MAKE) --no-print-directory all
	$(BUILD)/stalelab serve --listen 127.0.0.1:$(PORT) $(ARGS)

unit: $(TEST_BIN)
	@sh tests/run_unit.sh $(TEST_BIN)

test: deps
	@$(MAKE) --no-print-directory all $(TEST_BIN)
	@sh tests/run_all.sh $(BUILD)

bench: deps
	@$(MAKE) --no-print-directory all
	@sh bench/run.sh $(BUILD)

# the cuda backend's figures: each model (the MLP and LeNet-5 on
# Fashion-MNIST, gpt:L4-H4-E128-T64 and gpt:L6-H6-E384-T256 on text:webster,
# with tokens/s) at batch 64 and 256 against the cpu backend in the same run
# (a GPT's at batch 64 only), the server's update, 1 / 8 / 64 workers
# (tests/gpu.sh runs it on a GPU machine; elsewhere it says why it cannot)
SECONDS_PER ?= 2
bench-gpu: all
	$(BUILD)/stalelab bench --device cuda -b 64,256 -S $(SECONDS_PER)

# this tree's engine against BASE (a commit), side by side in one run
BASE ?= HEAD~1
results: deps
	@$(MAKE) --no-print-directory all
	@python3 experiments/results.py --stalelab $(BUILD)/stalelab --out $(BUILD)/results \
		$(if $(RESNET_FULL),--resnet-full)

results-quick: deps
	@$(MAKE) --no-print-directory all
	@python3 experiments/results.py --quick --stalelab $(BUILD)/stalelab --out $(BUILD)/results-quick

bench-compare: deps
	@$(MAKE) --no-print-directory all $(BUILD)/bench/convs
	@sh bench/compare.sh $(BUILD) $(BASE)

# the cpu backend's convolutions alone on ResNet-20's shapes (bench/convs.c)
$(BUILD)/bench/convs: bench/convs.c $(ENGINE_OBJ)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

bench-accuracy: deps
	@$(MAKE) --no-print-directory all
	@sh bench/accuracy.sh $(BUILD)

asan: deps
	@$(MAKE) --no-print-directory BUILD=build-asan OPT=-O1 \
		EXTRA_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
		all $(patsubst $(BUILD)/%,build-asan/%,$(TEST_BIN))
	@SL_ASAN=1 sh tests/run_all.sh build-asan

valgrind: deps
	@$(MAKE) --no-print-directory BUILD=build-vg OPT=-O0 all \
		$(patsubst $(BUILD)/%,build-vg/%,$(TEST_BIN))
	@SL_VALGRIND=1 sh tests/run_all.sh build-vg

# libFuzzer (clang, ASan+UBSan): every tests/fuzz/NAME_fuzz.c is a harness,
# built into build-fuzz/NAME_fuzz and run on a copy of its seed corpus
# tests/fuzz/corpus/NAME/ (see tests/fuzz/run.sh and docs/architecture.md).
# The tree is built with clang into build-fuzz/ and linked from an archive,
# so a harness pulls in only the objects it calls.
FUZZ_SECONDS ?= 60
FUZZ_SRC  := $(wildcard tests/fuzz/*_fuzz.c)
FUZZ_SAN  := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
fuzz-build: deps
	@command -v clang >/dev/null 2>&1 || { echo "clang not found: the fuzz harnesses need clang and libclang-rt-14-dev (run 'make deps')" >&2; exit 1; }
	@$(MAKE) --no-print-directory BUILD=build-fuzz CC=clang OPT=-O1 KERNEL_CFLAGS= \
		EXTRA_CFLAGS="$(FUZZ_SAN) -fsanitize=fuzzer-no-link" fuzz-bins

# The cpu backend's kernels (backend_cpu*.c) use GCC's function
# multi-versioning, which clang 14 does not take: in the fuzz build gcc
# compiles them, uninstrumented (numeric kernels, no parser in them).
FUZZ_GCC_OBJ := build-fuzz/engine/nn/backend_cpu.o build-fuzz/engine/nn/backend_cpu_%.o
$(FUZZ_GCC_OBJ): override CC := gcc
$(FUZZ_GCC_OBJ): override EXTRA_CFLAGS :=

fuzz-bins: $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/%)

$(BUILD)/libsl-fuzz.a: $(ENGINE_OBJ) $(filter-out $(WEB_OBJ),$(DAEMON_LIB_OBJ))
	rm -f $@
	ar rcs $@ $^

$(BUILD)/%_fuzz: tests/fuzz/%_fuzz.c tests/fuzz/fuzz.h $(BUILD)/libsl-fuzz.a
	$(CC) $(ALL_CFLAGS) -Itests/fuzz -fsanitize=fuzzer -o $@ $< $(BUILD)/libsl-fuzz.a $(LDLIBS)

fuzz: fuzz-build
	@sh tests/fuzz/run.sh build-fuzz $(FUZZ_SECONDS)

PREFIX  ?= /usr/local
DESTDIR ?=
# the docs the man page points to, installed in PREFIX/share/doc/stalelab
DOCS    := docs/api.md docs/bus.md docs/tui.md docs/formats.md docs/rules.md docs/performance.md docs/dashboard.md docs/cluster.md \
	   docs/experiments.md docs/cluster-gpus.png docs/cluster-jct.png \
	   docs/dashboard.png
install: all
	@$(MAKE) --no-print-directory install-files

# install what is built, without building (the tests use this)
install-files:
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
		$(DESTDIR)$(PREFIX)/share/stalelab $(DESTDIR)$(PREFIX)/share/doc/stalelab
	install -m 755 $(BUILD)/stalelab $(DESTDIR)$(PREFIX)/bin/stalelab
	if [ -f $(CUDA_SO) ]; then install -d $(DESTDIR)$(PLUGIN_DIR) && \
		install -m 755 $(CUDA_SO) $(DESTDIR)$(PLUGIN_DIR)/; fi
	install -m 644 docs/stalelab.1 $(DESTDIR)$(PREFIX)/share/man/man1/stalelab.1
	install -m 644 docs/stalelab.service $(DESTDIR)$(PREFIX)/share/stalelab/stalelab.service
	install -m 644 README.md $(DOCS) $(DESTDIR)$(PREFIX)/share/doc/stalelab/
	install -d $(DESTDIR)$(PREFIX)/share/stalelab/examples $(DESTDIR)$(PREFIX)/share/stalelab/python
	install -m 644 examples/*.json $(DESTDIR)$(PREFIX)/share/stalelab/examples/
	install -m 644 clients/python/stalelab.py $(DESTDIR)$(PREFIX)/share/stalelab/python/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/stalelab $(DESTDIR)$(PREFIX)/share/man/man1/stalelab.1
	rm -rf $(DESTDIR)$(PLUGIN_DIR)
	rm -rf $(DESTDIR)$(PREFIX)/share/stalelab $(DESTDIR)$(PREFIX)/share/doc/stalelab

clean:
	rm -rf build build-asan build-vg build-fuzz

-include $(ENGINE_OBJ:.o=.d) $(DAEMON_OBJ:.o=.d) $(TUI_OBJ:.o=.d) $(TEST_BIN:=.d)
