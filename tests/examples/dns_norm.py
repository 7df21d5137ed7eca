#!/usr/bin/env python3
"""Both DNS clients' answers in one form (tests/examples/dns.sh), as a server: Python starts
once for the whole test instead of once per answer (it costs half a second on some VMs).

    dns_norm.py REQUEST_FIFO REPLY_FIFO

Each request is one write of the request FIFO: a first line "dig" or "kdig", then that tool's
output. The reply, written whole to the reply FIFO, is the normalised form, a line each:
"OPCODE STATUS [flags] QD AN NS AR", the OPT record as "edns VERSION [flags] UDPSIZE",
"question NAME CLASS TYPE", then the records as "SECTION NAME TTL CLASS TYPE DATA" (an, ns, ar),
whitespace squeezed. A request that cannot be read gets "error: ..." as its reply. Ends when a
request's first line is "quit", or when the request FIFO's writer never comes (the test died).
"""
import json
import re
import sys

SECTIONS = {"QUESTION": "question", "ANSWER": "an", "AUTHORITY": "ns", "ADDITIONAL": "ar"}
OPS = {0: "QUERY", 1: "IQUERY", 2: "STATUS", 4: "NOTIFY", 5: "UPDATE"}
RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}


def norm_dig(text):
    """dig's text (+comments +question +answer +authority +additional)."""
    out, sec, head = [], None, ""
    for line in text.splitlines():
        m = re.search(r"->>HEADER<<- opcode: (\w+), status: (\w+),", line)
        if m:
            head = m.group(1) + " " + m.group(2)
            continue
        m = re.match(r";; flags:([^;]*); QUERY: (\d+), ANSWER: (\d+), AUTHORITY: (\d+), "
                     r"ADDITIONAL: (\d+)", line)
        if m:
            out.append(f"{head} [{m.group(1).strip()}] " + " ".join(m.groups()[1:]))
            continue
        m = re.match(r"; EDNS: version: (\d+), flags:([^;]*); udp: (\d+)", line)
        if m:
            out.append(f"edns {m.group(1)} [{m.group(2).strip()}] {m.group(3)}")
            continue
        m = re.match(r";; (QUESTION|ANSWER|AUTHORITY|ADDITIONAL) SECTION:", line)
        if m:
            sec = SECTIONS[m.group(1)]
            continue
        if sec == "question" and re.match(r";[^; ]", line):
            out.append("question " + " ".join(line[1:].split()))
        elif line and not line.startswith(";"):
            out.append(f"{sec} " + " ".join(line.split()))
    return out


def norm_kdig(text):
    """kdig's RFC 8427 JSON: one document per answer, several with +keepopen."""
    out, pos, dec = [], 0, json.JSONDecoder()
    while text[pos:].strip():
        d, pos = dec.raw_decode(text, len(text) - len(text[pos:].lstrip()))
        flags = " ".join(f for f in ("qr", "aa", "tc", "rd", "ra", "ad", "cd") if d[f.upper()])
        out.append("%s %s [%s] %d %d %d %d" % (
            OPS[d["Opcode"]], RCODES.get(d["RCODE"], d["RCODE"]), flags,
            d["QDCOUNT"], d["ANCOUNT"], d["NSCOUNT"], d["ARCOUNT"]))
        for rr in d.get("additionalRRs", []):
            if rr["TYPE"] == 41:
                out.append("edns %d [%s] %d" % ((rr["TTL"] >> 16) & 255,
                                                "do" if rr["TTL"] & 0x8000 else "", rr["CLASS"]))
        if "QNAME" in d:
            out.append("question %s %s %s" % (d["QNAME"], d["QCLASSname"], d["QTYPEname"]))
        for key, sec in (("answerRRs", "an"), ("authorityRRs", "ns"), ("additionalRRs", "ar")):
            for rr in d.get(key, []):
                if rr["TYPE"] != 41:
                    out.append(" ".join([sec, rr["NAME"], str(rr["TTL"]), rr["CLASSname"],
                                         rr["TYPEname"]] + rr["rdata" + rr["TYPEname"]].split()))
    return out


def answer(request):
    kind, _, text = request.partition("\n")
    try:
        lines = {"dig": norm_dig, "kdig": norm_kdig}[kind](text)
    except Exception as e:  # the reply says what went wrong; the test fails on it
        return f"error: {kind}: {type(e).__name__}: {e}\n"
    return "".join(line + "\n" for line in lines)


def main():
    req_path, reply_path = sys.argv[1], sys.argv[2]
    while True:
        with open(req_path, encoding="utf-8", errors="replace") as f:
            request = f.read()
        if request.startswith("quit"):
            return
        with open(reply_path, "w", encoding="utf-8") as f:
            f.write(answer(request))


if __name__ == "__main__":
    main()
