#!/usr/bin/env python3
"""Simulate the false-positive rate of one Bloom filter under fbf's probes.

fbf_probes (src/core/fbf_hash.h) takes position i of an element as
floor((h1 + i*h2 mod 2^64) * m / 2^64).  When h2 is within 2^64/m of 0
(mod 2^64) the k probes fall on one or two adjacent bits, so small filters
(the per-page filters of a window planned for a low rate) see more false
positives than the formula (1 - e^(-kn/m))^k that the estimate uses.  This
prints, for a few (m, k, n), the simulated rate with those probes and with a
hash remixed per probe (a 64-bit finalizer of h1 + i*h2), beside the
formula.  Random h1, h2 stand for the hash of distinct elements.

    python3 test/bench/probe_sim.py [trials]
"""
import math
import random
import sys

M64 = 1 << 64


def probes_fbf(h1, h2, k, m):
    g, out = h1, []
    for _ in range(k):
        out.append((g * m) >> 64)
        g = (g + h2) % M64
    return out


def probes_remixed(h1, h2, k, m):
    out = []
    for i in range(k):
        x = (h1 + i * h2) % M64
        x ^= x >> 33
        x = (x * 0xff51afd7ed558ccd) % M64
        x ^= x >> 33
        x = (x * 0xc4ceb9fe1a85ec53) % M64
        x ^= x >> 33
        out.append((x * m) >> 64)
    return out


def rate(probes, m, k, n, filters, lookups):
    hits = 0
    for _ in range(filters):
        bits = set()
        for _ in range(n):
            bits.update(probes(random.getrandbits(64), random.getrandbits(64), k, m))
        for _ in range(lookups):
            p = probes(random.getrandbits(64), random.getrandbits(64), k, m)
            hits += all(b in bits for b in p)
    return hits / (filters * lookups)


def main():
    filters = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    random.seed(1)
    print("m k n formula fbf_probes remixed")
    for m, k, n in [(64, 4, 1), (64, 4, 2), (256, 4, 9), (1024, 4, 36), (4096, 4, 144)]:
        formula = (1 - math.exp(-k * n / m)) ** k
        a = rate(probes_fbf, m, k, n, filters, 500)
        b = rate(probes_remixed, m, k, n, filters, 500)
        print(f"{m} {k} {n} {formula:.2e} {a:.2e} ({a / formula:.1f}x) {b:.2e} ({b / formula:.1f}x)")


if __name__ == "__main__":
    main()
