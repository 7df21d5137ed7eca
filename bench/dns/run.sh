#!/usr/bin/env bash
# bench/dns: authoritative DNS servers over UDP, one serving thread each, driven by dnsperf:
# NSD (server-count 1, response rate limiting off, minimal responses), Knot DNS (one UDP
# worker; rate limiting is a module, not loaded) when knotd runs here, and eddy-dns-server
# (--threads 1) when it is built. For each round, each server in turn (nsd knot eddy nsd knot
# eddy ...) is started on a free port pinned to one CPU, in a process group of its own, and
# dnsperf runs pinned to another CPU twice:
#
#   throughput  dnsperf -c CLIENTS -q OUTSTANDING -l SECONDS: queries per second, and the
#               server's CPU time per query (utime + stime of every process of its group,
#               from /proc, read just before and after dnsperf: NSD serves from a child)
#   latency     dnsperf -Q RATE -v -l SECONDS at a fixed rate below every server's limit:
#               p50, p99 and p99.9 from the time of each answer that -v prints (dnsperf
#               itself reports only the average and deviation; at saturation those are
#               queueing in front of the server, not its latency)
#
# then the server is stopped. The table gives medians, min-max, each server / NSD (queries
# per second, queries per server CPU-second, p99), eddy's targets (>= 1.0x NSD's queries per
# server CPU-second, p99 <= 1.1x NSD's), one {"bench":"dns",...} line per comparison, and
# each server's response codes and response size, with a warning where they differ from
# NSD's (a server that answers less would look faster).
#
#   bash bench/dns/run.sh BUILD_DIR [--rounds N] [--seconds S] [--clients N]
#                         [--outstanding N] [--rate QPS] [--latency-seconds S] [--cpu N]
#                         [--client-cpu N] [--no-pin] [--servers LIST] [--zone FILE]
#                         [--no-costs]
#
# The zone: --zone FILE, else examples/zones/example.zone when the tree has it, else
# bench/dns/example.test.zone; its origin is its $ORIGIN line. The query file is made from the
# zone as NSD serves it (AXFR): every name and type in it once, plus one name that does not
# exist (NXDOMAIN) for every four. Defaults: 5 rounds, 5 s of throughput (-c 8 -q 100) and
# 3 s of latency at 20000 queries/s per server and round, servers nsd,knot,eddy, server on
# CPU 0, dnsperf on CPU 1 (--no-pin: no taskset). Needs dnsperf, nsd, knot and dig
# (scripts/deps.sh --bench). Other --options (bench/run.sh passes its arguments to every
# benchmark) are ignored with a word.
set -euo pipefail
# shellcheck source=bench/support/proc.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/proc.sh" # parse_options, stop_server...

