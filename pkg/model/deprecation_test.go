package model_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/toolwire/toolwire/pkg/model"
)

// TestDefaultModelNotDeprecated reads the model constants of the SDK this
// module builds with: the default models (the main one and the small one)
// must be among them, without a "Deprecated:" note (a deprecated model
// reaches its end of life, and then every run that does not name a model
// fails).
func TestDefaultModelNotDeprecated(t *testing.T) {
	for _, name := range []string{model.DefaultModel, model.DefaultSmallModel} {
		checkNotDeprecated(t, name)
	}
}

func checkNotDeprecated(t *testing.T, name string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/anthropics/anthropic-sdk-go").Output()
	if err != nil {
		t.Skipf("cannot locate the SDK's source: %v", err)
	}
	file := filepath.Join(strings.TrimSpace(string(out)), "message.go")
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok || len(spec.Values) != 1 || len(spec.Names) != 1 || !strings.HasPrefix(spec.Names[0].Name, "ModelClaude") {
			return true
		}
		lit, ok := spec.Values[0].(*ast.BasicLit)
		if !ok {
			return true
		}
		if v, _ := strconv.Unquote(lit.Value); v == name {
			found = true
			if spec.Doc != nil && strings.Contains(spec.Doc.Text(), "Deprecated:") {
				t.Errorf("the default model %s is deprecated in the SDK: %s", v, spec.Doc.Text())
			}
		}
		return true
	})
	if !found {
		t.Fatalf("the default model %s is not one of the SDK's model constants in %s", name, file)
	}
}
