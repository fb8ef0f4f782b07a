package node

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/strandlog/strand/shared/kafka"
)

// ErrKafkaLimit is a Kafka front end limit that cannot work (checked by
// CheckLimits before anything starts).
var ErrKafkaLimit = errors.New("node: Kafka limit cannot work")

// bindKafkaLimitFlags registers the Kafka front end's limits
// (kafka.Limits, in c.Kafka.Limits) on fs, with the defaults as today
// (zero fields set to them first):
//
//	--kafka-max-conns                  1024   MaxConns
//	--kafka-max-conns-per-source        256   MaxConnsPerSource
//	--kafka-max-conns-per-tenant          0   MaxConnsPerTenant (512, or half the total)
//	--kafka-max-held-bytes          268435456 MaxHeldBytes (256 MiB)
//	--kafka-max-fetch-bytes          57671680 MaxFetchBytes (55 MiB)
//	--kafka-max-produce-bytes         8388608 MaxProduceBytes (8 MiB)
//	--kafka-idle-timeout                10m   IdleTimeout
//	--kafka-auth-deadline               10s   AuthDeadline
//	--kafka-max-groups               100000   MaxGroups
//	--kafka-max-groups-per-tenant         0   MaxGroupsPerTenant (10000, or half)
//	--kafka-max-members              100000   MaxMembers
//	--kafka-max-members-per-tenant        0   MaxMembersPerTenant (10000, or half)
func (c *Config) bindKafkaLimitFlags(fs *flag.FlagSet) {
	l := &c.Kafka.Limits
	// The tenants' shares stay 0 unless given: their default follows
	// the total (kafka.Limits: 512, 10,000 and 10,000, or half the total
	// when that is less), so that lowering a total alone works.
	given := *l
	*l = l.WithDefaults()
	l.MaxConnsPerTenant, l.MaxGroupsPerTenant, l.MaxMembersPerTenant = given.MaxConnsPerTenant, given.MaxGroupsPerTenant, given.MaxMembersPerTenant
	fs.IntVar(&l.MaxConns, "kafka-max-conns", l.MaxConns, "open Kafka connections; past it the oldest unauthenticated one is closed for a new one, else the new one is refused")
	fs.IntVar(&l.MaxConnsPerSource, "kafka-max-conns-per-source", l.MaxConnsPerSource, "unauthenticated Kafka connections of one source address (loopback ones under strand dev included); past it a new one is closed")
	fs.IntVar(&l.MaxConnsPerTenant, "kafka-max-conns-per-tenant", l.MaxConnsPerTenant, "Kafka connections one tenant has authenticated by SASL (0: 512, or half of --kafka-max-conns when that is less; held to half of it); past it SASL fails")
	fs.IntVar(&l.MaxHeldBytes, "kafka-max-held-bytes", l.MaxHeldBytes, "Kafka request and fetch answer bytes held across connections, read and not yet answered (one tenant holds at most half); past it a connection waits")
	fs.IntVar(&l.MaxFetchBytes, "kafka-max-fetch-bytes", l.MaxFetchBytes, "cap of a Kafka Fetch answer's bytes, whatever the client asks (at most --kafka-max-held-bytes; held in the tenant's half of it)")
	fs.IntVar(&l.MaxProduceBytes, "kafka-max-produce-bytes", l.MaxProduceBytes, "largest Kafka Produce request, bytes (at most half of --kafka-max-held-bytes)")
	fs.DurationVar(&l.IdleTimeout, "kafka-idle-timeout", l.IdleTimeout, "a Kafka connection that sends nothing, or reads none of an answer, this long is closed")
	fs.DurationVar(&l.AuthDeadline, "kafka-auth-deadline", l.AuthDeadline, "a Kafka connection not authenticated by SASL this long after it was accepted is closed")
	fs.IntVar(&l.MaxGroups, "kafka-max-groups", l.MaxGroups, "consumer groups the Kafka coordinator holds; past it a JoinGroup creating one is GROUP_MAX_SIZE_REACHED")
	fs.IntVar(&l.MaxGroupsPerTenant, "kafka-max-groups-per-tenant", l.MaxGroupsPerTenant, "consumer groups of one tenant (0: 10000, or half of --kafka-max-groups when that is less; held to half of it)")
	fs.IntVar(&l.MaxMembers, "kafka-max-members", l.MaxMembers, "members of every consumer group together; past it a JoinGroup adding one is GROUP_MAX_SIZE_REACHED")
	fs.IntVar(&l.MaxMembersPerTenant, "kafka-max-members-per-tenant", l.MaxMembersPerTenant, "consumer group members of one tenant (0: 10000, or half of --kafka-max-members when that is less; held to half of it)")
}

