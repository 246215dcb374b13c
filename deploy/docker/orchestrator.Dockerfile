# orchestrator, the conversation service, in a container.
#
# The binary is built on the host and copied in; this file compiles nothing:
#
#   ctx=$(mktemp -d)
#   CGO_ENABLED=0 go build -trimpath -o "$ctx/orchestrator" ./cmd/orchestrator
#   docker build -f deploy/docker/orchestrator.Dockerfile -t toolwire/orchestrator "$ctx"
#
# scripts/compose does this for docker-compose.yml. BASE defaults to Debian's
# slim image, which lacks the CA certificates the orchestrator needs to reach
# the Messages API over HTTPS: the build then installs them with apt (so it
# needs network). toolwire/base:bookworm (scripts/base-image) has them and
# the build installs nothing.
#
# The image is meant for a remote executor (toolsvc in its own container):
# the orchestrator runs as an unprivileged user and needs no capability.
# Its own in-process executor (no --executor) would need what toolsvc's
# image has, so do not use it here. Session transcripts go to
# /var/lib/toolwire/sessions: mount a volume there to keep them.
ARG BASE=debian:bookworm-slim
FROM ${BASE}
ARG ORCHESTRATOR_UID=10002

RUN set -eu; \
    if [ ! -e /etc/ssl/certs/ca-certificates.crt ]; then \
        apt-get update; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates; \
        rm -rf /var/lib/apt/lists/*; \
    fi; \
    groupadd --system --gid "$ORCHESTRATOR_UID" orchestrator; \
    useradd --system --uid "$ORCHESTRATOR_UID" --gid orchestrator --home-dir /var/lib/toolwire --no-create-home --shell /usr/sbin/nologin orchestrator; \
    install -d -o orchestrator -g orchestrator -m 0750 /var/lib/toolwire /var/lib/toolwire/sessions

COPY orchestrator /usr/local/bin/

USER orchestrator
WORKDIR /var/lib/toolwire
EXPOSE 7071
# On its TCP address the orchestrator wants TLS flags or an explicit
# --insecure; docker-compose.yml gives the whole command line.
ENTRYPOINT ["/usr/local/bin/orchestrator"]
CMD ["serve", "--listen", "0.0.0.0:7071", "--sessions-dir", "/var/lib/toolwire/sessions", "--log-format", "json"]
