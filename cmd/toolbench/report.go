package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Summary is one figure's statistics. Latencies are in µs. For MiB/s
// figures Median is the median stream's rate, P90 the rate 90% of streams
// reached or beat (the slow tail), and Mean the total bytes over the total
// time.
type Summary struct {
	ID      string  `json:"id"`
	Label   string  `json:"label"`
	Sandbox string  `json:"sandbox,omitempty"`
	Unit    string  `json:"unit"`
	N       int     `json:"n"`
	Median  float64 `json:"median"`
	P90     float64 `json:"p90"`
	Mean    float64 `json:"mean"`
	// For Bash streams: the share of the command's output that reached the
	// client in Progress events, the bytes toolsvc said it dropped, and the
	// median rate at which the command's whole output went through toolsvc
	// (64 MiB over the time to the Result), delivered or not.
	DeliveredShare float64 `json:"delivered_share,omitempty"`
	DroppedBytes   int64   `json:"dropped_bytes,omitempty"`
	OutputMedian   float64 `json:"output_mib_per_s_median,omitempty"`
	// CPUms is the mean CPU time of one sample in ms, summed over every
	// process it made work: toolbench, the server (echo or toolsvc) and
	// the commands they ran.
	CPUms float64 `json:"cpu_ms_per_sample"`
}

// Ratio compares a figure with its floor (or, with no floor, states an
// absolute median) against a target of issue 20.
type Ratio struct {
	Target string  `json:"target"`
	Issue  int     `json:"issue"`
	Figure string  `json:"figure"`
	Floor  string  `json:"floor,omitempty"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"` // "x" for ratios, "µs" for absolute
	Goal   string  `json:"goal"`
	Met    bool    `json:"met"`
}

// Bound is what the least implementation of a target reaches: a reference
// figure over the target's floor, both measured in the same run, or the
// reference's own median for a goal in absolute terms (the abort). An
// executor is free to tune its transport (toolsvc does), so a target over
// an untuned floor has a bound from the untuned reference and one from the
// tuned reference. Only when every reference misses the goal can no
// executor meet it on this machine. The stream also has bounds from
// references that keep the whole output (SavesOutput), as a Bash call
// does: when all of those miss, no executor that keeps it can meet the
// goal here.
type Bound struct {
	Target    string  `json:"target"`
	Reference string  `json:"reference"`
	Floor     string  `json:"floor,omitempty"` // "" for an absolute goal
	Value     float64 `json:"value"`           // reference median over floor median, or the reference's median
	Unit      string  `json:"unit"`            // "x" for a ratio, the reference's unit for an absolute goal
	Goal      string  `json:"goal"`
	Reachable bool    `json:"reachable"` // the reference meets the goal
	// SavesOutput says that the reference also writes every byte of the
	// output to a file, as a Bash call keeps it.
	SavesOutput bool `json:"saves_output,omitempty"`
	// FigureToReference is each measured figure's median over the
	// reference's, by figure id.
	FigureToReference map[string]float64 `json:"figure_to_reference,omitempty"`
}

// Confinement is the cost of the sandbox for one kind of call: the figure
// with --sandbox landlock against the same figure with --sandbox none.
type Confinement struct {
	Figure  string  `json:"figure"`
	Unit    string  `json:"unit"`
	Off     float64 `json:"off_median"`
	On      float64 `json:"on_median"`
	Delta   float64 `json:"delta"`
	OnToOff float64 `json:"on_to_off"`
}

// Machine describes where the run happened.
type Machine struct {
	NProc          int    `json:"nproc"`
	CPU            string `json:"cpu"`
	Kernel         string `json:"kernel"`
	Go             string `json:"go"`
	ToolsvcVersion string `json:"toolsvc_version"`
	// UID is the user toolbench ran as. Not root, it runs toolsvc with the
	// host's network (--network host), and toolsvc runs its tools as that
	// user.
	UID int `json:"uid"`
}

