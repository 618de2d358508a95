#!/bin/bash
# The healthcheck: the broker at HOST:PORT answers a Kafka ApiVersions request. An open port is not
# enough: the broker accepts connections before it serves them.
#   ready.sh HOST:PORT
set -euo pipefail
address=${1:?usage: ready.sh HOST:PORT}
exec 3<>"/dev/tcp/${address%:*}/${address##*:}"
# 12 bytes: API key 18 (ApiVersions), version 0, correlation id 7, client id "hc"
printf '\x00\x00\x00\x0c\x00\x12\x00\x00\x00\x00\x00\x07\x00\x02hc' >&3
# The answer: 4 bytes of size, then the correlation id
answer=$(timeout 5 head -c 8 <&3 | od -An -tx1 | tr -d ' \n')
[ "${answer:8}" = 00000007 ]
