# The consumer service: Kafka consumer group + Marquez-compatible API on port 5000.
# BASE_IMAGE: any image with Python 3.11+ whose `pip` installs into the `python` on PATH
# (deploy/local-images.sh passes one built from Debian where no registry is reachable).
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}
WORKDIR /app
COPY pyproject.toml README.md LICENSE NOTICE ./
# Dependencies first, in a layer of their own that a code change does not invalidate.
RUN mkdir emitter consumer && touch emitter/__init__.py consumer/__init__.py \
    && pip install --no-cache-dir ".[consumer]" && pip uninstall -y -q spark-lineage && rm -rf emitter consumer build *.egg-info
COPY emitter ./emitter
COPY consumer ./consumer
RUN pip install --no-cache-dir --no-deps .
EXPOSE 5000
ENTRYPOINT ["python", "-m", "consumer"]
CMD ["serve", "--host", "0.0.0.0", "--port", "5000"]
