package sandbox

import "runtime"

// init keeps the main goroutine on the main thread for the life of the
// program, so that no other goroutine ever runs there. Spawner threads and
// probes lock a thread and change its namespaces and credentials for good;
// were that the main thread, the Go runtime could not end it when the
// goroutine returns and would park it instead, leaving the process's
// leader thread (which /proc/self shows, and to which the kernel
// re-parents orphans) in a session's mount and network namespaces, holding
// them, and the session's temp file system, alive.
func init() {
	runtime.LockOSThread()
}
