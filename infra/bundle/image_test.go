package bundle

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// findRepoRoot walks up to the directory that holds infra/go.mod.
func findRepoRoot(t *testing.T) string {
	t.Helper()
	d, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for ; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "infra", "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatal("repository root not found")
		}
	}
}

// starDockerfile is the star's Dockerfile (relative to the repository).
const starDockerfile = "functions/star/Dockerfile"

// qemu returns the aarch64 user-mode emulator, failing under CI=true when
// it is missing (.ci/run installs qemu-user-static) and skipping otherwise.
func qemu(t *testing.T) string {
	t.Helper()
	for _, n := range []string{"qemu-aarch64-static", "qemu-aarch64"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	msg := "no qemu-aarch64(-static) on PATH: install qemu-user-static (Debian) to run the arm64 binary"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + "; .ci/run installs it")
	}
	t.Skip(msg)
	return ""
}

// TestStarImageOffline builds the star's image from its Dockerfile for
// linux/arm64 without a container engine, reads the OCI layout back, and
// checks that the entry point is an aarch64 ELF that starts (under qemu)
// and carries its build information.
func TestStarImageOffline(t *testing.T) {
	root := findRepoRoot(t)
	out := t.TempDir()
	if err := Image(root, starDockerfile, "linux/arm64", out); err != nil {
		t.Fatal(err)
	}
	img, err := ReadLayout(out)
	if err != nil {
		t.Fatal(err)
	}
	c := img.Config
	if c.OS != "linux" || c.Architecture != "arm64" {
		t.Errorf("image platform %s/%s, want linux/arm64", c.OS, c.Architecture)
	}
	if strings.Join(c.Config.Entrypoint, " ") != "/star" {
		t.Fatalf("entry point %q, want [/star]", c.Config.Entrypoint)
	}
	if !strings.HasPrefix(img.Base, "gcr.io/distroless/static") {
		t.Errorf("base %q, want a distroless static image (no libc: the binary must be static)", img.Base)
	}
	star, ok := img.Files["/star"]
	if !ok || img.Modes["/star"]&0o111 == 0 {
		t.Fatalf("no executable /star in the image (files %d)", len(img.Files))
	}
	bin := filepath.Join(t.TempDir(), "star")
	if err := os.WriteFile(bin, star, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckELF(bin); err != nil {
		t.Fatal(err)
	}
	// The version the binary carries (go version -m reads its build
	// information without running it).
	v, err := exec.Command(GoTool(), "version", "-m", bin).CombinedOutput()
	if err != nil || !strings.Contains(string(v), "github.com/strandlog/strand/functions/star") || !strings.Contains(string(v), "GOARCH=arm64") {
		t.Errorf("go version -m: %v\n%s", err, v)
	}
	t.Logf("star image binary: %s", strings.SplitN(string(v), "\n", 2)[0])
	// It starts: --help prints the flags and exits 0.
	var outb bytes.Buffer
	cmd := exec.Command(qemu(t), bin, "--help")
	cmd.Stdout, cmd.Stderr = &outb, &outb
	if err := cmd.Run(); err != nil {
		t.Fatalf("qemu %s --help: %v\n%s", bin, err, outb.String())
	}
	if !strings.Contains(outb.String(), "-table") || !strings.Contains(outb.String(), "-settled-bucket") {
		t.Errorf("star --help under qemu printed no flags:\n%s", outb.String())
	}
	// It prints its version, and says it is the arm64 build.
	ver, err := exec.Command(qemu(t), bin, "-version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(ver), "star ") || !strings.Contains(string(ver), "linux/arm64") {
		t.Errorf("qemu %s -version: %v\n%s", bin, err, ver)
	}
	t.Logf("star -version under qemu: %s", strings.TrimSpace(string(ver)))
}

// imageRepo is a repository root with a main package and a Dockerfile in
// the star's shape whose build stage declares platform as given.
func imageRepo(t *testing.T, argLines string) string {
	return tempRepo(t, map[string]string{
		"cmd/hello/main.go": "package main\n\nfunc main() { println(\"hello\") }\n",
		"Dockerfile": "# a comment\nFROM --platform=$BUILDPLATFORM golang:1 AS build\n" + argLines +
			"WORKDIR /src\nCOPY go.mod ./\nCOPY cmd/ cmd/\n" +
			"RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \\\n  go build -trimpath -o /out/hello ./cmd/hello\n\n" +
			"FROM gcr.io/distroless/static-debian12:nonroot\nCOPY --from=build /out/hello /hello\nEXPOSE 80 53/udp\nENTRYPOINT [\"/hello\"]\n",
	})
}

// TestImageFollowsPlatformArgs: the class of the amd64-binary bug. With
// ARG TARGETOS TARGETARCH (no defaults) the binary is built for the
// requested platform; with a default, BuildKit (and Image) keep the
// default, and the check on the binary catches it.
func TestImageFollowsPlatformArgs(t *testing.T) {
	for _, c := range []struct {
		args   string
		arm64  bool
		single bool
	}{
		{"ARG TARGETOS\nARG TARGETARCH\n", true, false},
		{"ARG TARGETOS TARGETARCH\n", true, true},
		{"ARG TARGETOS=linux\nARG TARGETARCH=amd64\n", false, false},
	} {
		root := imageRepo(t, c.args)
		out := t.TempDir()
		if err := Image(root, "Dockerfile", "linux/arm64", out); err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		img, err := ReadLayout(out)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := img.Config.Config.ExposedPorts["53/udp"]; !ok || len(img.Config.Config.ExposedPorts) != 2 {
			t.Errorf("exposed ports %v", img.Config.Config.ExposedPorts)
		}
		bin := filepath.Join(t.TempDir(), "hello")
		if err := os.WriteFile(bin, img.Files["/hello"], 0o755); err != nil {
			t.Fatal(err)
		}
		err = CheckELF(bin)
		if c.arm64 && err != nil {
			t.Errorf("%q: %v", c.args, err)
		}
		if !c.arm64 && !errors.Is(err, ErrNotArm64) {
			t.Errorf("%q: a defaulted TARGETARCH built an arm64 binary? CheckELF = %v", c.args, err)
		}
	}
}

func TestImageRefuses(t *testing.T) {
	for _, df := range []string{
		"FROM golang:1 AS build\nADD . /src\nFROM scratch\nCOPY --from=build /a /a\n",
		"ARG X\nFROM scratch\n",
		"FROM golang:1 AS build\nRUN true\nFROM scratch\nRUN echo hi\n",
		"FROM golang:1 AS build\nRUN exit 3\nFROM scratch\nCOPY --from=build /out/a /a\n",
		"FROM scratch\nENTRYPOINT /star\n",
		"FROM a b c d\n",
	} {
		root := tempRepo(t, map[string]string{"Dockerfile": df})
		if err := Image(root, "Dockerfile", "linux/arm64", t.TempDir()); err == nil {
			t.Errorf("built from:\n%s", df)
		}
	}
}

func TestExpand(t *testing.T) {
	v := map[string]string{"A": "x", "B_1": "y"}
	for in, want := range map[string]string{
		"$A/${B_1}": "x/y", "$$A": "$x", "a$": "a$", "${A": "${A", "$C.": ".", "GOARCH=$A go": "GOARCH=x go",
	} {
		if got := expand(in, v); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParseDockerfile(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("..", "..", starDockerfile))
	if err == nil {
		f.Add(string(b))
	}
	f.Add("FROM a AS b\nRUN x \\\n y\n")
	f.Add("FROM --platform=$X a\nCOPY --from=b /x /y\n")
	f.Fuzz(func(t *testing.T, s string) {
		stages, err := ParseDockerfile(strings.NewReader(s))
		if err != nil {
			return
		}
		for _, st := range stages {
			for _, in := range st.Instrs {
				if !supported[in.Cmd] || in.Cmd == "FROM" {
					t.Fatalf("instruction %q accepted", in.Cmd)
				}
			}
		}
		_ = expand(s, map[string]string{"A": "b"})
	})
}