// checkKafkaLimits reports a Kafka limit that cannot work, by its flag:
// a negative one (zero takes the default); a tenant's share larger than
// its total (a share above half the total is held to half, as
// kafka.Limits says); a Fetch cap larger than the held budget it is
// held in; a Produce larger than a tenant's half of that budget (its
// bytes are charged there before its body is read: a larger one would
// be undercounted).
func checkKafkaLimits(l kafka.Limits) error {
	for _, v := range []struct {
		flag string
		v    int
	}{
		{"kafka-max-conns", l.MaxConns}, {"kafka-max-conns-per-source", l.MaxConnsPerSource}, {"kafka-max-conns-per-tenant", l.MaxConnsPerTenant},
		{"kafka-max-held-bytes", l.MaxHeldBytes}, {"kafka-max-fetch-bytes", l.MaxFetchBytes}, {"kafka-max-produce-bytes", l.MaxProduceBytes},
		{"kafka-max-groups", l.MaxGroups}, {"kafka-max-groups-per-tenant", l.MaxGroupsPerTenant},
		{"kafka-max-members", l.MaxMembers}, {"kafka-max-members-per-tenant", l.MaxMembersPerTenant},
	} {
		if v.v < 0 {
			return fmt.Errorf("%w: --%s must not be negative (0: the default), got %d", ErrKafkaLimit, v.flag, v.v)
		}
	}
	for _, v := range []struct {
		flag string
		v    time.Duration
	}{{"kafka-idle-timeout", l.IdleTimeout}, {"kafka-auth-deadline", l.AuthDeadline}} {
		if v.v < 0 {
			return fmt.Errorf("%w: --%s must not be negative (0: the default), got %s", ErrKafkaLimit, v.flag, v.v)
		}
	}
	e := l.WithDefaults()
	for _, s := range []struct {
		per, total string
		p, t       int
	}{
		{"kafka-max-conns-per-tenant", "kafka-max-conns", e.MaxConnsPerTenant, e.MaxConns},
		{"kafka-max-groups-per-tenant", "kafka-max-groups", e.MaxGroupsPerTenant, e.MaxGroups},
		{"kafka-max-members-per-tenant", "kafka-max-members", e.MaxMembersPerTenant, e.MaxMembers},
	} {
		if s.p > s.t {
			return fmt.Errorf("%w: --%s %d is more than --%s %d (one tenant holds at most half of it: give at most %d)", ErrKafkaLimit, s.per, s.p, s.total, s.t, (s.t+1)/2)
		}
	}
	if e.MaxFetchBytes > e.MaxHeldBytes {
		return fmt.Errorf("%w: --kafka-max-fetch-bytes %d is more than --kafka-max-held-bytes %d (a Fetch answer is held in it until written)", ErrKafkaLimit, e.MaxFetchBytes, e.MaxHeldBytes)
	}
	if e.MaxProduceBytes > e.MaxHeldBytes/2 {
		return fmt.Errorf("%w: --kafka-max-produce-bytes %d is more than half of --kafka-max-held-bytes %d (a Produce is held in its tenant's half before its body is read)", ErrKafkaLimit, e.MaxProduceBytes, e.MaxHeldBytes)
	}
	return nil
}
