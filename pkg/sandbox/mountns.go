package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// mountSetup is what a session user's spawner thread mounts in the private
// mount namespace its children inherit.
type mountSetup struct {
	// idmap, when set, shows the workspace's files, which another user
	// owns, as the session user's.
	idmap *idmapMount
	// files are bound read-only over system files (/etc/passwd and
	// /etc/group with an entry for the session user).
	files []bindFile
	// tempDir is the session's own temp directory: of the session temp
	// file systems (MountSessionTemp) the namespace copied, it keeps this
	// one only.
	tempDir string
}

type idmapMount struct {
	path     string
	usernsFD int // user namespace whose id maps the mount takes
	from, to int // on-disk owner and the session user, for messages
}

type bindFile struct{ src, dst string }

// capHint names the capability an EPERM most likely lacks.
func capHint(err error, capability string) string {
	if errors.Is(err, unix.EPERM) {
		return " (needs " + capability + ")"
	}
	return ""
}

// setupMounts runs on the spawner thread, after unshare(CLONE_NEWNS): it
// makes every mount private (nothing propagates back to the service or on
// to other sessions), mounts a procfs that hides other users' processes,
// and applies m.
func setupMounts(m *mountSetup) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("sandbox: make mounts private: %w%s", err, capHint(err, "CAP_SYS_ADMIN"))
	}
	// The other sessions' temp mounts go first: mountHiddenProc reads the
	// mount table, which is then one mount per session shorter.
	if err := detachOtherTemps(m.tempDir); err != nil {
		return err
	}
	if err := mountHiddenProc(); err != nil {
		return err
	}
	if m.idmap != nil {
		if err := m.idmap.mount(); err != nil {
			return err
		}
	}
	for _, f := range m.files {
		if err := unix.Mount(f.src, f.dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("sandbox: bind %s: %w", f.dst, err)
		}
		if err := unix.Mount("", f.dst, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			return fmt.Errorf("sandbox: bind %s read-only: %w", f.dst, err)
		}
	}
	return nil
}

// mountHiddenProc mounts a fresh procfs over /proc with hidepid=2: a
// process sees the /proc/<pid> directories of its own user's processes
// only (toolsvc, being privileged, is not affected; it does not use this
// mount anyway). Whatever was mounted below the old /proc (a container
// runtime masks files such as /proc/kcore with /dev/null and makes
// /proc/sys read-only) is carried over onto the new one, so the mount
// reveals nothing the old one hid.
func mountHiddenProc() error {
	masks, err := cloneProcMounts()
	defer func() {
		for _, m := range masks {
			unix.Close(m.fd)
		}
	}()
	if err != nil {
		return err
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "hidepid=2"); err != nil {
		return fmt.Errorf("sandbox: mount a procfs with hidepid=2: %w%s", err, capHint(err, "CAP_SYS_ADMIN"))
	}
	for _, m := range masks {
		if err := unix.MoveMount(m.fd, "", unix.AT_FDCWD, m.path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("sandbox: carry %s over to the new procfs: %w", m.path, err)
		}
	}
	return nil
}

type clonedMount struct {
	path string
	fd   int
}

// cloneProcMounts returns detached copies of the mounts below /proc,
// parents before children. Automount points are left out: they hide
// nothing, and touching them would mount.
func cloneProcMounts() ([]clonedMount, error) {
	points, err := mountsBelow("/proc")
	if err != nil {
		return nil, err
	}
	var out []clonedMount
	for _, p := range points {
		fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_NO_AUTOMOUNT|unix.AT_SYMLINK_NOFOLLOW)
		if err != nil {
			return out, fmt.Errorf("sandbox: copy the mount on %s: %w%s", p, err, capHint(err, "CAP_SYS_ADMIN"))
		}
		out = append(out, clonedMount{path: p, fd: fd})
	}
	return out, nil
}

