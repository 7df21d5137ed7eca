#!/usr/bin/env bash
# bench/compare_builds.sh BASE_BUILD NEW_BUILD [--rounds N]: eddy against itself, two builds
# of it (say, before and after a change) in the same run: echo (64x16x64, 1x1x64; epoll_raw
# beside it), HTTP (wrk -c64; nginx beside it) and WebSocket echo (64 B; Netty beside it,
# when installed). Round by round the builds alternate (base new, then new base, ...), each
# case pinned as its own driver pins it (bench/echo, bench/http, bench/ws run.sh, one round
# each). Prints, per case and round, eddy's rate and server CPU per operation in each build
# and new / base, then the medians of the per-round ratios, and one
# {"bench":"compare",...} JSON line per case. Default 5 rounds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
base=$1
new=$2
shift 2
rounds=5
if [[ ${1:-} == --rounds ]]; then
    rounds=$2
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# one TREE LABEL ROUND: the three drivers against TREE; their JSON lines to $out.
one() {
    local tree=$1 label=$2 round=$3 f=$out/$2.$3.json
    bash "$here/echo/run.sh" "$tree" --rounds 1 --seconds 2 --warmup 0.5 \
        --cases 64x16x64,1x1x64 --servers eddy,epoll_raw --chart "$out/echo.png" 2>&1 | grep '^{"bench"' >>"$f" || true
    bash "$here/http/run.sh" "$tree" --rounds 1 --seconds 3 --warmup 1 \
        --servers eddy,nginx 2>&1 | grep '^{"bench"' >>"$f" || true
    bash "$here/ws/run.sh" "$tree" --rounds 1 --seconds 2 --warmup 0.5 --java-warmup 2 \
        --cases 64 --servers eddy,netty --no-costs 2>&1 | grep '^{"bench"' >>"$f" || true
}

echo "compare_builds: base $base, new $new, $rounds rounds, alternating"
# The machine's costs (bench/reactor measures them), beside the table.
"$new/bench/reactor/bench_reactor" --case tasks_1p --rounds 1 --ops 10k --subject eddy 2>&1 |
    sed -n '/^machine costs/,/^{"bench":"machine"/p' || true
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
    if ((r % 2)); then
        one "$base" base "$r"
        one "$new" new "$r"
    else
        one "$new" new "$r"
        one "$base" base "$r"
    fi
    echo "round $r done"
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def load(label, r):
    rows = {}
    try:
        for line in open(f"{out}/{label}.{r}.json"):
            d = json.loads(line)
            if d.get("subject") != "eddy":
                continue
            rate = d.get("ops_per_s", d.get("msgs_per_s"))
            cpu = d.get("cpu_ns_per_msg", d.get("cpu_ns_per_req"))
            rows[f'{d["bench"]}/{d["case"]}'] = (rate, cpu)
    except FileNotFoundError:
        pass
    return rows
cases = {}
for r in range(1, rounds + 1):
    b, n = load("base", r), load("new", r)
    for c in b.keys() & n.keys():
        cases.setdefault(c, []).append((b[c], n[c]))
print("| case | round | base rate | new rate | new/base rate | base CPU/op | new CPU/op | new/base CPU/op |")
print("|---|---|---|---|---|---|---|---|")
summary = []
for c in sorted(cases):
    rr, cr = [], []
    for i, ((br, bc), (nr, nc)) in enumerate(cases[c], 1):
        rr.append(nr / br); cr.append(nc / bc)
        print(f"| {c} | {i} | {br:,.0f} | {nr:,.0f} | {nr/br:.3f}x | {bc:,.0f} ns | {nc:,.0f} ns | {nc/bc:.3f}x |")
    summary.append((c, statistics.median(rr), statistics.median(cr), len(rr)))
print()
print("| case | median new/base rate | median new/base CPU per op | rounds |")
print("|---|---|---|---|")
for c, r, cpu, n in summary:
    print(f"| {c} | {r:.3f}x | {cpu:.3f}x | {n} |")
for c, r, cpu, n in summary:
    print(json.dumps({"bench": "compare", "case": c, "rate_ratio": round(r, 4),
                      "cpu_ratio": round(cpu, 4), "rounds": n}))
PY
