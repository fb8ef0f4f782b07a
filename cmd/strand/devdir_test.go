package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/metastore"
)

// TestDevRestartKeepsRevocation (issue 31 finding 5): restarting strand
// dev after its admin token was revoked does not bring it back: a new
// token is drawn and written, and the revoked one stays refused.
func TestDevRestartKeepsRevocation(t *testing.T) {
	ctx := context.Background()
	meta := metastore.NewMem()
	dir := t.TempDir()
	first, err := setupDevToken(ctx, meta, devFlags{dataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := revoke(ctx, meta, auth.Hash(first)); err != nil {
		t.Fatal(err)
	}
	second, err := setupDevToken(ctx, meta, devFlags{dataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if second == first {
		t.Error("the restart reused the revoked token")
	}
	if _, err := (&auth.Checker{Meta: meta}).Check(ctx, first); !errors.Is(err, auth.ErrRevoked) {
		t.Errorf("the revoked token after a restart: %v, want ErrRevoked", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "token")); strings.TrimSpace(string(b)) != second {
		t.Error("DATA_DIR/token does not hold the new token")
	}
	if _, err := setupDevToken(ctx, meta, devFlags{dataDir: dir, token: first}); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("--token with a revoked token: %v, want a refusal naming the revocation", err)
	}
}

// TestDevDataDirTrusted (issue 31 finding 6): strand dev refuses a data
// directory or token file that another user could write (group or world
// writable, or another owner), and never writes the token through a
// symlink.
func TestDevDataDirTrusted(t *testing.T) {
	ctx := context.Background()
	open := t.TempDir()
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := checkDataDir(open); err == nil || !strings.Contains(err.Error(), "writable by other users") {
		t.Errorf("a world-writable data dir: %v, want a refusal", err)
	}
	dir := t.TempDir()
	if err := checkDataDir(dir); err != nil {
		t.Fatalf("a private data dir: %v", err)
	}
	path := filepath.Join(dir, "token")
	planted := devToken(t, 3)
	if err := os.WriteFile(path, []byte(planted+"\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := setupDevToken(ctx, metastore.NewMem(), devFlags{dataDir: dir}); err == nil || !strings.Contains(err.Error(), "writable by other users") {
		t.Errorf("a world-writable token file: %v, want a refusal", err)
	}
	if os.Getuid() == 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(path, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		if _, err := setupDevToken(ctx, metastore.NewMem(), devFlags{dataDir: dir}); err == nil || !strings.Contains(err.Error(), "owned by") {
			t.Errorf("a token file of another user: %v, want a refusal", err)
		}
	}
	// A symlink in place of the token file: refused, its target untouched.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(target, []byte("theirs"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if _, err := setupDevToken(ctx, metastore.NewMem(), devFlags{dataDir: dir}); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("a symlinked token file: %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "theirs" {
		t.Errorf("the symlink's target was written: %q", b)
	}
}
