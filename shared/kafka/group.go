package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// One group's rebalance state machine (the classic protocol): members
// join, the join phase completes at the deadline or when every member
// joined, the leader's assignment is handed out at sync. The coordinator
// (groups.go) calls it with its lock held and drives its timers.

type group struct {
	name         string
	state        string
	generation   int32
	protocolType string
	protocol     string
	leader       string
	members      map[string]*member
	order        []string // member ids in join order
	deadline     time.Time
	initial      bool    // the first rebalance of an empty group: wait out the delay
	tenant       string  // whose join created it (coordinator.byTenant)
	quota        *shares // the members' count (coordinator.members)
}

type member struct {
	id, clientID, host string
	tenant             string // whose join added it (coordinator.members)
	instanceID         *string
	protocols          []kmsg.JoinGroupRequestProtocol
	session, rebalance time.Duration
	lastSeen           time.Time
	assignment         []byte
	joined             bool
	join               chan *kmsg.JoinGroupResponse // a join waiting for the rebalance
	sync               chan *kmsg.SyncGroupResponse // a sync waiting for the leader
}

// has reports whether the member offered the protocol.
func (m *member) has(protocol string) bool {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return true
		}
	}
	return false
}

// metadata is the member's metadata for the protocol (nil: not offered).
func (m *member) metadata(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

func (g *group) remove(id string) {
	m := g.members[id]
	if m == nil {
		return
	}
	if m.join != nil {
		r := &kmsg.JoinGroupResponse{ErrorCode: kerr.UnknownMemberID.Code, Generation: -1}
		m.join <- r
	}
	if m.sync != nil {
		m.sync <- &kmsg.SyncGroupResponse{ErrorCode: kerr.UnknownMemberID.Code}
	}
	delete(g.members, id)
	g.quota.put(m.tenant)
	for i, o := range g.order {
		if o == id {
			g.order = append(g.order[:i:i], g.order[i+1:]...)
			break
		}
	}
	if len(g.members) == 0 {
		g.state, g.leader, g.protocol = stateEmpty, "", ""
		g.generation++
	}
}

// prepare starts a rebalance: every member must join again by the
// deadline (the longest rebalance timeout), or by delay on a group that
// was empty (more members may come).
func (g *group) prepare(now time.Time, delay time.Duration) {
	if g.state == stateCompleting {
		for _, m := range g.members {
			if m.sync != nil {
				m.sync <- &kmsg.SyncGroupResponse{ErrorCode: kerr.RebalanceInProgress.Code}
				m.sync = nil
			}
		}
	}
	if g.state != statePreparing {
		for _, m := range g.members {
			m.joined = false
		}
		var longest time.Duration
		for _, m := range g.members {
			longest = max(longest, m.rebalance)
		}
		g.deadline = now.Add(longest)
		g.initial = false
	}
	if delay > 0 {
		g.initial = true
		g.deadline = now.Add(delay)
	}
	g.state = statePreparing
}

func (g *group) allJoined() bool {
	for _, m := range g.members {
		if !m.joined {
			return false
		}
	}
	return len(g.members) > 0
}

// complete ends the join phase: members that did not join are out, the
// generation moves, the leader gets every member's metadata.
func (g *group) complete() {
	for id, m := range g.members {
		if !m.joined {
			g.remove(id)
		}
	}
	if len(g.members) == 0 {
		g.state = stateEmpty
		return
	}
	g.generation++
	g.protocol = g.pickProtocol()
	if g.members[g.leader] == nil {
		g.leader = g.order[0]
	}
	g.state = stateCompleting
	g.initial = false
	for _, id := range g.order {
		m := g.members[id]
		m.assignment = nil
		resp := &kmsg.JoinGroupResponse{Generation: g.generation, LeaderID: g.leader, MemberID: id}
		pt, p := g.protocolType, g.protocol
		resp.ProtocolType, resp.Protocol = &pt, &p
		if id == g.leader {
			for _, oid := range g.order {
				om := g.members[oid]
				jm := kmsg.NewJoinGroupResponseMember()
				jm.MemberID, jm.InstanceID, jm.ProtocolMetadata = oid, om.instanceID, om.metadata(g.protocol)
				resp.Members = append(resp.Members, jm)
			}
		}
		if m.join != nil {
			m.join <- resp
			m.join = nil
		}
	}
}

// pickProtocol is the first of the leader-candidate's protocols every
// member supports (join order decides among equals).
func (g *group) pickProtocol() string {
	first := g.members[g.order[0]]
	if l := g.members[g.leader]; l != nil {
		first = l
	}
	for _, p := range first.protocols {
		if g.allHave(p.Name) {
			return p.Name
		}
	}
	return ""
}

// allHave reports whether every member offered the protocol.
func (g *group) allHave(protocol string) bool {
	for _, m := range g.members {
		if !m.has(protocol) {
			return false
		}
	}
	return true
}

// supports reports whether the protocols share one with the group's
// members (or the group has none).
func (g *group) supports(ps []kmsg.JoinGroupRequestProtocol) bool {
	if len(g.members) == 0 {
		return true
	}
	for _, p := range ps {
		if g.allHave(p.Name) {
			return true
		}
	}
	return false
}
