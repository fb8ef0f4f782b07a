package kafka

import "time"

// Limits bound what one client can make the front end hold or do, checked
// before the work they bound (the strand API's rules, limits.go there):
// a request's size before its body is read, a record set's records and
// decompressed bytes before they are allocated. Zero fields take the
// defaults below. The star's command and strand dev set most of them by
// flag (--kafka-max-conns and so on: node.BindLimitFlags), and node.Start
// refuses a set that cannot work (node.ErrKafkaLimit).
type Limits struct {
	// MaxProduceBytes bounds a Produce request (default 8 MiB; Kafka
	// producers send at most 1 MiB by default, max.request.size).
	MaxProduceBytes int
	// MaxRequestBytes bounds every other request (default 1 MiB).
	MaxRequestBytes int
	// MaxBatchRecords bounds the records of one partition's record set
	// in a Produce (default 65536).
	MaxBatchRecords int
	// MaxDecompressedBytes bounds one partition's record set once
	// decompressed (default 16 MiB).
	MaxDecompressedBytes int
	// MaxConns bounds the open connections (default 1024, as the API's).
	// A new connection past it closes the oldest one that has not
	// authenticated; when every one has, it is refused (conns.go).
	MaxConns int
	// MaxConnsPerSource bounds the open connections of one source address
	// that have not authenticated by SASL (default 256, as the API's):
	// past it a new one is closed at once. Without Config.Auth every
	// connection counts.
	MaxConnsPerSource int
	// MaxConnsPerTenant bounds the connections one tenant has
	// authenticated by SASL (default 512, or half of MaxConns when that
	// is less; at most half of MaxConns in any case): they
	// count here, not in their source's, so that a standby relaying
	// clients to the leader (ADR 0051) is not held to one source's 256.
	// Past it the SASL exchange fails.
	MaxConnsPerTenant int
	// MaxHeldBytes bounds the request bytes the front end holds across
	// connections, read and not yet answered (default 256 MiB); one tenant
	// holds at most half. A connection whose next request does not fit
	// stops being read until answers free room (held.go).
	MaxHeldBytes int
	// IdleTimeout closes a connection that sends nothing this long, or
	// that reads none of an answer this long (a write deadline; default
	// 10 min, Kafka's connections.max.idle.ms).
	IdleTimeout time.Duration
	// MaxFetchBytes caps a Fetch's answer, whatever its MaxBytes asks
	// (default 55 MiB, as Kafka's broker setting fetch.max.bytes); the
	// answer's bytes are held in MaxHeldBytes until it is written.
	MaxFetchBytes int
	// AuthDeadline closes a connection that has not authenticated (SASL)
	// this long after it was accepted (default 10 s, as the API's
	// server.ConnLimits.AuthDeadline): strangers hold connections, of
	// MaxConns, no longer than that. Without Config.Auth it does not apply.
	AuthDeadline time.Duration
	// MaxGroups bounds the consumer groups the coordinator holds (default
	// 100,000), MaxGroupsPerTenant one tenant's (a root token and every
	// token minted under it; default 10,000, or half of MaxGroups when
	// that is less; at most half of MaxGroups in any case).
	// Past them a JoinGroup creating a group is GROUP_MAX_SIZE_REACHED.
	// A group left empty is forgotten (its offsets are kept).
	MaxGroups, MaxGroupsPerTenant int
	// MaxMembers bounds the members of every group together (default
	// 100,000), MaxMembersPerTenant one tenant's (default 10,000, or half
	// of MaxMembers when that is less; at most half of it in any case);
	// one group has at most 1,000. Past them a
	// JoinGroup adding a member is GROUP_MAX_SIZE_REACHED.
	MaxMembers, MaxMembersPerTenant int
	// MaxWait caps a Fetch's long poll (default 30 s).
	MaxWait time.Duration
	// MaxOffsetRecords bounds the offsets stream's replay: past this many
	// records since its start, it is compacted (the live offsets written
	// again, the stream trimmed below them; default 10,000).
	MaxOffsetRecords int
}

// Limit defaults.
const (
	DefaultMaxProduceBytes      = 8 << 20
	DefaultMaxRequestBytes      = 1 << 20
	DefaultMaxBatchRecords      = 1 << 16
	DefaultMaxDecompressedBytes = 16 << 20
	DefaultMaxConns             = 1024
	DefaultMaxConnsPerSource    = 256
	DefaultMaxConnsPerTenant    = DefaultMaxConns / 2
	DefaultMaxHeldBytes         = 256 << 20
	DefaultMaxFetchBytes        = 55 << 20
	DefaultIdleTimeout          = 10 * time.Minute
	DefaultAuthDeadline         = 10 * time.Second
	DefaultMaxWait              = 30 * time.Second
	DefaultMaxGroups            = 100_000
	DefaultMaxGroupsPerTenant   = 10_000
	DefaultMaxMembers           = 100_000
	DefaultMaxMembersPerTenant  = 10_000
	DefaultMaxOffsetRecords     = 10_000
)

// WithDefaults is l with its zero (or negative) fields set to the
// defaults, the limits the front end enforces.
func (l Limits) WithDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxProduceBytes, DefaultMaxProduceBytes)
	def(&l.MaxRequestBytes, DefaultMaxRequestBytes)
	def(&l.MaxBatchRecords, DefaultMaxBatchRecords)
	def(&l.MaxDecompressedBytes, DefaultMaxDecompressedBytes)
	def(&l.MaxConns, DefaultMaxConns)
	def(&l.MaxConnsPerSource, DefaultMaxConnsPerSource)
	def(&l.MaxConnsPerTenant, min(DefaultMaxConnsPerTenant, max(l.MaxConns/2, 1)))
	def(&l.MaxHeldBytes, DefaultMaxHeldBytes)
	def(&l.MaxFetchBytes, DefaultMaxFetchBytes)
	def(&l.MaxOffsetRecords, DefaultMaxOffsetRecords)
	def(&l.MaxGroups, DefaultMaxGroups)
	def(&l.MaxGroupsPerTenant, min(DefaultMaxGroupsPerTenant, max(l.MaxGroups/2, 1)))
	def(&l.MaxMembers, DefaultMaxMembers)
	def(&l.MaxMembersPerTenant, min(DefaultMaxMembersPerTenant, max(l.MaxMembers/2, 1)))
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.AuthDeadline <= 0 {
		l.AuthDeadline = DefaultAuthDeadline
	}
	if l.MaxWait <= 0 {
		l.MaxWait = DefaultMaxWait
	}
	return l
}
