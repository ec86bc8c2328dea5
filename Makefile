# pgfence — the two commands a newcomer needs, on a fresh Debian 12 or 13 machine as root:
#   make demo   install what is missing, build, show a stale write refused
#   make test   install what is missing, build, run every test (warnings are errors)
#
# Other targets: deps build install deb sim faults soak fuzz bench bench-pg
#                bench-pg-instr bench-relay bench-coordinator bench-scale bench-wal
#                check-debian13 clean help
# Build options: JOBS=2 BUILD=build BUILD_TYPE=RelWithDebInfo CMAKE_FLAGS=... WERROR=ON|OFF
#                V=1 (make demo: show the build's output as it comes)

JOBS        ?= 2
BUILD       ?= build
BUILD_ASAN  ?= build-asan
BUILD_TYPE  ?= RelWithDebInfo
SEEDS       ?= 1000
FROM        ?= 1
SOAK_SEEDS  ?= 5000
# make faults: FAULT_SECONDS of seeded faults (FAULT_SEED: the schedule; empty: a
# random seed, printed). Not SECONDS: bash gives that name a meaning of its own.
FAULT_SECONDS ?= 120
FAULT_SEED    ?=
CMAKE_FLAGS ?=
# WERROR=ON|OFF sets the CMake option PGFENCE_WERROR (compiler warnings are
# errors) in the build directory; empty keeps the directory's setting (in a
# new one: ON with the tested g++ 12 and 14, OFF with any other compiler).
# make test and make build-asan set ON, so make test and CI (.ci/run) fail on
# any warning; make build, install and demo leave it, so a newer compiler's
# new warning does not stop them. Switching it rebuilds the directory once.
WERROR ?=
# The sanitizer build covers every layer up to net/ (the decoders, the cores
# and storage, where memory bugs would hide); server/ and above are built once.
# A module listed needs every module its targets link listed too: configure
# names any that is missing.
ASAN_MODULES ?= codec;raft;lock;member;auth;storage;log;net

.PHONY: all help deps build build-asan install deb test demo sim faults soak fuzz \
        bench bench-pg bench-pg-instr bench-relay bench-coordinator bench-scale bench-wal \
        check-debian13 clean

# werror_sync DIR: DIR's PGFENCE_WERROR made $(WERROR) when WERROR is set.
werror_sync = $(if $(WERROR),@grep -qx 'PGFENCE_WERROR:BOOL=$(WERROR)' $(1)/CMakeCache.txt || \
                cmake -S . -B $(1) -DPGFENCE_WERROR=$(WERROR) >/dev/null)

all: build

# The comment block at the top of this file, up to its first other line.
help:
	@sed -n '/^#/!q; s/^# \{0,1\}//p' Makefile

deps:
	@bash scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(if $(WERROR),-DPGFENCE_WERROR=$(WERROR)) $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	$(call werror_sync,$(BUILD))
	cmake --build $(BUILD) -j$(JOBS)
	$(MAKE) -C pg_extension -j$(JOBS)

$(BUILD_ASAN)/CMakeCache.txt:
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPGFENCE_SANITIZE=ON \
	      "-DPGFENCE_MODULES=$(ASAN_MODULES)" -DPGFENCE_WERROR=$(WERROR) $(CMAKE_FLAGS)

build-asan: WERROR = ON
build-asan: $(BUILD_ASAN)/CMakeCache.txt
	$(call werror_sync,$(BUILD_ASAN))
	cmake --build $(BUILD_ASAN) -j$(JOBS)

# Installs the extension into the PostgreSQL of the first pg_config in PATH
# (PGXS; PG_CONFIG=... another) and the programs and their manual pages under
# CMAKE_INSTALL_PREFIX (default /usr/local); DESTDIR=... stages both. The
# systemd unit comes with the package only (docs/operations.md, "Installing
# from source: make install").
install: build
	$(MAKE) -C pg_extension install
	cmake --install $(BUILD)

# Debian packages of the programs and the extension, from this build, in
# $(BUILD)/deb/ (scripts/make-deb.sh).
deb: deps build
	BUILD=$(BUILD) bash scripts/make-deb.sh

test: WERROR = ON
test: deps build build-asan
	$(MAKE) -C pg_extension install
	JOBS=$(JOBS) bash scripts/test.sh

