// Package readme runs the commands of the README as a new user types them:
// the Quickstart's first command and every command of "Using the executor
// directly" in README.md, and "Run it" in examples/python/README.md, taken
// from their fenced sh blocks (so that the documents and the test cannot
// drift apart), in a clean clone of the repository, as root and as an
// ordinary user.
//
// A block may carry a marker on the line before its fence:
//
//	<!-- readme-test: root -->   run only as root
//	<!-- readme-test: user -->   run only as an ordinary user
//	<!-- readme-test: first -->  run only the block's first command
//
// The blocks of one section run in order, as one bash script (set -euo
// pipefail), in the clone's root. The Quickstart's model is a fake of the
// Messages API on loopback (pkg/model/fakeapi); its second command,
// scripts/test, is not run: it would run this test again.
//
// The ordinary user is nobody (uid 65534) when the test runs as root, with
// a home, a Go build cache and a Go module cache of its own (the modules
// copied from root's cache, GOPROXY=off: the user needs no network), and
// the clone is theirs. Run as an ordinary user, the test runs only that
// user's half.
package readme
