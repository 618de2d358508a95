# The consumer service: Kafka consumer group + Marquez-compatible API on port 5000, run as an
# unprivileged user (uid 10001) that owns nothing in the image.
# BASE_IMAGE: any Debian-based image with Python 3.11+ whose `pip` installs into the `python` on
# PATH (deploy/local-images.sh passes one built from Debian where no registry is reachable).
ARG BASE_IMAGE=python:3.11.10-slim-bookworm
FROM ${BASE_IMAGE}
WORKDIR /app
COPY pyproject.toml README.md LICENSE NOTICE ./
# Dependencies first, in a layer of their own that a code change does not invalidate.
RUN mkdir emitter consumer && touch emitter/__init__.py consumer/__init__.py \
    && pip install --no-cache-dir ".[consumer]" && pip uninstall -y -q spark-lineage && rm -rf emitter consumer build *.egg-info
COPY emitter ./emitter
COPY consumer ./consumer
RUN pip install --no-cache-dir --no-deps . \
    && useradd --system --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin lineage
# No bytecode written at run time: the root filesystem may be read-only.
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 10001:10001
EXPOSE 5000
ENTRYPOINT ["python", "-m", "consumer"]
# Every interface of the container: a write token is then required (LINEAGE_API_TOKEN or
# --token-file; docs/operations.md).
CMD ["serve", "--host", "0.0.0.0", "--port", "5000"]