# The story comes first: the build and the install of pg_fence print one line
# each (scripts/quiet.sh), their output goes to $(BUILD)/make-demo-STEP.log and
# is shown in full only when the step fails; V=1 shows it as it comes. deps
# stays visible: it prints one line, or the packages it installs.
demo_step = V=$(V) bash scripts/quiet.sh $(BUILD)/make-demo-$(1).log "make demo: $(2)"
demo: deps
	@$(call demo_step,build,building (JOBS=$(JOBS))) $(MAKE) --no-print-directory build
	@$(call demo_step,install,installing pg_fence into PostgreSQL) $(MAKE) --no-print-directory -C pg_extension install
	@bash scripts/demo.sh

# make sim SEEDS=N FROM=S: simulation seeds S..S+N-1, non-zero exit on any failure.
sim: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS) --target raft_sim
	$(BUILD)/tests/simulation/raft_sim --seeds $(SEEDS) --from $(FROM)

# make faults FAULT_SECONDS=N FAULT_SEED=S: one end-to-end run under the nemesis
# (tests/e2e/safety/run.sh, in network namespaces; needs root). Its report (a
# summary, the schedule, a PNG timeline) goes to build/fault-reports/.
faults: deps build
	$(MAKE) -C pg_extension install
	SAFETY_SEED=$(FAULT_SEED) FAULT_REPORT_ROOT=$(CURDIR)/$(BUILD)/fault-reports \
	  bash tests/e2e/safety/run.sh --seconds $(FAULT_SECONDS)

# make soak: many more simulation seeds (from 100000, longer runs), long fuzz
# runs and a 10-minute fault-injected end-to-end run (about an hour in all).
soak: deps build
	$(MAKE) -C pg_extension install
	$(BUILD)/tests/simulation/raft_sim --seeds $(SOAK_SEEDS) --from 100000 --steps 200000
	bash scripts/fuzz.sh 300
	FAULT_REPORT_ROOT=$(CURDIR)/$(BUILD)/fault-reports bash tests/e2e/safety/run.sh --seconds 600

fuzz:
	bash scripts/fuzz.sh $(or $(FUZZ_SECONDS),60)

bench: bench-wal bench-pg bench-coordinator

# make bench-pg: the instructions per UPDATE of each variant (bench-pg-instr),
# then their tps under pgbench (bench/pg/run.sh). Both need the extension only.
bench-pg: bench-pg-instr
	bash bench/pg/run.sh

bench-pg-instr:
	PGFENCE_BENCH_DEPS=1 bash scripts/install-deps.sh
	$(MAKE) -C pg_extension -j$(JOBS) install
	bash bench/pg/instructions.sh

# make bench-relay: entries per second fence-relay delivers to a local
# receiver, by the receiver's own count (bench/outbox/run.sh; goal 2,000/s).
bench-relay:
	$(MAKE) -C pg_extension -j$(JOBS) install
	bash bench/outbox/run.sh

bench-wal: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS) --target bench_wal
	$(BUILD)/bench/bench_wal --dir $(BUILD)/bench-wal-data

# make bench-coordinator: the concurrency curve against etcd 3.4, cycles/s and
# latency at 1..2,048 connections, plaintext and TLS, with a PNG; about 12
# minutes (bench/coordinator/run.sh; BENCH_ROUNDS=2 BENCH_SECONDS=3 for a quick run).
bench-coordinator: deps build
	PGFENCE_BENCH_DEPS=1 bash scripts/install-deps.sh
	bash bench/coordinator/run.sh

# make bench-scale: cost at 0, 100k and 1M held locks against etcd 3.4, about
# 13 minutes (bench/scale/run.sh; BENCH_SCALE_LOCKS="0 10000" for a quick run).
# Builds its own Release tree (build-bench); not part of `make bench`.
bench-scale: deps
	PGFENCE_BENCH_DEPS=1 bash scripts/install-deps.sh
	JOBS=$(JOBS) bash bench/scale/run.sh

# make check-debian13: make demo and the unit tests inside a Debian 13
# (trixie) chroot, on a copy of this checkout in build-debian13/ (the host's
# build/ is untouched); scripts/check-debian13.sh. About 15 minutes the
# first time (the build), 2 after; not part of make test.
check-debian13:
	JOBS=$(JOBS) bash scripts/check-debian13.sh

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) build-fuzz build-debian13
	-$(MAKE) -C pg_extension clean
