# fbf: PostgreSQL extension (PGXS build)
#
#   make && make install          build and install into the PostgreSQL
#                                 that pg_config names
#   make installcheck             regression and isolation tests against a
#                                 running server (shared_preload_libraries
#                                 must include fbf), then the TAP tests
#   make prove_installcheck       the TAP tests alone (test/t, their helper
#                                 module in test/perl; they start their own
#                                 servers, so run them as a user initdb
#                                 accepts, not root)
#   make -C test/core check       standalone tests of the pure core
#
# test/check.sh runs every layer against a scratch cluster.

EXTENSION   = fbf
EXTVERSION  = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" fbf.control)

# One folder per subsystem (docs/design.md, "Architecture"); the pure
# core's list is shared with test/core and test/bench.
FBF_CORE_DIR = src/core
include $(FBF_CORE_DIR)/sources.mk

MODULE_big  = fbf
OBJS        = src/fbf.o \
              $(FBF_CORE_SRCS:.c=.o) $(CUCKOO_CORE_SRCS:.c=.o) $(CWIN_CORE_SRCS:.c=.o) \
              src/common/fbf_page.o src/common/fbf_xlog.o \
              src/type/fbf_type.o src/type/fbf_kind.o src/type/fbf_value_bloom.o \
              src/type/fbf_value_cuckoo.o src/type/fbf_value_key.o \
              src/registry/registry.o src/registry/share.o \
              src/window/window_am.o src/window/window_rebuild.o \
              src/window/window_page.o src/window/window_build.o \
              src/window/window_apply.o src/window/window_pending.o \
              src/window/window_chain_index.o \
              src/window/window_ring.o src/window/window_read.o \
              src/window/window_clock.o src/window/window_legacy.o \
              src/window/window_legacy_meta.o \
              src/window/window_xlog.o src/window/window_split.o \
              src/window/window_load.o src/window/window_cuckoo.o \
              src/window/window_cuckoo_snap.o src/window/window_key.o \
              src/window/window_layout.o src/window/window_bloom.o \
              src/window/window_bloom_snap.o src/window/window_maintain.o \
              src/window/window_adopt.o src/window/window_options.o \
              src/window/window_catalog.o src/window/window_stream.o \
              src/counter/counter.o src/counter/counter_maintain.o \
              src/counter/counter_stats.o src/counter/counter_delta.o \
              src/counter/counter_batch.o src/counter/counter_load.o src/counter/dedup.o \
              src/counter/counter_op.o src/counter/counter_rel.o src/counter/counter_engine.o \
              src/citus/citus_route.o src/citus/citus_placement.o src/citus/citus_shards.o \
              src/citus/citus_dedup.o \
              src/citus/citus_plan.o src/citus/citus_transfer.o src/citus/citus_alone.o \
              src/worker/worker.o \
              src/cuckoo/cuckoo.o src/cuckoo/cuckoobuild.o \
              src/cuckoo/cuckooinsert.o src/cuckoo/cuckooscan.o \
              src/cuckoo/cuckoovacuum.o src/cuckoo/cuckooutils.o \
              src/cuckoo/cuckoofuncs.o src/cuckoo/cuckooverify.o src/cuckoo/cuckoopost.o

DATA_built  = sql/$(EXTENSION)--$(EXTVERSION).sql
DATA        = sql/$(EXTENSION)--1.0.sql $(wildcard sql/$(EXTENSION)--*--*.sql)

# The regression tests' inputs are test/sql/NAME.sql, their outputs
# test/expected/NAME.out (pg_regress --inputdir=test; results/ and
# regression.diffs stay at the top, where PGXS puts and cleans them).
# test/expected/NAME_1.out: the output on PostgreSQL 18 where 18's own output
# differs from 15's: cuckoo (EXPLAIN prints "Disabled: true" under a
# disabled node), fbf_counter_errors (opening an index as a table is
# "cannot open relation"), fbf_edges (to_regclass returns NULL for a name
# of invalid syntax instead of raising), fbf_upgrade (an extension's array
# types and views' row types are members too).
REGRESS      = fbf_type fbf_type_errors fbf_type_fuzz fbf_type_forged fbf_counter fbf_counter_errors \
               fbf_counter_direct fbf_counter_batch fbf_dedup fbf_counter_load fbf_counter_mismatch \
               fbf_streams fbf_streams_snapshot fbf_prepared fbf_placement_read fbf_filters fbf_edges fbf_window_tables \
               cuckoo cuckoo_duplicates cuckoo_hash fbf_search_path fbf_upgrade
REGRESS_OPTS = --inputdir=test --load-extension=$(EXTENSION)

ISOLATION      = counter_duplicates counter_savepoints counter_maintenance \
                 counter_privileges cuckoo_privileges counter_direct counter_row_places counter_batch dedup_claims \
                 cuckoo_concurrency cuckoo_kill_vacuum cuckoo_kill_reuse \
                 cuckoo_stale_cache counter_prepared counter_batch_pages streams utility_lookups \
                 keying_cache counter_batch_hold
ISOLATION_OPTS = --inputdir=test/isolation --outputdir=test/isolation/output \
                 --load-extension=$(EXTENSION)

# Warnings are errors; PostgreSQL's own headers trip -Wunused-parameter and
# -Wmissing-field-initializers, and fmgr's V1 macros -Wmissing-prototypes.
PG_CFLAGS   = -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter \
              -Wno-missing-field-initializers
PG_CPPFLAGS = -I$(srcdir)/src -DFBF_EXTVERSION='"$(EXTVERSION)"'
SHLIB_LINK  = -lm

TAP_TESTS    = 1
PROVE_TESTS  = test/t/*.pl

EXTRA_CLEAN = results regression.diffs regression.out test/isolation/output

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# FbfTest.pm, the TAP tests' shared module, lives in test/perl: prove finds
# it there beside PostgreSQL::Test::Cluster (prove runs in $(srcdir); PROVE_FLAGS
# stays the user's).
PG_PROVE_FLAGS += -I test/perl

sql/$(EXTENSION)--$(EXTVERSION).sql: sql/$(EXTENSION).sql
	cp $< $@

# PGXS tracks no header dependencies: rebuild every object when any of our
# headers changes (layouts of pages and shared structs live in them).
$(OBJS): $(wildcard $(srcdir)/src/*.h $(srcdir)/src/*/*.h)

# The TAP tests alone; PGXS runs them only at the end of installcheck.
.PHONY: prove_installcheck
prove_installcheck:
	$(prove_installcheck)
