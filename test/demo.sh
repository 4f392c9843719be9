#!/usr/bin/env bash
# test/demo.sh: set everything up on a fresh Debian 12 machine (as root) and
# show fbf at work.
#
#   bash test/demo.sh
#
# Installs the packages it needs, builds and installs fbf, starts a
# throwaway cluster (as the postgres OS user, fbf preloaded), runs the demo
# in psql, and stops the cluster, even if something fails.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
cd "$FBF_ROOT"

trap 'fbf_cluster_stop' EXIT

fbf_install_deps
fbf_build_install
fbf_cluster_start

fbf_log "running the demo (test/demo.sql)"
psql -X -q -v ON_ERROR_STOP=1 -f test/demo.sql
