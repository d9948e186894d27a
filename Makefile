# shunt - build, test, bench.  `make` builds build/shunt and build/libshunt.so.
CC      ?= cc
BUILD   ?= build
CFLAGS  ?= -O2 -g
WARN    := -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -Wvla-larger-than=131072
CPPFLAGS = -Iinclude $(if $(HAVE_VERBS),-DSHUNT_HAVE_RDMA)
SAN     ?=
# RDMA (issue #4) needs libibverbs-dev to build (the library is dlopened at run time).
HAVE_VERBS := $(shell test -f /usr/include/infiniband/verbs.h && echo 1)
# The transports: shared memory always, RDMA when libibverbs' headers are
# there (nothing stands in for it otherwise: src/transport/transport.c).
SHIM_SRC := $(wildcard src/base/*.c) $(wildcard src/shim/*.c) $(wildcard src/setup/*.c) $(wildcard src/transport/*.c) $(wildcard src/transport/shm/*.c) $(if $(HAVE_VERBS),$(wildcard src/transport/rdma/*.c)) src/common/config.c src/common/reason.c src/common/msg.c src/common/handshake.c src/common/synopt.c src/common/failover.c src/common/rdvdir.c src/common/loadavg.c src/common/nbdnl.c src/common/iscsinl.c
TOOL_SRC := $(wildcard src/tools/*.c) src/common/reason.c src/common/config.c src/common/rdvdir.c
HDRS    := $(wildcard include/shunt/*.h src/base/*.h src/shim/*.h src/setup/*.h src/common/*.h src/transport/*.h src/transport/shm/*.h src/transport/rdma/*.h)

UNIT    := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(wildcard tests/unit/*.c))
BEHAVE  := $(patsubst tests/behave/%.c,$(BUILD)/tests/behave/%,$(wildcard tests/behave/*.c))
TOOLS   := $(patsubst tests/tools/%.c,$(BUILD)/tests/tools/%,$(filter-out tests/tools/replayd.c,$(wildcard tests/tools/*.c)))

# The agent (issue #3) needs libbpf and clang; without them it is skipped.
HAVE_BPF := $(shell test -f /usr/include/bpf/libbpf.h && command -v clang >/dev/null && echo 1)
AGENT   := $(if $(HAVE_BPF),$(BUILD)/shuntd $(BUILD)/shunt_sockops.bpf.o)
BPF_TESTS := $(if $(HAVE_BPF),$(BUILD)/tests/bpf/replay.bpf.o $(BUILD)/tests/bpf/rewrite.bpf.o $(BUILD)/tests/bpf/replayd)

all: $(BUILD)/libshunt.so $(BUILD)/shunt $(AGENT)

$(BUILD)/shunt_sockops.bpf.o: src/agent/sockops.bpf.c
	@mkdir -p $(@D)
	clang -O2 -g -target bpf -mcpu=v3 -I/usr/include/$(shell $(CC) -dumpmachine) -c $< -o $@

$(BUILD)/tests/bpf/%.bpf.o: tests/bpf/%.bpf.c
	@mkdir -p $(@D)
	clang -O2 -g -target bpf -I/usr/include/$(shell $(CC) -dumpmachine) -c $< -o $@

$(BUILD)/tests/bpf/replayd: tests/tools/replayd.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -o $@ $< -lbpf

$(BUILD)/shuntd: src/agent/shuntd.c src/common/agent.h
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -o $@ $< -lbpf

# The data path's loops (the spin, the ring copy) aligned: without it an
# unrelated change elsewhere moved them and the 64 B round trip went from
# 0.98 to 1.28 us on this machine (docs/benchmarks.md, fifteenth session).
SHIM_ALIGN := -falign-functions=64 -falign-loops=32
# Preloaded: its thread-locals in the initial-exec model, its calls bound at
# load (not again in every forked child).
SHIM_LINK := -fPIC -shared -fvisibility=hidden -ftls-model=initial-exec \
	-Wl,--version-script=src/shim/libshunt.map -Wl,-z,defs -Wl,-z,now -Wl,-z,relro
# A handler that calls into shunt waits for no lock its thread holds only
# if every lock is counted (src/base/lock.h): no mutex of pthread's taken bare.
$(BUILD)/libshunt.so: $(SHIM_SRC) $(HDRS) src/shim/libshunt.map
	@mkdir -p $(@D)
	@! grep -n 'pthread_mutex_\(try\)\?\(un\)\?lock(' $(SHIM_SRC) || \
		{ echo "take the library's mutexes with shunt_mutex_lock (src/base/lock.h)"; exit 1; }
	$(CC) $(CPPFLAGS) $(CFLAGS) $(SHIM_ALIGN) $(WARN) $(SAN) $(SHIM_LINK) -o $@ $(SHIM_SRC) -ldl -lpthread

# The same library with fault injection (src/shim/fault.c), for tests only.
$(BUILD)/libshunt-faults.so: $(SHIM_SRC) $(HDRS) src/shim/libshunt.map
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -DSHUNT_FAULTS $(CFLAGS) $(SHIM_ALIGN) $(WARN) $(SAN) $(SHIM_LINK) -o $@ $(SHIM_SRC) -ldl -lpthread

$(BUILD)/shunt: $(TOOL_SRC) $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -o $@ $(TOOL_SRC) -lm

COMMON_SRC := src/transport/ring.c src/base/lock.c src/common/config.c src/common/msg.c src/common/reason.c src/common/handshake.c src/common/synopt.c src/common/failover.c src/common/loadavg.c src/common/nbdnl.c src/common/iscsinl.c
$(BUILD)/tests/unit/%: tests/unit/%.c $(COMMON_SRC) $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) $(SAN) -o $@ $< $(COMMON_SRC) -lpthread

# conn.c through a fake transport: the whole library linked in (its wrappers
# are the test's own calls then, as under LD_PRELOAD).
$(BUILD)/tests/unit/conn_test: tests/unit/conn_test.c $(SHIM_SRC) $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) $(SAN) -o $@ $< $(SHIM_SRC) -ldl -lpthread

# arena.c's segment free between threads: the library linked in, as above,
# with its fault hooks (src/shim/fault.c).
$(BUILD)/tests/unit/arena_test: tests/unit/arena_test.c $(SHIM_SRC) $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -DSHUNT_FAULTS $(CFLAGS) $(WARN) $(SAN) -o $@ $< $(SHIM_SRC) -ldl -lpthread

# the registry's offer slots: the library linked in, as above.
$(BUILD)/tests/unit/slot_test: tests/unit/slot_test.c $(SHIM_SRC) $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) $(SAN) -o $@ $< $(SHIM_SRC) -ldl -lpthread

$(BUILD)/tests/unit/procnet_test: tests/unit/procnet_test.c src/tools/procnet.c src/tools/procnet.h $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) $(SAN) -o $@ $< src/tools/procnet.c

BEHAVE_LIBS_io_uring := -luring
BEHAVE_LIBS_accept_past_us := -luring
BEHAVE_LIBS_uring_late := -luring
$(BUILD)/tests/behave/%: tests/behave/%.c tests/behave/common.h tests/behave/uring.h $(HDRS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -Wno-vla-larger-than -o $@ $< -lpthread $(BEHAVE_LIBS_$*)

TOOL_LIBS_static_cat := -static
TOOL_LIBS_static_accept := -static
$(BUILD)/tests/tools/%: tests/tools/%.c $(HDRS) $(COMMON_SRC) src/common/agent.h tests/behave/common.h
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -o $@ $< $(TOOL_LIBS_$*)

tests: all $(UNIT) $(BEHAVE) $(TOOLS) $(BPF_TESTS) $(BUILD)/libshunt-faults.so

test: tests
	BUILD=$(BUILD) tests/run.sh

# The RDMA suite in the Soft-RoCE guest (also part of `make test`).
test-rdma: tests
	tests/vm/run.sh -t 1500 -- env BUILD=$(BUILD) bash tests/rdma/run.sh


bench: all
	$(BUILD)/shunt bench

demo: all
	scripts/demo.sh

# Sanitizer build of the library and tests (ASan+UBSan); run with `make asan-test`.
asan:
	$(MAKE) BUILD=build-asan SAN="-fsanitize=address,undefined -fno-omit-frame-pointer" tests
asan-test: asan
	BUILD=build-asan SHUNT_ASAN=1 tests/run.sh

fuzz:
	tests/fuzz/run.sh

clean:
	rm -rf build build-asan build-fuzz


.PHONY: all tests test test-rdma test-integration check bench demo asan asan-test fuzz clean
