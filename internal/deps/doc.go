// Package deps holds the test of the repository's dependency rules (see
// deps_test.go and the README's "Repository layout"): domain packages
// import no gRPC, no protobuf and no generated code, edges carry the
// protocols, commands reach generated code through the edges, and
// generated code imports nothing of ours. It has no code of its own.
package deps
