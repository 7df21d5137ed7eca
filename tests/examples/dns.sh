#!/usr/bin/env bash
# eddy-dns-server against resolvers' tools nobody here wrote: dig (BIND 9) and kdig (Knot,
# its RFC 8427 JSON), each over UDP and TCP, for every record type of examples/zones/
# example.zone, CNAME chains (in the zone, leaving it, dangling, a loop, one too long),
# NXDOMAIN and NODATA with the SOA in authority, names outside the zone (REFUSED), a name
# whose answer does not fit 512 bytes (TC without EDNS, then the clients' own TCP retry; whole
# over UDP with EDNS), EDNS (version 1: BADVERS; the DO bit), a non-QUERY opcode and AXFR
# (NOTIMP), a class other than IN (REFUSED), 0x20 case, several queries on one TCP
# connection, and TCP's idle timeout. Answers are compared whole: opcode, status, flags,
# section counts, the OPT record, the question, and each record's section, owner, TTL,
# class, type and data. SIGTERM must stop the server, exit 0 and say so.
#   tests/examples/dns.sh SERVER [ZONE]
set -euo pipefail
server=$1
zone=${2:-$(dirname "$0")/../../examples/zones/example.zone}
for tool in dig kdig python3; do
    if ! command -v "$tool" >/dev/null; then
        echo "dns.sh: $tool is missing (scripts/deps.sh installs bind9-dnsutils, knot-dnsutils)"
        exit 1
    fi
done
log=$(mktemp)
pid=
idle_pid=
norm_pid=
cleanup() {
    for p in $pid $idle_pid $norm_pid; do
        kill -9 "$p" 2>/dev/null || true
    done
    rm -f "$log" "$log.idle" "$log.out" "$log.req" "$log.reply"
}
trap cleanup EXIT
source "$(dirname "$0")/lib.sh"
"$server" --zone "$zone" --port 0 --threads 2 >"$log" 2>&1 &
pid=$!
port=$(port_of "$log" "udp+tcp")
[[ -n "$port" ]] || {
    echo "no port in: $(cat "$log")"
    exit 1
}
grep -q "serving example.test. (74 records) on 127.0.0.1:$port udp+tcp" "$log" || {
    echo "unexpected first line: $(cat "$log")"
    exit 1
}
fail() {
    echo "FAIL: $*"
    cat "$log"
    exit 1
}