[[ $# -ge 1 ]] || usage
build_dir=$1
shift
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
rounds=5 seconds=5 clients=8 outstanding=100 rate=20000 lat_seconds=3 cpu=0 client_cpu=1
servers=nsd,knot,eddy zone='' costs=1 pin=1
parse_options bench/dns/run.sh "no-pin no-costs rounds seconds clients outstanding rate \
    latency-seconds=lat_seconds cpu client-cpu servers zone others" "$@"
[[ $rounds =~ ^[0-9]+$ && $rounds -ge 1 && $rounds -le 101 ]] || usage

for tool in dnsperf nsd dig; do
    if ! command -v "$tool" >/dev/null && [[ ! -x /usr/sbin/$tool ]]; then
        echo "bench/dns/run.sh: $tool is missing (bash scripts/deps.sh --bench installs it)" >&2
        exit 1
    fi
done
PATH=$PATH:/usr/sbin # nsd and knotd live there; a user's PATH may not have it

if [[ -z $zone ]]; then
    zone=$root/bench/dns/example.test.zone
    if [[ -f $root/examples/zones/example.zone ]]; then
        zone=$root/examples/zones/example.zone
    fi
fi
# shellcheck disable=SC2016 # the $ is the zone file's
origin=$(sed -n 's/^\$ORIGIN[[:space:]]\{1,\}\([^[:space:];]*\).*/\1/p' "$zone" | head -1)
if [[ -z $origin ]]; then
    echo "bench/dns/run.sh: $zone has no \$ORIGIN line" >&2
    exit 1
fi
origin=${origin%.}. # absolute

scratch_dir
trap 'exit 130' INT TERM
# Each server leads a process group of its own (start_server), which stop_server stops whole:
# NSD forks.
server_group=1

# The configuration of server $1 on port $2 in $tmp/$1, and the command that runs it (in cmd).
configure() {
    local name=$1 p=$2 dir=$tmp/$1
    rm -rf "$dir"
    mkdir -p "$dir"
    cp "$zone" "$dir/zone"
    case $name in
    nsd)
        # One server process (server-count), no rate limiting (NSD limits responses per
        # source by default: the benchmark would measure the limiter), minimal responses (by
        # default NSD adds the zone's NS records and their addresses to every answer, which
        # Knot and eddy do not: twice the bytes per response here), no control socket, no
        # database, everything under $dir; AXFR to 127.0.0.1 for the query file.
        cat >"$dir/nsd.conf" <<EOF
server:
    server-count: 1
    ip-address: 127.0.0.1
    port: $p
    do-ip6: no
    username: ""
    chroot: ""
    zonesdir: "$dir"
    database: ""
    pidfile: "$dir/nsd.pid"
    xfrdfile: "$dir/xfrd.state"
    zonelistfile: "$dir/zone.list"
    xfrdir: "$dir"
    logfile: "$dir/nsd.log"
    verbosity: 0
    rrl-ratelimit: 0
    rrl-whitelist-ratelimit: 0
    minimal-responses: yes
remote-control:
    control-enable: no
zone:
    name: $origin
    zonefile: "$dir/zone"
    provide-xfr: 127.0.0.1 NOKEY
EOF
        cmd=(nsd -d -c "$dir/nsd.conf")
        ;;
    knot)
        # One UDP worker, one TCP worker, one background worker; Knot limits rates only with
        # mod-rrl, which is not loaded. Its control socket and databases stay under $dir.
        cat >"$dir/knot.conf" <<EOF
server:
    listen: 127.0.0.1@$p
    rundir: "$dir"
    pidfile: "$dir/knot.pid"
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: warning
database:
    storage: "$dir"
template:
  - id: default
    storage: "$dir"
zone:
  - domain: $origin
    file: "$dir/zone"
EOF
        cmd=(knotd -c "$dir/knot.conf")
        ;;
    eddy)
        cmd=("$eddy" --zone "$dir/zone" --host 127.0.0.1 --port "$p" --threads 1)
        ;;
    esac
}

# Starts server $1 on a free port, pinned, in a process group of its own (setsid: the
# background job is no group leader, so setsid execs in place and $! leads the group); sets
# server_pid and port once it answers for the zone's SOA.
start_server() {
    local name=$1 log=$tmp/server.log
    port=$(free_port bench/dns/run.sh)
    configure "$name" "$port"
    : >"$log"
    setsid "${pin_server[@]}" "${cmd[@]}" >"$log" 2>&1 </dev/null &
    server_pid=$!
    for _ in $(seq 200); do
        if [[ -n $(dig +short +time=1 +tries=1 -p "$port" @127.0.0.1 "$origin" SOA 2>/dev/null) ]]
        then
            return 0
        fi
        if ! kill -0 "$server_pid" 2>/dev/null; then
            break
        fi
        sleep 0.05
    done
    echo "bench/dns/run.sh: $name did not start:" >&2
    cat "$log" "$tmp/$name/nsd.log" >&2 2>/dev/null || true
    exit 1
}

pin_setup dnsperf

