package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/tests/testproc"
)

const (
	drainStreams = 6 // half Standard, half Express; one producer each
	drainReaders = 3 // tailing readers, on streams 0..2
	drainBudget  = 10 * time.Second
	drainBefore  = 3000 // acked records before SIGTERM
	drainAfter   = 3000 // acked records after the successor serves
)

// TestDevDrainsOnSIGTERM runs `strand dev` under load (a producer per
// stream through append sessions, tailing readers), sends SIGTERM, starts
// the successor on the same data, and checks what the clients saw: every
// session open at SIGTERM ended with unavailable saying the server was
// draining (and the client resumed), no error a client would treat as
// permanent, the process exited within its drain budget, and every
// acknowledged record reads back exactly as sent. It logs the pause in
// acks and in tail delivery (docs/operations.md, "Deploys and restarts").
// Regression test: it failed before the drain (sessions ended with
// invalid_argument "protocol error: incomplete envelope" when the process
// exited, after Close waited out its 5 s timeout).
func TestDevDrainsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := testproc.Build(t, "./cmd/strand")
	dataDir := filepath.Join(t.TempDir(), "data")
	addr := testproc.FreeAddr(t)
	endpoint := "http://" + addr
	d := startDev(t, bin, dataDir, addr, "--drain-budget", drainBudget.String())
	tokb, err := os.ReadFile(filepath.Join(dataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(endpoint, client.WithToken(strings.TrimSpace(string(tokb))))
	if err != nil {
		t.Fatal(err)
	}
	for i := range drainStreams {
		class := []string{"standard", "express"}[i%2]
		if _, err := c.CreateStream(ctx, name(i), client.CreateOptions{Class: class}); err != nil {
			t.Fatal(err)
		}
	}
	o := testproc.NewObserved()
	ackedTo := make([]atomic.Uint64, drainStreams)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range drainStreams {
		wg.Go(func() { testproc.Producer(ctx, c, name(i), o, &ackedTo[i], stop) })
	}
	for i := range drainReaders {
		wg.Go(func() { testproc.Reader(ctx, c, name(i), o, stop) })
	}
	o.WaitAcked(ctx, t, drainBefore)
	o.WaitReading(ctx, t, drainReaders) // see WaitReading: else, on a loaded machine, a reader's first open may meet the drain

	term := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitErr := d.cmd.Wait()
	exited := time.Now()
	if waitErr != nil {
		t.Fatalf("strand dev exited with %v after SIGTERM, want a clean exit", waitErr)
	}
	if took := exited.Sub(term); took > drainBudget {
		t.Fatalf("strand dev took %s to exit after SIGTERM, over its %s drain budget", took, drainBudget)
	}
	atTerm := o.Acked.Load()
	d = startDev(t, bin, dataDir, addr, "--drain-budget", drainBudget.String())
	serving := time.Now()
	o.WaitAcked(ctx, t, atTerm+drainAfter)
	o.WaitTailed(ctx, t, exited)
	close(stop)
	wg.Wait()

	var producers []string
	for i := range drainStreams {
		producers = append(producers, name(i))
	}
	o.Check(t, producers, producers[:drainReaders])
	for i := range drainStreams {
		checkPrefix(t, ctx, c, name(i), ackedTo[i].Load())
	}
	t.Logf("drain: SIGTERM to exit %s (budget %s); exit to successor serving %s; pause in acks %s, in tail delivery %s; %d records acked before SIGTERM, %d in all",
		exited.Sub(term).Round(time.Millisecond), drainBudget, serving.Sub(exited).Round(time.Millisecond),
		testproc.Gap(o.Acks, term).Round(time.Millisecond), testproc.Gap(o.Tails, term).Round(time.Millisecond), atTerm, o.Acked.Load())
}
