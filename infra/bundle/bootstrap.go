package bundle

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
)

// ErrNotArm64 is returned (wrapped) for a file that is not a linux/arm64
// executable ELF.
var ErrNotArm64 = errors.New("bundle: not a linux/arm64 executable")

// LambdaBuildFlags are the go build flags of a Lambda bootstrap (besides
// -o and the package). -trimpath and -buildvcs=false make it reproducible:
// no build directory and no VCS stamp (revision, time, modified) in the
// binary, so a commit that changes no Go source builds the same bytes and
// the same asset hash, and redeploys no function. On the command line,
// -buildvcs=false wins over any GOFLAGS.
var LambdaBuildFlags = []string{"-tags", "lambda.norpc", "-trimpath", "-buildvcs=false", "-ldflags=-s -w"}

// Arm64Env is the environment that cross-compiles for linux/arm64 with no
// C toolchain.
var Arm64Env = []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64"}

// Dir returns infra/build/<name> under repoRoot: the Lambda asset
// directory of function name, holding only its bootstrap.
func Dir(repoRoot, name string) string {
	return filepath.Join(repoRoot, "infra", "build", name)
}

var (
	builtMu sync.Mutex
	built   = map[string]error{}
)

// Bootstrap builds functions/<name> of repoRoot into Dir(repoRoot,
// name)/bootstrap and checks that it is a linux/arm64 ELF; it returns the
// directory. The first call for a function builds; later calls in the same
// process return the first result.
func Bootstrap(repoRoot, name string) (string, error) {
	dir := Dir(repoRoot, name)
	key := dir
	builtMu.Lock()
	defer builtMu.Unlock()
	if err, ok := built[key]; ok {
		return dir, err
	}
	err := buildBootstrap(repoRoot, name, dir)
	built[key] = err
	return dir, err
}

func buildBootstrap(repoRoot, name, dir string) error {
	src := filepath.Join(repoRoot, "functions", name)
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("bundle: function %s: %w", name, err)
	}
	// The asset directory holds the bootstrap and nothing else: a README
	// placeholder or a stray file would change the asset.
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("bundle: clean %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bundle: create %s: %w", dir, err)
	}
	out := filepath.Join(dir, "bootstrap")
	args := append([]string{"build"}, LambdaBuildFlags...)
	args = append(args, "-o", out, "./functions/"+name)
	if err := GoBuild(repoRoot, Arm64Env, args...); err != nil {
		return fmt.Errorf("bundle: build functions/%s for Lambda (linux/arm64): %w", name, err)
	}
	if err := CheckELF(out); err != nil {
		return fmt.Errorf("bundle: functions/%s: %w", name, err)
	}
	return nil
}

// GoTool is the go command: $GO if set, else go on PATH, else the one of
// the toolchain that built this program.
func GoTool() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// GoBuild runs the go command with args in dir, with env added to this
// process's environment; the error carries the command's output.
func GoBuild(dir string, env []string, args ...string) error {
	cmd := exec.Command(GoTool(), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var outb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outb, &outb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %v: %w\n%s", args, err, outb.String())
	}
	return nil
}

// CheckELF returns nil if path is an executable ELF for linux/arm64
// (64-bit, EM_AARCH64, ET_EXEC or ET_DYN) with an execute bit, and an
// error wrapping ErrNotArm64 otherwise.
func CheckELF(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotArm64, err)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%w: %s is not executable (mode %v)", ErrNotArm64, path, fi.Mode())
	}
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNotArm64, path, err)
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_AARCH64 {
		return fmt.Errorf("%w: %s is %v %v, want ELFCLASS64 EM_AARCH64", ErrNotArm64, path, f.Class, f.Machine)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("%w: %s is an ELF of type %v, not an executable", ErrNotArm64, path, f.Type)
	}
	if f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		return fmt.Errorf("%w: %s has OS ABI %v, want Linux", ErrNotArm64, path, f.OSABI)
	}
	return nil
}
