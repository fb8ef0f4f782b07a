package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/client"
)

// TestHintsFollowTheirErrors: every hint against the error it follows
// (issue 20 item 8: before, a revoke of a revoked hash was told to list
// streams, and every unavailable error asked whether the server ran).
func TestHintsFollowTheirErrors(t *testing.T) {
	wire := func(code connect.Code, msg string) error {
		// A wire error is one decoded from a server's answer.
		e := connect.NewWireError(code, errors.New(msg))
		return fmt.Errorf("call: %w", e)
	}
	local := func(code connect.Code, msg string) error { return connect.NewError(code, errors.New(msg)) }
	for _, tc := range []struct {
		name      string
		err       error
		want, not string // the hint says want (""; no hint) and never not
	}{
		{"unknown token", wire(connect.CodeUnauthenticated, "auth: missing or unknown bearer token"), "STRAND_TOKEN", "revoked"},
		{"expired token", wire(connect.CodeUnauthenticated, "auth: token expired at 2026-01-01T00:00:00Z"), "expired", "STRAND_TOKEN"},
		{"revoked token", wire(connect.CodeUnauthenticated, "auth: token revoked"), "revoked", "STRAND_TOKEN"},
		{"denied", wire(connect.CodePermissionDenied, "auth: permission denied"), "strand token create", ""},
		{"server down", local(connect.CodeUnavailable, "dial tcp 127.0.0.1:4780: connection refused"), "--endpoint", ""},
		{"halted", wire(connect.CodeUnavailable, "star: epoch halted: disk full"), "halted", "server running"},
		{"not the leader", wire(connect.CodeUnavailable, "star: not the leader"), "retry", "server running"},
		{"untrusted leader", fmt.Errorf("append: %w", client.ErrUntrustedLeader), "--trust-leader", ""},
		{"no such token hash", wire(connect.CodeNotFound, "no token has hash ab12: it was revoked already or never issued"), "strand token ls", "strand ls`"},
		{"no such stream", wire(connect.CodeNotFound, `stream "tokens" does not exist`), "strand create", "token ls"},
		{"deleted stream", wire(connect.CodeNotFound, "star: stream not open on this star: the stream was deleted, or is being deleted"), "strand ls", ""},
		{"bad argument", wire(connect.CodeInvalidArgument, "bad name"), "", ""},
		{"server stopping under a tail", local(connect.CodeInvalidArgument, "protocol error: incomplete envelope: http2: server sent GOAWAY and closed the connection"), "stopping", ""},
		{"not an API error", errors.New("--token-file x is empty"), "", ""},
	} {
		got := explain(tc.err)
		has := strings.Contains(got, "\n  hint: ")
		switch {
		case tc.want == "" && has:
			t.Errorf("%s: a hint where none fits: %q", tc.name, got)
		case tc.want != "" && (!has || !strings.Contains(got, tc.want)):
			t.Errorf("%s: %q, want a hint with %q", tc.name, got, tc.want)
		case tc.not != "" && strings.Contains(got, tc.not):
			t.Errorf("%s: %q says %q", tc.name, got, tc.not)
		}
	}
}

