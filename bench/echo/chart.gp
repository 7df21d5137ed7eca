# bench/echo's chart: gnuplot -e "datafile='F'; outfile='bench/echo.png'; panels=3" chart.gp
# (panels=2 when the run had no idle_rss case).
# datafile comes from echo_report --chart-data: three blocks (index 0, 1, 2) with a row per
# case and a column per server: messages per second relative to epoll_raw, server CPU per
# message relative to epoll_raw, resident bytes per idle connection.
set terminal pngcairo size (panels == 3 ? 1500 : 1000),520 font "sans,10" noenhanced
set output outfile
set datafile missing "-"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set key top left Left reverse noautotitle
set xtics nomirror
set multiplot layout 1,panels title "bench/echo: echo servers on one CPU, load generator on the other (medians)"
ncols = system("head -1 '".datafile."' | wc -w") + 0

set title "messages per second (churn: connections) / raw epoll  (higher is better)"
set yrange [0:*]
plot for [i=2:ncols] datafile index 0 using i:xtic(1) title columnheader(i)

set title "server CPU time per message / raw epoll  (lower is better)"
plot for [i=2:ncols] datafile index 1 using i:xtic(1) title columnheader(i)

if (panels == 3) {
    set title "resident bytes per idle connection (10,000 open)  (lower is better)"
    set logscale y
    set yrange [100:*]
    plot for [i=2:ncols] datafile index 2 using i:xtic(1) title columnheader(i)
}
unset multiplot
