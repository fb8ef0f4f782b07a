package integration

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/client"
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

// TestStarStandbyTakesOverOnTheTable runs two star tasks of one star
// with --standby against the emulator (the lease on DynamoDB, ADR 0051):
// the first leads, the second stands by and relays its API port to the
// leader. Clients reach the star only through the standby's port (as
// through a load balancer that routes to both tasks; the second endpoint
// is the leader's own). kill -9 of the leader: the standby takes the lease
// when it lapses (TTL 1 s), fences, walks, mints and serves; producers and
// tailing readers resume. Every acknowledged record reads back once, in
// order.
func TestStarStandbyTakesOverOnTheTable(t *testing.T) {
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
	killed := time.Now()
	a.kill()
	atKill := o.Acked.Load()
	led := waitLeader(ctx, t, adminB, 30*time.Second)
	o.WaitAcked(ctx, t, atKill+300)
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
	t.Logf("standby on the emulator: kill -9 to leading %s (lease TTL 1 s); pause in acks %s, in tail delivery %s; %d sessions cut mid-message",
		led.Sub(killed).Round(time.Millisecond), testproc.Gap(o.Acks, killed).Round(time.Millisecond), testproc.Gap(o.Tails, killed).Round(time.Millisecond), lost)
}
