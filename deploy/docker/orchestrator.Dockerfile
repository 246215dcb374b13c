# orchestrator, the conversation service, in a container.
#
# The binary is built on the host and copied in; this file compiles nothing:
#
#   ctx=$(mktemp -d)
#   CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$ctx/orchestrator" ./cmd/orchestrator
#   docker build -f deploy/docker/orchestrator.Dockerfile -t toolwire/orchestrator:0.1.0 "$ctx"
#
# scripts/compose does this for docker-compose.yml.
#
# The image is as small as the orchestrator allows: a static binary on an
# empty (scratch) file system with only what it reads or writes besides the
# network: the CA certificates that verify the Messages API's HTTPS
# certificate, its user in /etc/passwd, its transcript directory and /tmp.
# No shell, no package manager, no other program. A first stage takes
# those files from BASE: the local toolwire/base:bookworm
# (scripts/base-image) has the certificates and the build installs
# nothing; Debian's slim image, pinned to a point release, lacks them and
# the build installs them with apt (so it needs network). Nothing of that
# stage but the gathered files reaches the image.
#
# The image is meant for a remote executor (toolsvc in its own container,
# --executor): the orchestrator runs as an unprivileged user, needs no
# capability and runs no tool itself. Its in-process executor (no
# --executor) needs bash, ripgrep and what toolsvc's image has, so it does
# not work here; `orchestrator -p ... --executor toolsvc:7070` does.
# Session transcripts go to /var/lib/toolwire/sessions: mount a volume
# there to keep them.
ARG BASE=debian:12.15-slim

FROM ${BASE} AS rootfs
ARG ORCHESTRATOR_UID=10002
RUN set -eu; \
    if [ ! -e /etc/ssl/certs/ca-certificates.crt ]; then \
        apt-get update; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates; \
        rm -rf /var/lib/apt/lists/*; \
    fi; \
    mkdir -p /rootfs/etc/ssl/certs /rootfs/tmp /rootfs/var/lib/toolwire/sessions; \
    cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/; \
    echo "orchestrator:x:$ORCHESTRATOR_UID:$ORCHESTRATOR_UID:orchestrator:/var/lib/toolwire:/nonexistent" >/rootfs/etc/passwd; \
    echo "orchestrator:x:$ORCHESTRATOR_UID:" >/rootfs/etc/group; \
    chmod 1777 /rootfs/tmp; \
    chown -R "$ORCHESTRATOR_UID:$ORCHESTRATOR_UID" /rootfs/var/lib/toolwire; \
    chmod -R 0750 /rootfs/var/lib/toolwire

FROM scratch
ARG ORCHESTRATOR_UID=10002
COPY --from=rootfs /rootfs/ /
COPY orchestrator /usr/local/bin/

ENV PATH=/usr/local/bin HOME=/var/lib/toolwire
USER ${ORCHESTRATOR_UID}:${ORCHESTRATOR_UID}
WORKDIR /var/lib/toolwire
EXPOSE 7071
# Readiness of the default plaintext listener, as docker-compose.yml runs
# it: OrchestratorService must answer SERVING. With TLS, override the check
# with the server's CA, e.g. in Compose
#   healthcheck:
#     test: ["CMD", "orchestrator", "health", "--tls-ca", "/run/secrets/ca.crt",
#            "--tls-server-name", "orchestrator.example"]
# (the image has no shell, so the check must be in exec form).
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/orchestrator", "health", "--addr", "127.0.0.1:7071", "--insecure", "--timeout", "3s"]
# On its TCP address the orchestrator wants TLS flags or an explicit
# --insecure; docker-compose.yml gives the whole command line.
ENTRYPOINT ["/usr/local/bin/orchestrator"]
CMD ["serve", "--listen", "0.0.0.0:7071", "--sessions-dir", "/var/lib/toolwire/sessions", "--log-format", "json"]
