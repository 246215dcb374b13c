package sandbox

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// TestSubvolumeFilter runs the seccomp program in a BPF interpreter over
// struct seccomp_data for each way to call ioctl on amd64 and arm64: the
// subvolume and snapshot requests are refused on every ABI, and other
// requests and system calls pass.
func TestSubvolumeFilter(t *testing.T) {
	const (
		allow = unix.SECCOMP_RET_ALLOW
		deny  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	)
	for goarch, calls := range ioctlSyscalls {
		raw, err := subvolumeFilter(calls)
		if err != nil {
			t.Fatal(err)
		}
		prog, ok := bpf.Disassemble(raw)
		if !ok {
			t.Fatal("the filter has an instruction bpf cannot read")
		}
		vm, err := bpf.NewVM(prog)
		if err != nil {
			t.Fatal(err)
		}
		verdict := func(arch, nr uint32, arg1 uint64) uint32 {
			// The kernel loads each 32-bit word in the machine's byte
			// order, the interpreter in network order: the words are
			// written big-endian where a little-endian machine has them.
			data := make([]byte, 64)
			binary.BigEndian.PutUint32(data[0:], nr)
			binary.BigEndian.PutUint32(data[4:], arch)
			binary.BigEndian.PutUint32(data[16+8:], uint32(arg1))
			binary.BigEndian.PutUint32(data[16+12:], uint32(arg1>>32))
			v, err := vm.Run(data)
			if err != nil {
				t.Fatal(err)
			}
			return uint32(v)
		}
		for _, c := range calls {
			for _, req := range subvolumeIoctls {
				if got := verdict(c.arch, c.nr, uint64(req)); got != deny {
					t.Errorf("%s: arch %#x nr %d request %#x: %#x, want EPERM", goarch, c.arch, c.nr, req, got)
				}
				// The kernel reads the request as an unsigned int.
				if got := verdict(c.arch, c.nr, 0xffffffff00000000|uint64(req)); got != deny {
					t.Errorf("%s: request %#x with high bits set: %#x, want EPERM", goarch, req, got)
				}
			}
			// BTRFS_IOC_SNAP_DESTROY, FICLONE and TCGETS pass.
			for _, req := range []uint32{0x5000940f, 0x40049409, unix.TCGETS} {
				if got := verdict(c.arch, c.nr, uint64(req)); got != allow {
					t.Errorf("%s: arch %#x nr %d request %#x: %#x, want allow", goarch, c.arch, c.nr, req, got)
				}
			}
			// Another system call with a subvolume request's value.
			if got := verdict(c.arch, c.nr+1, uint64(subvolumeIoctls[0])); got != allow {
				t.Errorf("%s: arch %#x nr %d: %#x, want allow", goarch, c.arch, c.nr+1, got)
			}
		}
		if got := verdict(0x12345678, unix.SYS_IOCTL, uint64(subvolumeIoctls[0])); got != allow {
			t.Errorf("%s: unknown architecture: %#x, want allow", goarch, got)
		}
	}
}