# The servers that run here, in the order asked.
eddy=$build_dir/examples/eddy-dns-server
subjects=()
for s in ${servers//,/ }; do
    case $s in
    nsd) subjects+=(nsd) ;;
    knot)
        if command -v knotd >/dev/null; then
            subjects+=(knot)
        else
            echo "bench/dns/run.sh: knotd is missing (bash scripts/deps.sh --bench); knot" \
                "left out" >&2
        fi
        ;;
    eddy)
        if [[ -x $eddy ]]; then
            subjects+=(eddy)
        else
            echo "bench/dns/run.sh: $eddy is not built (no eddy DNS server in this tree" \
                "yet?); eddy left out, NSD and Knot measured alone" >&2
        fi
        ;;
    *)
        echo "bench/dns/run.sh: unknown server $s (nsd, knot, eddy)" >&2
        exit 2
        ;;
    esac
done
if [[ ${subjects[0]:-} != nsd ]]; then
    echo "bench/dns/run.sh: every ratio is against nsd: --servers must start with it" >&2
    exit 2
fi

# The query file, from the zone as NSD loaded it: each (name, type) once, DNSSEC types
# aside, and an NXDOMAIN name after every fourth line.
start_server nsd
dig +onesoa +nocmd +nostats +nocomments -p "$port" @127.0.0.1 "$origin" AXFR >"$tmp/axfr.txt"
stop_server
awk '$1 !~ /^;/ && NF >= 5 && $4 !~ /^(RRSIG|NSEC|NSEC3|NSEC3PARAM|DNSKEY|DS|CDS|CDNSKEY)$/ {
        key = $1 " " $4
        if (key in seen)
            next
        seen[key] = 1
        print key
        if (++n % 4 == 0)
            printf "nx-%d.%s A\n", n, origin
    }' origin="$origin" "$tmp/axfr.txt" >"$tmp/queries.txt"
nq=$(wc -l <"$tmp/queries.txt")
if ((nq < 2)); then
    echo "bench/dns/run.sh: no records came back from NSD's AXFR of $origin" >&2
    exit 1
fi

echo "bench dns: authoritative servers on one serving thread each, over UDP:" \
    "$(nsd -v 2>&1 | head -1)$(command -v knotd >/dev/null && echo ", $(knotd -V | head -1)")"
echo "zone: ${zone#"$root"/} ($origin, $(grep -c . "$tmp/axfr.txt") records); queries: $nq" \
    "lines, every name and type once, 1 in 5 NXDOMAIN"
echo "cpu: $(cpu_model); $where; load average $(load_average) at start"
echo "$rounds rounds, servers alternating: ${subjects[*]}; throughput: dnsperf -c $clients" \
    "-q $outstanding -l $seconds; latency: dnsperf -Q $rate -l $lat_seconds -v"
if ((costs)); then
    machine_costs dns "$build_dir" "$cpu" "$client_cpu"
fi

# dnsperf's "  Label:   value ..." line: the value.
dnsperf_value() {
    sed -n "s/^ *$2: *\([0-9.]*\).*/\1/p" <<<"$1" | head -1
}

