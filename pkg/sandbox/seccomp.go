package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// subvolumeIoctls are the btrfs ioctl requests that make a subvolume or a
// snapshot (BTRFS_IOC_SNAP_CREATE, _SUBVOL_CREATE and their _V2 forms).
var subvolumeIoctls = []uint32{0x50009401, 0x5000940e, 0x50009417, 0x50009418}

// ioctlSyscall is one way to call ioctl: the audit architecture the kernel
// reports for it and its system call number there.
type ioctlSyscall struct {
	arch, nr uint32
}

// ioctlSyscalls lists, for the architecture toolsvc runs on, every ABI its
// processes may call ioctl through, compat ones included: a filter that
// checks only the native number is bypassed by a 32-bit program. The
// numbers are written out: unix.SYS_IOCTL is the one of the build's
// architecture only.
var ioctlSyscalls = map[string][]ioctlSyscall{
	"amd64": {
		{unix.AUDIT_ARCH_X86_64, 16},
		{unix.AUDIT_ARCH_X86_64, 0x40000000 | 514}, // x32
		{unix.AUDIT_ARCH_I386, 54},
	},
	"arm64": {
		{unix.AUDIT_ARCH_AARCH64, 29},
		{unix.AUDIT_ARCH_ARM, 54},
	},
}

// The fields of struct seccomp_data the filter reads: the system call
// number, the architecture, and the low half of the second argument (the
// ioctl request, an unsigned int) on a little-endian machine.
const (
	seccompNr      = 0
	seccompArch    = 4
	seccompArg1Low = 16 + 8
)

// subvolumeFilter returns the seccomp program that fails the ioctls of
// subvolumeIoctls with EPERM and lets every other system call through.
func subvolumeFilter(calls []ioctlSyscall) ([]bpf.RawInstruction, error) {
	var prog []bpf.Instruction
	// Per way to call ioctl, five instructions: on a match, jump to the
	// check of the request, after the "allow" that ends the list.
	for i, c := range calls {
		toCheck := uint8(5*(len(calls)-i) - 4)
		prog = append(prog,
			bpf.LoadAbsolute{Off: seccompArch, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: c.arch, SkipFalse: 3},
			bpf.LoadAbsolute{Off: seccompNr, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: c.nr, SkipFalse: 1},
			bpf.Jump{Skip: uint32(toCheck)},
		)
	}
	prog = append(prog, bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW})
	prog = append(prog, bpf.LoadAbsolute{Off: seccompArg1Low, Size: 4})
	for i, req := range subvolumeIoctls {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: req, SkipTrue: uint8(len(subvolumeIoctls) - i)})
	}
	prog = append(prog,
		bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
	)
	return bpf.Assemble(prog)
}

// refuseSubvolumes installs the filter on the calling thread (no_new_privs
// must be set on it); its children inherit it and cannot remove it.
func refuseSubvolumes() error {
	calls, ok := ioctlSyscalls[runtime.GOARCH]
	if !ok {
		return fmt.Errorf("sandbox: no seccomp filter for subvolumes on %s", runtime.GOARCH)
	}
	raw, err := subvolumeFilter(calls)
	if err != nil {
		return fmt.Errorf("sandbox: seccomp filter: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, in := range raw {
		filter[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	// Without SECCOMP_FILTER_FLAG_TSYNC: this thread only.
	if _, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return fmt.Errorf("sandbox: seccomp filter against btrfs subvolumes: %w", e)
	}
	runtime.KeepAlive(filter)
	return nil
}
