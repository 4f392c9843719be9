# src/core/sources.mk: the one list of the pure core's sources (C with no
# PostgreSQL includes).  Included by the extension's Makefile, by
# test/core/Makefile and by test/bench/Makefile, each of which sets
# FBF_CORE_DIR to this directory first.
#
#   FBF_CORE_SRCS      the Forgetful Bloom Filter: bit arrays, the keyed
#                      hash, the ring of filters, its codec, its planner
#                      (fbf_plan.c), the AIMD step (fbf_aimd.c) and the
#                      exact streams beside it (fbf_stream.c) and their
#                      section of a snapshot (fbf_stream_snap.c)
#   CUCKOO_CORE_SRCS   the cuckoo table of the cuckoo index access method
#   CWIN_CORE_SRCS     the cuckoo window: its page (cwin_block.c), its
#                      planner (cwin_plan.c), the in-memory window
#                      (cwin_window.c), and its snapshot value and codec
#                      (cwin_snap.c)
#   FBF_CORE_HDRS      every header of the core (for rebuild dependencies)

FBF_CORE_SRCS    = $(addprefix $(FBF_CORE_DIR)/,bloom_bits.c fbf_keyed_hash.c fbf_core.c fbf_codec.c fbf_plan.c fbf_aimd.c fbf_stream.c fbf_stream_snap.c)
CUCKOO_CORE_SRCS = $(addprefix $(FBF_CORE_DIR)/,cuckoo_table.c)
CWIN_CORE_SRCS   = $(addprefix $(FBF_CORE_DIR)/,cwin_block.c cwin_plan.c cwin_window.c cwin_snap.c)
FBF_CORE_HDRS    = $(wildcard $(FBF_CORE_DIR)/*.h)
