package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/metastore"
)

func devToken(t *testing.T, seed byte) string {
	tk, err := auth.NewToken(bytes.NewReader(bytes.Repeat([]byte{seed}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// TestHelpPrintsNoSecret: --help never shows STRAND_TOKEN's value as a
// flag default.
func TestHelpPrintsNoSecret(t *testing.T) {
	secret := devToken(t, 3)
	t.Setenv("STRAND_TOKEN", secret)
	for _, args := range [][]string{{"read", "--help"}, {"token", "create", "--help"}, {"--help"}} {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), strings.TrimPrefix(secret, auth.TokenPrefix)[:16]) {
			t.Errorf("strand %s prints the token:\n%s", strings.Join(args, " "), out.String())
		}
	}
}

// TestClientTokenSources: --token, else --token-file, else STRAND_TOKEN.
func TestClientTokenSources(t *testing.T) {
	env, file, flag := devToken(t, 4), devToken(t, 5), devToken(t, 6)
	t.Setenv("STRAND_TOKEN", env)
	path := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(path, []byte(file+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		f    clientFlags
		want string
	}{
		{clientFlags{}, env},
		{clientFlags{tokenFile: path}, file},
		{clientFlags{token: flag, tokenFile: path}, flag},
	} {
		got, err := tc.f.bearer()
		if err != nil || got != tc.want {
			t.Errorf("%+v: %q %v, want %q", tc.f, got, err, tc.want)
		}
	}
	if _, err := (&clientFlags{tokenFile: filepath.Join(t.TempDir(), "none")}).bearer(); err == nil {
		t.Error("a missing --token-file was accepted")
	}
}

// TestDevTokenHygiene: restarting strand dev with a new --token revokes
// the one it replaces; the token file is 0600 even when it existed with
// another mode; --token-file is read.
func TestDevTokenHygiene(t *testing.T) {
	ctx := context.Background()
	meta := metastore.NewMem()
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	old, repl := devToken(t, 7), devToken(t, 8)
	if err := os.WriteFile(path, []byte(old+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := setupDevToken(ctx, meta, devFlags{dataDir: dir})
	if err != nil || got != old {
		t.Fatalf("reuse: %q %v", got, err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v after a write, want 0600", st.Mode().Perm())
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err = setupDevToken(ctx, meta, devFlags{dataDir: dir, token: repl})
	if err != nil || got != repl {
		t.Fatalf("replace: %q %v", got, err)
	}
	if _, err := meta.GetToken(ctx, auth.Hash(old)); !errors.Is(err, metastore.ErrNotFound) {
		t.Errorf("the replaced token is still valid: %v", err)
	}
	if _, err := meta.GetToken(ctx, auth.Hash(repl)); err != nil {
		t.Errorf("the new token is not issued: %v", err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v after a rewrite, want 0600", st.Mode().Perm())
	}
	third := devToken(t, 9)
	tf := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(tf, []byte(third+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := setupDevToken(ctx, meta, devFlags{dataDir: dir, tokenFile: tf}); err != nil || got != third {
		t.Fatalf("--token-file: %q %v", got, err)
	}
	if _, err := meta.GetToken(ctx, auth.Hash(repl)); !errors.Is(err, metastore.ErrNotFound) {
		t.Errorf("the token replaced through --token-file is still valid: %v", err)
	}
}
