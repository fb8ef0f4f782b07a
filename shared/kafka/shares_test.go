package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/auth"
)

// TestGroupSharePerTenant: a coordinator of 4 groups and 4 members holds
// at most 2 of each for one tenant. Tenant a's third group is refused
// GROUP_MAX_SIZE_REACHED, and so is a second member in one of its groups
// (its members' share spent); tenant b still creates its two; once a's
// member leaves one group, the group is forgotten (empty) and a's third
// group joins. Before the shares, a took its third group (the table's
// 100,000 were one pool) and its member was admitted.
func TestGroupSharePerTenant(t *testing.T) {
	c, clk := testCoordinatorWith(t, Limits{MaxGroups: 4, MaxMembers: 4})
	as := func(tenant string) context.Context {
		return auth.WithGrant(context.Background(), auth.Grant{Tenant: tenant, Ops: []auth.Op{auth.Read}})
	}
	a, b := as("tenant-a"), as("tenant-b")
	joinAs := func(ctx context.Context, group string) *kmsg.JoinGroupResponse {
		t.Helper()
		r := joinReq("")
		r.Version, r.Group, r.SessionTimeoutMillis = 3, group, 60_000 // v3: the id comes with the answer
		ch := make(chan *kmsg.JoinGroupResponse, 1)
		go func() { ch <- c.join(ctx, r, "cl", "h").(*kmsg.JoinGroupResponse) }()
		return settle(t, c, clk, ch, 50*time.Millisecond)
	}
	want := func(r *kmsg.JoinGroupResponse, code int16, what string) {
		t.Helper()
		if r.ErrorCode != code {
			t.Fatalf("%s: error %d, want %d", what, r.ErrorCode, code)
		}
	}
	a1 := joinAs(a, "a/1")
	want(a1, 0, "a's first group")
	want(joinAs(a, "a/2"), 0, "a's second group")
	want(joinAs(a, "a/3"), kerr.GroupMaxSizeReached.Code, "a's third group, past its share of 2")
	want(joinAs(a, "a/1"), kerr.GroupMaxSizeReached.Code, "a's third member, past its share of 2")
	want(joinAs(b, "b/1"), 0, "b's first group")
	want(joinAs(b, "b/2"), 0, "b's second group")

	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group, leave.MemberID = "a/1", a1.MemberID
	if code := c.leave(leave).(*kmsg.LeaveGroupResponse).ErrorCode; code != 0 {
		t.Fatalf("a's leave: error %d", code)
	}
	c.tick(clk.Now()) // the empty group is forgotten
	want(joinAs(a, "a/3"), 0, "a's group after one of its groups emptied")
}

// TestPendingMemberIDsCounted: a member id handed out by MEMBER_ID_REQUIRED
// counts in its tenant's members until it joins or expires. With a share
// of 2, a's third id is refused GROUP_MAX_SIZE_REACHED (before, every
// JoinGroup without an id kept one for 5 minutes, unbounded); joining
// with an id it holds still works, and ids expired give their place back.
func TestPendingMemberIDsCounted(t *testing.T) {
	c, clk := testCoordinatorWith(t, Limits{MaxMembers: 4})
	a := auth.WithGrant(context.Background(), auth.Grant{Tenant: "tenant-a", Ops: []auth.Op{auth.Read}})
	askID := func() *kmsg.JoinGroupResponse {
		return c.join(a, joinReq(""), "cl", "h").(*kmsg.JoinGroupResponse)
	}
	var ids []string
	for range 2 {
		r := askID()
		if r.ErrorCode != kerr.MemberIDRequired.Code {
			t.Fatalf("asking a member id: error %d, want MEMBER_ID_REQUIRED", r.ErrorCode)
		}
		ids = append(ids, r.MemberID)
	}
	if r := askID(); r.ErrorCode != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("a's third member id, past its share of 2: error %d, want GROUP_MAX_SIZE_REACHED", r.ErrorCode)
	}
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { ch <- c.join(a, joinReq(ids[0]), "cl", "h").(*kmsg.JoinGroupResponse) }()
	if r := settle(t, c, clk, ch, 50*time.Millisecond); r.ErrorCode != 0 {
		t.Fatalf("joining with a member id a holds: error %d", r.ErrorCode)
	}
	clk.Sleep(pendingMemberTTL + time.Second) // the other id expires, and the member (no heartbeats)
	c.tick(clk.Now())
	for i := range 2 {
		if r := askID(); r.ErrorCode != kerr.MemberIDRequired.Code {
			t.Fatalf("member id %d after the others expired: error %d, want MEMBER_ID_REQUIRED", i+1, r.ErrorCode)
		}
	}
}
