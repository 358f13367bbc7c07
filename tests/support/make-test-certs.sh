#!/usr/bin/env bash
# Makes a throwaway certificate authority and a server certificate it signed,
# for the TLS tests (C++, Python, Go and Java alike), with the openssl command:
#
#   tests/support/make-test-certs.sh DIR
#
# writes into DIR (which must exist):
#   ca.pem          the CA's certificate: what a client trusts (--ca-file)
#   server.pem      the server's certificate, for 127.0.0.1, ::1 and localhost,
#                   signed by the CA (chronoqd --tls-cert)
#   server.key      its private key (chronoqd --tls-key)
#   other-ca.pem    another CA, which signed nothing the server has: a client
#                   trusting only it must refuse the server
#   other.key       a key that is not the server certificate's
# EC P-256 keys: made in milliseconds. Valid for a day; nothing is kept.
set -euo pipefail
dir=${1:?usage: make-test-certs.sh DIR}
cd "$dir"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
key ca.key
openssl req -x509 -new -key ca.key -days 1 -subj "/CN=chronoq test CA" -out ca.pem \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
key server.key
openssl req -new -key server.key -subj "/CN=localhost" -out server.csr
printf '%s\n' "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost" \
  "basicConstraints=CA:FALSE" "keyUsage=digitalSignature" "extendedKeyUsage=serverAuth" \
  > server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
  -extfile server.ext -out server.pem 2>/dev/null
key other-ca.key
openssl req -x509 -new -key other-ca.key -days 1 -subj "/CN=another test CA" -out other-ca.pem \
  -addext "basicConstraints=critical,CA:TRUE"
key other.key
rm -f server.csr server.ext ca.srl
