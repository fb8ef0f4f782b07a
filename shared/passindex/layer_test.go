package passindex_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// stages are the packages that read or write the window: passindex sits
// below them and imports none (ADR 0058), so no stage's logic leaks into
// the read model they share.
var stages = []string{"absorb", "settle", "trim", "probe", "read", "server", "star", "node", "bench", "wake", "kafka"}

// TestImportsNoStage: the package's code (its tests may use fixtures)
// imports no stage package.
func TestImportsNoStage(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "github.com/strandlog/strand/shared/"
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range stages {
				if path == prefix+s || strings.HasPrefix(path, prefix+s+"/") {
					t.Errorf("%s imports %s: passindex is below the stages (ADR 0058)", name, path)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no source files found")
	}
}
