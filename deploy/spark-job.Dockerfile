# A PySpark job runner with the emitter installed: runs the demo pipeline (or any script
# mounted at /jobs) with `python -m emitter run`, publishing to Kafka.
FROM eclipse-temurin:17-jre
RUN apt-get update -q && apt-get install -y -q --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /app
COPY pyproject.toml README.md ./
COPY emitter ./emitter
COPY consumer ./consumer
COPY demo ./demo
RUN pip install --no-cache-dir ".[emitter]"
ENTRYPOINT ["python", "-m", "emitter", "run"]
CMD ["demo/pipeline.py", "/tmp/demo-output"]
