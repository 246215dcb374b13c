// Command toolbench measures a built toolsvc binary from the outside: it
// starts toolsvc as child processes on loopback, talks to them with the
// generated ExecutorService client, and compares every figure with a floor
// measured in the same run on the same machine.
//
// Usage:
//
//	toolbench --toolsvc PATH [-n 200] [--json]
//
// The figures are one Read of a 1 KiB file (in a session with the
// executor's default options, and in one opened as the orchestrator opens
// its sessions, with LIFECYCLE_FOLDED: the Result alone), Bash `true` (back
// to back, and 100 ms after the call before, as the calls of a
// conversation come, against os/exec after the same pause), 32 concurrent Bash
// `true` of one assistant message, the time from sending an Abort for a
// running `sleep 30` (and for a bash with a `sleep 30` child) to its Result,
// 64 MiB of Bash stdout streamed as Progress events, and the time from
// starting a toolsvc process to its SERVING health status, each with the
// sandbox off (--sandbox none) and on (the default). --only selects figures
// by id, to rerun one that looked like noise. The floors are a bare gRPC
// bidi ping-pong of 1 KiB and a bare gRPC server stream of 64 KiB messages
// (served by a second toolbench process, so client and server are separate
// processes as they are for toolsvc), a bare os/exec `bash -c true` and 32
// of them at once. A further reference, floor_exec_head_64mib, runs the
// stream figure's command with os/exec and only reads its output: how fast
// that output can be had at all, before anything sends it.
//
// Three references are the least implementations of a Read and of a Bash
// stream, served by the same bare gRPC server: ref_grpc_read_1kib answers
// each ping with the 1 KiB file's lines numbered,
// ref_grpc_exec_stream_64mib sends `head`'s stdout as it is read from the
// pipe, and ref_grpc_exec_stream_64mib_saved also writes each read to a
// file in the TMPDIR toolsvc's sessions use, as a Bash call keeps its whole
// output for the model to read (its trailer says how many bytes the file
// held, and toolbench checks it). Divided by their target's floor they are
// the best any executor could score on the machine that day, and the best
// one that keeps the whole output; the "bounds" table prints that and each
// toolsvc figure against its reference. A fourth, ref_grpc_abort_sleep, is
// the least an abort can cost: the bare server starts `bash -c 'sleep 30'`
// when asked, toolbench waits for the sleep in /proc as it does for
// toolsvc's, and on the abort message the server sends SIGKILL and answers
// at once, reaping in a goroutine. The abort's goal is a time, so its bound
// is that median against the goal itself.
//
// The gRPC floors, the Read and stream references and the head reference are
// measured twice: over gRPC's defaults, and tuned as for bulk output (HTTP/2
// stream and connection windows of 4 and 16 MiB, 256 KiB read and write
// buffers on both ends, 256 KiB stream messages, the command's stdout pipe
// enlarged to 1 MiB with F_SETPIPE_SZ and read 256 KiB at a time). The tuned
// ids end in "_tuned"; the echo server listens on a second port for them.
// Targets and bounds are computed against both. An executor may tune its own
// transport, so a target over an untuned floor gets a bound from each
// reference, and it is out of every executor's reach only when both
// references miss it.
//
// After the rounds, the sessions figure opens 10, 100 and 500 sessions
// (--sessions) on each toolsvc and has every one send Reads of the 1 KiB
// file back to back, 20000 in all (--sessions-calls): calls per second,
// and toolsvc's own CPU per call from /proc/PID/stat.
//
// Because the machine it runs on may be shared, samples are taken in rounds:
// each round takes a share of every figure's samples, floors and peers in a
// shuffled order, so a burst of load from elsewhere touches both sides of a
// ratio alike. The load average before and after the run is printed with
// the results.
//
// toolbench builds nothing: give it a toolsvc binary. It binds only
// 127.0.0.1, stops its children by PID (SIGTERM, then a wait) and removes
// its temporary directory when done. It is a measuring tool, not a test:
// it prints whether each target is met but exits 0 either way.
//
// Why one package of this size (about 3,100 lines): each figure comes with
// the floor and reference it is compared with, and all of them share the
// runs, the statistics and the report.
package main
