// Package tool is the shared vocabulary of toolwire's executor: what a tool
// is (Tool, Spec), what a call carries in (Call) and out (Result, Progress),
// and the per-session state tools share (Env, FileState).
//
// It knows nothing of gRPC, queues or permissions. Tool implementations live
// in the packages under pkg/tools; the pipeline that validates, authorises,
// schedules and runs calls lives in pkg/executor.
//
// Why one package of this size (about 540 lines): it is the contract
// between the executor and every tool (the interface, its environment,
// results and the record of reads), and each part is used by all tools.
package tool
