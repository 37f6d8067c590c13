#!/usr/bin/env bash
# Makes throwaway TLS material for tests (and shows the openssl commands that
# docs/security.md describes):
#   security_make_certs.sh DIR
# writes into DIR (PEM, keys unencrypted, valid 2 days):
#   ca.pem ca.key              a CA
#   server.pem server.key      signed by ca: CN and SAN "localhost", IP 127.0.0.1;
#                              also a client certificate (for the health probe)
#   client.pem client.key      signed by ca: a worker's client certificate
#   other_ca.pem other_ca.key  an unrelated CA
#   other_client.pem .key      signed by other_ca
# Needs the openssl command (Debian package openssl).
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
if ! command -v openssl >/dev/null 2>&1; then
  echo "$0: the openssl command is missing (Debian package openssl)" >&2
  exit 3
fi
dir=$1
mkdir -p "$dir"
cd "$dir"

# EC P-256 keys: quick to make, accepted by gRPC's TLS.
newkey=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)

make_ca() {  # NAME CN
  openssl req -x509 "${newkey[@]}" -keyout "$1.key" -out "$1.pem" -days 2 \
    -subj "/CN=$2" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
}

make_leaf() {  # NAME CA CN EXTENSIONS...
  local name=$1 ca=$2 cn=$3
  shift 3
  printf '%s\n' "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" "$@" >"$name.ext"
  openssl req "${newkey[@]}" -keyout "$name.key" -out "$name.csr" \
    -subj "/CN=$cn" 2>/dev/null
  openssl x509 -req -in "$name.csr" -CA "$ca.pem" -CAkey "$ca.key" \
    -set_serial "0x$(openssl rand -hex 8)" -days 2 -extfile "$name.ext" \
    -out "$name.pem" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}

make_ca ca "asgd test CA"
make_ca other_ca "unrelated test CA"
make_leaf server ca localhost \
  "subjectAltName=DNS:localhost,IP:127.0.0.1" \
  "extendedKeyUsage=serverAuth,clientAuth"
make_leaf client ca asgd-worker "extendedKeyUsage=clientAuth"
make_leaf other_client other_ca asgd-worker "extendedKeyUsage=clientAuth"
chmod 600 ./*.key
