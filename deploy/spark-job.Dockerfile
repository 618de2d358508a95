# A PySpark job runner with the emitter installed: runs the demo pipeline (or any script
# mounted at /jobs) with `python -m emitter run`, publishing to Kafka.
# BASE_IMAGE: a Debian or Ubuntu image; Java 17 is installed from its packages unless the
# image has one (deploy/local-images.sh passes a plain Debian base). It runs as an unprivileged
# user (uid 10001) with a home of its own (Spark's caches).
ARG BASE_IMAGE=eclipse-temurin:17.0.12_7-jre-jammy
FROM ${BASE_IMAGE}
RUN apt-get update -q && apt-get install -y -q --no-install-recommends python3 python3-venv \
    && if ! command -v java >/dev/null; then \
        apt-get install -y -q --no-install-recommends openjdk-17-jre-headless; fi \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /app
COPY pyproject.toml README.md LICENSE NOTICE ./
# Dependencies first, in a layer of their own that a code change does not invalidate.
RUN mkdir emitter consumer && touch emitter/__init__.py consumer/__init__.py \
    && pip install --no-cache-dir ".[emitter]" && pip uninstall -y -q spark-lineage && rm -rf emitter consumer build *.egg-info
COPY emitter ./emitter
COPY consumer ./consumer
COPY demo ./demo
RUN pip install --no-cache-dir --no-deps . \
    && useradd --uid 10001 --user-group --create-home --shell /usr/sbin/nologin spark
USER 10001:10001
ENTRYPOINT ["python", "-m", "emitter", "run"]
CMD ["demo/pipeline.py", "/tmp/demo-output"]
