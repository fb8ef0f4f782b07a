package emulator

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// EnvEndpoint names the environment variable that points the tests at an
// already running emulator (or any AWS-compatible endpoint).
const EnvEndpoint = "STRAND_AWS_ENDPOINT"

// EnvDynamoDBEndpoint names the environment variable that points the
// DynamoDB clients of the tests at their own endpoint, when the emulator
// named by EnvEndpoint serves no DynamoDB: LocalStack's open-source core
// serves DynamoDB only through DynamoDB Local, which it downloads with a
// Java runtime at first use (docs/localstack.md), so localstack/core.sh
// runs moto's DynamoDB beside it and sets this.
const EnvDynamoDBEndpoint = "STRAND_AWS_ENDPOINT_DYNAMODB"

// EnvPython names the environment variable that overrides the python
// interpreter used to run moto (default: python3 on PATH).
const EnvPython = "STRAND_PYTHON"

// Region is the region every emulator client uses.
const Region = "us-east-1"

// StartTimeout bounds how long the moto server may take to answer HTTP.
const StartTimeout = 60 * time.Second

//go:embed moto_server.py
var serverScript []byte

var (
	once     sync.Once
	srv      *server
	startErr error
)

type server struct {
	url  string
	cmd  *exec.Cmd
	dir  string
	stop sync.Once
	done chan struct{}
	logs *tail
}

// Endpoint returns the AWS endpoint URL for this test binary. See the package
// documentation for how it is chosen and when it fails or skips the test.
func Endpoint(t testing.TB) string {
	t.Helper()
	if ep := strings.TrimRight(os.Getenv(EnvEndpoint), "/"); ep != "" {
		return ep
	}
	once.Do(func() { srv, startErr = start() })
	if startErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("emulator: CI=true and the moto emulator could not start: %v", startErr)
		}
		t.Skipf("emulator: SKIPPING emulator-backed test: %v "+
			"(install it with: pip install 'moto[server]==5.*', or set %s to a running emulator such as LocalStack)",
			startErr, EnvEndpoint)
	}
	return srv.url
}

// DynamoDBEndpoint returns the endpoint for DynamoDB clients:
// STRAND_AWS_ENDPOINT_DYNAMODB when it is set, otherwise Endpoint(t).
func DynamoDBEndpoint(t testing.TB) string {
	t.Helper()
	if ep := strings.TrimRight(os.Getenv(EnvDynamoDBEndpoint), "/"); ep != "" {
		return ep
	}
	return Endpoint(t)
}

// Main runs the tests and then stops the shared moto server, if one was
// started, and exits with the tests' status. Use it as TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop stops the shared moto server if this binary started one. It is safe to
// call more than once and when nothing was started.
func Stop() {
	if s := srv; s != nil {
		s.shutdown()
	}
}

// Config returns an aws.Config for Endpoint(t) with static test credentials
// and region us-east-1.
func Config(t testing.TB) aws.Config {
	t.Helper()
	return ConfigFor(Endpoint(t))
}

// ConfigFor returns an aws.Config for endpoint with static test credentials
// ("test"/"test") and region us-east-1. Service clients fill in their default
// HTTP client and retryer.
func ConfigFor(endpoint string) aws.Config {
	return aws.Config{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(endpoint),
	}
}

var (
	nameSeq   atomic.Uint64
	nameClean = regexp.MustCompile(`[^a-z0-9]+`)
)

// Name returns a fresh name, "<prefix>-<random>-<n>", lowercase letters,
// digits and hyphens, at most 63 bytes: valid as an S3 bucket name and as a
// DynamoDB table name. prefix is lowercased and cleaned; it may be empty.
func Name(t testing.TB, prefix string) string {
	t.Helper()
	p := strings.Trim(nameClean.ReplaceAllString(strings.ToLower(prefix), "-"), "-")
	if p == "" {
		p = "strand"
	}
	if len(p) > 36 {
		p = strings.TrimRight(p[:36], "-")
	}
	var b [5]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("emulator: random name: %v", err)
	}
	return fmt.Sprintf("%s-%s-%d", p, hex.EncodeToString(b[:]), nameSeq.Add(1))
}

// start writes the embedded script to a temporary directory, starts it, reads
// the port it bound and waits until it answers HTTP.
func start() (*server, error) {
	py := os.Getenv(EnvPython)
	if py == "" {
		py = "python3"
	}
	pyPath, err := exec.LookPath(py)
	if err != nil {
		return nil, fmt.Errorf("python interpreter %q not found: %w", py, err)
	}
	dir, err := os.MkdirTemp("", "strand-moto-")
	if err != nil {
		return nil, fmt.Errorf("temp dir for moto script: %w", err)
	}
	script := filepath.Join(dir, "moto_server.py")
	if err := os.WriteFile(script, serverScript, 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("write moto script: %w", err)
	}

	s := &server{dir: dir, done: make(chan struct{}), logs: &tail{max: 8 << 10}}
	cmd := exec.Command(pyPath, script, "127.0.0.1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1")
	cmd.Stderr = s.logs
	cmd.SysProcAttr = sysProcAttr()
	// stdin stays open for the server's life; the server exits on its EOF,
	// which the kernel delivers when this process exits for any reason.
	if _, err := cmd.StdinPipe(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("moto stdin: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("moto stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start moto (%s %s): %w", pyPath, script, err)
	}
	s.cmd = cmd

	portc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "PORT "); ok {
				select {
				case portc <- p:
				default:
				}
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	exited := make(chan error, 1)
	go func() {
		exited <- cmd.Wait()
		close(s.done)
	}()

	deadline := time.NewTimer(StartTimeout)
	defer deadline.Stop()
	var port string
	select {
	case port = <-portc:
	case err := <-exited:
		s.cleanup()
		return nil, fmt.Errorf("moto server exited before binding (%v); python said: %s", err, s.logs.summary())
	case <-deadline.C:
		s.shutdown()
		return nil, fmt.Errorf("moto server did not bind within %v; python said: %s", StartTimeout, s.logs.summary())
	}
	s.url = "http://127.0.0.1:" + port

	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	if err := waitHTTP(ctx, s.url, s.done); err != nil {
		s.shutdown()
		return nil, fmt.Errorf("moto server at %s: %w; python said: %s", s.url, err, s.logs.summary())
	}
	return s, nil
}

// waitHTTP polls url until any HTTP response arrives.
func waitHTTP(ctx context.Context, url string, done <-chan struct{}) error {
	c := &http.Client{Timeout: 2 * time.Second}
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/moto-api/", nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return nil
		}
		last = err
		select {
		case <-done:
			return errors.New("server exited while starting")
		case <-ctx.Done():
			return fmt.Errorf("no HTTP answer: %v", last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *server) shutdown() {
	s.stop.Do(func() {
		if s.cmd != nil && s.cmd.Process != nil {
			terminate(s.cmd.Process)
			select {
			case <-s.done:
			case <-time.After(5 * time.Second):
				kill(s.cmd.Process)
				<-s.done
			}
		}
		s.cleanup()
	})
}

func (s *server) cleanup() { os.RemoveAll(s.dir) }

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// summary returns the last lines of output, trimmed, or a placeholder.
func (t *tail) summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := bytes.TrimSpace(t.buf)
	if len(b) == 0 {
		return "(nothing)"
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) > 6 {
		lines = lines[len(lines)-6:]
	}
	return strings.Join(lines, " | ")
}
