package sandbox

import "testing"

// DisableCgroups makes runners created until the end of t use no cgroup,
// as on a host or container without a writable hierarchy.
func DisableCgroups(t testing.TB) {
	t.Helper()
	cgroupsDisabled.Store(true)
	t.Cleanup(func() { cgroupsDisabled.Store(false) })
}
