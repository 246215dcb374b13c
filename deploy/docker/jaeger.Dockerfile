# Jaeger v2, the tracing backend of the compose deployment, in a container.
#
# The binary is built on the host from Jaeger's Go module and copied in
# together with toolwire's configuration; this file compiles nothing:
#
#   ctx=$(mktemp -d)
#   cp "$(scripts/jaeger)" "$ctx/jaeger"
#   cp deploy/jaeger/config.yaml "$ctx/"
#   docker build -f deploy/docker/jaeger.Dockerfile -t toolwire/jaeger "$ctx"
#
# scripts/compose does this for docker-compose.yml. scripts/jaeger builds a
# static binary, so any Linux base works and the image installs nothing:
# BASE defaults to Debian's slim image; the tests use the local
# toolwire/base:bookworm (scripts/base-image).
#
# Jaeger runs as an unprivileged uid with no home and writes nothing: traces
# live in memory and are gone when the container stops.
ARG BASE=debian:12.15-slim
FROM ${BASE}
ARG JAEGER_UID=10003

COPY jaeger /usr/local/bin/jaeger
COPY config.yaml /etc/jaeger/config.yaml

# Inside the container Jaeger listens on every interface of the container;
# docker-compose.yml publishes only the query port, on the host's loopback.
ENV JAEGER_LISTEN_HOST=0.0.0.0
USER ${JAEGER_UID}:${JAEGER_UID}
# OTLP gRPC, OTLP HTTP, query HTTP (API and UI), query gRPC, Prometheus
# endpoint of the metrics received.
EXPOSE 4317 4318 16686 16685 8889
ENTRYPOINT ["/usr/local/bin/jaeger", "--config", "/etc/jaeger/config.yaml"]