: >"$tmp/rounds.txt"
# One round (its number $2) of server $3 (the case, $1, is udp alone): started, dnsperf's two
# passes, stopped; a line of $tmp/rounds.txt.
run_round() {
    local r=$2 s=$3 t0 t1 out done_q qps lost avg codes rsize pcts
    start_server "$s"
    t0=$(group_cpu_ticks "$server_pid")
    if ! out=$("${pin_client[@]}" dnsperf -s 127.0.0.1 -p "$port" -d "$tmp/queries.txt" \
        -c "$clients" -q "$outstanding" -l "$seconds" -t 1 2>&1); then
        echo "bench/dns/run.sh: dnsperf failed against $s: $out" >&2
        exit 1
    fi
    t1=$(group_cpu_ticks "$server_pid")
    done_q=$(dnsperf_value "$out" "Queries completed")
    qps=$(dnsperf_value "$out" "Queries per second")
    lost=$(dnsperf_value "$out" "Queries lost")
    avg=$(dnsperf_value "$out" "Average Latency (s)")
    # What the answers were: the response codes' shares and the average response size,
    # so that a server answering less (errors, smaller answers) shows.
    codes=$(sed -n 's/^ *Response codes: *//p' <<<"$out" | tr -d ' ' | tr ',' ' ')
    rsize=$(sed -n 's/^ *Average packet size:.*response \([0-9]*\).*/\1/p' <<<"$out")
    # The fixed-rate pass: one "> RCODE name type seconds" line per answer.
    if ! "${pin_client[@]}" dnsperf -s 127.0.0.1 -p "$port" -d "$tmp/queries.txt" \
        -Q "$rate" -l "$lat_seconds" -t 1 -v >"$tmp/latency.txt" 2>&1; then
        echo "bench/dns/run.sh: dnsperf -Q $rate failed against $s" >&2
        cat "$tmp/latency.txt" >&2
        exit 1
    fi
    pcts=$(awk '/^> [A-Z]+ / { print $NF * 1e6 }' "$tmp/latency.txt" | sort -n |
        awk '{ v[NR] = $1 } END {
            if (NR == 0) { print "0 0 0 0"; exit }
            printf "%.1f %.1f %.1f %d\n", v[int(NR * 0.5) + 1], v[int(NR * 0.99) + 1],
                v[int(NR * 0.999) + 1], NR }')
    stop_server
    # server round qps cpu_ns_per_query cpu_util avg_us lost p50 p99 p999 samples
    # response_bytes codes (NOERROR12(75.00%) NXDOMAIN4(25.00%) ...)
    awk -v s="$s" -v r="$r" -v qps="$qps" -v n="$done_q" -v ticks=$((t1 - t0)) \
        -v hz="$hz" -v secs="$seconds" -v avg="$avg" -v lost="$lost" -v p="$pcts" \
        -v rsize="${rsize:-0}" -v codes="$codes" \
        'BEGIN { printf "%s %d %.0f %.1f %.3f %.1f %d %s %d %s\n", s, r, qps,
            (n > 0 ? ticks * 1e9 / hz / n : 0), ticks / hz / secs, avg * 1e6, lost, p,
            rsize, codes }' >>"$tmp/rounds.txt"
}
rounds_loop udp run_round

