# unionnfsd — plain, non-recursive make.
#   make              build/unionnfsd
#   make test         unit, integration and end-to-end tests (tests/run-tests)
#   make check        unit, integration and fuzz-replay tests again under AddressSanitizer +
#                     UndefinedBehaviorSanitizer (build/san/); the qemu tests run once, in `make test`
#   make install      PREFIX=/usr/local DESTDIR= (sysconfdir and the other directories below)
#   make uninstall    the same files but the configuration and the state directory
#   make deb          build/unionnfsd_VERSION_ARCH.deb, a Debian package (deploy/debian/)
#   make clean

PREFIX ?= /usr/local
DESTDIR ?=
sbindir ?= $(PREFIX)/sbin
mandir ?= $(PREFIX)/share/man
# A service's configuration is looked for in /etc, where the unit, the manual and the Debian
# package have it: so /etc for PREFIX=/usr and /usr/local alike; a self-contained tree
# elsewhere (PREFIX=/opt/unionnfsd) keeps it in $(PREFIX)/etc.
sysconfdir ?= $(if $(filter /usr /usr/local,$(PREFIX)),/etc,$(PREFIX)/etc)
# systemd reads packaged units from /lib/systemd/system (Debian 12 keeps them there) and the
# administrator's from /usr/local/lib/systemd/system; a unit elsewhere needs `systemctl link`.
systemdunitdir ?= $(if $(filter /usr,$(PREFIX)),/lib/systemd/system,$(PREFIX)/lib/systemd/system)
# The server's default --state (and the example configuration's).
statedir = /var/lib/unionnfsd
BUILD ?= build
SAN ?=
# 0 leaves out the end-to-end tests in qemu (make check: they take minutes and test the kernel
# client, which the sanitizers do not see)
RUN_E2E ?= 1

CC ?= cc
OPT ?= -O2
CFLAGS_ALL = -std=gnu11 -Wall -Wextra -Werror $(OPT) -g -D_GNU_SOURCE -pthread \
	-Iinclude -I$(BUILD)/gen -I/usr/include/tirpc $(CFLAGS)
LDFLAGS_ALL = -pthread $(LDFLAGS)
LIBS = -ltirpc -llmdb -lev -lsodium
# make STAGES=1 BUILD=build/stages: log where TCP calls spend their time (src/net/stages.h)
ifeq ($(STAGES),1)
CFLAGS_ALL += -DNET_STAGE_TIMES
endif
ifeq ($(SAN),1)
CFLAGS_ALL += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS_ALL += -fsanitize=address,undefined
endif
# rpcgen's output is not ours to fix; it only has to compile.
GEN_CFLAGS = $(filter-out -Werror -Wextra,$(CFLAGS_ALL)) -Wno-unused-variable

XDR = nfs3 mount3 nlm4 sm_inter
GEN_H = $(XDR:%=$(BUILD)/gen/%.h)
GEN_C = $(XDR:%=$(BUILD)/gen/%_xdr.c)
GEN_O = $(XDR:%=$(BUILD)/obj/gen/%_xdr.o)

