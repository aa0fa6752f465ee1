# unionnfsd — plain, non-recursive make.
#   make              build/unionnfsd
#   make test         unit, integration and end-to-end tests (tests/run-tests)
#   make check        the same under AddressSanitizer + UndefinedBehaviorSanitizer (build/san/)
#   make install      PREFIX=/usr/local DESTDIR=
#   make clean

PREFIX ?= /usr/local
DESTDIR ?=
BUILD ?= build
SAN ?=

CC ?= cc
OPT ?= -O2
CFLAGS_ALL = -std=gnu11 -Wall -Wextra -Werror $(OPT) -g -D_GNU_SOURCE -pthread \
	-Iinclude -I$(BUILD)/gen -I/usr/include/tirpc $(CFLAGS)
LDFLAGS_ALL = -pthread $(LDFLAGS)
LIBS = -ltirpc -llmdb -lev -lsodium
ifeq ($(SAN),1)
CFLAGS_ALL += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS_ALL += -fsanitize=address,undefined
endif
# rpcgen's output is not ours to fix; it only has to compile.
GEN_CFLAGS = $(filter-out -Werror -Wextra,$(CFLAGS_ALL)) -Wno-unused-variable

XDR = nfs3 mount3
GEN_H = $(XDR:%=$(BUILD)/gen/%.h)
GEN_C = $(XDR:%=$(BUILD)/gen/%_xdr.c)
GEN_O = $(XDR:%=$(BUILD)/obj/gen/%_xdr.o)

MAIN_SRC = src/main.c
LIB_SRC = $(filter-out $(MAIN_SRC),$(sort $(wildcard src/*.c src/*/*.c store/*.c)))
LIB_O = $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(GEN_O)

UNIT_SRC = $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN = $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/unit/%)
INTEG_SRC = $(sort $(wildcard tests/integration/test_*.c))
INTEG_BIN = $(INTEG_SRC:tests/integration/%.c=$(BUILD)/tests/integration/%)
INTEG_COMMON = $(wildcard tests/integration/common.c)

.PHONY: all test check install clean unit integration e2e
.SECONDARY: $(GEN_H) $(GEN_C)
all: $(BUILD)/unionnfsd

$(BUILD)/gen/%.h: rpc/%.x
	@mkdir -p $(dir $@)
	rm -f $@ && rpcgen -M -h -o $@ $<
$(BUILD)/gen/%_xdr.c: rpc/%.x $(BUILD)/gen/%.h Makefile
	@mkdir -p $(dir $@)
	rm -f $@ && rpcgen -M -c -o $@ $<
	sed -i -e 's|#include ".*/$*.h"|#include "$*.h"\n#include "xdr_strict.h"|' \
		-e 's|xdr_string (xdrs, objp,|xdr_string_strict (xdrs, objp,|' $@
$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(GEN_CFLAGS) -c -o $@ $<

$(BUILD)/obj/%.o: %.c $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c -o $@ $<

$(BUILD)/unionnfsd: $(BUILD)/obj/$(MAIN_SRC:.c=.o) $(LIB_O)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

$(BUILD)/tests/unit/%: tests/unit/%.c $(LIB_O) $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) -o $@ $< $(LIB_O) $(LIBS) -lcmocka

$(BUILD)/tests/integration/%: tests/integration/%.c $(INTEG_COMMON) $(LIB_O) $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests/integration $(LDFLAGS_ALL) -o $@ $< $(INTEG_COMMON) $(LIB_O) $(LIBS) -lnfs -lcmocka

unit: $(UNIT_BIN)
integration: $(BUILD)/unionnfsd $(INTEG_BIN)

test: $(BUILD)/unionnfsd $(UNIT_BIN) $(INTEG_BIN)
	BUILD=$(BUILD) tests/run-tests

check:
	$(MAKE) BUILD=build/san SAN=1 OPT=-O1 test

install: $(BUILD)/unionnfsd
	install -D -m 0755 $(BUILD)/unionnfsd $(DESTDIR)$(PREFIX)/sbin/unionnfsd

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
