package deps

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/toolwire/toolwire/"

// edges are the packages that carry a protocol: gRPC, protobuf and the
// generated code are theirs. Every other package under pkg/ is a domain
// package. A new package that needs gRPC goes here, with its job.
var edges = map[string]string{
	"pkg/execgrpc":            "ExecutorService: server, client, proto<->execapi",
	"pkg/orchgrpc":            "OrchestratorService: server, proto<->orchestrator",
	"pkg/embedded":            "the executor in-process, over an in-memory gRPC connection",
	"pkg/execpool":            "executor pools by gRPC health",
	"pkg/healthprobe":         "the health subcommands",
	"pkg/rpcauth":             "TLS, mutual TLS and tokens for gRPC",
	"pkg/rpcerr":              "status reasons (google.rpc.ErrorInfo)",
	"pkg/rpcserver":           "the gRPC server both services run on",
	"pkg/settings/settingspb": "settings.Settings <-> executorv1.Settings",
	"pkg/telemetry":           "OpenTelemetry setup; the trace context of a raw ToolUse",
	"pkg/telemetry/otlptest":  "an OTLP collector for tests",
	"internal/googlerpc":      "descriptor sets of google.rpc for clients in other languages",
}

// cmdGen are the commands that may import generated code themselves, and
// why. Any other command reaches it through the edges.
var cmdGen = map[string]string{
	"cmd/toolsvc":   "toolsvc serve registers ExecutorService; toolsvc call speaks it message by message, as a raw client for scripts",
	"cmd/toolbench": "it measures the raw Execute protocol",
}

// executorSide are the packages of toolsvc, which has no model client and
// no conversation: they must not need the orchestrator's.
var executorSide = []string{"pkg/executor", "pkg/execsvc", "pkg/execgrpc", "pkg/embedded", "cmd/toolsvc"}

type group int

const (
	groupDomain group = iota + 1
	groupEdge
	groupCmd
	groupGen
	groupSuite // test suites and examples: clients from outside, no rule
)

func (g group) String() string {
	return [...]string{"", "domain", "edge", "cmd", "gen", "suite"}[g]
}

func groupOf(rel string) (group, bool) {
	switch {
	case edges[rel] != "":
		return groupEdge, true
	case strings.HasPrefix(rel, "gen/"):
		return groupGen, true
	case strings.HasPrefix(rel, "cmd/"):
		return groupCmd, true
	case strings.HasPrefix(rel, "test/"), strings.HasPrefix(rel, "examples/"):
		return groupSuite, true
	case strings.HasPrefix(rel, "pkg/"), rel == "internal/testkit", rel == "internal/testpdf", rel == "internal/deps":
		return groupDomain, true
	}
	return 0, false
}

// graph is the import graph of the module's packages and everything they
// import, tests left out.
type graph map[string][]string

func load(t *testing.T) graph {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"...").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	g := graph{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			g[f[0]] = f[1:]
		}
	}
	return g
}

// path returns a chain of imports from pkg to a package that bad accepts,
// or nil when there is none.
func (g graph) path(pkg string, bad func(string) bool) []string {
	parent := map[string]string{pkg: ""}
	queue := []string{pkg}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, imp := range g[p] {
			if _, seen := parent[imp]; seen {
				continue
			}
			parent[imp] = p
			if bad(imp) {
				var chain []string
				for q := imp; q != ""; q = parent[q] {
					chain = append(chain, strings.TrimPrefix(q, module))
				}
				slices.Reverse(chain)
				return chain
			}
			queue = append(queue, imp)
		}
	}
	return nil
}

func rel(p string) (string, bool) { return strings.CutPrefix(p, module) }

func isGRPCOrProto(p string) bool {
	return strings.HasPrefix(p, "google.golang.org/grpc") || strings.HasPrefix(p, "google.golang.org/protobuf") ||
		strings.HasPrefix(p, "google.golang.org/genproto")
}

func inGroup(want ...group) func(string) bool {
	return func(p string) bool {
		r, ok := rel(p)
		if !ok {
			return false
		}
		g, _ := groupOf(r)
		return slices.Contains(want, g)
	}
}

// TestDependencyRules checks the rules of the README's "Repository layout"
// for every package of the module:
//   - domain packages depend on no gRPC, protobuf or generated package and
//     on no edge, command or suite;
//   - edges depend on no command or suite;
//   - commands import generated code only through the edges, but for those
//     in cmdGen;
//   - generated code depends on nothing of ours;
//   - the executor's packages and toolsvc do not depend on the
//     orchestrator or the model client.
func TestDependencyRules(t *testing.T) {
	g := load(t)
	var mine []string
	for p := range g {
		if _, ok := rel(p); ok {
			mine = append(mine, p)
		}
	}
	sort.Strings(mine)
	if len(mine) < 20 {
		t.Fatalf("go list found only %d packages of the module: %v", len(mine), mine)
	}
	fail := func(pkg, rule string, chain []string) {
		t.Errorf("%s %s: %s", strings.TrimPrefix(pkg, module), rule, strings.Join(chain, " -> "))
	}
	for _, p := range mine {
		r, _ := rel(p)
		grp, ok := groupOf(r)
		if !ok {
			t.Errorf("%s is in no group: make it a domain or edge package (deps_test.go) or move it", r)
			continue
		}
		switch grp {
		case groupDomain:
			if c := g.path(p, isGRPCOrProto); c != nil {
				fail(p, "is a domain package and depends on gRPC or protobuf", c)
			}
			if c := g.path(p, inGroup(groupGen, groupEdge, groupCmd, groupSuite)); c != nil {
				fail(p, "is a domain package and depends on generated code, an edge, a command or a suite", c)
			}
		case groupEdge:
			if c := g.path(p, inGroup(groupCmd, groupSuite)); c != nil {
				fail(p, "is an edge and depends on a command or a suite", c)
			}
		case groupCmd:
			if cmdGen[r] == "" {
				for _, imp := range g[p] {
					if ir, ok := rel(imp); ok && strings.HasPrefix(ir, "gen/") {
						fail(p, "imports generated code itself, not through an edge", []string{r, ir})
					}
				}
			}
			if c := g.path(p, inGroup(groupSuite)); c != nil {
				fail(p, "depends on a suite", c)
			}
		case groupGen:
			if c := g.path(p, func(q string) bool { r, ok := rel(q); return ok && !strings.HasPrefix(r, "gen/") }); c != nil {
				fail(p, "is generated code and depends on a package of ours", c)
			}
		}
	}
	for _, r := range executorSide {
		if _, ok := g[module+r]; !ok {
			t.Errorf("%s of executorSide is not a package", r)
			continue
		}
		bad := func(q string) bool { return q == module+"pkg/orchestrator" || q == module+"pkg/model" }
		if c := g.path(module+r, bad); c != nil {
			fail(module+r, "is on the executor's side and depends on the orchestrator or the model client", c)
		}
	}
	for r := range edges {
		if _, ok := g[module+r]; !ok {
			t.Errorf("edge %s is not a package (any more?)", r)
		}
	}
	for r := range cmdGen {
		if _, ok := g[module+r]; !ok {
			t.Errorf("command %s of cmdGen is not a package (any more?)", r)
		}
	}
	if testing.Verbose() {
		for _, p := range mine {
			r, _ := rel(p)
			grp, _ := groupOf(r)
			fmt.Printf("%-8s %s\n", grp, r)
		}
	}
}
