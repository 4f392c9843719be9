# test/bench/figures.gp: PNGs from the CSVs of paper_figures (run from
# docs/figures by test/bench/figures.sh).
set terminal pngcairo size 800,500 font "sans,10"
set datafile separator ","
set key top left
set grid

set output "check_fpp.png"
set title "Membership checks: basic FBF, m = 6250, k = 5, t = 5 s, 50 elements/s"
set xlabel "elements inserted"
set ylabel "false-positive rate (200,000 non-members)"
plot "check_fpp.csv" using 1:2 skip 1 with linespoints title "simple", \
     "" using 1:3 skip 1 with linespoints title "optimized (paper, Algorithm 2)", \
     "" using 1:4 skip 1 with lines dashtype 2 lw 2 title "paired (future AND present): identical"

set output "estimate_elems.png"
set title "Estimate against measurement, optimized check (same run)"
plot "estimate_elems.csv" using 1:2 skip 1 with points pt 7 title "measured", \
     "" using 1:3 skip 1 with lines lw 2 title "estimate, shared-epoch model (fbf)", \
     "" using 1:4 skip 1 with lines dashtype 2 title "estimate, independent pairs (paper)"

set output "estimate_m.png"
set title "Estimate against measurement: 300 elements, k = 5, three periods"
set xlabel "m (bits per filter)"
set logscale y
plot "estimate_m.csv" using 1:2 skip 1 with points pt 7 title "measured", \
     "" using 1:3 skip 1 with lines lw 2 title "estimate, shared-epoch model", \
     "" using 1:4 skip 1 with lines dashtype 2 title "estimate, independent pairs"
unset logscale y

set output "refresh_knob.png"
set title "Refresh period: m = 25000, k = 5, 3 filters, 5000 elements, exponential ramp"
set xlabel "arrival rate (elements/s)"
set ylabel "false-positive rate"
set logscale xy
plot for [p in "5 3 2 1"] "refresh_knob.csv" using ($1 == p ? $2 : 1/0):3 skip 1 with linespoints title "t = ".p." s"

set output "filters_knob.png"
set title "Number of filters: t = 5 s, m = 6250, k = 5, 3000 elements, linear ramp"
plot for [n in "3 6 12 24"] "filters_knob.csv" using ($1 == n ? $2 : 1/0):3 skip 1 with linespoints title n." filters"
unset logscale xy

set output "aimd.png"
set title "AIMD: 3 filters, m = 6250, k = 5, t = 11 s at start, retention 22 s, rising then falling load"
set xlabel "second"
set ylabel "false-positive rate"
set y2label "filters, t (s), rate / 10"
set y2tics
set ytics nomirror
set key top right
plot "aimd.csv" using 1:6 skip 1 axes x1y1 with lines lw 2 title "measured FPP", \
     "" using 1:5 skip 1 axes x1y1 with lines dashtype 2 title "estimate", \
     "" using 1:7 skip 1 axes x1y1 with lines lc rgb "red" title "target", \
     "" using 1:3 skip 1 axes x1y2 with steps title "filters", \
     "" using 1:4 skip 1 axes x1y2 with steps title "t (s)", \
     "" using 1:($2/10) skip 1 axes x1y2 with lines lc rgb "gray" title "rate / 10"
unset y2tics
unset y2label
set ytics mirror

set output "retries.png"
set title "Counting with retries: 20,000 operations, retries 1-5 s later (at most 5)"
set xlabel "retry probability"
set ylabel "counter error (counted - operations) / operations"
set key top left
plot "retries.csv" using 1:2 skip 1 with linespoints title "plain counter", \
     "" using 1:3 skip 1 with linespoints title "FBF counter (retention 30 s, 1%)", \
     "" using 1:4 skip 1 with linespoints title "recyclable Bloom filter, same memory", \
     "" using 1:5 skip 1 with linespoints title "cuckoo window, same memory"

set output "bits.png"
set title "Bits per element of the window at a given false-positive rate"
set xlabel "target false-positive rate"
set ylabel "bits per window element"
set logscale x
set xrange [0.00005:0.02]
set key top right
plot "bits.csv" using 1:2 skip 1 with linespoints lw 2 title "FBF (planned, measured FPP within 25%)", \
     "" using 1:4 skip 1 with linespoints title "one ideal Bloom filter holding exactly the window", \
     "" using 1:($5 > 0 ? $5 : 1/0) skip 1 with points pt 5 ps 1.5 title "Age-Partitioned Bloom Filter (published)", \
     "" using 1:6 skip 1 with linespoints lw 2 title "cuckoo window (planned, 8 kB pages)"
