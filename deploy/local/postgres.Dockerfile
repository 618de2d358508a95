# PostgreSQL from Debian's package, configured like the postgres image: POSTGRES_USER,
# POSTGRES_PASSWORD and POSTGRES_DB create the first user and database; PGPORT picks the port.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
RUN mkdir -p /etc/postgresql-common \
    && echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.conf \
    && apt-get update -q && apt-get install -y -q --no-install-recommends postgresql-15 \
    && rm -rf /var/lib/apt/lists/*
COPY postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint.sh
ENV PGDATA=/var/lib/postgresql/data PGPORT=5432 POSTGRES_LISTEN=127.0.0.1
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint.sh"]
