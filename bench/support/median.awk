# The median of the numbers in list (separated by spaces), for the bench drivers' summaries:
# awk -f bench/support/median.awk -f <(their program) ...
function median(list,    a, i, j, t, m) {
    m = split(list, a, " ")
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] + 0 < a[i] + 0) {
        t = a[i]; a[i] = a[j]; a[j] = t }
    return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