// TestHintsThroughTheBinary: the three wrong hints issue 20 reported, as a
// user meets them.
func TestHintsThroughTheBinary(t *testing.T) {
	d := startDev(t)
	env := d.env()

	// A revoke of a revoked hash says so and exits 0 (issue 34: it said
	// "nothing to do" and exited 1); a hash never issued points at the
	// token list, not at the stream list.
	r := strand(t, env, "", "token", "create", "--prefix", "a/", "--ops", "read")
	secret := strings.TrimSpace(r.stdout)
	if r.code != 0 || !auth.WellFormed(secret) {
		t.Fatalf("token create: %+v", r)
	}
	// Its stdout is not a terminal: the note says where the secret went
	// (issue 34: "token create > file" spoke of "the secret above").
	if strings.Contains(r.stderr, "above") || !strings.Contains(r.stderr, "stdout") {
		t.Fatalf("token create to a pipe: stderr %q", r.stderr)
	}
	if r := strand(t, env, "", "token", "revoke", auth.Hash(secret)); r.code != 0 {
		t.Fatalf("revoke: %+v", r)
	}
	r = strand(t, env, "", "token", "revoke", auth.Hash(secret))
	if r.code != 0 || !strings.Contains(r.stdout, "revoked already") || strings.Contains(r.stdout, "not_found") || r.stderr != "" {
		t.Fatalf("second revoke: %+v; want exit 0 and \"revoked already\" on stdout", r)
	}
	r = strand(t, env, "", "token", "revoke", strings.Repeat("ab", 32))
	if r.code == 0 || !strings.Contains(r.stderr, "hint: strand token ls") || strings.Contains(r.stderr, "strand ls`") {
		t.Fatalf("revoke of a hash never issued: %+v", r)
	}

	// A token file with a second line: malformed, and where it came from;
	// not "is the server running?".
	path := filepath.Join(t.TempDir(), "team.token")
	if err := os.WriteFile(path, []byte(d.token+"\nsecond line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = strand(t, env, "", "--token-file", path, "ls")
	if r.code == 0 || !strings.Contains(r.stderr, "malformed") || !strings.Contains(r.stderr, path) ||
		!strings.Contains(r.stderr, "2 lines") || strings.Contains(r.stderr, "server running") || strings.Contains(r.stderr, d.token) {
		t.Fatalf("token file with two lines: %+v", r)
	}
	r = strand(t, d.env("STRAND_TOKEN=strand_short"), "", "ls")
	if r.code == 0 || !strings.Contains(r.stderr, "malformed") || !strings.Contains(r.stderr, "STRAND_TOKEN") {
		t.Fatalf("a short STRAND_TOKEN: %+v", r)
	}

	// A stream deleted under a tail: the tail ends, says so, and shows no
	// internal id.
	r = strand(t, env, "", "create", "doomed")
	m := regexp.MustCompile(`id ([0-9a-f]{32})`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		t.Fatalf("create: %+v", r)
	}
	mustStrand(t, env, "one\n", "append", "doomed")
	tail := startStrand(t, env, "tail", "doomed", "--tail-offset", "1")
	if l := tail.line(t); l != "one" {
		t.Fatalf("tail printed %q", l)
	}
	mustStrand(t, env, "", "rm", "doomed")
	if _, err := tail.wait(t, 20*time.Second); err == nil {
		t.Fatal("the tail of a deleted stream exited 0")
	}
	stderr := tail.stderr.String()
	if strings.Contains(stderr, m[1]) || !strings.Contains(stderr, "deleted") {
		t.Fatalf("tail of a deleted stream: %q (id %s)", stderr, m[1])
	}
}

// TestMessagesSpeakToUsers: no internal layer names, no repeated code, and
// cobra's mutual exclusion in plain words. Issue 34: "invalid_argument:
// metastore: invalid argument: empty stream name" and "if any flags in the
// group [seq timestamp tail-offset] are set none of the others can be;
// [seq tail-offset] were all set".
func TestMessagesSpeakToUsers(t *testing.T) {
	wire := func(code connect.Code, msg string) error { return connect.NewWireError(code, errors.New(msg)) }
	for _, tc := range []struct {
		err  error
		want string
	}{
		{wire(connect.CodeInvalidArgument, "metastore: invalid argument: empty stream name"), "invalid_argument: empty stream name"},
		{wire(connect.CodeFailedPrecondition, "star: fencing token mismatch: x"), "failed_precondition: fencing token mismatch: x"},
		{fmt.Errorf("--producer-id: %w", errors.New("client: producer id \"x\": want 32 hex digits")), "--producer-id: producer id \"x\": want 32 hex digits"},
		{errors.New("if any flags in the group [seq timestamp tail-offset] are set none of the others can be; [seq tail-offset] were all set"), "--seq and --tail-offset: they are alternatives: give one of them"},
		{fmt.Errorf("%w (region r)", fmt.Errorf("%w: table t has key id (HASH), want PK (hash) and SK (range)", errors.New("dynamo: not a strand metastore table"))), "not a strand metastore table: table t has key id (HASH), want PK (hash) and SK (range) (region r)"},
		{errors.New("a starter: begins here"), "a starter: begins here"},
	} {
		if got := message(tc.err); got != tc.want {
			t.Errorf("message(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
	// Through the binary: the flag group, before any server is needed.
	r := strand(t, nil, "", "read", "s", "--seq", "1", "--tail-offset", "2")
	if r.code == 0 || strings.Contains(r.stderr, "group") || !strings.Contains(r.stderr, "--seq and --tail-offset") {
		t.Fatalf("read --seq --tail-offset: %+v", r)
	}
}
