#!/bin/bash
# Starts the broker the way the apache/kafka image does (its /etc/kafka/docker/run, configure and
# launch), with the same class doing the work, kafka.docker.KafkaDockerWrapper from Kafka's own jar:
#   - every KAFKA_* environment variable becomes a server property: KAFKA_ dropped, lower case,
#     `_` -> `.`, `__` -> `_`, `___` -> `-` (KAFKA_NODE_ID -> node.id); not the JVM ones
#     (KAFKA_HEAP_OPTS, KAFKA_OPTS, KAFKA_JVM_PERFORMANCE_OPTS, KAFKA_LOG4J_OPTS, ...);
#   - on top of /mnt/shared/config/server.properties when one is mounted; with neither,
#     /etc/kafka/docker/server.properties (a single node on localhost:9092);
#   - KAFKA_LISTENERS defaults to KAFKA_ADVERTISED_LISTENERS on every address;
#   - the storage is formatted with CLUSTER_ID on first start (a restarted container keeps it);
#   - the log goes to stdout; KAFKA_LOG4J_LOGGERS (name=LEVEL,...) sets the level of loggers.
# The apache/kafka image's shortcuts for TLS and SASL files under /etc/kafka/secrets are not
# here: give their server properties (KAFKA_SSL_KEYSTORE_LOCATION, ...) directly.
set -euo pipefail
libs="/opt/kafka/libs/*"
export CLUSTER_ID=${CLUSTER_ID:-5L6g3nShT-eMCtK--X86sw}  # the apache/kafka image's default

if [ "${KAFKA_PROCESS_ROLES:-}" = controller ]; then
    unset KAFKA_ADVERTISED_LISTENERS
elif [ -z "${KAFKA_LISTENERS:-}" ] && [ -n "${KAFKA_ADVERTISED_LISTENERS:-}" ]; then
    # shellcheck disable=SC2001 # every listener's host: a regular expression
    KAFKA_LISTENERS=$(sed -e 's|://[^:]*:|://0.0.0.0:|g' <<<"$KAFKA_ADVERTISED_LISTENERS")
    export KAFKA_LISTENERS
fi

# Writes /opt/kafka/config/{server.properties,log4j2.yaml,tools-log4j2.yaml}, then formats.
if ! setup=$(java -Dlog4j2.configurationFile=/etc/kafka/docker/tools-log4j2.yaml -cp "$libs" \
        kafka.docker.KafkaDockerWrapper setup --default-configs-dir /etc/kafka/docker \
        --mounted-configs-dir /mnt/shared/config --final-configs-dir /opt/kafka/config 2>&1); then
    if ! grep -qi "already formatted" <<<"$setup"; then
        echo "$setup" >&2
        exit 1
    fi
fi
echo "$setup"  # "Formatting ...", or on a restart "... is already formatted"

# The JVM settings of Kafka's kafka-server-start.sh and kafka-run-class.sh, by the same variables.
# shellcheck disable=SC2086 # each variable holds several options
exec java ${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G} \
    ${KAFKA_JVM_PERFORMANCE_OPTS:--server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true} \
    ${KAFKA_LOG4J_OPTS:--Dlog4j2.configurationFile=/opt/kafka/config/log4j2.yaml} ${KAFKA_OPTS:-} \
    -cp "$libs" kafka.Kafka /opt/kafka/config/server.properties
