package integration

import (
	"context"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/metastore/dynamo"
	"github.com/strandlog/strand/tests/testproc"
)

// waitLeader waits until admin's /leader answers 200.
func waitLeader(ctx context.Context, t *testing.T, admin string, within time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/leader", nil)
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return time.Now()
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s did not lead within %s", admin, within)
	return time.Time{}
}

// standbyTakeover runs two star tasks of one star with --standby against
// the emulator (the lease on DynamoDB, ADR 0051): the first leads, the
// second stands by and relays its API port to the leader. Clients reach
// the star only through the standby's port (as through a load balancer
// that routes to both tasks; the second endpoint is the leader's own).
// stop ends the leader and returns when its process was gone; the standby
// takes over (fence, walk, mint) and serves; producers and tailing readers
// resume. Every acknowledged record reads back once, in order. It returns
// the time from the leader's exit to the standby holding the lease.
func standbyTakeover(t *testing.T, how string, stop func(p *starProc) time.Time) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := testproc.Build(t, "./functions/star")
	d := deploy(ctx, t)
	token := adminToken(ctx, t, d)
	standby := func(addr string) []string {
		return []string{"STRAND_STANDBY=true", "STRAND_LEASE_TTL=1s", "STRAND_ADVERTISE_ADDR=" + addr}
	}
	addrA, adminA := testproc.FreeAddr(t), testproc.FreeAddr(t)
	a := startStar(ctx, t, bin, d, addrA, adminA, 1, standby(addrA)...)
	waitLeader(ctx, t, adminA, 30*time.Second)
	addrB, adminB := testproc.FreeAddr(t), testproc.FreeAddr(t)
	startStar(ctx, t, bin, d, addrB, adminB, 2, standby(addrB)...)

	c, err := client.New("http://"+addrB+",http://"+addrA, client.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	l := startLoad(ctx, t, c, "standby")
	o := l.o
	o.WaitAcked(ctx, t, 300)
	stopped := time.Now()
	exited := stop(a)
	atStop := o.Acked.Load()
	meta := dynamo.New(d.ddb, d.table)
	var taken time.Time
	for deadline := time.Now().Add(30 * time.Second); taken.IsZero(); time.Sleep(5 * time.Millisecond) {
		if l, err := meta.GetLease(ctx, starID); err == nil && l.Addr == addrB {
			taken = time.Now()
		} else if time.Now().After(deadline) {
			t.Fatalf("the standby did not take the lease within 30 s: %+v, %v", l, err)
		}
	}
	led := waitLeader(ctx, t, adminB, 30*time.Second)
	o.WaitAcked(ctx, t, atStop+300)
	o.WaitTailed(ctx, t, led)
	l.end()
	// A session cut mid-message when the leader died reads as a protocol
	// error (connect-go: incomplete envelope), which the client itself
	// takes for a lost connection (ErrConnectionLost, retried); so does
	// this test. Anything else fails it.
	lost := 0
	for _, err := range o.Bad {
		m := err.Error()
		if !strings.Contains(m, "incomplete envelope") && !strings.Contains(m, "connection reset") {
			t.Fatalf("clients saw an error that is neither unavailable nor a lost connection: %v", err)
		}
		lost++
	}
	l.checkAcked(ctx, t, c, "takeover")
	t.Logf("standby on the emulator: %s to leading %s (the leader's exit to the lease taken %s, to leading %s; lease TTL 1 s); pause in acks %s, in tail delivery %s; %d sessions cut mid-message",
		how, led.Sub(stopped).Round(time.Millisecond), taken.Sub(exited).Round(time.Millisecond), led.Sub(exited).Round(time.Millisecond),
		testproc.Gap(o.Acks, stopped).Round(time.Millisecond), testproc.Gap(o.Tails, stopped).Round(time.Millisecond), lost)
	return taken.Sub(exited)
}

// TestStarStandbyTakesOverOnTheTable: kill -9 of the leader; the standby
// takes the lease when it lapses (TTL 1 s) and leads.
func TestStarStandbyTakesOverOnTheTable(t *testing.T) {
	standbyTakeover(t, "kill -9", func(p *starProc) time.Time { p.kill(); return time.Now() })
}

// TestStarStandbyHandoverOnTheTable: SIGTERM of the leader, as ECS stops a
// task in a deploy; it drains, releases the lease and exits cleanly, and
// the standby takes the lease at its next read (every 100 ms at this TTL),
// where a lease left unreleased, renewed until the exit, would hold it for
// TTL less a renewal period (0.75 s) after the exit.
func TestStarStandbyHandoverOnTheTable(t *testing.T) {
	taken := standbyTakeover(t, "SIGTERM", func(p *starProc) time.Time {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		<-p.done
		if !p.cmd.ProcessState.Success() {
			t.Fatalf("the leader exited with %v after SIGTERM, want a clean exit", p.cmd.ProcessState)
		}
		return time.Now()
	})
	if taken >= 500*time.Millisecond {
		t.Fatalf("the standby took the lease %s after the leader's exit, want under 0.5 s: the leader did not release it", taken)
	}
}
