// Package container holds the end-to-end test of toolsvc inside a Docker
// container; it has no code of its own.
//
// The test builds a static toolsvc, the local base image
// (scripts/base-image) and the toolsvc image (deploy/docker), starts toolsvc
// on a private --internal Docker network with exactly the flags
// docs/security.md recommends, and attacks it from the host through
// `toolsvc call --addr <container ip>:7070`: escapes from the workspace with
// the file tools and with Bash, reads of secrets, network egress, a
// root-only unix socket, fork, memory and disk bombs, endless output,
// processes that outlive their call, the executor's own environment, and
// one session listing, signalling, tracing and reading into another. It
// also records which protections toolsvc reports as enforced under weaker
// container configurations, and that it refuses to start when the container
// cannot give it what the sandbox needs.
//
// It skips only when docker is not usable. The first run builds the base
// image with debootstrap, which needs root, apt's Debian mirror and several
// minutes (go test -timeout 30m, or run scripts/base-image first); later runs
// reuse the image. Everything else it creates (containers, network, the
// toolsvc image) is removed at the end and checked to be gone.
package container
