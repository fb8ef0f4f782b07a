package bundle

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestContextSources(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(findRepoRoot(t), "functions", "star", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		df   string
		want []string
	}{
		{string(b), []string{"go.mod", "go.sum", "shared", "functions/star"}},
		{"FROM a AS b\nCOPY x y/ ./\nCOPY ./x/ z\nFROM c\nCOPY --from=b /out/s /s\nCOPY [\"w\", \"/w\"]\n", []string{"x", "y", "w"}},
		{"FROM a\nRUN true\n", nil},
	} {
		st, err := ParseDockerfile(strings.NewReader(c.df))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ContextSources(st)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q: ContextSources = %v, %v; want %v", c.df, got, err, c.want)
		}
	}
	for _, df := range []string{
		"FROM a\nCOPY *.go ./\n", "FROM a\nCOPY $X ./\n", "FROM a\nCOPY ../x ./\n", "FROM a\nCOPY /etc/passwd ./\n",
		"FROM a\nCOPY . ./\n", "FROM a\nCOPY x\n", "FROM a\nCOPY [\"x\"\n",
	} {
		st, err := ParseDockerfile(strings.NewReader(df))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := ContextSources(st); !errors.Is(err, ErrDockerfile) {
			t.Errorf("%q: ContextSources = %v, %v; want ErrDockerfile", df, got, err)
		}
	}
	ex := ContextExcludes([]string{"go.mod", "shared"}, "functions/star/Dockerfile", []string{"**/*.token"})
	if want := []string{"*", "!go.mod", "!shared", "!functions/star/Dockerfile", "**/*.token"}; !slices.Equal(ex, want) {
		t.Errorf("ContextExcludes = %v, want %v", ex, want)
	}
}
