package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// These helpers drive the real binary: CLI behaviour (exit codes, what
// reaches stderr, signals) is tested as a user meets it.

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binOut  []byte
)

// strandBin builds ./cmd/strand once per test process.
func strandBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "strand-bin")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "strand")
		cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", binPath, ".")
		binOut, binErr = cmd.CombinedOutput()
	})
	if binErr != nil {
		t.Fatalf("go build: %v\n%s", binErr, binOut)
	}
	return binPath
}

// devProc is a strand dev started from the binary.
type devProc struct {
	endpoint, token, dataDir string
	cmd                      *exec.Cmd
	out                      *syncBuf
	done                     chan struct{} // closed when the process has exited
}

// kill ends d with SIGKILL (kill -9) and waits for it.
func (d *devProc) kill() {
	_ = d.cmd.Process.Kill()
	<-d.done
}

// startDev runs `strand dev` on a free port and a temporary data dir, and
// stops it (SIGINT) when the test ends.
func startDev(t *testing.T, extra ...string) *devProc {
	t.Helper()
	return startDevAt(t, t.TempDir(), extra...)
}

// startDevAt is startDev on a given data dir (a restart keeps its data).
func startDevAt(t *testing.T, dataDir string, extra ...string) *devProc {
	t.Helper()
	d := &devProc{dataDir: dataDir, out: &syncBuf{}}
	d.cmd = exec.Command(strandBin(t), append([]string{"dev", "--data-dir", d.dataDir, "--addr", "127.0.0.1:0", "--log-level", "error"}, extra...)...)
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	d.done = done
	go func() { _ = d.cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = d.cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = d.cmd.Process.Kill()
			<-done
		}
	})
	re := regexp.MustCompile(`STRAND_ENDPOINT=(\S+)\n\s*export STRAND_TOKEN=(\S+)`)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(d.out.String()); m != nil {
			d.endpoint, d.token = m[1], m[2]
			return d
		}
		select {
		case <-done:
			t.Fatalf("strand dev ended: %s", d.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("strand dev did not print its endpoint: %q", d.out.String())
		}
	}
}

// env is the environment of a client command against d (STRAND_* from d,
// then extra).
func (d *devProc) env(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STRAND_") {
			env = append(env, kv)
		}
	}
	return append(append(env, "STRAND_ENDPOINT="+d.endpoint, "STRAND_TOKEN="+d.token), extra...)
}

// result is what one CLI run printed and how it exited.
type result struct {
	stdout, stderr string
	code           int
}

// strand runs one CLI command to its end (at most 30 s) with env and stdin.
func strand(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, strandBin(t), args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errOut.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("strand %v: %v", args, err)
	}
	return r
}

// mustStrand is strand, failing the test unless the command exits 0.
func mustStrand(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	r := strand(t, env, stdin, args...)
	if r.code != 0 {
		t.Fatalf("strand %v: exit %d: %s", args, r.code, r.stderr)
	}
	return r
}

// started is a CLI command left running (tail), its stdout read line by
// line.
type started struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *syncBuf
	done   chan error
}

func startStrand(t *testing.T, env []string, args ...string) *started {
	t.Helper()
	s := &started{cmd: exec.Command(strandBin(t), args...), lines: make(chan string, 1000), stderr: &syncBuf{}, done: make(chan error, 1)}
	s.cmd.Env = env
	s.cmd.Stderr = s.stderr
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
		s.done <- s.cmd.Wait()
	}()
	t.Cleanup(func() { _ = s.cmd.Process.Kill() })
	return s
}

// line waits for the next stdout line.
func (s *started) line(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-s.lines:
		if !ok {
			t.Fatalf("ended without a line; stderr %q", s.stderr.String())
		}
		return l
	case <-time.After(20 * time.Second):
		t.Fatalf("no line in 20 s; stderr %q", s.stderr.String())
	}
	return ""
}

// wait waits (at most limit) for the command to exit and returns how long
// it took.
func (s *started) wait(t *testing.T, limit time.Duration) (time.Duration, error) {
	t.Helper()
	t0 := time.Now()
	select {
	case err := <-s.done:
		return time.Since(t0), err
	case <-time.After(limit):
		t.Fatalf("still running after %s; stderr %q", limit, s.stderr.String())
	}
	return 0, nil
}