// mountsBelow lists the mount points strictly below dir in the calling
// thread's mount namespace, shallowest first, without duplicates and
// without autofs mounts.
func mountsBelow(dir string) ([]string, error) {
	var points []string
	err := eachMount(func(point, fstype, _ string) {
		if strings.HasPrefix(point, dir+"/") && fstype != "autofs" && !slices.Contains(points, point) {
			points = append(points, point)
		}
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(points, func(a, b string) int {
		return strings.Count(a, "/") - strings.Count(b, "/")
	})
	return points, nil
}

// eachMount calls fn with the mount point, file system type and source of
// every mount of the calling thread's mount namespace, in mountinfo's
// order (parents before children).
func eachMount(fn func(point, fstype, source string)) error {
	// thread-self: the mount namespace is the spawner thread's own.
	f, err := os.Open("/proc/thread-self/mountinfo")
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 5 || sep+2 >= len(fields) {
			continue
		}
		fn(unescapeMountinfo(fields[4]), fields[sep+1], fields[sep+2])
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("sandbox: read mountinfo: %w", err)
	}
	return nil
}

// unescapeMountinfo undoes the octal escapes (\040 for a space, ...) of
// a mountinfo path.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mount puts an id-mapped copy of the workspace over itself. The copy
// carries the mounts below the workspace along, unmapped.
func (m *idmapMount) mount() error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, m.path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("sandbox: copy the workspace mount: %w%s", err, capHint(err, "CAP_SYS_ADMIN"))
	}
	defer unix.Close(fd)
	if err := setIDMap(fd, m.usernsFD); err != nil {
		return fmt.Errorf("sandbox: show the workspace %s (owner %d) as the session user's (uid %d): %w", m.path, m.from, m.to, err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, m.path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("sandbox: mount the id-mapped workspace: %w", err)
	}
	return nil
}

// setIDMap makes the detached mount fd id-mapped by the user namespace
// usernsFD.
func setIDMap(fd, usernsFD int) error {
	attr := unix.MountAttr{
		Attr_set:  unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		Userns_fd: uint64(usernsFD),
	}
	err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EINVAL):
		return fmt.Errorf("id-mapped mount refused: %w (the file system does not support id-mapped mounts)", err)
	case errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("id-mapped mount refused: %w (the kernel is older than 5.12, or a seccomp profile blocks mount_setattr)", err)
	}
	return fmt.Errorf("id-mapped mount refused: %w%s", err, capHint(err, "CAP_SYS_ADMIN"))
}

// newIDMapUserns returns a user namespace (as an fd) whose maps turn the
// on-disk ids fromUID and fromGID into toUID and toGID, for an id-mapped
// mount. A user namespace lives only as long as a process or fd holds it,
// and a process that runs Go threads cannot enter a new one, so a child is
// started in it, stopped at its exec before it runs anything, and killed
// once the fd is open.
func newIDMapUserns(fromUID, fromGID, toUID, toGID int) (int, error) {
	// Under many concurrent opens the start was seen to fail now and then
	// with EPERM, never one at a time: more tries, further apart each time
	// (5 ms doubling, about 0.6 s in all). Five tries 5-25 ms apart were
	// not always enough with 1,000 sessions opening on a loaded machine.
	var fd int
	var err error
	delay := 5 * time.Millisecond
	for try := 0; try < 8; try++ {
		if fd, err = startIDMapHolder(fromUID, fromGID, toUID, toGID); err == nil || !errors.Is(err, unix.EPERM) {
			return fd, err
		}
		time.Sleep(delay)
		delay *= 2
	}
	return fd, err
}

// startIDMapHolder is one try of newIDMapUserns.
func startIDMapHolder(fromUID, fromGID, toUID, toGID int) (int, error) {
	// /proc/self/exe works even when the binary was replaced on disk.
	p, err := os.StartProcess("/proc/self/exe", []string{"toolwire-idmap-holder"}, &os.ProcAttr{
		Dir: "/",
		Env: []string{},
		Sys: &syscall.SysProcAttr{
			Cloneflags:  unix.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: fromUID, HostID: toUID, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: fromGID, HostID: toGID, Size: 1}},
			// Stops the child at its exec: it never runs.
			Ptrace:    true,
			Pdeathsig: syscall.SIGKILL,
		},
	})
	if err != nil {
		return -1, fmt.Errorf("sandbox: user namespace for the id-mapped workspace: %w%s", err, capHint(err, "CAP_SYS_ADMIN"))
	}
	defer func() {
		p.Kill()
		p.Wait()
	}()
	fd, err := unix.Open(filepath.Join("/proc", strconv.Itoa(p.Pid), "ns", "user"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("sandbox: user namespace for the id-mapped workspace: %w", err)
	}
	return fd, nil
}

