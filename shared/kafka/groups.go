package kafka

import (
	"context"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strandlog/strand/shared/auth"
)

// Group states (Kafka's names, as DescribeGroups and ListGroups show them).
const (
	stateEmpty       = "Empty"
	statePreparing   = "PreparingRebalance"
	stateCompleting  = "CompletingRebalance"
	stateStable      = "Stable"
	minSessionMs     = 1_000
	maxSessionMs     = 30 * 60_000
	maxGroupMembers  = 1_000
	janitorEvery     = 100 * time.Millisecond
	pendingMemberTTL = 5 * time.Minute
)

// coordinator runs the classic consumer group protocol (JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup) for every group in memory, and keeps
// committed offsets durable in the offsets stream. Membership is not
// durable: after a restart, members rejoin (their heartbeats answer
// UNKNOWN_MEMBER_ID) and resume from the committed offsets.
type coordinator struct {
	s       *Server
	offsets *offsetStore
	mu      sync.Mutex
	groups  map[string]*group
	// byTenant and members bound the groups and the members (of every
	// group) in all and per tenant (Limits.MaxGroups, MaxGroupsPerTenant,
	// MaxMembers, MaxMembersPerTenant); a group is counted to the tenant
	// whose join created it, a member to the tenant that joined.
	byTenant, members *shares
	pending           map[string]pendingID // member ids handed out by MEMBER_ID_REQUIRED
	stop              chan struct{}
	wg                sync.WaitGroup
}

func newCoordinator(s *Server) *coordinator {
	c := &coordinator{s: s, offsets: &offsetStore{core: s.cfg.Core, max: s.lim.MaxOffsetRecords}, groups: map[string]*group{},
		pending: map[string]pendingID{}, stop: make(chan struct{}),
		byTenant: newShares(s.lim.MaxGroups, s.lim.MaxGroupsPerTenant), members: newShares(s.lim.MaxMembers, s.lim.MaxMembersPerTenant)}
	c.wg.Add(1)
	go c.janitor()
	return c
}

func (c *coordinator) close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	c.wg.Wait()
}

// janitor expires members past their session, ends rebalances past
// their deadline and forgets groups left empty (their committed offsets
// are kept in the offsets stream: ListGroups still names them).
func (c *coordinator) janitor() {
	defer c.wg.Done()
	for {
		select {
		case <-c.stop:
			return
		case <-c.s.clk.After(janitorEvery):
		}
		c.tick(c.s.clk.Now())
	}
}

func (c *coordinator) tick(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, p := range c.pending {
		if now.After(p.until) {
			delete(c.pending, id)
			c.members.put(p.tenant)
		}
	}
	for name, g := range c.groups {
		if g.state == stateEmpty && len(g.members) == 0 {
			delete(c.groups, name)
			c.byTenant.put(g.tenant)
			continue
		}
		for _, m := range g.members {
			if m.join == nil && now.Sub(m.lastSeen) > m.session {
				c.s.log.Info("kafka: group member expired", "group", g.name, "member", m.id)
				g.remove(m.id)
				if g.state != stateEmpty {
					g.prepare(now, 0)
				}
			}
		}
		if g.state == statePreparing && (!now.Before(g.deadline) || g.allJoined() && !g.initial) {
			g.complete()
		}
	}
}

// pendingID is a member id handed out by MEMBER_ID_REQUIRED (KIP-394):
// kept until, counted in tenant's members meanwhile.
type pendingID struct {
	until  time.Time
	tenant string
}

func (c *coordinator) newMemberID(clientID string) string {
	var b [8]byte
	if _, err := c.s.cfg.Rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("kafka: member id randomness: %v", err))
	}
	return clientID + "-" + hex.EncodeToString(b[:])
}

