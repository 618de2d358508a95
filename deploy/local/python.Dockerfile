# Stands in for python:3.11-slim where no registry is reachable: Debian's Python 3.11 in a venv
# that puts `python` and `pip` on PATH.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
RUN apt-get update -q && apt-get install -y -q --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/* && python3 -m venv /opt/python
ENV PATH=/opt/python/bin:$PATH PYTHONUNBUFFERED=1
