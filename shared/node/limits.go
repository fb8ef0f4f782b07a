package node

import (
	"flag"
	"fmt"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/server"
)

// BindLimitFlags registers the API's abuse limits on fs (the star's
// command and strand dev share them; each is also STRAND_ + its name
// upper-cased, through star.ApplyEnv), with the defaults as today:
//
//	--max-sessions-per-token          1000  Limits.MaxSessionsPerToken
//	--max-sessions                   10000  Limits.MaxSessions
//	--max-conns                       1024  MaxConns
//	--token-lookups-per-source         50   SourceRate.PerSecond (per s)
//	--token-lookup-burst-per-source   200   SourceRate.Burst
//	--token-lookups                   500   GlobalRate.PerSecond (per s)
//	--token-lookup-burst             2000   GlobalRate.Burst
//	--max-streams-per-tenant            0   Limits.MaxStreamsPerTenant (0: unlimited)
//	--append-bytes-per-sec-per-tenant   0   Limits.AppendBytesPerSecPerTenant (0: unlimited)
//	--append-burst-bytes-per-tenant     0   Limits.AppendBurstBytesPerTenant
//	--write-timeout                   30s   Limits.WriteTimeout
//
// and the Kafka front end's (Kafka.Limits; bindKafkaLimitFlags in
// kafkalimits.go lists them). Zero fields of c are set to those defaults first. CheckLimits says
// what is wrong with a value given.
func (c *Config) BindLimitFlags(fs *flag.FlagSet) {
	if c.Limits.MaxSessionsPerToken == 0 {
		c.Limits.MaxSessionsPerToken = server.DefaultMaxSessionsPerToken
	}
	if c.Limits.MaxSessions == 0 {
		c.Limits.MaxSessions = server.DefaultMaxSessions
	}
	if c.MaxConns == 0 {
		c.MaxConns = server.DefaultMaxConns
	}
	if c.Limits.WriteTimeout == 0 {
		c.Limits.WriteTimeout = server.DefaultWriteTimeout
	}
	if c.SourceRate == (auth.Rate{}) {
		c.SourceRate = auth.DefaultSourceRate
	}
	if c.GlobalRate == (auth.Rate{}) {
		c.GlobalRate = auth.DefaultGlobalRate
	}
	fs.IntVar(&c.Limits.MaxSessionsPerToken, "max-sessions-per-token", c.Limits.MaxSessionsPerToken, "sessions (AppendSession + ReadSession) one tenant (a root token and the tokens minted under it) may hold open on this star; past it resource_exhausted")
	fs.IntVar(&c.Limits.MaxSessions, "max-sessions", c.Limits.MaxSessions, "sessions (AppendSession + ReadSession) open on this star, all tenants together (one tenant holds at most half); past it resource_exhausted")
	fs.IntVar(&c.MaxConns, "max-conns", c.MaxConns, "open API connections; past it the oldest unauthenticated (else the longest idle) is shed for a new one")
	fs.Float64Var(&c.SourceRate.PerSecond, "token-lookups-per-source", c.SourceRate.PerSecond, "metastore lookups per second of tokens not known valid, per source address (past it and its burst: resource_exhausted, no lookup)")
	fs.IntVar(&c.SourceRate.Burst, "token-lookup-burst-per-source", c.SourceRate.Burst, "burst of --token-lookups-per-source")
	fs.Float64Var(&c.GlobalRate.PerSecond, "token-lookups", c.GlobalRate.PerSecond, "metastore lookups per second of tokens not known valid, from all sources together")
	fs.IntVar(&c.GlobalRate.Burst, "token-lookup-burst", c.GlobalRate.Burst, "burst of --token-lookups")
	fs.IntVar(&c.Limits.MaxStreamsPerTenant, "max-streams-per-tenant", c.Limits.MaxStreamsPerTenant, "streams one tenant (a root token and the tokens minted under it) may have, counted under its root token's prefix; past it CreateStream is resource_exhausted, not retriable (0: unlimited)")
	fs.Int64Var(&c.Limits.AppendBytesPerSecPerTenant, "append-bytes-per-sec-per-tenant", c.Limits.AppendBytesPerSecPerTenant, "metered bytes one tenant may append a second on this star; past it an append is resource_exhausted, retriable later (0: unlimited)")
	fs.DurationVar(&c.Limits.WriteTimeout, "write-timeout", c.Limits.WriteTimeout, "a call whose client takes none of a response write (64 KiB) or flush for this long is ended and its resources released (a reader that stopped reading)")
	fs.Int64Var(&c.Limits.AppendBurstBytesPerTenant, "append-burst-bytes-per-tenant", c.Limits.AppendBurstBytesPerTenant, "burst of --append-bytes-per-sec-per-tenant (at least a second's rate and 1 MiB)")
	c.bindKafkaLimitFlags(fs)
}

// CheckLimits reports a limit that cannot work: each must be positive
// (zero fields mean the defaults). A rate below 1 per second with a burst
// of at least 1 is allowed (a lookup every few seconds). The Kafka
// limits are checked too (checkKafkaLimits: ErrKafkaLimit).
func (c *Config) CheckLimits() error {
	switch {
	case c.Limits.MaxSessionsPerToken < 0:
		return fmt.Errorf("node: --max-sessions-per-token must be positive, got %d", c.Limits.MaxSessionsPerToken)
	case c.Limits.MaxSessions < 0:
		return fmt.Errorf("node: --max-sessions must be positive, got %d", c.Limits.MaxSessions)
	case c.MaxConns < 0:
		return fmt.Errorf("node: --max-conns must be positive, got %d", c.MaxConns)
	case c.Limits.WriteTimeout < 0:
		return fmt.Errorf("node: --write-timeout must be positive, got %s", c.Limits.WriteTimeout)
	case c.Limits.MaxStreamsPerTenant < 0, c.Limits.AppendBytesPerSecPerTenant < 0, c.Limits.AppendBurstBytesPerTenant < 0:
		return fmt.Errorf("node: --max-streams-per-tenant, --append-bytes-per-sec-per-tenant and --append-burst-bytes-per-tenant must not be negative (0: unlimited), got %d, %d and %d",
			c.Limits.MaxStreamsPerTenant, c.Limits.AppendBytesPerSecPerTenant, c.Limits.AppendBurstBytesPerTenant)
	}
	for _, r := range []struct {
		rate, burst string
		r           auth.Rate
	}{{"--token-lookups-per-source", "--token-lookup-burst-per-source", c.SourceRate}, {"--token-lookups", "--token-lookup-burst", c.GlobalRate}} {
		if r.r == (auth.Rate{}) {
			continue
		}
		if !(r.r.PerSecond > 0) || r.r.Burst < 1 {
			return fmt.Errorf("node: %s must be positive and %s at least 1, got %v and %d", r.rate, r.burst, r.r.PerSecond, r.r.Burst)
		}
	}
	return checkKafkaLimits(c.Kafka.Limits)
}
