package main

import (
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestDevExitsWithItsParent: strand dev started by a parent that then dies
// (as go run killed alone) stops serving and frees its port. Issue 20
// item 10: it kept serving and holding the data dir.
func TestDevExitsWithItsParent(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	// The parent: a shell that starts strand dev and waits, as go run does.
	sh := exec.Command("sh", "-c", `"$0" dev --data-dir "$1" --addr 127.0.0.1:0 --log-level error --exit-with-parent >"$2" 2>&1 & wait`,
		strandBin(t), filepath.Join(dir, "data"), out)
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`STRAND_ENDPOINT=(\S+)`)
	var endpoint string
	for deadline := time.Now().Add(30 * time.Second); endpoint == ""; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(out)
		if m := re.FindSubmatch(b); m != nil {
			endpoint = string(m[1])
		}
		if time.Now().After(deadline) {
			_ = sh.Process.Kill()
			t.Fatalf("strand dev did not start: %q", b)
		}
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Process.Kill(); err != nil { // SIGKILL: the parent dies at once
		t.Fatal(err)
	}
	_ = sh.Wait()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			break // refused: the orphan is gone
		}
		c.Close()
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(out)
			t.Fatalf("strand dev still serves %s 20 s after its parent died: %q", u.Host, b)
		}
	}
	if b, _ := os.ReadFile(out); !strings.Contains(string(b), "stopping") {
		t.Fatalf("strand dev did not stop in order: %q", b)
	}
}

// TestEachCommandShowsItsFlags: a command lists only the flags it uses
// (issue 20 item 12: strand dev --help listed --endpoint).
func TestEachCommandShowsItsFlags(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		want, not []string
	}{
		{[]string{"dev", "--help"}, []string{"--data-dir", "--exit-with-parent"}, []string{"--endpoint", "--trust-leader"}},
		{[]string{"read", "--help"}, []string{"--endpoint", "--token-file", "--trust-leader"}, []string{"--data-dir"}},
		{[]string{"token", "revoke", "--help"}, []string{"--endpoint", "--token-file"}, nil},
		{[]string{"token", "bootstrap", "--help"}, []string{"--table", "--region", "--aws-endpoint", "--out"}, []string{"--endpoint", "--token-file", "--trust-leader"}},
		{[]string{"bench", "--help"}, []string{"--endpoint"}, []string{"--trust-leader", "--data-dir"}},
		{[]string{"--help"}, nil, []string{"--endpoint"}},
	} {
		r := strand(t, os.Environ(), "", tc.args...)
		for _, w := range tc.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("strand %v lacks %s", tc.args, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(r.stdout, n) {
				t.Errorf("strand %v lists %s", tc.args, n)
			}
		}
	}
	// A client flag before the command still works.
	r := strand(t, os.Environ(), "", "--endpoint", "http://127.0.0.1:1", "ls")
	if r.code == 0 || !strings.Contains(r.stderr, "127.0.0.1:1") {
		t.Fatalf("strand --endpoint URL ls: %+v", r)
	}
}

// TestGoRunChild: strand dev knows it runs under go run by its parent (the
// go command) or by where its executable is, $GOCACHE included. Issue 34:
// under another GOCACHE only the "go-build" path was checked, and failed.
func TestGoRunChild(t *testing.T) {
	for _, tc := range []struct {
		exe, parent, gocache string
		want                 bool
	}{
		{"/home/u/.cache/go-build/ab/abcd-d/strand", "/usr/bin/bash", "", true},
		{"/tmp/go-build123/b001/exe/strand", "", "", true},
		{"/ci/cache/ab/abcd-d/strand", "/usr/local/go/bin/go", "/ci/cache", true},
		{"/ci/cache/ab/abcd-d/strand", "", "/ci/cache", true},
		{"/ci/cache/ab/abcd-d/strand", "/usr/bin/bash", "", false},
		{"/x/strand", "/root/sdk/go1.26.0/bin/go1.26.0", "", true},
		{"/usr/local/bin/strand", "/usr/bin/bash", "/ci/cache", false},
		{"/ci/cachex/strand", "/usr/bin/bash", "/ci/cache", false},
		{"/usr/local/bin/strand", "/usr/bin/gopls", "", false},
	} {
		if got := goRunChild(tc.exe, tc.parent, tc.gocache); got != tc.want {
			t.Errorf("goRunChild(%q, %q, %q) = %v, want %v", tc.exe, tc.parent, tc.gocache, got, tc.want)
		}
	}
}

// TestDevUnderAGoParent: started by a process named go, from a path with
// no go-build in it, strand dev exits with its parent by default.
func TestDevUnderAGoParent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent's executable is read from /proc")
	}
	dir := t.TempDir()
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	goParent := filepath.Join(dir, "go")
	if err := os.WriteFile(goParent, sh, 0o755); err != nil {
		t.Fatal(err)
	}
	for parent, want := range map[string]bool{goParent: true, "/bin/sh": false} {
		out, err := exec.Command(parent, "-c", `"$0" dev --help; exit $?`, strandBin(t)).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", parent, err, out)
		}
		var line string
		for l := range strings.Lines(string(out)) {
			if strings.Contains(l, "--exit-with-parent") {
				line = l
			}
		}
		if got := strings.Contains(line, "(default true)"); got != want {
			t.Errorf("under %s: %q; want the default on: %v", parent, line, want)
		}
	}
}
