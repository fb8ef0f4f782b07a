package integration

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/tests/testproc"
)

// TestStarProcessDrainsOnSIGTERM runs the star task's binary against the
// emulator (S3, DynamoDB, SQS) under load, a producer per stream through
// append sessions and tailing readers, sends SIGTERM as ECS does, starts
// the successor, and checks what the clients saw: every session ended
// with unavailable because the star was draining, and the clients resumed
// on the successor; no error other than unavailable; the process exited
// cleanly within its drain budget; every acknowledged record reads back
// exactly as sent. Regression test: it failed before the drain (sessions
// ended with a protocol error when the process exited).
func TestStarProcessDrainsOnSIGTERM(t *testing.T) {
	const budget = 10 * time.Second
	t.Setenv("STRAND_DRAIN_BUDGET", budget.String())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := testproc.Build(t, "./functions/star")
	d := deploy(ctx, t)
	token := adminToken(ctx, t, d)
	addr, admin := testproc.FreeAddr(t), testproc.FreeAddr(t)
	p := startStar(ctx, t, bin, d, addr, admin, 1)
	c, err := client.New("http://"+addr, client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	l := startLoad(ctx, t, c, "drain")
	o := l.o
	o.WaitAcked(ctx, t, 500)
	o.WaitReading(ctx, t, int64(len(l.names)))
	term := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-p.done
	exited := time.Now()
	took := exited.Sub(term)
	if !p.cmd.ProcessState.Success() {
		t.Fatalf("the star exited with %v after SIGTERM, want a clean exit", p.cmd.ProcessState)
	}
	if took > budget {
		t.Fatalf("the star took %s to exit after SIGTERM, over its %s drain budget", took, budget)
	}
	atTerm := o.Acked.Load()
	startStar(ctx, t, bin, d, addr, admin, 2)
	o.WaitAcked(ctx, t, atTerm+500)
	o.WaitTailed(ctx, t, exited)
	l.end()
	o.Check(t, l.names, l.names)
	l.checkAcked(ctx, t, c, "restart")
	t.Logf("star drain on the emulator: SIGTERM to exit %s (budget %s); pause in acks %s, in tail delivery %s",
		took.Round(time.Millisecond), budget, testproc.Gap(o.Acks, term).Round(time.Millisecond), testproc.Gap(o.Tails, term).Round(time.Millisecond))
}