func (c *coordinator) join(ctx context.Context, r *kmsg.JoinGroupRequest, clientID, host string) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.Generation = -1
	fail := func(code int16) kmsg.Response { resp.ErrorCode = code; return resp }
	if r.Group == "" {
		return fail(kerr.InvalidGroupID.Code)
	}
	if r.SessionTimeoutMillis < minSessionMs || r.SessionTimeoutMillis > maxSessionMs {
		return fail(kerr.InvalidSessionTimeout.Code)
	}
	if len(r.Protocols) == 0 || r.ProtocolType == "" {
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	rebalance := r.RebalanceTimeoutMillis
	if r.Version == 0 || rebalance <= 0 {
		rebalance = r.SessionTimeoutMillis
	}
	now := c.s.clk.Now()
	gr, _ := auth.FromContext(ctx)
	tenant := gr.Tenant // "": no authentication
	c.mu.Lock()
	g := c.groups[r.Group]
	if g == nil {
		if !c.byTenant.take(tenant) {
			c.mu.Unlock()
			c.s.log.Info("kafka: group refused: the groups of its tenant, or of all, are at their limit", "group", r.Group,
				"tenant", shortTenant(tenant), "max", c.byTenant.max, "per_tenant", c.byTenant.per)
			return fail(kerr.GroupMaxSizeReached.Code)
		}
		g = &group{name: r.Group, state: stateEmpty, members: map[string]*member{}, tenant: tenant, quota: c.members}
		c.groups[r.Group] = g
	}
	if g.state != stateEmpty && g.protocolType != r.ProtocolType || !g.supports(r.Protocols) {
		c.mu.Unlock()
		return fail(kerr.InconsistentGroupProtocol.Code)
	}
	id := r.MemberID
	m := g.members[id]
	switch {
	case id == "" && r.Version >= 4:
		// KIP-394: hand out the id; the member joins again with it.
		// It counts as a member of its tenant until it joins or expires:
		// ids asked for and never used would otherwise pile up.
		if !c.members.take(tenant) {
			c.mu.Unlock()
			c.s.log.Info("kafka: member id refused: the members of its tenant, or of all, are at their limit", "group", r.Group,
				"tenant", shortTenant(tenant), "max", c.members.max, "per_tenant", c.members.per)
			return fail(kerr.GroupMaxSizeReached.Code)
		}
		resp.MemberID = c.newMemberID(clientID)
		c.pending[resp.MemberID] = pendingID{until: now.Add(pendingMemberTTL), tenant: tenant}
		c.mu.Unlock()
		return fail(kerr.MemberIDRequired.Code)
	case id == "":
		id = c.newMemberID(clientID)
	case m == nil:
		p, ok := c.pending[id]
		if !ok {
			c.mu.Unlock()
			return fail(kerr.UnknownMemberID.Code)
		}
		delete(c.pending, id)
		c.members.put(p.tenant) // the member takes its place below
	}
	if m == nil {
		if len(g.members) >= maxGroupMembers || !c.members.take(tenant) {
			c.mu.Unlock()
			c.s.log.Info("kafka: member refused: its group, or the members of its tenant or of all, are at their limit", "group", r.Group,
				"tenant", shortTenant(tenant), "per_group", maxGroupMembers, "max", c.members.max, "per_tenant", c.members.per)
			return fail(kerr.GroupMaxSizeReached.Code)
		}
		m = &member{id: id, clientID: clientID, host: host, tenant: tenant}
		g.members[id] = m
		g.order = append(g.order, id)
	}
	if m.join != nil { // a duplicate join replaces the older one
		m.join <- &kmsg.JoinGroupResponse{ErrorCode: kerr.RebalanceInProgress.Code, Generation: -1}
	}
	m.instanceID, m.protocols = r.InstanceID, r.Protocols
	m.session = time.Duration(r.SessionTimeoutMillis) * time.Millisecond
	m.rebalance = time.Duration(rebalance) * time.Millisecond
	g.protocolType = r.ProtocolType
	switch {
	case g.state == stateEmpty:
		g.prepare(now, min(c.s.cfg.GroupRebalanceDelay, m.rebalance))
	case g.state == statePreparing && g.initial:
		g.deadline = now.Add(min(c.s.cfg.GroupRebalanceDelay, m.rebalance)) // more may come
	default:
		g.prepare(now, 0)
	}
	// After prepare, which marks every member not joined yet.
	m.lastSeen, m.joined = now, true
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	m.join = ch
	if g.allJoined() && !g.initial {
		g.complete()
	}
	c.mu.Unlock()
	select {
	case got := <-ch:
		got.Version, got.ThrottleMillis = resp.Version, 0
		if got.MemberID == "" {
			got.MemberID = id
		}
		return got
	case <-c.stop:
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
}

// member finds a group member, checking the generation (-1 skips it).
func (c *coordinator) member(group, id string, gen int32) (*group, *member, int16) {
	g := c.groups[group]
	if g == nil {
		return nil, nil, kerr.UnknownMemberID.Code
	}
	m := g.members[id]
	if m == nil {
		return g, nil, kerr.UnknownMemberID.Code
	}
	if gen != -1 && gen != g.generation {
		return g, m, kerr.IllegalGeneration.Code
	}
	return g, m, 0
}

func (c *coordinator) sync(ctx context.Context, r *kmsg.SyncGroupRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
	c.mu.Lock()
	g, m, code := c.member(r.Group, r.MemberID, r.Generation)
	if code != 0 {
		c.mu.Unlock()
		resp.ErrorCode = code
		return resp
	}
	m.lastSeen = c.s.clk.Now()
	pt, p := g.protocolType, g.protocol
	resp.ProtocolType, resp.Protocol = &pt, &p
	switch g.state {
	case statePreparing:
		c.mu.Unlock()
		resp.ErrorCode = kerr.RebalanceInProgress.Code
		return resp
	case stateStable:
		resp.MemberAssignment = m.assignment
		c.mu.Unlock()
		return resp
	}
	if m.id == g.leader {
		for _, a := range r.GroupAssignment {
			if om := g.members[a.MemberID]; om != nil {
				om.assignment = a.MemberAssignment
			}
		}
		g.state = stateStable
		for _, om := range g.members {
			if om.sync != nil {
				om.sync <- &kmsg.SyncGroupResponse{MemberAssignment: om.assignment}
				om.sync = nil
			}
		}
		resp.MemberAssignment = m.assignment
		c.mu.Unlock()
		return resp
	}
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	m.sync = ch
	c.mu.Unlock()
	select {
	case got := <-ch:
		resp.ErrorCode, resp.MemberAssignment = got.ErrorCode, got.MemberAssignment
		return resp
	case <-c.stop:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
}

func (c *coordinator) heartbeat(r *kmsg.HeartbeatRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	g, m, code := c.member(r.Group, r.MemberID, r.Generation)
	if m != nil {
		m.lastSeen = c.s.clk.Now()
	}
	switch {
	case code != 0:
		resp.ErrorCode = code
	case g.state == statePreparing:
		resp.ErrorCode = kerr.RebalanceInProgress.Code
	}
	return resp
}

func (c *coordinator) leave(r *kmsg.LeaveGroupRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
	ids := []string{r.MemberID}
	if r.Version >= 3 {
		ids = ids[:0]
		for _, m := range r.Members {
			ids = append(ids, m.MemberID)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.groups[r.Group]
	left := false
	for i, id := range ids {
		code := kerr.UnknownMemberID.Code
		if g != nil && g.members[id] != nil {
			g.remove(id)
			code, left = 0, true
		}
		if r.Version >= 3 {
			lm := kmsg.NewLeaveGroupResponseMember()
			lm.MemberID, lm.InstanceID, lm.ErrorCode = id, r.Members[i].InstanceID, code
			resp.Members = append(resp.Members, lm)
		} else {
			resp.ErrorCode = code
		}
	}
	if left && g.state != stateEmpty {
		g.prepare(c.s.clk.Now(), 0)
	}
	return resp
}

func (c *coordinator) describe(ctx context.Context, r *kmsg.DescribeGroupsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range r.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group, dg.State = name, "Dead"
		if !groupAllowed(ctx, name) {
			dg.ErrorCode = kerr.GroupAuthorizationFailed.Code
		} else if g := c.groups[name]; g != nil {
			dg.State, dg.ProtocolType, dg.Protocol = g.state, g.protocolType, g.protocol
			for _, id := range g.order {
				m := g.members[id]
				dm := kmsg.NewDescribeGroupsResponseGroupMember()
				dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.id, m.instanceID, m.clientID, m.host
				dm.ProtocolMetadata, dm.MemberAssignment = m.metadata(g.protocol), m.assignment
				dg.Members = append(dg.Members, dm)
			}
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (c *coordinator) list(ctx context.Context, r *kmsg.ListGroupsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
	c.mu.Lock()
	states := map[string]string{}
	types := map[string]string{}
	for name, g := range c.groups {
		states[name], types[name] = g.state, g.protocolType
	}
	c.mu.Unlock()
	if stored, err := c.offsets.groups(c.s.ctx); err == nil {
		for _, name := range stored {
			if _, ok := states[name]; !ok {
				states[name], types[name] = stateEmpty, "consumer"
			}
		}
	}
	names := make([]string, 0, len(states))
	for n := range states {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if len(r.StatesFilter) > 0 && !contains(r.StatesFilter, states[n]) || !groupAllowed(ctx, n) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = n, types[n], states[n], "classic"
		resp.Groups = append(resp.Groups, lg)
	}
	return resp
}
