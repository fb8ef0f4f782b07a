package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strandlog/strand/tests/testproc"
)

// readmeCmd is one logical command line of a ```sh block in README.md's
// Walkthrough: continuation lines joined, the trailing comment split off.
type readmeCmd struct {
	text    string // as written, without the trailing comment
	comment string
	block   int
}

// walkthroughBlocks returns the ```sh blocks of the "## Walkthrough" section
// of readme, each as its logical command lines.
func walkthroughBlocks(t *testing.T, readme string) [][]readmeCmd {
	t.Helper()
	start := strings.Index(readme, "\n## Walkthrough\n")
	if start < 0 {
		t.Fatal("README.md has no \"## Walkthrough\" section")
	}
	section := readme[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	comment := regexp.MustCompile(`\s+#\s+(.*)$`)
	var blocks [][]readmeCmd
	lines := strings.Split(section, "\n")
	for i := 0; i < len(lines); i++ {
		if lines[i] != "```sh" {
			continue
		}
		var block []readmeCmd
		cur := ""
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			l := lines[i]
			if strings.HasSuffix(l, `\`) {
				cur += strings.TrimSuffix(l, `\`)
				continue
			}
			cur += l
			if strings.TrimSpace(cur) != "" {
				c := readmeCmd{text: cur, block: len(blocks)}
				if m := comment.FindStringSubmatchIndex(cur); m != nil {
					c.text, c.comment = cur[:m[0]], cur[m[2]:m[3]]
				}
				block = append(block, c)
			}
			cur = ""
		}
		blocks = append(blocks, block)
	}
	if len(blocks) == 0 {
		t.Fatal("README.md's Walkthrough has no ```sh blocks")
	}
	return blocks
}

// syncBuf is a bytes.Buffer safe for a writer process and a polling reader.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startReadmeDev runs `strand dev` in root, as the README's first block does
// (default --data-dir ./strand-data), on addr, and waits for it to serve. It
// fails, never skips: a walkthrough that cannot start its server is broken.
func startReadmeDev(t *testing.T, bin, root, addr string) {
	t.Helper()
	cmd := exec.Command(bin, "dev", "--addr", addr, "--log-level", "warn")
	cmd.Dir = root
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuf
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start strand dev: %v", err)
	}
	ready, exited := make(chan string, 1), make(chan error, 1)
	go func() {
		var out strings.Builder
		defer func() { exited <- cmd.Wait() }()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "export STRAND_TOKEN=") {
				ready <- out.String()
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	})
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		t.Fatalf("strand dev exited before serving on %s: %v; stderr:\n%s", addr, err, stderr.String())
	case out := <-ready:
		if !strings.Contains(out, "export STRAND_ENDPOINT=http://"+addr) {
			t.Fatalf("strand dev printed %q, want it to serve on %s", out, addr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("strand dev did not start within 30s; stderr:\n%s", stderr.String())
	}
}

// tcpEstablishedTo reports whether /proc/net/tcp holds an established
// connection whose remote end is port (a client connected to the server).
func tcpEstablishedTo(port int) (bool, error) {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return false, err
	}
	want := fmt.Sprintf(":%04X", port)
	for _, l := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(l)
		if len(f) > 3 && strings.HasSuffix(f[2], want) && f[3] == "01" {
			return true, nil
		}
	}
	return false, nil
}

// refusal is the message a command whose README comment says it is refused
// must fail with, by what the comment says.
func refusal(t *testing.T, comment string) string {
	t.Helper()
	switch {
	case strings.HasPrefix(comment, "permission denied"):
		return "permission denied"
	case strings.Contains(comment, "fenced"):
		return "fencing token"
	case strings.Contains(comment, "timestamp"):
		return "timestamp required"
	}
	t.Fatalf("README comment %q says refused, and this test has no expected message for it", comment)
	return ""
}

