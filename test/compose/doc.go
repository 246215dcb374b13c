// Package compose holds the end-to-end test of the compose deployment
// (docker-compose.yml at the repository root); it has no code of its own
// besides the test-only fake Messages API in fakemodel.
//
// The test fills the build contexts with scripts/compose, brings the whole
// deployment up under a project name of its own with `up -d --build`,
// adding compose.test.yml (a fake Messages API container on the private
// network, serving the scripted conversation of test/tracing/spancontract),
// waits until Docker reports toolsvc and the orchestrator healthy by their
// images' HEALTHCHECK (their health subcommands), runs that conversation through the orchestrator's published gRPC port on
// 127.0.0.1, finds its trace in the Jaeger container's query API (also on
// 127.0.0.1) and checks it against the span contract. It then brings the
// project down with `down -v --remove-orphans --rmi local` and checks that
// no container, network, volume or image of it remains, on failure too.
//
// It skips only when docker is not usable, like test/container. It fails
// when the Jaeger binary (scripts/jaeger) or Docker Compose is missing. The
// first run builds the local base image with scripts/base-image (root,
// apt's Debian mirror, several minutes); later runs reuse it.
package compose
