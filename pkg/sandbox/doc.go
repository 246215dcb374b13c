// Package sandbox starts confined processes for one session and kills them
// again, whole trees at a time.
//
// A Runner owns one session's processes. Every process it starts gets a
// single pipe for both stdout and stderr (so output arrives in write order),
// a clean environment built from an allowlist, and a place of its own in the
// process tree that can be killed at once: a per-call cgroup v2 directory
// (created with clone3 CLONE_INTO_CGROUP, killed with cgroup.kill) where the
// kernel offers one, a process group otherwise.
//
// Confinement is applied without re-executing the service binary: a Runner
// keeps one OS thread of its own, locked and never returned to the Go
// scheduler, that holds the session's confinement and forks every child.
// That thread
//
//   - lives in a fresh network namespace with only loopback up (Network
//     "none"), so children inherit the namespace; with Network
//     "allowlist" it also makes a listening socket at 127.0.0.1 in that
//     namespace, which the service serves with its egress proxy
//     (Runner.EgressListener) and the children's HTTP_PROXY names;
//   - has no_new_privs set and a Landlock domain applied to itself only
//     (landlock_restrict_self without TSYNC), so children inherit the domain
//     while the rest of the service stays unconfined;
//   - forks children that drop to an unprivileged user (Credential) in the
//     child before exec: one user for every runner (RunAsUser), or a user
//     of the runner's own leased from a UIDPool (SessionUser). A session
//     user's thread also lives in a private mount namespace with a fresh
//     procfs mounted hidepid=2 over /proc, so that its children see only
//     their own user's processes, and, when another user owns the
//     workspace, an id-mapped mount that shows the workspace as theirs.
//
// The tree of a call is killed through its cgroup; where there is none, a
// session user's call carries a supplementary group of its own that every
// descendant inherits and cannot drop, and the tree is found by it in
// /proc. Closing a session user's runner kills every process of the user.
//
// A call's first process is born in the call's cgroups: cgroup v2 clones it
// there (CLONE_INTO_CGROUP); in cgroup v1 the spawner thread, alone, moves
// into the call's directories for the fork and back out right after it.
// Resource limits that are per process (CPU time, file size, open files and
// the fallbacks for memory and processes) are applied while the child is
// stopped right after its execve (PTRACE_TRACEME in the child, prlimit by
// the spawner, then PTRACE_DETACH). Either way not one instruction of the
// target runs unconfined.
// Re-executing a Go binary for each call would cost several milliseconds of
// runtime start-up per process; this design keeps the per-call overhead to a
// few system calls.
//
// Two profiles share this machinery. By default processes read and execute
// the system directories only, with HOME in the temp dir and an
// environment allowlist, as a multi-tenant executor wants. With ReadAll
// (the development profile of a user's own machine) everything is
// readable but DenyPaths, the user's HOME is HOME, and the environment is
// the service's minus an EnvDenylist. Landlock only grants, so a denied
// path is carved out: a directory holding one is granted entry by entry.
// Processes that stay root (a root user's own executor) keep only the
// capabilities for files: their thread's bounding set loses the rest.
//
// What the kernel cannot provide is either refused up front by Check (fail
// closed: the configured policy is not silently weakened) or, for
// best-effort extras such as cgroup controllers, left out and reported by
// Runner.Enforced.
//
// The package does not decide what may run: permission rules, tool input
// checks and output formatting belong to the executor and the tools.
//
// Why one package of this size (about 3,700 lines): the locked thread, the
// namespaces it enters, the Landlock domain, the uid leases, the cgroups and
// the stop-after-execve spawner are one mechanism. Each file is one of these
// parts, but they share the thread's state and its invariants (what the
// thread holds when a child forks), which a package boundary would have to
// export and could then no longer guarantee.
package sandbox