// TestReadmeWalkthrough runs every command of README.md's Walkthrough as
// written, in bash, from a temporary directory that plays the repository
// root (strand dev's ./strand-data is there), with `go run ./cmd/strand`
// replaced by a prebuilt binary, the endpoint export pointed at a free port,
// and HASH replaced by the hash `token create` printed. Commands whose
// comment says refused or permission denied must fail with that message;
// all others must succeed; key outputs are checked against what the
// walkthrough itself wrote.
func TestReadmeWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true and %s is not installed: %v", tool, err)
			}
			t.Skipf("%s is not installed: %v", tool, err)
		}
	}
	readme, err := os.ReadFile(filepath.Join(testproc.RepoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := walkthroughBlocks(t, string(readme))
	bin := testproc.Build(t, "./cmd/strand")
	root := t.TempDir()
	addr := testproc.FreeAddr(t)
	port, err := strconv.Atoi(addr[strings.LastIndex(addr, ":")+1:])
	if err != nil {
		t.Fatal(err)
	}
	// The walkthrough's endpoint export names strand dev's default address;
	// the test serves on a free port instead, so check the default here.
	if help, err := exec.Command(bin, "dev", "--help").CombinedOutput(); err != nil || !strings.Contains(string(help), `(default "127.0.0.1:4780")`) {
		t.Fatalf("strand dev --help (%v) does not give 127.0.0.1:4780 as --addr's default, which README's endpoint export assumes:\n%s", err, help)
	}
	startReadmeDev(t, bin, root, addr)

	const endpointExport = "export STRAND_ENDPOINT=http://127.0.0.1:4780"
	var (
		exports   []string // the export lines run so far, rerun before each command
		hash      string   // what token create printed
		trimmed   bool     // trim hello ran
		tail      *exec.Cmd
		tailOut   syncBuf
		tailBlock = -1
		checked   = map[string]bool{}
	)
	// A reader's shell starts without strand's variables; the walkthrough sets them.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STRAND_") {
			env = append(env, kv)
		}
	}
	// shell is line in bash, after the exports so far (one shell session).
	shell := func(line string) *exec.Cmd {
		cmd := exec.Command("bash", "-c", strings.Join(append(append([]string{}, exports...), line), "\n"))
		cmd.Dir, cmd.Env = root, env
		return cmd
	}
	run := func(line string) (string, string, error) {
		cmd := shell(line)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	for bi, block := range blocks {
		for _, c := range block {
			line := c.text
			if strings.TrimSpace(line) == endpointExport {
				line = "export STRAND_ENDPOINT=http://" + addr
				checked["endpoint"] = true
			}
			line = strings.ReplaceAll(line, "go run ./cmd/strand", strconv.Quote(bin))
			if strings.Contains(line, "token revoke") {
				if hash == "" {
					t.Fatalf("README: %q before token create printed a hash", c.text)
				}
				line = regexp.MustCompile(`\bHASH\b`).ReplaceAllString(line, hash)
			}
			if strings.HasPrefix(line, "export ") {
				exports = append(exports, line)
			}
			if strings.Contains(line, " tail ") {
				if len(block) != 1 {
					t.Fatalf("README: the tail block holds more than the tail: %+v", block)
				}
				tail = shell(line)
				tail.Stdout, tail.Stderr = &tailOut, &tailOut
				tail.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				if err := tail.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = syscall.Kill(-tail.Process.Pid, syscall.SIGKILL); _ = tail.Wait() })
				// The tail follows from the tail at the time it connects: wait
				// until it has (the only connection open at this point).
				deadline := time.Now().Add(10 * time.Second)
				for {
					ok, err := tcpEstablishedTo(port)
					if err != nil {
						time.Sleep(time.Second)
						break
					}
					if ok {
						time.Sleep(300 * time.Millisecond)
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("README %q: the tail did not connect within 10s; output:\n%s", c.text, tailOut.String())
					}
					time.Sleep(20 * time.Millisecond)
				}
				tailBlock = bi
				continue
			}

			stdout, stderr, err := run(line)
			t.Logf("$ %s\n%s%s", c.text, stdout, stderr)
			if strings.HasPrefix(c.comment, "refused") || strings.HasPrefix(c.comment, "permission denied") {
				want := refusal(t, c.comment)
				if err == nil {
					t.Fatalf("README %q (%s) succeeded; stdout:\n%s", c.text, c.comment, stdout)
				}
				if !strings.Contains(stderr, want) {
					t.Fatalf("README %q (%s) failed with %q, want a message saying %q", c.text, c.comment, stderr, want)
				}
				checked["refused: "+want] = true
				continue
			}
			if err != nil {
				t.Fatalf("README %q failed: %v\nstdout:\n%s\nstderr:\n%s", c.text, err, stdout, stderr)
			}
			if strings.HasPrefix(strings.TrimSpace(line), "curl ") {
				// curl -s exits 0 on an HTTP error: the body says it.
				if !strings.HasPrefix(stdout, "{") || strings.Contains(stdout, `"code":`) {
					t.Fatalf("README %q answered %q, want a JSON result", c.text, stdout)
				}
			}
			checkReadmeOutput(t, c.text, stdout, stderr, trimmed, checked)
			switch {
			case strings.Contains(c.text, "token create"):
				m := regexp.MustCompile(`created token ([0-9a-f]{64})`).FindStringSubmatch(stderr)
				if m == nil {
					t.Fatalf("README %q printed no token hash; stderr:\n%s", c.text, stderr)
				}
				hash = m[1]
				if b, err := os.ReadFile(filepath.Join(root, "team-a.token")); err != nil || !strings.HasPrefix(string(b), "strand_") {
					t.Fatalf("README %q: team-a.token holds %q (%v), want the secret", c.text, b, err)
				}
				checked["token create"] = true
			case strings.Contains(c.text, "token revoke"):
				if !strings.Contains(stdout+stderr, "revoked "+hash) {
					t.Fatalf("README %q printed %q, want it to say it revoked %s", c.text, stdout+stderr, hash)
				}
				// "refused everywhere within 10 s": the revoked token's append fails, saying revoked.
				deadline := time.Now().Add(10 * time.Second)
				for {
					_, stderr, err := run(`echo after-revoke | STRAND_TOKEN=$(cat team-a.token) ` + strconv.Quote(bin) + ` append team-a/orders`)
					if err != nil && strings.Contains(stderr, "revoked") {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("README %q: 10s later the revoked token's append gives %v %q, want refused as revoked", c.text, err, stderr)
					}
					time.Sleep(200 * time.Millisecond)
				}
				checked["token revoke"] = true
			case strings.Contains(c.text, "strand trim hello"):
				trimmed = true
			}
		}
		if tailBlock >= 0 && bi > tailBlock {
			// The block after the tail appended; the tail must print it.
			deadline := time.Now().Add(10 * time.Second)
			for !regexp.MustCompile(`(?m)^fourth$`).MatchString(tailOut.String()) {
				if time.Now().After(deadline) {
					t.Fatalf("README tail printed %q within 10s of the append, want the record fourth", tailOut.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			// Ctrl-C stops it.
			_ = syscall.Kill(-tail.Process.Pid, syscall.SIGINT)
			done := make(chan error, 1)
			go func() { done <- tail.Wait() }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("README tail did not stop within 10s of Ctrl-C; output:\n%s", tailOut.String())
			}
			t.Logf("$ %s (in the background, then Ctrl-C)\n%s", strings.TrimSpace(blocks[tailBlock][0].text), tailOut.String())
			tailBlock = -1
			checked["tail"] = true
		}
	}
	for _, k := range []string{"endpoint", "tail", "token create", "token revoke",
		"refused: permission denied", "refused: fencing token", "refused: timestamp required",
		"read", "read json", "read after trim", "read by timestamp", "raw read", "fenced append"} {
		if !checked[k] {
			t.Errorf("README walkthrough: no command checked %q (did the walkthrough change?)", k)
		}
	}
}

