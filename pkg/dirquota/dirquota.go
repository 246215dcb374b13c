// Package dirquota makes directories with a disk quota of their own, where
// the file system under them can enforce one: on btrfs with quotas enabled
// (`btrfs quota enable`), such a directory is a subvolume whose quota group
// has a limit on the bytes it references. A write past the limit fails in
// the writer with EDQUOT ("Disk quota exceeded"), whoever writes, root
// included.
//
// A subvolume made inside such a directory would have a quota group of its
// own, outside the limit: whoever writes there must be kept from making
// subvolumes and snapshots (see pkg/sandbox's Config.NoSubvolumes).
package dirquota

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrUnsupported is returned by Probe for a file system that cannot give a
// directory a quota of its own.
var ErrUnsupported = errors.New("no per-directory disk quotas")

// The btrfs ioctls used here (linux/btrfs.h).
const (
	iocSubvolCreate = 0x5000940e // BTRFS_IOC_SUBVOL_CREATE
	iocSnapDestroy  = 0x5000940f // BTRFS_IOC_SNAP_DESTROY
	iocInoLookup    = 0xd0009412 // BTRFS_IOC_INO_LOOKUP
	iocFSInfo       = 0x8400941f // BTRFS_IOC_FS_INFO
	iocQgroupLimit  = 0x8030942b // BTRFS_IOC_QGROUP_LIMIT

	// firstFreeObjectID is the inode number of a subvolume's top directory.
	firstFreeObjectID = 256
	// mark is the extended attribute Make sets on a subvolume it made, so
	// that SetLimit and Usage leave every other subvolume alone. Only a
	// process with CAP_SYS_ADMIN can set or remove a trusted.* attribute.
	mark = "trusted.toolwire.dirquota"
	// limitMaxReferenced marks btrfs_qgroup_limit.max_rfer as set.
	limitMaxReferenced = 1
)

// volArgs is struct btrfs_ioctl_vol_args.
type volArgs struct {
	fd   int64
	name [4088]byte
}

// inoLookupArgs is struct btrfs_ioctl_ino_lookup_args.
type inoLookupArgs struct {
	treeID   uint64
	objectID uint64
	name     [4080]byte
}

// fsInfoArgs is struct btrfs_ioctl_fs_info_args, up to the fsid (the rest
// is padding for this use).
type fsInfoArgs struct {
	maxID      uint64
	numDevices uint64
	fsid       [16]byte
	_          [1024 - 32]byte
}

// qgroupLimitArgs is struct btrfs_ioctl_qgroup_limit_args.
type qgroupLimitArgs struct {
	qgroupID uint64
	flags    uint64
	maxRfer  uint64
	maxExcl  uint64
	rsvRfer  uint64
	rsvExcl  uint64
}

// FS is a file system on which directories can get quotas.
type FS struct {
	// sysfs is /sys/fs/btrfs/FSID/qgroups, where the file system accounts
	// each quota group.
	sysfs string
}

// Probe returns the file system of dir when it can give directories made
// on it a quota, or an error wrapping ErrUnsupported that says why not and
// what would make it so.
func Probe(dir string) (*FS, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil, fmt.Errorf("dirquota: %s: %w", dir, err)
	}
	if st.Type != unix.BTRFS_SUPER_MAGIC {
		return nil, fmt.Errorf("%w: %s is not on btrfs, the file system whose subvolume quotas toolwire uses", ErrUnsupported, dir)
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("dirquota: %w", err)
	}
	defer f.Close()
	var info fsInfoArgs
	if err := ioctl(int(f.Fd()), iocFSInfo, unsafe.Pointer(&info)); err != nil {
		return nil, fmt.Errorf("dirquota: btrfs file system of %s: %w", dir, err)
	}
	u := info.fsid
	sysfs := fmt.Sprintf("/sys/fs/btrfs/%x-%x-%x-%x-%x/qgroups", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	if _, err := os.Stat(sysfs); err != nil {
		return nil, fmt.Errorf("%w: quotas are not enabled on the btrfs file system of %s (run: btrfs quota enable %s)", ErrUnsupported, dir, dir)
	}
	return &FS{sysfs: sysfs}, nil
}