MAIN_SRC = src/main.c
CTL_SRC = src/ctl/unionnfsd_ctl.c
LIB_SRC = $(filter-out $(MAIN_SRC) $(CTL_SRC),$(sort $(wildcard src/*.c src/*/*.c store/*.c)))
LIB_O = $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(GEN_O)

UNIT_SRC = $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN = $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/unit/%)
INTEG_SRC = $(sort $(wildcard tests/integration/test_*.c))
INTEG_BIN = $(INTEG_SRC:tests/integration/%.c=$(BUILD)/tests/integration/%)
INTEG_COMMON = $(wildcard tests/integration/common.c) tests/wait.c tests/netns.c tests/rmtree.c
# libFuzzer targets (tests/fuzz/fuzz_*.c): `make fuzz` runs them (clang, build/fuzz/),
# `make test` replays their corpus through the same sources built with $(CC).
FUZZ_TARGETS = $(patsubst tests/fuzz/%.c,%,$(sort $(wildcard tests/fuzz/fuzz_*.c)))
FUZZ_HELPERS = tests/fuzz/serve_env.c tests/rmtree.c
FUZZ_REPLAY = $(FUZZ_TARGETS:%=$(BUILD)/tests/fuzz/replay_%)
FUZZ_SECONDS ?= 60
FUZZ_DIR = build/fuzz

.PHONY: all test check install uninstall deb clean unit integration e2e fuzz fuzz-build fuzz-merge fuzz-seeds
.SECONDARY: $(GEN_H) $(GEN_C)
all: $(BUILD)/unionnfsd $(BUILD)/unionnfsd-ctl

$(BUILD)/gen/%.h: rpc/%.x
	@mkdir -p $(dir $@)
	rm -f $@ && rpcgen -M -h -o $@ $<
$(BUILD)/gen/%_xdr.c: rpc/%.x $(BUILD)/gen/%.h Makefile
	@mkdir -p $(dir $@)
	rm -f $@ && rpcgen -M -c -o $@ $<
	sed -i -e 's|#include ".*/$*.h"|#include "$*.h"\n#include "xdr_strict.h"|' \
		-e 's|xdr_string (xdrs, |xdr_string_strict (xdrs, |' $@
$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(GEN_CFLAGS) -c -o $@ $<

$(BUILD)/obj/%.o: %.c $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c -o $@ $<

$(BUILD)/unionnfsd: $(BUILD)/obj/$(MAIN_SRC:.c=.o) $(LIB_O)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

# The control client stands alone: it speaks a line protocol, it needs none of the server.
$(BUILD)/unionnfsd-ctl: $(BUILD)/obj/$(CTL_SRC:.c=.o)
	$(CC) $(LDFLAGS_ALL) -o $@ $^

$(BUILD)/tests/unit/%: tests/unit/%.c $(LIB_O) $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) -o $@ $(filter %.c,$^) $(LIB_O) $(LIBS) -lcmocka
# The union unit tests share one fixture.
$(BUILD)/tests/unit/test_union $(BUILD)/tests/unit/test_union_semantics \
		$(BUILD)/tests/unit/test_union_writable $(BUILD)/tests/unit/test_union_metacopy \
		$(BUILD)/tests/unit/test_union_rebase: \
		tests/unit/union_fixture.c tests/unit/union_fixture.h
$(BUILD)/tests/unit/test_net: tests/wait.c tests/wait.h
# Outbound calls are tested against small RPC servers of the test's own.
$(BUILD)/tests/unit/test_rpc_client $(BUILD)/tests/unit/test_nsm: tests/unit/fake_rpc.c tests/unit/fake_rpc.h
$(BUILD)/tests/unit/test_nsm $(BUILD)/tests/unit/test_union: tests/wait.c tests/wait.h
# Tests that make a temporary tree remove it with one helper.
$(BUILD)/tests/unit/test_store $(BUILD)/tests/unit/test_nfs3 $(BUILD)/tests/unit/test_fsio \
$(BUILD)/tests/unit/test_nsm $(BUILD)/tests/unit/test_union $(BUILD)/tests/unit/test_union_semantics \
		$(BUILD)/tests/unit/test_union_writable $(BUILD)/tests/unit/test_union_metacopy \
		$(BUILD)/tests/unit/test_union_rebase $(BUILD)/tests/unit/test_union_rebase_report \
		$(BUILD)/tests/unit/test_union_metacopy_rebase: \
		tests/rmtree.c tests/rmtree.h
# Tests that need port 111 or the reserved ports to themselves run in a network namespace.
$(BUILD)/tests/unit/test_rpc_client $(BUILD)/tests/unit/test_nsm $(BUILD)/tests/unit/test_portmap: \
		tests/netns.c tests/netns.h
# The lock table's test fails chosen allocations (__wrap_malloc in tests/unit/test_locks.c).
$(BUILD)/tests/unit/test_locks: LDFLAGS_ALL += -Wl,--wrap=malloc -Wl,--wrap=calloc

$(BUILD)/tests/integration/%: tests/integration/%.c $(INTEG_COMMON) $(LIB_O) $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests/integration $(LDFLAGS_ALL) -o $@ $< $(INTEG_COMMON) $(LIB_O) $(LIBS) -lnfs -lcmocka

# NSM's integration test has a fake client statd (tests/unit/fake_rpc.c).
$(BUILD)/tests/integration/test_nsm: tests/integration/test_nsm.c tests/unit/fake_rpc.c tests/unit/fake_rpc.h $(INTEG_COMMON) $(LIB_O) $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests/integration $(LDFLAGS_ALL) -o $@ $< tests/unit/fake_rpc.c $(INTEG_COMMON) $(LIB_O) $(LIBS) -lnfs -lcmocka

$(BUILD)/tests/fuzz/replay_%: tests/fuzz/%.c tests/fuzz/replay.c $(FUZZ_HELPERS) tests/fuzz/serve_env.h $(LIB_O) $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests/fuzz $(LDFLAGS_ALL) -o $@ $< tests/fuzz/replay.c $(FUZZ_HELPERS) $(LIB_O) $(LIBS)
$(BUILD)/tests/fuzz/gen_seeds: tests/fuzz/gen_seeds.c $(FUZZ_HELPERS) tests/fuzz/serve_env.h $(LIB_O) $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests/fuzz $(LDFLAGS_ALL) -o $@ $< $(FUZZ_HELPERS) $(LIB_O) $(LIBS)
# Built inside `make fuzz-build` (BUILD=build/fuzz, CC=clang): every object carries coverage.
$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_HELPERS) tests/fuzz/serve_env.h $(LIB_O) $(GEN_H)
	$(CC) $(CFLAGS_ALL) -Itests/fuzz $(LDFLAGS_ALL) -fsanitize=fuzzer -o $@ $< $(FUZZ_HELPERS) $(LIB_O) $(LIBS)

# Other people's code need not be clang -Werror clean to be fuzzed.
fuzz-build:
	$(MAKE) BUILD=$(FUZZ_DIR) CC=clang SAN=1 OPT=-O1 \
		CFLAGS='-fsanitize=fuzzer-no-link -Wno-error' $(FUZZ_TARGETS:%=$(FUZZ_DIR)/%)
# New inputs land in build/fuzz/new/<target>; tests/fuzz/corpus/<target> is only read.
fuzz: fuzz-build
	@set -e; for t in $(FUZZ_TARGETS); do \
		mkdir -p $(FUZZ_DIR)/new/$$t tests/fuzz/corpus/$$t; \
		echo "== $$t for $(FUZZ_SECONDS)s"; \
		rm -rf $(FUZZ_DIR)/tmp; mkdir -p $(FUZZ_DIR)/tmp; \
		TMPDIR=$(CURDIR)/$(FUZZ_DIR)/tmp ASAN_OPTIONS=detect_leaks=1 \
		$(FUZZ_DIR)/$$t -max_total_time=$(FUZZ_SECONDS) \
			-timeout=10 -max_len=4096 -print_final_stats=1 \
			$$([ -f tests/fuzz/$$t.dict ] && echo -dict=tests/fuzz/$$t.dict) \
			-artifact_prefix=$(FUZZ_DIR)/$$t- $(FUZZ_DIR)/new/$$t tests/fuzz/corpus/$$t; \
	done
# Folds build/fuzz/new into the corpus, minimized: the hand-made seed-* files and only the
# inputs that add coverage to them stay.
fuzz-merge: fuzz-build
	@set -e; for t in $(FUZZ_TARGETS); do \
		rm -rf $(FUZZ_DIR)/merged/$$t; mkdir -p $(FUZZ_DIR)/merged/$$t $(FUZZ_DIR)/new/$$t; \
		cp tests/fuzz/corpus/$$t/seed-* $(FUZZ_DIR)/merged/$$t/ 2>/dev/null || true; \
		rm -rf $(FUZZ_DIR)/tmp; mkdir -p $(FUZZ_DIR)/tmp; \
		TMPDIR=$(CURDIR)/$(FUZZ_DIR)/tmp $(FUZZ_DIR)/$$t -merge=1 \
			$(FUZZ_DIR)/merged/$$t tests/fuzz/corpus/$$t $(FUZZ_DIR)/new/$$t; \
		rm -rf tests/fuzz/corpus/$$t; mv $(FUZZ_DIR)/merged/$$t tests/fuzz/corpus/$$t; \
		rm -rf $(FUZZ_DIR)/new/$$t; \
	done
# Regenerates the hand-made seeds (valid calls for every procedure) into the corpus.
fuzz-seeds: $(BUILD)/tests/fuzz/gen_seeds
	mkdir -p tests/fuzz/corpus
	$(BUILD)/tests/fuzz/gen_seeds tests/fuzz/corpus

unit: $(UNIT_BIN)
integration: $(BUILD)/unionnfsd $(BUILD)/unionnfsd-ctl $(INTEG_BIN)

test: $(BUILD)/unionnfsd $(BUILD)/unionnfsd-ctl $(UNIT_BIN) $(INTEG_BIN) $(FUZZ_REPLAY)
	BUILD=$(BUILD) RUN_E2E=$(RUN_E2E) tests/run-tests

check:
	$(MAKE) BUILD=build/san SAN=1 OPT=-O1 RUN_E2E=0 test

# Man pages are installed gzip-ed (Debian policy), each deploy/man/NAME.N to manN.
MAN_PAGES = $(wildcard deploy/man/*.[1-9])
install: $(BUILD)/unionnfsd $(BUILD)/unionnfsd-ctl
	install -D -m 0755 $(BUILD)/unionnfsd $(DESTDIR)$(sbindir)/unionnfsd
	install -D -m 0755 $(BUILD)/unionnfsd-ctl $(DESTDIR)$(sbindir)/unionnfsd-ctl
	@set -e; for page in $(MAN_PAGES); do \
		dir=$(DESTDIR)$(mandir)/man$${page##*.}; \
		echo "gzip -9n < $$page > $$dir/$${page##*/}.gz"; \
		install -d -m 0755 $$dir; \
		gzip -9n < $$page > $$dir/$${page##*/}.gz; \
		chmod 0644 $$dir/$${page##*/}.gz; \
	done
	install -d -m 0755 $(DESTDIR)$(systemdunitdir)
	sed -e 's|^ExecStart=/usr/local/sbin/|ExecStart=$(sbindir)/|' \
		-e 's| /etc/unionnfsd.conf| $(sysconfdir)/unionnfsd.conf|g' \
		deploy/unionnfsd.service > $(DESTDIR)$(systemdunitdir)/unionnfsd.service
	chmod 0644 $(DESTDIR)$(systemdunitdir)/unionnfsd.service
	@# The configuration is the administrator's once installed: never overwritten.
	@if [ -e $(DESTDIR)$(sysconfdir)/unionnfsd.conf ]; then \
		echo "kept $(DESTDIR)$(sysconfdir)/unionnfsd.conf (the example is deploy/example.conf)"; \
	else \
		echo "install -D -m 0644 deploy/example.conf $(DESTDIR)$(sysconfdir)/unionnfsd.conf"; \
		install -D -m 0644 deploy/example.conf $(DESTDIR)$(sysconfdir)/unionnfsd.conf; \
	fi
	install -d -m 0700 $(DESTDIR)$(statedir)

# Keeps $(sysconfdir)/unionnfsd.conf and $(statedir) (the inode map clients' handles rely on).
uninstall:
	rm -f $(DESTDIR)$(sbindir)/unionnfsd $(DESTDIR)$(sbindir)/unionnfsd-ctl \
		$(DESTDIR)$(systemdunitdir)/unionnfsd.service \
		$(foreach page,$(MAN_PAGES),$(DESTDIR)$(mandir)/man$(subst .,,$(suffix $(page)))/$(notdir $(page)).gz)

# The Debian package: the server built again with Debian's hardening flags in build/deb,
# installed with PREFIX=/usr into a staging tree, packaged by deploy/debian/build-deb.
DEB_BUILD = build/deb
DEB_FLAGS = DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get
deb:
	$(MAKE) BUILD=$(DEB_BUILD) SAN= OPT=-O2 \
		CFLAGS="$$($(DEB_FLAGS) CFLAGS) $$($(DEB_FLAGS) CPPFLAGS)" \
		LDFLAGS="$$($(DEB_FLAGS) LDFLAGS)" $(DEB_BUILD)/unionnfsd $(DEB_BUILD)/unionnfsd-ctl
	deploy/debian/build-deb $(DEB_BUILD) build

clean:
	rm -rf build

# Benchmark tools (tests/bench/); `make bench` depends on bench-tools.
.PHONY: bench-tools
LOADGEN_SRC = $(sort $(wildcard tests/bench/loadgen*.c))
bench-tools: $(BUILD)/bench/loadgen $(BUILD)/bench/mkmap $(BUILD)/bench/rpclat $(BUILD)/bench/rpcecho
$(BUILD)/bench/loadgen: $(LOADGEN_SRC) $(wildcard tests/bench/loadgen*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) -o $@ $(LOADGEN_SRC) -lnfs
# A blocking libtirpc client, and the polling responder that is the benchmark's limit.
$(BUILD)/bench/rpclat: tests/bench/rpclat.c $(GEN_O) $(BUILD)/obj/src/rpc/xdr_strict.o $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) -o $@ $< $(GEN_O) $(BUILD)/obj/src/rpc/xdr_strict.o -ltirpc
$(BUILD)/bench/rpcecho: tests/bench/rpcecho.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) -o $@ $<
# Builds a large inode map and its tree through the store API (tests/bench/map-scale.sh).
$(BUILD)/bench/mkmap: tests/bench/mkmap.c $(LIB_O) $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) -o $@ $< $(LIB_O) $(LIBS)

# The benchmark against nfs-ganesha (issue 5): needs root, nfs-ganesha, rpcbind; see
# tests/bench/README.md. REPEAT=N, BENCH_QUICK=1, BENCH_KERNEL=0 pass through the environment.
.PHONY: bench
bench: all bench-tools
	BUILD=$(BUILD) tests/bench/run-bench

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
