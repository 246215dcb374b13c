# One address for the orchestrator replicas of docker-compose.yml's
# "replicas" profile: HAProxy from Debian's package, on the local base image
# made with it (see postgres.Dockerfile) or installed with apt on Debian's
# slim image.
#
# It balances TCP connections round robin over the replicas that accept
# them (gRPC runs over one HTTP/2 connection, so a client stays on a
# replica until it reconnects); any replica serves any session.
ARG BASE=debian:12.15-slim
FROM ${BASE}
RUN set -eu; \
    if [ ! -x /usr/sbin/haproxy ]; then \
        apt-get update; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends haproxy; \
        rm -rf /var/lib/apt/lists/*; \
    fi
COPY haproxy.cfg /etc/haproxy/haproxy.cfg
USER haproxy
EXPOSE 7071
ENTRYPOINT ["haproxy", "-W", "-db", "-f", "/etc/haproxy/haproxy.cfg"]
