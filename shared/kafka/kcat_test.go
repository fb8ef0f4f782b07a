package kafka_test

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// kcatBin is kcat's path; missing, the test skips, except under CI=true
// where it fails (.ci/run installs the Debian package).
func kcatBin(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("kcat is required under CI=true (.ci/run installs it: apt-get install kcat)")
		}
		t.Skip("kcat is not installed (apt-get install kcat)")
	}
	return p
}

// kcat runs kcat with args, stdin in, and returns its stdout.
func kcat(t *testing.T, in string, args ...string) string {
	t.Helper()
	cmd := exec.Command(kcatBin(t), args...)
	cmd.Stdin = strings.NewReader(in)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("kcat %v: %v\nstderr: %s", args, err, errb.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("kcat %v: no exit in 30 s\nstdout: %s\nstderr: %s", args, out.String(), errb.String())
	}
	return out.String()
}

// TestKcatRoundTrip: kcat (librdkafka, a client nobody here wrote)
// produces keyed records with headers under each codec to an
// auto-created topic and reads them back byte for byte; a kcat consumer
// group reads everything, commits, and a second run of the group reads
// only what came after.
func TestKcatRoundTrip(t *testing.T) {
	kcatBin(t)
	n, _ := startNode(t)
	b := n.KafkaAddr()
	var want strings.Builder
	for i, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		in := "k-" + codec + ":value " + codec + "\n"
		kcat(t, in, "-P", "-b", b, "-t", "kc", "-K", ":", "-H", "codec="+codec, "-X", "compression.codec="+codec)
		want.WriteString("k-" + codec + "|value " + codec + "|codec=" + codec + "|" + string(rune('0'+i)) + "\n")
	}
	got := kcat(t, "", "-C", "-b", b, "-t", "kc", "-o", "beginning", "-e", "-q", "-f", "%k|%s|%h|%o\n")
	if got != want.String() {
		t.Fatalf("kcat read:\n%s\nwant:\n%s", got, want.String())
	}

	first := kcat(t, "", "-C", "-b", b, "-G", "kc-group", "-X", "auto.offset.reset=earliest", "-e", "-q", "-f", "%s\n", "kc")
	if strings.Count(first, "\n") != 5 {
		t.Fatalf("the group's first run read:\n%s\nwant the 5 records", first)
	}
	kcat(t, "after\n", "-P", "-b", b, "-t", "kc")
	second := kcat(t, "", "-C", "-b", b, "-G", "kc-group", "-X", "auto.offset.reset=earliest", "-e", "-q", "-f", "%s\n", "kc")
	if second != "after\n" {
		t.Fatalf("the group's second run read:\n%s\nwant only \"after\"", second)
	}
}
