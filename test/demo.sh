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

fbf_log "a retry storm: 8 real clients whose requests are cut off (test/bench/retry_storm)"
make -s -C test/bench retry_storm
test/bench/retry_storm -d "host=$PGHOST port=$PGPORT dbname=$PGDATABASE user=$PGUSER" \
	-c 8 -n 1000 -p 0.1 -s 1
