package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// errUntrusted: a data directory or token file another local user could
// have written (issue 31): strand dev refuses it rather than trust a
// planted admin token.
var errUntrusted = errors.New("strand dev: untrusted path")

// trusted checks that what fi describes (at path) is owned by this user
// and writable by no other: not group or world writable.
func trusted(path string, fi fs.FileInfo) error {
	if uid, other := ownedByOther(fi); other {
		return fmt.Errorf("%w: %s is owned by uid %d, not by this user (uid %d): another user could have planted its contents; use a directory of your own (e.g. --data-dir ~/.strand-data)", errUntrusted, path, uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%w: %s is writable by other users (mode %v): another user could plant an admin token there; chmod go-w %s, or use a directory of your own", errUntrusted, path, fi.Mode().Perm(), path)
	}
	return nil
}

// checkDataDir refuses a data directory that exists and is not this
// user's own or that others may write. One that does not exist is made
// by the caller, mode 0700.
func checkDataDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("--data-dir %s is not a directory", dir)
	}
	return trusted(dir, fi)
}

// readSecretFile reads the token file at path: "" when there is none; an
// error when it is a symlink, not a regular file, or not trusted.
func readSecretFile(path string) (string, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return "", fmt.Errorf("%w: %s is a symlink: strand dev reads and writes its token file only in place; remove it", errUntrusted, path)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s is not a regular file", errUntrusted, path)
	}
	if err := trusted(path, fi); err != nil {
		return "", err
	}
	b, err := os.ReadFile(path)
	return string(b), err
}

// writeSecret writes a secret to path with mode 0600: to a new file in the
// same directory, renamed over path, so that a symlink planted at path is
// replaced, never written through.
func writeSecret(path, data string) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".token-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(f.Name()) // after a successful rename: nothing
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	if _, err := f.WriteString(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
