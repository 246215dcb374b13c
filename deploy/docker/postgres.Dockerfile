# PostgreSQL for the orchestrator replicas of docker-compose.yml's
# "replicas" profile: Debian's postgresql package. Built on the local base
# image made with it (TOOLWIRE_BASE_IMAGE=toolwire/base-db:bookworm
# TOOLWIRE_BASE_EXTRA=postgresql,haproxy scripts/base-image, then
# BASE=toolwire/base-db:bookworm) it pulls nothing and installs nothing; on
# Debian's slim image it installs the package with apt.
#
# The entry point makes the cluster on first start (the superuser
# "toolwire" with the password $POSTGRES_PASSWORD, the database
# "toolwire", password logins from the compose network) and runs the
# server in the foreground as the postgres user. The orchestrators make
# their tables themselves (schema migrations at start).
ARG BASE=debian:12.15-slim
FROM ${BASE}
RUN set -eu; \
    if [ ! -x /usr/lib/postgresql/15/bin/postgres ]; then \
        apt-get update; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql; \
        rm -rf /var/lib/apt/lists/*; \
    fi; \
    rm -rf /var/lib/postgresql/15/main; \
    mkdir -p /var/lib/postgresql/data; \
    chown postgres:postgres /var/lib/postgresql/data; \
    chmod 0700 /var/lib/postgresql/data
COPY postgres-entrypoint /usr/local/bin/
ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/bin:/usr/bin:/bin PGDATA=/var/lib/postgresql/data
USER postgres
EXPOSE 5432
HEALTHCHECK --interval=5s --timeout=5s --start-period=60s --retries=3 \
    CMD ["pg_isready", "-h", "127.0.0.1", "-U", "toolwire", "-d", "toolwire"]
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint"]
