package kafka

import (
	"context"
	"log/slog"
	"math/rand"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/clock"
)

// testCoordinator is a coordinator on a manual clock and seeded ids, its
// timers driven by the test (tick), no janitor.
func testCoordinator(t *testing.T) (*coordinator, *clock.Manual) {
	return testCoordinatorWith(t, Limits{})
}

// testCoordinatorWith is testCoordinator under limits l.
func testCoordinatorWith(t *testing.T, l Limits) (*coordinator, *clock.Manual) {
	clk := clock.NewManual(time.Unix(1_000_000, 0))
	l = l.WithDefaults()
	s := &Server{cfg: Config{Rand: rand.New(rand.NewSource(1)), GroupRebalanceDelay: 100 * time.Millisecond},
		clk: clk, log: slog.New(slog.DiscardHandler), lim: l}
	c := &coordinator{s: s, groups: map[string]*group{}, pending: map[string]pendingID{}, stop: make(chan struct{}),
		byTenant: newShares(l.MaxGroups, l.MaxGroupsPerTenant), members: newShares(l.MaxMembers, l.MaxMembersPerTenant)}
	t.Cleanup(func() { close(c.stop) })
	return c, clk
}

func joinReq(id string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version, r.Group, r.MemberID, r.ProtocolType = 5, "g", id, "consumer"
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 2000, 5000
	r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte(id)}}
	return r
}

// join sends a join and returns a channel with its answer (joins wait
// for the rebalance).
func join(c *coordinator, id string) <-chan *kmsg.JoinGroupResponse {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { ch <- c.join(context.Background(), joinReq(id), "cl", "h").(*kmsg.JoinGroupResponse) }()
	return ch
}

// settle ticks until the answer comes (the join reached its wait).
func settle(t *testing.T, c *coordinator, clk *clock.Manual, ch <-chan *kmsg.JoinGroupResponse, step time.Duration) *kmsg.JoinGroupResponse {
	t.Helper()
	for range 200 {
		select {
		case r := <-ch:
			return r
		case <-time.After(5 * time.Millisecond):
			clk.Sleep(step)
			c.tick(clk.Now())
		}
	}
	t.Fatal("the join was not answered")
	return nil
}

func memberID(t *testing.T, c *coordinator) string {
	t.Helper()
	r := c.join(context.Background(), joinReq(""), "cl", "h").(*kmsg.JoinGroupResponse)
	if r.ErrorCode != kerr.MemberIDRequired.Code || r.MemberID == "" {
		t.Fatalf("a first join: error %d, member %q; want MEMBER_ID_REQUIRED with an id", r.ErrorCode, r.MemberID)
	}
	return r.MemberID
}

func heartbeat(c *coordinator, id string, gen int32) int16 {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Group, r.MemberID, r.Generation = "g", id, gen
	return c.heartbeat(r).(*kmsg.HeartbeatResponse).ErrorCode
}

// TestGroupStateMachine walks the classic protocol on a manual clock: a
// first member waits out the initial delay and leads generation 1; its
// assignment comes back at sync; a second member makes the first one's
// heartbeat answer REBALANCE_IN_PROGRESS, both rejoin into generation 2
// with the leader seeing both; the second member's session runs out
// without heartbeats and it is removed, starting a rebalance; an old
// generation's heartbeat is ILLEGAL_GENERATION.
func TestGroupStateMachine(t *testing.T) {
	c, clk := testCoordinator(t)
	a := memberID(t, c)
	ra := settle(t, c, clk, join(c, a), 50*time.Millisecond)
	if ra.ErrorCode != 0 || ra.Generation != 1 || ra.LeaderID != a || len(ra.Members) != 1 {
		t.Fatalf("a's join: %+v", ra)
	}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = "g", a, 1
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: a, MemberAssignment: []byte("all")}}
	if r := c.sync(context.Background(), sync).(*kmsg.SyncGroupResponse); r.ErrorCode != 0 || string(r.MemberAssignment) != "all" {
		t.Fatalf("a's sync: %+v", r)
	}
	if code := heartbeat(c, a, 1); code != 0 {
		t.Fatalf("a's heartbeat when stable: %d", code)
	}

	b := memberID(t, c)
	jb := join(c, b)
	time.Sleep(20 * time.Millisecond) // b waits in its join
	if code := heartbeat(c, a, 1); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("a's heartbeat while b joins: %d, want REBALANCE_IN_PROGRESS", code)
	}
	ja := join(c, a)
	ra, rb := settle(t, c, clk, ja, 10*time.Millisecond), settle(t, c, clk, jb, 10*time.Millisecond)
	if ra.Generation != 2 || rb.Generation != 2 || ra.LeaderID != a || len(ra.Members) != 2 || len(rb.Members) != 0 {
		t.Fatalf("generation 2: a %+v, b %+v", ra, rb)
	}
	if code := heartbeat(c, a, 1); code != kerr.IllegalGeneration.Code {
		t.Errorf("a heartbeat of generation 1 in 2: %d, want ILLEGAL_GENERATION", code)
	}

	// b goes silent; a keeps heartbeating.
	for range 5 {
		clk.Sleep(500 * time.Millisecond)
		heartbeat(c, a, 2)
		c.tick(clk.Now())
	}
	g := c.groups["g"]
	if g.members[b] != nil || g.state != statePreparing {
		t.Fatalf("after b's session: members %d, state %s; want b removed and a rebalance", len(g.members), g.state)
	}
	if code := heartbeat(c, a, 2); code != kerr.RebalanceInProgress.Code {
		t.Errorf("a's heartbeat after b expired: %d, want REBALANCE_IN_PROGRESS", code)
	}
	if code := heartbeat(c, b, 2); code != kerr.UnknownMemberID.Code {
		t.Errorf("b's heartbeat after it expired: %d, want UNKNOWN_MEMBER_ID", code)
	}
}