// probeSessionMounts checks, on a thread thrown away afterwards, that the
// service can give a session user its private /proc and, for a workspace
// in dir that another user owns, an id-mapped mount.
func probeSessionMounts(dir string) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread ends with the goroutine, and its
		// mount namespace with it.
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			errc <- fmt.Errorf("sandbox: mount namespace: %w%s", err, capHint(err, "CAP_SYS_ADMIN"))
			return
		}
		if err := setupMounts(&mountSetup{}); err != nil {
			errc <- err
			return
		}
		if dir == "" {
			errc <- nil
			return
		}
		uerr := func() error {
			usernsFD, err := newIDMapUserns(0, 0, 65534, 65534)
			if err != nil {
				return err
			}
			defer unix.Close(usernsFD)
			fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
			if err != nil {
				return fmt.Errorf("sandbox: copy the mount of %s: %w%s", dir, err, capHint(err, "CAP_SYS_ADMIN"))
			}
			// Never attached: closing the fd drops the copy.
			defer unix.Close(fd)
			if err := setIDMap(fd, usernsFD); err != nil {
				return fmt.Errorf("sandbox: workspaces under %s that another user owns cannot be shown as the session user's: %w", dir, err)
			}
			return nil
		}()
		errc <- uerr
	}()
	return <-errc
}

// sessionTempSource is the source name of the session temp file systems,
// by which the mount tables show them.
const sessionTempSource = "toolwire-session-tmp"

// sessionTempsPrefix names the directory, in the temp root, that holds
// this process's session temp directories with file systems of their own:
// toolwire-sessions-<pid>. It is bound onto itself, so that a session's
// new mount namespace can drop every other session's temp file system it
// copied with one detach of that mount; ReleaseSessionTempRoots undoes
// it.
const sessionTempsPrefix = "toolwire-sessions-"

var sessionTemps struct {
	sync.Mutex
	ready map[string]bool
}

// SessionTempRoot returns the directory in root (a temp root such as
// os.TempDir()) to make session temp directories in that MountSessionTemp
// will mount on, making it and its mount if needed, and removing those of
// toolwire processes that are gone. It needs root.
func SessionTempRoot(root string) (string, error) {
	d := filepath.Join(root, sessionTempsPrefix+strconv.Itoa(os.Getpid()))
	sessionTemps.Lock()
	defer sessionTemps.Unlock()
	if sessionTemps.ready[d] {
		return d, nil
	}
	removeStaleTempRoots(root)
	if err := os.Mkdir(d, 0o711); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("sandbox: session temp root: %w", err)
	}
	if fi, err := os.Lstat(d); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("sandbox: session temp root %s is not a directory", d)
	}
	mounted, err := isMountPoint(d)
	if err != nil {
		return "", err
	}
	if !mounted {
		if err := unix.Mount(d, d, "", unix.MS_BIND, ""); err != nil {
			return "", fmt.Errorf("sandbox: bind the session temp root %s onto itself: %w%s", d, err, capHint(err, "CAP_SYS_ADMIN"))
		}
	}
	if sessionTemps.ready == nil {
		sessionTemps.ready = map[string]bool{}
	}
	sessionTemps.ready[d] = true
	return d, nil
}

// ReleaseSessionTempRoots detaches and removes the session temp roots of
// this process, once its sessions are over (at exit).
func ReleaseSessionTempRoots() {
	sessionTemps.Lock()
	defer sessionTemps.Unlock()
	for d := range sessionTemps.ready {
		_ = unix.Unmount(d, unix.MNT_DETACH)
		_ = os.RemoveAll(d)
		delete(sessionTemps.ready, d)
	}
}

