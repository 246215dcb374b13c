# shellcheck shell=bash
# Helpers shared by the scripts in this directory. Source it; do not run it.
#
# After sourcing, the working directory is the repository root: `go tool
# -modfile=tools/go.mod` and buf's configuration both resolve from there.

TOOLWIRE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$TOOLWIRE_ROOT"

# Debian packages the full test run needs. protoc and grpc_python_plugin make
# the Python stubs, python3-grpcio/python3-protobuf run the Python example,
# ripgrep backs the Grep tool, iproute2 gives `ip` to the network tests,
# postgresql gives the orchestrator's store tests a real database (they start
# a throwaway cluster of their own with its binaries), btrfs-progs makes the
# btrfs file systems on which the workspace quota tests run.
TOOLWIRE_APT_TEST_PACKAGES=(ripgrep protobuf-compiler protobuf-compiler-grpc python3-grpcio python3-protobuf iproute2 debootstrap postgresql btrfs-progs)

# The protoc release gen/python was generated with. Another release writes
# different Python code, so the gen check names it when they differ.
TOOLWIRE_PROTOC_VERSION="libprotoc 3.21.12"

# heading prints a step title that stands out in a long CI log.
heading() {
	printf '\n==> %s\n' "$*"
}

# note prints an informational line to stderr.
note() {
	printf '    %s\n' "$*" >&2
}

# die prints an error to stderr and exits non-zero.
die() {
	printf 'error: %s\n' "$*" >&2
	exit 1
}

# ensure_apt installs the given Debian packages that are not installed yet,
# running `apt-get update` once before the first install of this process.
# Installed packages are left alone, so a prepared machine needs no network.
ensure_apt() {
	local missing=() pkg
	for pkg in "$@"; do
		if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
			missing+=("$pkg")
		fi
	done
	if ((${#missing[@]} == 0)); then
		return 0
	fi
	command -v apt-get >/dev/null || die "missing packages ${missing[*]} and no apt-get to install them"
	local sudo=()
	if ((EUID != 0)); then
		command -v sudo >/dev/null || die "missing packages ${missing[*]}: run as root or install them"
		sudo=(sudo)
	fi
	note "installing ${missing[*]}"
	if [[ -z "${TOOLWIRE_APT_UPDATED:-}" ]]; then
		"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq </dev/null >&2
		TOOLWIRE_APT_UPDATED=1
	fi
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >&2
}

# buf runs the buf release pinned in tools/go.mod.
buf() {
	go tool -modfile=tools/go.mod buf "$@"
}

# generate writes gen/ under the directory $1 (default: the repository
# root), all of it derived from proto/ and go.mod:
#   - Go and Python stubs of the contract (buf.gen.yaml, which empties gen/
#     first);
#   - gen/descriptor/toolwire.binpb, the contract as a buf image (a
#     FileDescriptorSet with comments), from which clients in languages
#     not generated here are made (see buf.gen.ts.yaml);
#   - gen/descriptor/google-rpc.binpb, google.rpc.Status and ErrorInfo as
#     the Go module in go.mod has them, and their Python classes
#     (buf.gen.googlerpc.yaml), which clients need to read error reasons.
generate() {
	local out="${1:-.}"
	buf generate -o "$out"
	mkdir -p "$out/gen/descriptor"
	buf build -o "$out/gen/descriptor/toolwire.binpb"
	go run ./internal/googlerpc -o "$out/gen/descriptor/google-rpc.binpb"
	buf generate "$out/gen/descriptor/google-rpc.binpb" --template buf.gen.googlerpc.yaml --path google/rpc -o "$out"
}

# check_protoc fails unless /usr/bin/protoc is the release gen/python was made
# with, since any other release would rewrite the committed stubs.
check_protoc() {
	local got
	got="$(/usr/bin/protoc --version 2>/dev/null || true)"
	[[ "$got" == "$TOOLWIRE_PROTOC_VERSION" ]] ||
		die "gen/python is made with Debian bookworm's protoc ($TOOLWIRE_PROTOC_VERSION); /usr/bin/protoc is '${got:-missing}'"
}
