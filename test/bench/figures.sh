#!/usr/bin/env bash
# test/bench/figures.sh: regenerate the figures of docs/figures from scratch.
#
#   bash test/bench/figures.sh
#
# Builds test/bench/paper_figures (the paper's experiments on the pure FBF
# core, simulated clock), writes its CSVs into docs/figures, and renders
# them to PNG with gnuplot (installed from Debian's packages if missing).
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v gnuplot >/dev/null; then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnuplot-nox >/dev/null
fi
make -s -C test/bench paper_figures
mkdir -p docs/figures
test/bench/paper_figures docs/figures
(cd docs/figures && gnuplot ../../test/bench/figures.gp)
ls docs/figures
