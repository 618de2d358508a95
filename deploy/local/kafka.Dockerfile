# Apache Kafka from the Maven artifacts jars/pom.xml pins, on a Debian base with Debian's JRE 17.
# The build context is made by deploy/local-images.sh: the files of kafka-image/ and, in libs/, the
# jars `python -m jars copy kafka` copies. It starts like the apache/kafka image (kafka-image/run.sh):
# KAFKA_* environment variables become server properties and CLUSTER_ID formats the storage on
# first start; the broker runs as an unprivileged user (appuser, uid 1000, as in that image).
# Without a volume, its data (KAFKA_LOG_DIRS=/var/lib/kafka/data) goes with the container.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
RUN apt-get update -q && apt-get install -y -q --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --uid 1000 --user-group --create-home --shell /bin/bash appuser \
    && mkdir -p /opt/kafka/config /var/lib/kafka/data /mnt/shared/config \
    && chown appuser:appuser /opt/kafka/config /var/lib/kafka/data
COPY libs /opt/kafka/libs
COPY server.properties log4j2.yaml tools-log4j2.yaml /etc/kafka/docker/
COPY run.sh ready.sh /opt/kafka/bin/
USER appuser
EXPOSE 9092
CMD ["/opt/kafka/bin/run.sh"]
