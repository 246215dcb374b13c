// Command googlerpc writes the descriptors of google/rpc/status.proto and
// google/rpc/error_details.proto, with the files they import, as one
// FileDescriptorSet. scripts/gen runs it to generate the Python classes of
// google.rpc.Status and ErrorInfo, which clients need to read the reason
// of a toolwire error, into gen/python, and commits the set as
// gen/descriptor/google-rpc.binpb for clients in other languages.
//
// The descriptors are those compiled into the Go module
// google.golang.org/genproto/googleapis/rpc at the version go.mod pins, so
// every language reads the error details exactly as the servers write
// them, and no copy of the .proto files is kept here.
//
//	go run ./internal/googlerpc -o gen/descriptor/google-rpc.binpb
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

func main() {
	out := flag.String("o", "", "file to write the FileDescriptorSet to (required)")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: googlerpc -o FILE")
		os.Exit(2)
	}
	if err := write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "googlerpc:", err)
		os.Exit(1)
	}
}

func write(path string) error {
	set := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	for _, fd := range []protoreflect.FileDescriptor{
		(&spb.Status{}).ProtoReflect().Descriptor().ParentFile(),
		(&errdetails.ErrorInfo{}).ProtoReflect().Descriptor().ParentFile(),
	} {
		add(set, fd, seen)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(set)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// add appends fd to set after the files it imports, each file once, as a
// FileDescriptorSet must order them.
func add(set *descriptorpb.FileDescriptorSet, fd protoreflect.FileDescriptor, seen map[string]bool) {
	if seen[fd.Path()] {
		return
	}
	seen[fd.Path()] = true
	imports := fd.Imports()
	paths := make([]protoreflect.FileDescriptor, 0, imports.Len())
	for i := range imports.Len() {
		paths = append(paths, imports.Get(i).FileDescriptor)
	}
	slices.SortFunc(paths, func(a, b protoreflect.FileDescriptor) int { return strings.Compare(a.Path(), b.Path()) })
	for _, imp := range paths {
		add(set, imp, seen)
	}
	set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
}