// Report is toolbench's whole output, also its --json form.
type Report struct {
	Start       time.Time        `json:"start"`
	Duration    string           `json:"duration"`
	Machine     Machine          `json:"machine"`
	LoadBefore  string           `json:"load_before"`
	LoadAfter   string           `json:"load_after"`
	Samples     int              `json:"samples"`
	Warmup      int              `json:"warmup"`
	Rounds      int              `json:"rounds"`
	Seed        uint64           `json:"seed"`
	Figures     []Summary        `json:"figures"`
	Ratios      []Ratio          `json:"ratios"`
	Bounds      []Bound          `json:"bounds"`
	Confinement []Confinement    `json:"confinement"`
	Sessions    []SessionsFigure `json:"sessions,omitempty"`
}

// summarise computes a figure's statistics from its samples.
func summarise(f *figure) Summary {
	s := Summary{ID: f.id, Label: f.label, Sandbox: f.sandbox, N: len(f.took), DroppedBytes: f.dropped}
	if len(f.took) == 0 {
		return s
	}
	s.CPUms = float64(f.cpu) / float64(time.Millisecond) / float64(len(f.took))
	var total time.Duration
	var totalBytes int64
	vals := make([]float64, len(f.took))
	for i, d := range f.took {
		total += d
		totalBytes += f.bytes[i]
		switch f.unit {
		case latency:
			vals[i] = us(d)
		case throughput:
			vals[i] = mibps(f.bytes[i], d)
		}
	}
	slices.Sort(vals)
	s.Median = percentile(vals, 50)
	if f.produced > 0 {
		s.DeliveredShare = float64(totalBytes) / float64(f.produced*int64(len(f.took)))
		out := make([]float64, len(f.took))
		for i, d := range f.took {
			out[i] = mibps(f.produced, d)
		}
		slices.Sort(out)
		s.OutputMedian = percentile(out, 50)
	}
	switch f.unit {
	case latency:
		s.Unit = "µs"
		s.P90 = percentile(vals, 90)
		s.Mean = us(total) / float64(len(vals))
	case throughput:
		s.Unit = "MiB/s"
		s.P90 = percentile(vals, 10) // slow tail
		s.Mean = mibps(totalBytes, total)
	}
	return s
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func mibps(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / (1 << 20) / d.Seconds()
}

// percentile is the nearest-rank p-th percentile of sorted values.
func percentile(sorted []float64, p float64) float64 {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// target is one goal of issue 20 on a figure id prefix.
type target struct {
	name    string
	issue   int
	figure  string // figure id without "/sandbox"
	floor   string // floor figure id; "" for an absolute goal
	goal    float64
	atLeast bool   // the value must be >= goal (throughput), else <= / <
	ref     string // reference figure id: the least implementation; "" for none
	// saved is the reference that also keeps the whole output, as the
	// figure's tool must; "" for none.
	saved string
}

// met reports whether v meets t's goal: a ratio, or for an absolute goal
// (no floor) a median.
func (t target) met(v float64) bool {
	switch {
	case t.floor == "":
		return v < t.goal
	case t.atLeast:
		return v >= t.goal
	}
	return v <= t.goal
}

// goalText states t's goal; unit is the figure's, for an absolute goal.
func (t target) goalText(unit string) string {
	switch {
	case t.floor == "":
		return fmt.Sprintf("< %g %s", t.goal, unit)
	case t.atLeast:
		return fmt.Sprintf(">= %gx", t.goal)
	}
	return fmt.Sprintf("<= %gx", t.goal)
}

// targets are issue 20's goals. The untuned floors are gRPC's defaults; the
// tuned ones (windows, buffers, pipe and message size set for bulk output)
// are reported beside them, and the stream has a goal against both.
var targets = []target{
	{name: "Read 1 KiB / bare gRPC ping-pong", issue: 20, figure: "read_1kib", floor: "floor_grpc_pingpong", goal: 1.5, ref: refRead},
	{name: "Read 1 KiB / tuned gRPC ping-pong", issue: 20, figure: "read_1kib", floor: "floor_grpc_pingpong" + tunedSuffix, goal: 1.5, ref: refRead + tunedSuffix},
	{name: "Read 1 KiB, lifecycle folded / bare gRPC ping-pong", issue: 20, figure: "read_1kib_folded", floor: "floor_grpc_pingpong", goal: 1.5},
	{name: "Bash `true` / os/exec `bash -c true`", issue: 20, figure: "bash_true", floor: "floor_exec_bash_true", goal: 1.25},
	{name: "stdout stream / bare gRPC 64 KiB stream", issue: 20, figure: "bash_stream_64mib", floor: "floor_grpc_stream_64mib", goal: 0.9, atLeast: true, ref: refStream, saved: refStreamSaved},
	{name: "stdout stream / tuned gRPC stream", issue: 20, figure: "bash_stream_64mib", floor: "floor_grpc_stream_64mib" + tunedSuffix, goal: 0.8, atLeast: true, ref: refStream + tunedSuffix, saved: refStreamSaved + tunedSuffix},
	{name: "32 concurrent Bash `true` / 32 os/exec", issue: 20, figure: "bash_true_x32", floor: "floor_exec_bash_true_x32", goal: 1.5},
	{name: "abort of running `sleep` to Result, median", issue: 20, figure: "abort_sleep", goal: 500, ref: refAbort},
}

// evaluate computes every target's ratio for each sandbox measured, and the
// cost of confinement.
func evaluate(sums []Summary, sandboxes []string) ([]Ratio, []Confinement) {
	byID := summariesByID(sums)
	var ratios []Ratio
	for _, t := range targets {
		for _, sb := range sandboxes {
			fig, ok := byID[t.figure+"/"+sb]
			if !ok || fig.N == 0 {
				continue
			}
			r := Ratio{Target: t.name + " (sandbox " + sb + ")", Issue: t.issue, Figure: fig.ID}
			if t.floor == "" {
				r.Value, r.Unit = fig.Median, fig.Unit
				r.Goal, r.Met = t.goalText(fig.Unit), t.met(fig.Median)
			} else {
				fl := byID[t.floor]
				if fl.N == 0 || fl.Median == 0 {
					continue
				}
				r.Floor, r.Unit = fl.ID, "x"
				r.Value = fig.Median / fl.Median
				r.Goal, r.Met = t.goalText("x"), t.met(r.Value)
			}
			ratios = append(ratios, r)
		}
	}
	var conf []Confinement
	for _, name := range []string{"read_1kib", "bash_true", "bash_true_idle", "bash_true_x32", "bash_stream_64mib", "abort_sleep", "abort_start", "startup_serving"} {
		off, on := byID[name+"/none"], byID[name+"/landlock"]
		if off.N == 0 || on.N == 0 || off.Median == 0 {
			continue
		}
		conf = append(conf, Confinement{Figure: name, Unit: on.Unit, Off: off.Median, On: on.Median,
			Delta: on.Median - off.Median, OnToOff: on.Median / off.Median})
	}
	return ratios, conf
}

// summariesByID indexes summaries by figure id.
func summariesByID(sums []Summary) map[string]Summary {
	byID := make(map[string]Summary, len(sums))
	for _, s := range sums {
		byID[s.ID] = s
	}
	return byID
}

// bounds compares each target's reference with its floor, and each measured
// figure of the target with the reference.
func bounds(sums []Summary, sandboxes []string) []Bound {
	byID := summariesByID(sums)
	var out []Bound
	for _, t := range targets {
		if t.ref == "" {
			continue
		}
		for _, ref := range []string{t.ref, t.saved} {
			if ref == "" {
				continue
			}
			ids := []string{ref}
			if !strings.HasSuffix(ref, tunedSuffix) {
				ids = append(ids, ref+tunedSuffix)
			}
			for _, id := range ids {
				if b, ok := bound(t, byID[id], byID[t.floor], byID, sandboxes); ok {
					b.SavesOutput = ref == t.saved
					out = append(out, b)
				}
			}
		}
	}
	return out
}

// bound compares reference ref of target t with the target's floor fl (for
// an absolute goal, ref's median with the goal), and each measured figure
// of t with ref; false when either was not measured.
func bound(t target, ref, fl Summary, byID map[string]Summary, sandboxes []string) (Bound, bool) {
	if ref.N == 0 || ref.Median == 0 {
		return Bound{}, false
	}
	b := Bound{Target: t.name, Reference: ref.ID, Value: ref.Median, Unit: ref.Unit}
	if t.floor != "" {
		if fl.N == 0 || fl.Median == 0 {
			return Bound{}, false
		}
		b.Floor, b.Value, b.Unit = fl.ID, ref.Median/fl.Median, "x"
	}
	b.Goal, b.Reachable = t.goalText(b.Unit), t.met(b.Value)
	for _, sb := range sandboxes {
		if fig := byID[t.figure+"/"+sb]; fig.N > 0 {
			if b.FigureToReference == nil {
				b.FigureToReference = make(map[string]float64)
			}
			b.FigureToReference[fig.ID] = fig.Median / ref.Median
		}
	}
	return b, true
}

// unreachable says why bound b misses its goal: only with its reference's
// transport, or with every reference measured (then no executor can meet
// the goal on this machine). A reference that keeps the whole output is
// compared with the others that keep it only.
func unreachable(all []Bound, b Bound) string {
	for _, o := range all {
		if o.Target == b.Target && o.Reachable && (o.SavesOutput || !b.SavesOutput) {
			return "not with this reference's transport; " + o.Reference + " meets it"
		}
	}
	if b.SavesOutput {
		return "no executor that keeps the whole output can meet the goal here"
	}
	return "no executor can meet the goal here"
}

// streamCeiling is the fastest a Bash stream could go on nproc CPUs if it
// did nothing but the work of the two 64 MiB floors, in MiB/s: read the
// command's output from a pipe (head) and send it as gRPC messages
// (flood). Both are CPU-bound on a small machine, and toolsvc must do
// both for every byte, on the same CPUs. Zero when either is missing.
func streamCeiling(head, flood Summary, nproc int) float64 {
	cpu := head.CPUms + flood.CPUms
	if head.N == 0 || flood.N == 0 || cpu <= 0 || nproc < 1 {
		return 0
	}
	wall := time.Duration(cpu / float64(nproc) * float64(time.Millisecond))
	return mibps(streamBytes, wall)
}

// valueText prints a target's or a bound's value: a ratio with enough
// digits that 1.304 does not print as a met 1.30, else a median and its
// unit.
func valueText(v float64, unit string) string {
	if unit == "x" {
		return fmt.Sprintf("%.3fx", v)
	}
	return num(v) + " " + unit
}

// writeText prints the report as tables.
func writeText(w io.Writer, r *Report) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "toolbench %s (%s): %d samples per latency figure, %d warm-up, %d interleaved rounds, seed %d\n",
		r.Start.UTC().Format(time.RFC3339), r.Duration, r.Samples, r.Warmup, r.Rounds, r.Seed)
	fmt.Fprintf(bw, "machine: %d CPUs, %s, Linux %s, %s; toolsvc %s\n", r.Machine.NProc, r.Machine.CPU, r.Machine.Kernel, r.Machine.Go, r.Machine.ToolsvcVersion)
	fmt.Fprintf(bw, "load average (1/5/15 min): before %s, after %s\n", r.LoadBefore, r.LoadAfter)
	if r.Machine.UID != 0 {
		fmt.Fprintf(bw, "note: run as uid %d, not root: toolsvc ran with --network host and without the protections only root can set up (session users, a network namespace); the targets are judged on a run as root\n", r.Machine.UID)
	}
	fmt.Fprintln(bw)

	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "id\tunit\t    n\t   median\t      p90\t     mean\t CPU ms\tfigure")
	for _, s := range r.Figures {
		fmt.Fprintf(tw, "%s\t%s\t%5d\t%9s\t%9s\t%9s\t%7s\t%s\n", s.ID, s.Unit, s.N, num(s.Median), num(s.P90), num(s.Mean), num(s.CPUms), s.Label)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(bw, "(MiB/s rows: median stream rate; p90 = rate 90% of streams reached; mean = all bytes / all time;")
	fmt.Fprintln(bw, " CPU ms: mean CPU time of one sample, toolbench, servers and their commands together)")
	byID := summariesByID(r.Figures)
	for _, suffix := range []string{"", tunedSuffix} {
		head, flood := byID["floor_exec_head_64mib"+suffix], byID["floor_grpc_stream_64mib"+suffix]
		if c := streamCeiling(head, flood, r.Machine.NProc); c > 0 {
			fmt.Fprintf(bw, "note: a Bash stream does at least the work of both 64 MiB floors, %s + %s (%s + %s CPU ms); on %d CPUs that caps it at %s MiB/s, %.2fx that gRPC floor\n",
				head.ID, flood.ID, num(head.CPUms), num(flood.CPUms), r.Machine.NProc, num(c), c/flood.Median)
		}
	}
	head := byID["floor_exec_head_64mib"]
	for _, s := range r.Figures {
		if s.OutputMedian > 0 {
			fmt.Fprintf(bw, "note: %s: %.1f%% of the output reached the client as Progress (%d bytes reported dropped); the whole output went through toolsvc at %s MiB/s (median)\n",
				s.ID, 100*s.DeliveredShare, s.DroppedBytes, num(s.OutputMedian))
			if head.Median > 0 {
				fmt.Fprintf(bw, "note: %s: %.3fx the rate at which the bare command's output can be read at all (floor_exec_head_64mib)\n", s.ID, s.Median/head.Median)
			}
		}
	}

	fmt.Fprintln(bw, "\ntargets (ratios of medians measured in this run)")
	tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "target\tissue\tvalue\tgoal\tmet")
	for _, t := range r.Ratios {
		met := "NOT MET"
		if t.Met {
			met = "met"
		}
		fmt.Fprintf(tw, "%s\t#%d\t%s\t%s\t%s\n", t.Target, t.Issue, valueText(t.Value, t.Unit), t.Goal, met)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	if len(r.Bounds) > 0 {
		fmt.Fprintln(bw, "\nbounds (the least implementation of the figure, no executor around it, against the same floor, or for the abort against")
		fmt.Fprintln(bw, " the goal itself; an executor may tune its transport, so a goal over an untuned floor is within reach when either reference")
		fmt.Fprintln(bw, " meets it; a reference ending in _saved or _saved_tuned also writes every byte to a file, as a Bash call keeps its whole")
		fmt.Fprintln(bw, " output for the model to read)")
		tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "target\treference\tvalue\tgoal\treachable\tfigure / reference")
		for _, b := range r.Bounds {
			reachable := "no: " + unreachable(r.Bounds, b)
			if b.Reachable {
				reachable = "yes"
			}
			var rel []string
			for _, id := range slices.Sorted(maps.Keys(b.FigureToReference)) {
				rel = append(rel, fmt.Sprintf("%s %.2fx", id, b.FigureToReference[id]))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", b.Target, b.Reference, valueText(b.Value, b.Unit), b.Goal, reachable, strings.Join(rel, ", "))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	if len(r.Sessions) > 0 {
		fmt.Fprintf(bw, "\nmany sessions: Reads of the 1 KiB file back to back in every session at once (goal: executor CPU per call <= %g ms with 100 sessions)\n", sessionsGoal)
		tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "sandbox	sessions	 calls	   s	calls/s	executor CPU ms/call	all CPU ms/call	goal")
		for _, s := range r.Sessions {
			goal := ""
			if s.Sessions == 100 {
				goal = "NOT MET"
				if s.ExecutorCPUms <= sessionsGoal {
					goal = "met"
				}
			}
			fmt.Fprintf(tw, "%s\t%8d\t%6d\t%4.1f\t%7.0f\t%20.3f\t%15.3f\t%s\n", s.Sandbox, s.Sessions, s.Calls, s.Seconds, s.CallsPerSecond, s.ExecutorCPUms, s.TotalCPUms, goal)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}

	if len(r.Confinement) > 0 {
		fmt.Fprintln(bw, "\ncost of confinement (median with --sandbox landlock vs --sandbox none)")
		tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "figure\tunit\t      off\t       on\t   on-off\t on/off")
		for _, c := range r.Confinement {
			fmt.Fprintf(tw, "%s\t%s\t%9s\t%9s\t%9s\t%6.2fx\n", c.Figure, c.Unit, num(c.Off), num(c.On), num(c.Delta), c.OnToOff)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// writeJSON prints the report as one JSON object.
func writeJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// num formats a figure with a precision that suits its size.
func num(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// machine describes this host.
func machine() Machine {
	m := Machine{NProc: runtime.NumCPU(), Go: runtime.Version(), CPU: "unknown", Kernel: "unknown", UID: os.Geteuid()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// loadAvg is the 1, 5 and 15 minute load average.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
