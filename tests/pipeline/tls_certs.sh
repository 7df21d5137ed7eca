#!/usr/bin/env bash
# Make the TLS tests' certificates with the openssl tool into DIR (the build directory; no
# private key is committed): a test CA and another CA nobody trusts, a server certificate for
# localhost and 127.0.0.1 signed by the CA, the same expired, and a client certificate.
#   bash tests/pipeline/tls_certs.sh DIR
set -euo pipefail
dir=$1
mkdir -p "$dir"
cd "$dir"
new_key_csr() { # name cn
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$1.key" -out "$1.csr" -subj "/CN=$2" 2>/dev/null
}
new_ca() { # name cn
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$1.key" -out "$1.pem" -subj "/CN=$2" -days 3 2>/dev/null
}
sign() { # name days extensions
    printf '%s\n' "$3" > "$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial \
        -days "$2" -extfile "$1.ext" -out "$1.pem" 2>/dev/null
}
new_ca ca "eddy test CA"
new_ca other-ca "eddy untrusted CA"
new_key_csr server localhost
sign server 3 "subjectAltName=DNS:localhost,IP:127.0.0.1"
new_key_csr expired localhost
sign expired -1 "subjectAltName=DNS:localhost,IP:127.0.0.1"   # notAfter before now
new_key_csr client "eddy test client"
sign client 3 "extendedKeyUsage=clientAuth"
rm -f ./*.csr ./*.ext ./*.srl
chmod 600 ./*.key
