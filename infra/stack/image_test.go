package stack

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// writeFiles writes files (path relative to root -> content) under root.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, body := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// starImageHash synthesizes only the star's image asset from repo and
// returns its hash and the files of the staged context in the cloud
// assembly (what `cdk deploy` would build from).
func starImageHash(t *testing.T, repo string) (string, []string) {
	t.Helper()
	out := t.TempDir()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(out)})
	st := awscdk.NewStack(app, jsii.String("Img"), nil)
	img, err := NewStarImage(st, "Image", repo)
	if err != nil {
		t.Fatal(err)
	}
	app.Synth(nil)
	hash := *img.AssetHash()
	var files []string
	dir := filepath.Join(out, "asset."+hash)
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatalf("staged context: %v", err)
	}
	slices.Sort(files)
	return hash, files
}

// TestStarImageContext: the star image's context holds only what its
// Dockerfile copies, so a change anywhere else (docs, tests, the CLI
// binary and token files the walkthrough writes, build outputs) leaves the
// asset hash unchanged, and a change to a copied source changes it. Before
// the context was derived from the Dockerfile, the docs-only change gave a
// new hash (and so a new star deployment).
func TestStarImageContext(t *testing.T) {
	dockerfile, err := os.ReadFile(filepath.Join(repoRoot, StarDockerfile))
	if err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	writeFiles(t, repo, map[string]string{
		StarDockerfile:           string(dockerfile),
		"go.mod":                 "module github.com/strandlog/strand\n",
		"go.sum":                 "",
		"functions/star/main.go": "package main\n",
		"shared/star/star.go":    "package star\n",
		"functions/trim/main.go": "package main\n",
		"docs/deploy.md":         "# deploy\n",
		"README.md":              "# strand\n",
	})
	base, files := starImageHash(t, repo)
	want := []string{"functions/star/Dockerfile", "functions/star/main.go", "go.mod", "go.sum", "shared/star/star.go"}
	if !slices.Equal(files, want) {
		t.Errorf("staged context %v, want %v", files, want)
	}
	// Docs, tests, another function, the walkthrough's binary and tokens
	// (also inside a copied directory), build outputs: same hash.
	writeFiles(t, repo, map[string]string{
		"docs/deploy.md":             "# deploy, edited\n",
		"docs/new.md":                "new page\n",
		"README.md":                  "# strand, edited\n",
		"tests/sim/sim_test.go":      "package sim\n",
		"functions/trim/main.go":     "package main // edited\n",
		"strand":                     "\x7fELF the CLI",
		"admin.token":                "secret",
		"shared/star/leaked.token":   "secret",
		"functions/star/star.test":   "\x7fELF a test binary",
		"infra/build/trim/bootstrap": "\x7fELF",
		".git/HEAD":                  "ref: refs/heads/main\n",
	})
	if h, files := starImageHash(t, repo); h != base {
		t.Errorf("hash changed from %s to %s on changes outside the Dockerfile's sources; context %v", base, h, files)
	} else if !slices.Equal(files, want) {
		t.Errorf("staged context %v, want %v", files, want)
	}
	// A copied source changes: a new hash.
	writeFiles(t, repo, map[string]string{"shared/star/star.go": "package star // edited\n"})
	if h, _ := starImageHash(t, repo); h == base {
		t.Errorf("hash %s unchanged after an edit of shared/", h)
	}
}