// checkReadmeOutput checks the outputs the walkthrough's own appends
// determine: hello holds first, second, third, fourth from seq 0, and
// sensors t1, t2 at two client timestamps a minute apart.
func checkReadmeOutput(t *testing.T, cmd, stdout, stderr string, trimmed bool, checked map[string]bool) {
	t.Helper()
	jsonLine := func(l string) (rec struct {
		SeqNum      uint64 `json:"seqNum"`
		TimestampMs int64  `json:"timestampMs"`
		Body        string `json:"body"`
	}) {
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("README %q printed %q, not a JSON record: %v", cmd, l, err)
		}
		return rec
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	switch strings.TrimSpace(cmd) {
	case "go run ./cmd/strand read hello":
		if !trimmed {
			if stdout != "first\nsecond\nthird\n" {
				t.Fatalf("README %q printed %q, want first, second, third", cmd, stdout)
			}
			checked["read"] = true
			return
		}
		// After trim hello 2 the read starts at seq 2: third (then fourth,
		// fifth and sixth, appended since).
		if len(lines) < 2 || lines[0] != "third" || lines[1] != "fourth" {
			t.Fatalf("README %q after the trim printed %q, want it to start at seq 2 (third, fourth, ...)", cmd, stdout)
		}
		checked["read after trim"] = true
	case "go run ./cmd/strand read hello --seq 1 --format json":
		if r := jsonLine(lines[0]); r.SeqNum != 1 || r.Body != "second" {
			t.Fatalf("README %q printed %q first, want seq 1 second", cmd, lines[0])
		}
		checked["read json"] = true
	case "go run ./cmd/strand read sensors --timestamp 2023-11-14T22:14:00Z --format json":
		if r := jsonLine(lines[0]); r.SeqNum != 1 || r.Body != "t2" || r.TimestampMs != 1700000060000 {
			t.Fatalf("README %q printed %q first, want seq 1 t2 at 1700000060000", cmd, lines[0])
		}
		checked["read by timestamp"] = true
	case "echo seventh | go run ./cmd/strand append hello --fence-token writer-1":
		if !strings.Contains(stdout+stderr, "appended 1 record to hello") {
			t.Fatalf("README %q printed %q, want it to append one record", cmd, stdout+stderr)
		}
		checked["fenced append"] = true
	}
	if strings.Contains(cmd, "Strand-Format: raw") && strings.Contains(cmd, `"seqNum":0,"count":2`) {
		if !strings.Contains(stdout, `"seqNum":0`) || !strings.Contains(stdout, `"body":"first"`) || !strings.Contains(stdout, `"body":"second"`) {
			t.Fatalf("README %q answered %q, want seq 0 first and seq 1 second as text", cmd, stdout)
		}
		checked["raw read"] = true
	}
}
