# toolsvc, the sandboxed tool executor, in a container.
#
# The binary is built on the host and copied in; this file compiles nothing:
#
#   ctx=$(mktemp -d)
#   CGO_ENABLED=0 go build -trimpath -o "$ctx/toolsvc" ./cmd/toolsvc
#   cp deploy/docker/toolsvc-entrypoint "$ctx/"
#   docker build -f deploy/docker/toolsvc.Dockerfile -t toolwire/toolsvc:0.1.0 "$ctx"
#
# BASE defaults to Debian's slim image of one point release (the one
# scripts/base-image found when this was written), which lacks ripgrep: the
# build then installs it with apt (so it needs network). scripts/base-image builds
# toolwire/base:bookworm, which already has everything; with
# --build-arg BASE=toolwire/base:bookworm the build installs nothing.
#
# Each session's tools run as a user of their own, from toolsvc's
# --session-uids range (default 200000-265535; no account may use those
# ids). "tool", uid TOOL_UID, owns /workspace: toolsvc shows a workspace it
# owns to each session's user as that user's own (an id-mapped mount), and
# what the tools write there stays tool's on disk. /workspace is searchable
# by others (0751), so that sessions reach the directories toolsvc makes for
# them inside it. Give toolsvc containers that share a host ranges of their
# own (--session-uids after the image name): per-user limits such as
# RLIMIT_NPROC count every process of a uid on the host.
#
# Run it as docs/security.md describes: with the capabilities the sandbox
# needs and no others, a private cgroup namespace, a read-only root, and TLS
# credentials mounted from the host (on its TCP address toolsvc refuses to
# serve plaintext unless told --insecure).
ARG BASE=debian:12.15-slim
FROM ${BASE}
ARG TOOL_UID=10001

RUN set -eu; \
    if ! command -v rg >/dev/null || ! command -v ps >/dev/null || [ ! -e /etc/ssl/certs/ca-certificates.crt ]; then \
        apt-get update; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ripgrep procps ca-certificates; \
        rm -rf /var/lib/apt/lists/*; \
    fi; \
    groupadd --system --gid "$TOOL_UID" tool; \
    useradd --system --uid "$TOOL_UID" --gid tool --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin tool; \
    install -d -o tool -g tool -m 0751 /workspace; \
    install -d -m 0755 /run/toolsvc/cgroup2

COPY toolsvc toolsvc-entrypoint /usr/local/bin/

# toolsvc itself stays root inside the container: it needs CAP_SYS_ADMIN for
# the tools' network and mount namespaces and root to switch tools to their
# session's user. Tools never run as root.
WORKDIR /workspace
EXPOSE 7070
# Readiness of the plaintext listener docker-compose.yml runs: the executor
# service must answer SERVING, which it stops doing when SIGTERM starts the
# drain. With TLS (docs/security.md), override the check with the CA and
# the name in the server's certificate:
#   docker run --health-cmd 'toolsvc health --tls-ca /run/secrets/toolsvc/ca.crt --tls-server-name toolsvc' ...
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/toolsvc", "health", "--addr", "127.0.0.1:7070", "--insecure", "--timeout", "3s"]
ENTRYPOINT ["/usr/local/bin/toolsvc-entrypoint", "--listen", "0.0.0.0:7070", "--root", "/workspace"]
