package main

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFenceAndTrimThroughTheBinary: strand fence, append --fence-token and
// strand trim as a user runs them. A fenced stream refuses an append
// without its token with a hint and writes nothing; the fence survives
// kill -9 of strand dev and a restart on the same data dir; after a trim,
// read starts at the trim point, and the text output leaves the command
// records out while --format json shows them. On refs (--pass-index=false)
// and on the pass index, the default (the restart then recovers the fence
// from the pass index window or from the refs settle made of it).
func TestFenceAndTrimThroughTheBinary(t *testing.T) {
	for name, extra := range map[string][]string{"refs": {"--pass-index=false"}, "pass-index": nil} {
		t.Run(name, func(t *testing.T) { fenceAndTrimThroughTheBinary(t, name == "pass-index", extra...) })
	}
}

func fenceAndTrimThroughTheBinary(t *testing.T, passIndex bool, extra ...string) {
	d := startDev(t, extra...)
	env := d.env()
	mustStrand(t, env, "", "create", "orders")
	mustStrand(t, env, "a\nb\nc\n", "append", "orders")
	out := mustStrand(t, env, "", "fence", "orders", "writer-2").stdout
	if !strings.Contains(out, "fenced orders (command record at seq 3)") {
		t.Fatalf("fence printed %q", out)
	}
	r := strand(t, env, "deposed\n", "append", "orders")
	if r.code == 0 || !strings.Contains(r.stderr, "failed_precondition") || !strings.Contains(r.stderr, "fencing token mismatch") || !strings.Contains(r.stderr, "hint: the stream is fenced") {
		t.Fatalf("append without the token: exit %d, stderr %q", r.code, r.stderr)
	}
	mustStrand(t, env, "d\n", "append", "orders", "--fence-token", "writer-2")

	// kill -9, restart on the same data: the fence holds.
	dir := d.dataDir
	for deadline := time.Now().Add(10 * time.Second); passIndex && passIndexObjects(t, dir) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("strand dev (pass index on) wrote no pass index in %s", dir)
		}
	}
	d.kill()
	d = startDevAt(t, dir, extra...)
	env = d.env()
	r = strand(t, env, "deposed\n", "append", "orders", "--retry-for", "0")
	if r.code == 0 || !strings.Contains(r.stderr, "fencing token mismatch") {
		t.Fatalf("append without the token after a restart: exit %d, stderr %q", r.code, r.stderr)
	}
	mustStrand(t, env, "e\n", "append", "orders", "--fence-token", "writer-2")
	if r := strand(t, env, "", "trim", "orders", "2"); r.code == 0 || !strings.Contains(r.stderr, "fencing token mismatch") {
		t.Fatalf("trim without the token: exit %d, stderr %q", r.code, r.stderr)
	}
	out = mustStrand(t, env, "", "trim", "orders", "2", "--fence-token", "writer-2").stdout
	if !strings.Contains(out, "trimmed orders below seq 2 (command record at seq 6)") {
		t.Fatalf("trim printed %q", out)
	}
	if got := mustStrand(t, env, "", "read", "orders").stdout; got != "c\nd\ne\n" {
		t.Fatalf("read after the trim: %q", got)
	}
	js := mustStrand(t, env, "", "read", "orders", "--format", "json").stdout
	lines := strings.Split(strings.TrimSpace(js), "\n")
	if len(lines) != 5 || !strings.Contains(lines[0], `"seqNum":2`) || !strings.Contains(lines[1], `"body":"writer-2"`) || !strings.Contains(lines[4], `"seqNum":6`) {
		t.Fatalf("json read after the trim: %q", js)
	}
	if r := strand(t, env, "", "trim", "orders", "x"); r.code == 0 || !strings.Contains(r.stderr, `SEQ "x"`) {
		t.Fatalf("bad SEQ: exit %d, stderr %q", r.code, r.stderr)
	}
	mustStrand(t, env, "", "fence", "orders", "", "--current", "writer-2")
	mustStrand(t, env, "f\n", "append", "orders")
	if !passIndex && passIndexObjects(t, dir) != 0 {
		t.Fatalf("strand dev --pass-index=false wrote pass indexes in %s", dir)
	}
}

// passIndexObjects counts the pass index objects (index/...) in a strand
// dev data dir's settled bucket.
func passIndexObjects(t *testing.T, dataDir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(dataDir, "buckets", "settled"), func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() && strings.Contains(filepath.ToSlash(path), "/index/") {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestConfigThroughTheBinary: strand config changes a stream's
// timestamping from its command record on, and the change survives kill -9
// of strand dev; retention shows in ls; nothing to change is an error.
func TestConfigThroughTheBinary(t *testing.T) {
	d := startDev(t)
	env := d.env()
	mustStrand(t, env, "", "create", "sensors")
	mustStrand(t, env, "a\n", "append", "sensors")
	out := mustStrand(t, env, "", "config", "sensors", "--timestamping", "client-require").stdout
	if !strings.Contains(out, "configured sensors (command record at seq 1; the records after it use it): retention forever, timestamps client-require, capped") {
		t.Fatalf("config printed %q", out)
	}
	if r := strand(t, env, "b\n", "append", "sensors"); r.code == 0 || !strings.Contains(r.stderr, "requires client timestamps") {
		t.Fatalf("append without timestamps after client-require: exit %d, stderr %q", r.code, r.stderr)
	}
	dir := d.dataDir
	d.kill()
	d = startDevAt(t, dir)
	env = d.env()
	if r := strand(t, env, "b\n", "append", "sensors"); r.code == 0 || !strings.Contains(r.stderr, "requires client timestamps") {
		t.Fatalf("append without timestamps after a restart: exit %d, stderr %q", r.code, r.stderr)
	}
	out = mustStrand(t, env, "", "config", "sensors", "--timestamping", "client-prefer", "--retention", "72h").stdout
	if !strings.Contains(out, "retention 72h0m0s, timestamps client-prefer, capped") {
		t.Fatalf("config printed %q", out)
	}
	mustStrand(t, env, "c\n", "append", "sensors")
	if ls := mustStrand(t, env, "", "ls", "--json").stdout; !strings.Contains(ls, `"retentionMs":259200000`) {
		t.Fatalf("ls --json: %q", ls)
	}
	if got := mustStrand(t, env, "", "read", "sensors").stdout; got != "a\nc\n" {
		t.Fatalf("read: %q", got)
	}
	if r := strand(t, env, "", "config", "sensors"); r.code == 0 || !strings.Contains(r.stderr, "nothing to change") {
		t.Fatalf("config with nothing: exit %d, stderr %q", r.code, r.stderr)
	}
}