// Make creates dir, whose parent must exist, as a directory whose contents
// may take at most limit bytes. It leaves nothing behind when it fails; an
// error wrapping ErrUnsupported means the parent lies on another file
// system (one mounted below the probed directory) that cannot have quotas.
func (q *FS) Make(dir string, limit int64) error {
	parent, name := filepath.Split(filepath.Clean(dir))
	var args volArgs
	if len(name) >= len(args.name) || strings.ContainsRune(name, 0) {
		return fmt.Errorf("dirquota: make %s: bad name", dir)
	}
	copy(args.name[:], name)
	p, err := os.Open(parent)
	if err != nil {
		return fmt.Errorf("dirquota: make %s: %w", dir, err)
	}
	defer p.Close()
	if err := ioctl(int(p.Fd()), iocSubvolCreate, unsafe.Pointer(&args)); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("dirquota: make %s: %w", dir, os.ErrExist)
		}
		if errors.Is(err, unix.ENOTTY) {
			// Another file system is mounted there.
			return fmt.Errorf("%w: %s is not on btrfs", ErrUnsupported, parent)
		}
		return fmt.Errorf("dirquota: make %s as a btrfs subvolume: %w", dir, err)
	}
	err = unix.Setxattr(dir, mark, []byte("1"), 0)
	if err != nil {
		err = fmt.Errorf("dirquota: mark %s: %w", dir, err)
	} else if ok, lerr := q.SetLimit(dir, limit); lerr != nil || !ok {
		err = cmp.Or(lerr, fmt.Errorf("dirquota: %s is not the subvolume just made", dir))
	}
	if err != nil {
		_ = ioctl(int(p.Fd()), iocSnapDestroy, unsafe.Pointer(&args))
		return err
	}
	return nil
}

// SetLimit sets the quota of dir, a directory Make made, to limit bytes.
// For any other directory (an ordinary one, or a subvolume someone else
// made) it does nothing and returns false.
func (q *FS) SetLimit(dir string, limit int64) (bool, error) {
	f, err := openSubvolume(dir)
	if f == nil || err != nil {
		return false, err
	}
	defer f.Close()
	args := qgroupLimitArgs{flags: limitMaxReferenced, maxRfer: uint64(limit)}
	if err := ioctl(int(f.Fd()), iocQgroupLimit, unsafe.Pointer(&args)); err != nil {
		if errors.Is(err, unix.ENOTCONN) {
			// Another btrfs, without quotas, is mounted there.
			return false, fmt.Errorf("%w: quotas are not enabled on the btrfs file system of %s", ErrUnsupported, dir)
		}
		return false, fmt.Errorf("dirquota: limit %s to %d bytes: %w", dir, limit, err)
	}
	return true, nil
}

// Usage returns the bytes dir's contents take and its limit (0: none), as
// the file system last accounted them: a write that just failed at the
// limit shows, space just freed may show a moment later. ok is false for
// a directory without a quota of its own.
func (q *FS) Usage(dir string) (used, limit int64, ok bool, err error) {
	f, err := openSubvolume(dir)
	if f == nil || err != nil {
		return 0, 0, false, err
	}
	defer f.Close()
	args := inoLookupArgs{objectID: firstFreeObjectID}
	if err := ioctl(int(f.Fd()), iocInoLookup, unsafe.Pointer(&args)); err != nil {
		return 0, 0, false, fmt.Errorf("dirquota: subvolume of %s: %w", dir, err)
	}
	group := filepath.Join(q.sysfs, "0_"+strconv.FormatUint(args.treeID, 10))
	if used, err = readNumber(filepath.Join(group, "referenced")); err != nil {
		return 0, 0, false, err
	}
	if limit, err = readNumber(filepath.Join(group, "max_referenced")); err != nil {
		return 0, 0, false, err
	}
	return used, limit, true, nil
}

// openSubvolume opens dir when it is the top of a subvolume Make made;
// nil, nil for any other directory.
func openSubvolume(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("dirquota: %w", err)
	}
	var st unix.Stat_t
	var sfs unix.Statfs_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("dirquota: %s: %w", dir, err)
	}
	if err := unix.Fstatfs(int(f.Fd()), &sfs); err != nil {
		f.Close()
		return nil, fmt.Errorf("dirquota: %s: %w", dir, err)
	}
	if sfs.Type != unix.BTRFS_SUPER_MAGIC || st.Ino != firstFreeObjectID || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		f.Close()
		return nil, nil
	}
	var v [1]byte
	if _, err := unix.Fgetxattr(int(f.Fd()), mark, v[:]); err != nil {
		f.Close()
		if errors.Is(err, unix.ENODATA) {
			return nil, nil
		}
		return nil, fmt.Errorf("dirquota: %s: %w", dir, err)
	}
	return f, nil
}

// readNumber reads a sysfs file of one decimal number.
func readNumber(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("dirquota: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("dirquota: %s: %w", path, err)
	}
	return n, nil
}

func ioctl(fd int, req uintptr, arg unsafe.Pointer) error {
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg)); e != 0 {
		return e
	}
	return nil
}