// removeStaleTempRoots removes the session temp roots in root of toolwire
// processes that died without doing so.
func removeStaleTempRoots(root string) {
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		pid, err := strconv.Atoi(strings.TrimPrefix(e.Name(), sessionTempsPrefix))
		if !strings.HasPrefix(e.Name(), sessionTempsPrefix) || err != nil || pid == os.Getpid() || !errors.Is(unix.Kill(pid, 0), unix.ESRCH) {
			continue
		}
		d := filepath.Join(root, e.Name())
		_ = unix.Unmount(d, unix.MNT_DETACH)
		subs, _ := os.ReadDir(d)
		for _, s := range subs {
			_ = unix.Unmount(filepath.Join(d, s.Name()), unix.MNT_DETACH)
		}
		_ = os.RemoveAll(d)
	}
}

// isMountPoint reports whether dir is the root of a mount in the calling
// thread's mount namespace.
func isMountPoint(dir string) (bool, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, dir, unix.AT_SYMLINK_NOFOLLOW, 0, &st); err != nil {
		return false, fmt.Errorf("sandbox: %w", err)
	}
	if st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return false, fmt.Errorf("sandbox: the kernel does not say whether %s is a mount point", dir)
	}
	return st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
}

// MountSessionTemp mounts a file system of size bytes of its own (tmpfs)
// on dir, a session's empty temp directory in SessionTempRoot, so that the
// session can write no more than that there: a write past it fails with
// ENOSPC. It holds one file (inode) per 16 KiB at most. The memory it
// takes is charged to the memory bound of the session whose processes
// write it. It needs root.
func MountSessionTemp(dir string, size int64) error {
	inodes := max(size/(16<<10), 1024)
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700", size, inodes)
	if err := unix.Mount(sessionTempSource, dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("sandbox: mount the session's temp file system on %s: %w%s", dir, err, capHint(err, "CAP_SYS_ADMIN"))
	}
	return nil
}

// UnmountSessionTemp detaches the file system MountSessionTemp mounted on
// dir; its memory is freed once no process uses it.
func UnmountSessionTemp(dir string) {
	_ = unix.Unmount(dir, unix.MNT_DETACH)
}

// detachOtherTemps drops, in the calling thread's new mount namespace, the
// temp file systems of other sessions that it copied from the service's,
// so that this session cannot reach them (nor read their session ids in
// its mountinfo) and they are freed when their session ends: it keeps a
// copy of its own (keep), detaches this service's session temp root with
// everything below it, and puts its own back; then it detaches what other
// toolsvc processes of the host mounted for their sessions.
func detachOtherTemps(keep string) error {
	if err := detachOwnRoot(keep); err != nil {
		return err
	}
	return detachForeignTemps(keep)
}

// detachOwnRoot is detachOtherTemps for this service's sessions. Its cost
// does not grow with their number.
func detachOwnRoot(keep string) error {
	if keep == "" || !strings.HasPrefix(filepath.Base(filepath.Dir(keep)), sessionTempsPrefix) {
		return nil
	}
	own, err := isMountPoint(keep)
	if err != nil || !own {
		return err
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, keep, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("sandbox: copy the session's temp mount: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Unmount(filepath.Dir(keep), unix.MNT_DETACH); err != nil {
		return fmt.Errorf("sandbox: detach the other sessions' temp directories: %w", err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, keep, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("sandbox: put the session's temp mount back: %w", err)
	}
	return nil
}

// detachForeignTemps detaches, in the calling thread's mount namespace,
// the session temp roots and session temp file systems other than keep:
// those of the other toolsvc processes of the host.
func detachForeignTemps(keep string) error {
	var points []string
	err := eachMount(func(point, _, source string) {
		if point == keep || strings.HasPrefix(keep, point+"/") {
			return // keep, or a mount it lies in
		}
		if source == sessionTempSource || strings.HasPrefix(filepath.Base(point), sessionTempsPrefix) {
			points = append(points, point)
		}
	})
	if err != nil {
		return err
	}
	for _, p := range points {
		// A temp root goes with the file systems below it: those are
		// then no longer mounted (EINVAL).
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("sandbox: detach another service's session temp directory %s: %w", p, err)
		}
	}
	return nil
}
