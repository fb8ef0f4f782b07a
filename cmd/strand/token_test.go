package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/auth"
)

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

// run runs one CLI command line; it returns stdout, stderr and the error.
func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// TestTokenCommandsEndToEnd runs strand dev in-process and drives the token
// commands against it: create a scoped token, use it, list, revoke, refused.
func TestTokenCommandsEndToEnd(t *testing.T) {
	m := runDevUntil(t, `STRAND_ENDPOINT=(\S+)\n\s*export STRAND_TOKEN=(\S+)`, func(ctx context.Context, out io.Writer) error {
		return runDev(ctx, devFlags{dataDir: t.TempDir(), addr: "127.0.0.1:0", starID: "star-0", logLevel: "error"}, out)
	})
	endpoint, admin := m[1], m[2]
	as := func(tok string, args ...string) (string, string, error) {
		return run(t, append([]string{"--endpoint", endpoint, "--token", tok}, args...)...)
	}

	stdout, stderr, err := as(admin, "token", "create", "--prefix", "team-a/", "--ops", "admin,append", "--description", "team a")
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	secret := strings.TrimSpace(stdout)
	if !auth.WellFormed(secret) || !strings.Contains(stderr, auth.Hash(secret)) || !strings.Contains(stderr, "only once") {
		t.Fatalf("create printed %q / %q", stdout, stderr)
	}
	if strings.Contains(stderr, "warning") {
		t.Fatalf("a prefix ending in a separator drew a warning: %q", stderr)
	}
	// A prefix that does not end in a separator covers more than it seems:
	// team-b also covers team-bravo/...; the CLI says so.
	if _, stderr, err := as(admin, "token", "create", "--prefix", "team-b", "--ops", "read"); err != nil || !strings.Contains(stderr, `warning: prefix "team-b" does not end in a separator`) {
		t.Fatalf("create team-b: %q %v", stderr, err)
	}
	// A token that starts a tenant, with a quota of its own (ADR 0060); ls
	// shows it.
	if _, stderr, err := as(admin, "token", "create", "--prefix", "team-t/", "--ops", "admin", "--tenant", "--max-streams", "3"); err != nil ||
		!strings.Contains(stderr, "starts a tenant (3 streams, the star's bytes/s)") {
		t.Fatalf("create a tenant: %q %v", stderr, err)
	}
	if stdout, _, err := as(admin, "token", "ls", "--prefix", "team-t/"); err != nil || !strings.Contains(stdout, "\tstarts a tenant (3 streams") {
		t.Fatalf("ls a tenant: %q %v", stdout, err)
	}
	// The team token works within its prefix, and cannot escalate.
	if _, _, err := as(secret, "create", "team-a/orders"); err != nil {
		t.Fatalf("create a stream with the team token: %v", err)
	}
	_, _, err = as(secret, "token", "create", "--prefix", "", "--ops", "read")
	if connect.CodeOf(err) != connect.CodePermissionDenied || !strings.Contains(explain(err), "strand token create") {
		t.Fatalf("escalation: %v", err)
	}
	stdout, _, err = as(admin, "token", "ls", "--prefix", "team-a/")
	if err != nil || !strings.Contains(stdout, auth.Hash(secret)) || strings.Contains(stdout, secret) || !strings.Contains(stdout, "team a") {
		t.Fatalf("ls: %q %v", stdout, err)
	}
	// Flags and arguments that are missing say what to give.
	for _, args := range [][]string{
		{"token", "create", "--ops", "read"},
		{"token", "create", "--prefix", "x/"},
		{"token", "revoke"},
	} {
		if _, _, err := as(admin, args...); err == nil || connect.CodeOf(err) != connect.CodeUnknown {
			t.Fatalf("%v: %v", args, err)
		}
	}
	_, _, err = as(admin, "token", "create", "--prefix", "x/", "--ops", "write")
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "read, append, trim, fence or admin") {
		t.Fatalf("bad op: %v", err)
	}

	if stdout, _, err = as(admin, "token", "revoke", auth.Hash(secret)); err != nil || !strings.Contains(stdout, "revoked") {
		t.Fatalf("revoke: %q %v", stdout, err)
	}
	_, _, err = as(secret, "ls")
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeUnauthenticated {
		t.Fatalf("revoked token: %v", err)
	}
}

func TestTokenHelp(t *testing.T) {
	for cmd, wants := range map[string][]string{
		"create": {"--prefix", "--ops", "--description", "shown again"},
		"revoke": {"HASH", "10 s"},
		"ls":     {"--prefix", "--json"},
	} {
		stdout, _, err := run(t, "token", cmd, "--help")
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wants {
			if !strings.Contains(stdout, w) {
				t.Errorf("token %s --help lacks %q:\n%s", cmd, w, stdout)
			}
		}
	}
}