# Both clients' answers in one form, a line each (tests/examples/dns_norm.py says which),
# by one Python process for the whole test: a request FIFO in, a reply FIFO out.
mkfifo "$log.req" "$log.reply"
python3 "$(dirname "$0")/dns_norm.py" "$log.req" "$log.reply" &
norm_pid=$!
norm() {
    { echo "$1"; cat; } >"$log.req"
    local out
    out=$(cat "$log.reply")
    [[ $out != error:* ]] || { echo "$out"; return 1; }
    [[ -z $out ]] || echo "$out"
}
norm_dig() { norm dig; }
norm_kdig() { norm kdig; }
dig_q() {
    timeout 10 dig @127.0.0.1 -p "$port" +time=3 +tries=1 +noall +comments +question +answer \
        +authority +additional "$@" 2>&1
}
kdig_q() {
    timeout 10 kdig @127.0.0.1 -p "$port" +time=3 +retry=0 +json "$@" 2>"$log.out"
}
# expect WANT ARGS...: dig and kdig (with EDNS, as dig sends it), each over UDP and over
# TCP, asked ARGS, all answer WANT (lines, as norm_* write them).
expect() {
    local want=$1 got client
    shift
    for client in dig "dig +tcp" "kdig +edns" "kdig +edns +tcp"; do
        if [[ $client == dig* ]]; then
            got=$(dig_q ${client#dig} "$@" | norm_dig) || fail "$client $*: $got"
        else
            got=$(kdig_q ${client#kdig} "$@" | norm_kdig) || fail "$client $*: $(cat "$log.out")"
        fi
        [[ "$got" == "$want" ]] || fail "$client $*: got
$got
expected
$want"
    done
}

soa_data="SOA ns1.example.test. hostmaster.example.test. 2024010101 7200 3600 1209600 300"
soa="example.test. 300 IN $soa_data"  # in authority: the negative TTL (its minimum)
apex_soa="example.test. 3600 IN $soa_data"
edns="edns 0 [] 1232"

# Each type: the RRset, authoritative; NS and MX with the glue the zone has (none for
# mail.example.net); ns2's own TTL.
expect "QUERY NOERROR [qr aa rd] 1 1 0 1
$edns
question example.test. IN SOA
an $apex_soa" example.test SOA
expect "QUERY NOERROR [qr aa rd] 1 2 0 4
$edns
question example.test. IN NS
an example.test. 3600 IN NS ns1.example.test.
an example.test. 3600 IN NS ns2.example.test.
ar ns1.example.test. 3600 IN A 192.0.2.53
ar ns1.example.test. 3600 IN AAAA 2001:db8::53
ar ns2.example.test. 600 IN A 192.0.2.54" example.test NS
expect "QUERY NOERROR [qr aa rd] 1 1 0 1
$edns
question ns2.example.test. IN A
an ns2.example.test. 600 IN A 192.0.2.54" ns2.example.test A
expect "QUERY NOERROR [qr aa rd] 1 1 0 1
$edns
question host.example.test. IN AAAA
an host.example.test. 3600 IN AAAA 2001:db8::80" host.example.test AAAA
expect "QUERY NOERROR [qr aa rd] 1 2 0 3
$edns
question example.test. IN MX
an example.test. 3600 IN MX 10 mail.example.test.
an example.test. 3600 IN MX 20 mail.example.net.
ar mail.example.test. 3600 IN A 192.0.2.25
ar mail.example.test. 3600 IN AAAA 2001:db8::25" example.test MX
expect "QUERY NOERROR [qr aa rd] 1 2 0 1
$edns
question txt.example.test. IN TXT
an txt.example.test. 3600 IN TXT \"first string\" \"second \\\"quoted\\\" string\" \
\"back\\\\slash\" \"ABC\"
an txt.example.test. 3600 IN TXT \"unquoted\"" txt.example.test TXT
expect "QUERY NOERROR [qr aa rd] 1 1 0 1
$edns
question example.test. IN TXT
an example.test. 3600 IN TXT \"v=spf1 mx -all\"" example.test TXT
# ANY: every record at the name, and the glue of its NS and MX targets.
expect "QUERY NOERROR [qr aa rd] 1 8 0 6
$edns
question example.test. IN ANY
an example.test. 3600 IN A 192.0.2.1
an example.test. 3600 IN NS ns1.example.test.
an example.test. 3600 IN NS ns2.example.test.
an $apex_soa
an example.test. 3600 IN MX 10 mail.example.test.
an example.test. 3600 IN MX 20 mail.example.net.
an example.test. 3600 IN TXT \"v=spf1 mx -all\"
an example.test. 3600 IN AAAA 2001:db8::1
ar ns1.example.test. 3600 IN A 192.0.2.53
ar ns1.example.test. 3600 IN AAAA 2001:db8::53
ar ns2.example.test. 600 IN A 192.0.2.54
ar mail.example.test. 3600 IN A 192.0.2.25
ar mail.example.test. 3600 IN AAAA 2001:db8::25" example.test ANY

# CNAMEs: the chain followed in the zone; asked for the CNAME itself, only it; leaving the
# zone, it stops there; to a name that does not exist, NXDOMAIN (RFC 6604) with the SOA; a
# loop, each CNAME once; a chain longer than 8, cut after the 8th.
expect "QUERY NOERROR [qr aa rd] 1 3 0 1
$edns
question www.example.test. IN A
an www.example.test. 3600 IN CNAME web.example.test.
an web.example.test. 3600 IN CNAME host.example.test.
an host.example.test. 3600 IN A 192.0.2.80" www.example.test A
expect "QUERY NOERROR [qr aa rd] 1 1 0 1
$edns
question www.example.test. IN CNAME
an www.example.test. 3600 IN CNAME web.example.test." www.example.test CNAME
expect "QUERY NOERROR [qr aa rd] 1 1 0 1
$edns
question alias-out.example.test. IN A
an alias-out.example.test. 3600 IN CNAME www.example.net." alias-out.example.test A
expect "QUERY NXDOMAIN [qr aa rd] 1 1 1 1
$edns
question dangling.example.test. IN A
an dangling.example.test. 3600 IN CNAME nowhere.example.test.
ns $soa" dangling.example.test A
expect "QUERY NOERROR [qr aa rd] 1 2 0 1
$edns
question loop1.example.test. IN A
an loop1.example.test. 3600 IN CNAME loop2.example.test.
an loop2.example.test. 3600 IN CNAME loop1.example.test." loop1.example.test A
chain=""
for i in 1 2 3 4 5 6 7 8; do
    chain+=$'\n'"an c$i.example.test. 3600 IN CNAME c$((i + 1)).example.test."
done
expect "QUERY NOERROR [qr aa rd] 1 8 0 1
$edns
question c1.example.test. IN A$chain" c1.example.test A
expect "QUERY NOERROR [qr aa rd] 1 1 0 1
$edns
question c10.example.test. IN A
an c10.example.test. 3600 IN A 192.0.2.10" c10.example.test A

# Negative answers: NXDOMAIN and NODATA (a type the name lacks; an empty non-terminal), the
# SOA in authority with the lesser of its TTL and its minimum (RFC 2308).
expect "QUERY NXDOMAIN [qr aa rd] 1 0 1 1
$edns
question nope.example.test. IN A
ns $soa" nope.example.test A
expect "QUERY NXDOMAIN [qr aa rd] 1 0 1 1
$edns
question x.a.b.c.deep.example.test. IN TXT
ns $soa" x.a.b.c.deep.example.test TXT
expect "QUERY NOERROR [qr aa rd] 1 0 1 1
$edns
question host.example.test. IN MX
ns $soa" host.example.test MX
expect "QUERY NOERROR [qr aa rd] 1 0 1 1
$edns
question b.c.deep.example.test. IN A
ns $soa" b.c.deep.example.test A
expect "QUERY NOERROR [qr aa rd] 1 1 0 1
$edns
question a.b.c.deep.example.test. IN A
an a.b.c.deep.example.test. 3600 IN A 192.0.2.99" a.b.c.deep.example.test A

# Outside the zone, the parent and a name that only ends like it included: REFUSED, AA clear.
for name in www.example.net test example.testing . xexample.test; do
    [[ $name == . ]] && q=. || q=$name.
    expect "QUERY REFUSED [qr rd] 1 0 0 1
$edns
question $q IN A" "$name" A
done

# 0x20: the question comes back as asked, and the first owner (compressed to it) too; names
# compare without case past that. (dig only: kdig lowercases the names it sends.)
for client in dig "dig +tcp"; do
    got=$(dig_q ${client#dig} WwW.ExAmPlE.TeSt A | norm_dig)
    grep -qx "question WwW.ExAmPlE.TeSt. IN A" <<<"$got" || fail "$client 0x20: $got"
    grep -q "^an WwW.ExAmPlE.TeSt. 3600 IN CNAME " <<<"$got" || fail "$client 0x20: $got"
    want=$(dig_q ${client#dig} www.example.test A | norm_dig)
    [[ ${got,,} == "${want,,}" ]] ||
        fail "$client 0x20: $got"
done

# many: 40 A records, 655 bytes of answer. Over UDP without EDNS they do not fit 512: TC,
# the question alone. Both clients then retry over TCP by themselves and get all 40.
many=""
for i in $(seq 100 139); do
    many+=$'\n'"an many.example.test. 3600 IN A 192.0.2.$i"
done
tc_want="QUERY NOERROR [qr aa tc rd] 1 0 0 0
question many.example.test. IN A"
got=$(dig_q +noedns +ignore many.example.test A | norm_dig)
[[ $got == "$tc_want" ]] || fail "dig +noedns +ignore many: $got"
got=$(kdig_q +noedns +ignore many.example.test A | norm_kdig)
[[ $got == "$tc_want" ]] || fail "kdig +noedns +ignore many: $got"
full_want="QUERY NOERROR [qr aa rd] 1 40 0 0
question many.example.test. IN A$many"
raw=$(dig_q +noedns many.example.test A)
grep -q "Truncated, retrying in TCP mode" <<<"$raw" || fail "dig did not retry over TCP: $raw"
[[ $(norm_dig <<<"$raw") == "$full_want" ]] || fail "dig +noedns many, retried: $raw"
got=$(kdig_q +noedns many.example.test A | norm_kdig)
grep -q "truncated reply .* retrying over TCP" "$log.out" || fail "kdig did not retry over TCP"
[[ $got == "$full_want" ]] || fail "kdig +noedns many, retried: $got"
# With EDNS (1232 bytes, both clients' default size) the 686 bytes come whole over UDP...
full_want="QUERY NOERROR [qr aa rd] 1 40 0 1
$edns
question many.example.test. IN A$many"
raw=$(dig_q +ignore +stats many.example.test A)
grep -q "(UDP)" <<<"$raw" || fail "dig many with EDNS: not over UDP: $raw"
[[ $(norm_dig <<<"$raw") == "$full_want" ]] || fail "dig many with EDNS: $raw"
got=$(kdig_q +edns +ignore many.example.test A | norm_kdig)
[[ $got == "$full_want" ]] || fail "kdig +edns many: $got"
# ... and a client's EDNS size of 512 is kept to: TC again, with the OPT.
tc_want="QUERY NOERROR [qr aa tc rd] 1 0 0 1
$edns
question many.example.test. IN A"
got=$(dig_q +bufsize=512 +ignore many.example.test A | norm_dig)
[[ $got == "$tc_want" ]] || fail "dig +bufsize=512 many: $got"
got=$(kdig_q +bufsize=512 +ignore many.example.test A | norm_kdig)
[[ $got == "$tc_want" ]] || fail "kdig +bufsize=512 many: $got"

# EDNS: version 1 is answered BADVERS (an extended rcode) with our version, 0; the DO bit is
# copied; options the server does not know (a cookie, padding, NSID) are ignored.
want="QUERY BADVERS [qr rd] 1 0 0 1
$edns
question example.test. IN SOA"
for t in "" +tcp; do
    got=$(dig_q $t +edns=1 +noednsnegotiation example.test SOA | norm_dig)
    [[ $got == "$want" ]] || fail "dig $t +edns=1: $got"
done
expect "QUERY NOERROR [qr aa rd] 1 1 0 1
edns 0 [do] 1232
question example.test. IN A
an example.test. 3600 IN A 192.0.2.1" +dnssec example.test A
got=$(kdig_q +edns +padding=256 +cookie +nsid host.example.test A | norm_kdig)
[[ $got == "QUERY NOERROR [qr aa rd] 1 1 0 1
$edns
question host.example.test. IN A
an host.example.test. 3600 IN A 192.0.2.80" ]] || fail "kdig with EDNS options: $got"

# Not served: a class other than IN (REFUSED), a zone transfer (NOTIMP, the question kept),
# an opcode other than QUERY (NOTIMP: the header, and our OPT for an EDNS query).
for t in "" +tcp; do
    got=$(dig_q $t version.bind CH TXT | norm_dig)
    [[ $got == "QUERY REFUSED [qr rd] 1 0 0 1
$edns
question version.bind. CH TXT" ]] || fail "dig $t CH: $got"
    got=$(dig_q $t +noedns +opcode=status example.test SOA | norm_dig)
    [[ $got == "STATUS NOTIMP [qr rd] 0 0 0 0" ]] || fail "dig $t +noedns +opcode=status: $got"
    # An EDNS query's NOTIMP carries our OPT (RFC 6891 6.1.1), so no resolver takes the
    # error for a server without EDNS.
    got=$(dig_q $t +opcode=status example.test SOA | norm_dig)
    [[ $got == "STATUS NOTIMP [qr rd] 0 0 0 1
$edns" ]] || fail "dig $t +opcode=status: $got"
done
raw=$(dig_q example.test AXFR)
grep -q "Transfer failed" <<<"$raw" || fail "dig AXFR: $raw"
[[ $(norm_dig <<<"$raw") == "QUERY NOTIMP [qr] 1 0 0 1
$edns
question example.test. IN AXFR" ]] || fail "dig AXFR: $raw"

# Several queries on one TCP connection (kdig +keepopen), answered in order.
got=$(kdig_q +tcp +keepopen ns2.example.test A nope.example.test A host.example.test AAAA |
    norm_kdig | grep -E "^(QUERY|question)")
[[ $got == "QUERY NOERROR [qr aa rd] 1 1 0 0
question ns2.example.test. IN A
QUERY NXDOMAIN [qr aa rd] 1 0 1 0
question nope.example.test. IN A
QUERY NOERROR [qr aa rd] 1 1 0 0
question host.example.test. IN AAAA" ]] || fail "kdig +keepopen: $got"

"$server" --help | grep -q usage
"$server" --zone /nonexistent/zone --port 0 >"$log.out" 2>&1 && fail "a missing zone served"
grep -q "/nonexistent/zone" "$log.out" || fail "a missing zone: $(cat "$log.out")"

# --idle-timeout: a TCP connection that asks nothing for a second is closed; one query on
# it first is answered.
"$server" --zone "$zone" --port 0 --threads 1 --idle-timeout 1 >"$log.idle" 2>&1 &
idle_pid=$!
idle_port=$(port_of "$log.idle" "udp+tcp")
[[ -n "$idle_port" ]] || fail "no port in: $(cat "$log.idle")"
exec 3<>"/dev/tcp/127.0.0.1/$idle_port"
start=$(date +%s%N)
rc=0
timeout 10 cat <&3 >/dev/null || rc=$?
((rc == 0)) || fail "--idle-timeout 1: the connection was not closed (cat: $rc)"
took=$((($(date +%s%N) - start) / 1000000))
((took >= 800 && took < 5000)) || fail "--idle-timeout 1: closed after $took ms"
exec 3<&-
kill -TERM "$idle_pid"
wait "$idle_pid" || fail "the idle-timeout server did not exit 0: $(cat "$log.idle")"
idle_pid=

kill -TERM "$pid"
for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
kill -0 "$pid" 2>/dev/null && fail "the server did not stop on SIGTERM"
rc=0
wait "$pid" || rc=$?
pid=
((rc == 0)) || fail "exit status $rc after SIGTERM"
grep -q "eddy-dns-server: stopped by SIGTERM; [0-9]* UDP and [0-9]* TCP answers" "$log" ||
    fail "no stop line"
cat "$log"
