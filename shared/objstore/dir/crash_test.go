package dir

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/strandlog/strand/shared/objstore"
)

// crashRootEnv names the bucket root of the crash test's child process.
const crashRootEnv = "STRAND_DIR_CRASH_ROOT"

// TestMain runs the crash child when this test binary is started as one.
func TestMain(m *testing.M) {
	if root := os.Getenv(crashRootEnv); root != "" {
		crashChild(root)
		return // not reached: the parent kills the child
	}
	os.Exit(m.Run())
}

// crashChild puts "chains/k" and stops between staging the body (written
// and fsynced) and linking it, telling the parent on stdout, until the
// parent kills it.
func crashChild(root string) {
	b, err := Open(root, "bkt")
	if err != nil {
		os.Exit(3)
	}
	b.anon = os.Getenv("STRAND_DIR_CRASH_ANON") == "1"
	afterStage = func() {
		os.Stdout.WriteString("staged\n")
		select {}
	}
	b.PutIfAbsent(context.Background(), "chains/k", []byte("crashed body"))
	os.Exit(4) // the put returned: the parent never killed us
}

// TestKill9BetweenStageAndLink: a process killed with SIGKILL after its
// body is written and fsynced but before the link leaves no object, the
// key free, and (with anonymous files) nothing at all in .tmp; a named
// temp body is left there until RemoveTemp. Before O_TMPFILE staging
// every such crash left a put-* file (the anon=true case failed).
func TestKill9BetweenStageAndLink(t *testing.T) {
	for _, anon := range []bool{true, false} {
		t.Run(map[bool]string{true: "anon", false: "named"}[anon], func(t *testing.T) {
			root := t.TempDir()
			b, err := Open(root, "bkt")
			if err != nil {
				t.Fatal(err)
			}
			if anon && !b.anon {
				t.Skip("no anonymous files (O_TMPFILE and /proc) on this filesystem")
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), crashRootEnv+"="+root, "STRAND_DIR_CRASH_ANON="+map[bool]string{true: "1", false: "0"}[anon])
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil || line != "staged\n" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("child did not stage: %q, %v", line, err)
			}
			if err := cmd.Process.Kill(); err != nil { // SIGKILL
				t.Fatal(err)
			}
			cmd.Wait()

			ctx := context.Background()
			if _, err := b.Head(ctx, "chains/k"); !errors.Is(err, objstore.ErrNotFound) {
				t.Fatalf("Head after the crash: %v, want ErrNotFound", err)
			}
			left, err := os.ReadDir(b.tmp)
			if err != nil {
				t.Fatal(err)
			}
			want := map[bool]int{true: 0, false: 1}[anon]
			if len(left) != want {
				t.Fatalf("%d files left in .tmp after the crash (%v), want %d", len(left), left, want)
			}
			if err := b.PutIfAbsent(ctx, "chains/k", []byte("retried")); err != nil {
				t.Fatalf("put after the crash: %v", err)
			}
			if got, err := b.Get(ctx, "chains/k", 0, -1); err != nil || string(got) != "retried" {
				t.Fatalf("Get after the crash: %q, %v", got, err)
			}
			if n, err := b.RemoveTemp(); err != nil || n != want {
				t.Fatalf("RemoveTemp = %d, %v; want %d", n, err, want)
			}
		})
	}
}