# Medians (the middle value; the mean of the two middle ones when even), min-max, ratios to
# NSD, JSON.
awk -v rounds="$rounds" -v rate="$rate" '
function sortv(list, a,    k, i, j, t) {
    k = split(list, a, " ")
    for (i = 2; i <= k; i++) {
        t = a[i]
        for (j = i - 1; j >= 1 && a[j] > t; j--)
            a[j + 1] = a[j]
        a[j + 1] = t
    }
    return k
}
function med(s, f,    a, k) {
    k = sortv(v[s, f], a)
    lo = a[1]
    hi = a[k]
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
{
    if (!($1 in seen)) {
        seen[$1] = 1
        order[++ns] = $1
    }
    for (f = 3; f <= 12; f++)
        v[$1, f] = v[$1, f] " " $f
    mix = ""
    for (f = 13; f <= NF; f++) {
        code = $f
        sub(/[0-9]+\(/, " ", code)
        sub(/\)$/, "", code)
        mix = mix (f > 13 ? ", " : "") code
    }
    codes[$1] = mix
}
END {
    printf "\n%-6s %-28s %-26s %8s %9s %6s %8s %8s %9s\n", "server",
        "queries/s median (min-max)", "server CPU ns/query (min-max)", "CPU use", "avg us",
        "lost", "p50 us", "p99 us", "p99.9 us"
    for (i = 1; i <= ns; i++) {
        s = order[i]
        q[s] = med(s, 3); qr = sprintf("%.0f (%.0f-%.0f)", q[s], lo, hi)
        c[s] = med(s, 4); cr = sprintf("%.0f (%.0f-%.0f)", c[s], lo, hi)
        u[s] = med(s, 5); a[s] = med(s, 6); l[s] = med(s, 7)
        p50[s] = med(s, 8); p99[s] = med(s, 9); p999[s] = med(s, 10)
        printf "%-6s %-28s %-29s %5.2f %9.1f %6d %8.1f %8.1f %9.1f\n", s, qr, cr, u[s], a[s],
            l[s], p50[s], p99[s], p999[s]
    }
    printf "(CPU use: the server'\''s CPU-seconds per second of the throughput pass, near 1.00" \
        " when it set the rate; avg: dnsperf'\''s average at saturation; p50-p99.9: at %d" \
        " queries/s)\n", rate
    printf "answers (the last round'\''s):\n"
    for (i = 1; i <= ns; i++) {
        s = order[i]
        b[s] = med(s, 12)
        printf "  %-6s %s; %d bytes per response on average\n", s, codes[s], b[s]
        if (i > 1 && (codes[s] != codes["nsd"] || b[s] < 0.9 * b["nsd"] || b[s] > 1.1 * b["nsd"]))
            printf "  WARNING: %s does not answer as nsd does (codes or sizes): compare them" \
                " with dig before reading its ratios\n", s
    }
    for (i = 2; i <= ns; i++) {
        s = order[i]
        ratio = q[s] / q["nsd"]; per_cpu = c["nsd"] / c[s]; pr = p99[s] / p99["nsd"]
        target = ""
        if (s == "eddy") {
            met = per_cpu >= 1.0 && pr <= 1.1
            target = sprintf("   targets queries per CPU-second >= 1.0x, p99 <= 1.1x: %s",
                met ? "met" : "NOT met")
        }
        printf "%s / nsd: queries/s %.3fx, queries per server CPU-second %.3fx, p99 %.2fx%s\n",
            s, ratio, per_cpu, pr, target
        json[i] = sprintf("{\"bench\":\"dns\",\"case\":\"udp\",\"subject\":\"%s\"," \
            "\"baseline\":\"nsd\",\"ops_per_s\":%.0f,\"baseline_ops_per_s\":%.0f," \
            "\"ratio\":%.4f,\"cpu_ns_per_query\":%.1f,\"baseline_cpu_ns_per_query\":%.1f," \
            "\"queries_per_cpu_s_ratio\":%.4f,\"p50_us\":%.1f,\"p99_us\":%.1f," \
            "\"p999_us\":%.1f,\"baseline_p50_us\":%.1f,\"baseline_p99_us\":%.1f," \
            "\"baseline_p999_us\":%.1f,\"p99_ratio\":%.4f,\"latency_qps\":%d,\"rounds\":%d",
            s, q[s], q["nsd"], ratio, c[s], c["nsd"], per_cpu, p50[s], p99[s], p999[s],
            p50["nsd"], p99["nsd"], p999["nsd"], pr, rate, rounds)
        if (s == "eddy")
            json[i] = json[i] sprintf(",\"target\":\"queries per server CPU-second >= " \
                "1.0x, p99 <= 1.1x\",\"target_met\":%s", met ? "true" : "false")
        json[i] = json[i] "}"
    }
    if (ns == 1)
        json[1] = sprintf("{\"bench\":\"dns\",\"case\":\"udp\",\"subject\":\"nsd\"," \
            "\"baseline\":\"\",\"ops_per_s\":%.0f,\"cpu_ns_per_query\":%.1f,\"p50_us\":%.1f," \
            "\"p99_us\":%.1f,\"p999_us\":%.1f,\"latency_qps\":%d,\"rounds\":%d}", q["nsd"],
            c["nsd"], p50["nsd"], p99["nsd"], p999["nsd"], rate, rounds)
    for (i = 1; i <= ns; i++)
        if (i in json)
            print json[i]
}' "$tmp/rounds.txt"
echo "load average $(load_average) at the end"
