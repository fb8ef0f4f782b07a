package node

import (
	"context"
	crand "crypto/rand"
	"errors"
	"flag"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/client"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/server"
	"github.com/strandlog/strand/shared/star"
)

// TestLimitFlags: the abuse limits bind to flags and STRAND_* variables,
// default to today's values, and a value that cannot work is refused.
func TestLimitFlags(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("star", flag.ContinueOnError)
	c.BindLimitFlags(fs)
	t.Setenv("STRAND_TOKEN_LOOKUP_BURST", "9")
	t.Setenv("STRAND_MAX_SESSIONS_PER_TOKEN", "8") // the flag wins
	t.Setenv("STRAND_APPEND_BYTES_PER_SEC_PER_TENANT", "4096")
	if err := fs.Parse([]string{"--max-sessions-per-token=7", "--token-lookups=2.5", "--max-streams-per-tenant=5", "--max-sessions=40"}); err != nil {
		t.Fatal(err)
	}
	if err := star.ApplyEnv(fs); err != nil {
		t.Fatal(err)
	}
	if c.Limits.MaxSessionsPerToken != 7 || c.GlobalRate != (auth.Rate{PerSecond: 2.5, Burst: 9}) ||
		c.SourceRate != auth.DefaultSourceRate || c.MaxConns != server.DefaultMaxConns ||
		c.Limits.MaxStreamsPerTenant != 5 || c.Limits.AppendBytesPerSecPerTenant != 4096 || c.Limits.AppendBurstBytesPerTenant != 0 || c.Limits.MaxSessions != 40 {
		t.Fatalf("limits %+v %d %+v %+v", c.Limits, c.MaxConns, c.GlobalRate, c.SourceRate)
	}
	if err := c.CheckLimits(); err != nil {
		t.Fatal(err)
	}
	var d Config
	d.BindLimitFlags(flag.NewFlagSet("dev", flag.ContinueOnError))
	if d.Limits.MaxSessionsPerToken != 1000 || d.MaxConns != 1024 || d.SourceRate != (auth.Rate{PerSecond: 50, Burst: 200}) ||
		d.GlobalRate != (auth.Rate{PerSecond: 500, Burst: 2000}) ||
		d.Limits.MaxStreamsPerTenant != 0 || d.Limits.AppendBytesPerSecPerTenant != 0 || // quotas: unlimited
		d.Limits.WriteTimeout != server.DefaultWriteTimeout || d.Limits.MaxSessions != 10_000 {
		t.Fatalf("defaults changed: %+v %d %+v %+v", d.Limits, d.MaxConns, d.SourceRate, d.GlobalRate)
	}
	for _, bad := range []func(*Config){
		func(c *Config) { c.SourceRate = auth.Rate{PerSecond: 0, Burst: 5} },
		func(c *Config) { c.GlobalRate = auth.Rate{PerSecond: 1, Burst: 0} },
		func(c *Config) { c.Limits.MaxSessionsPerToken = -1 },
		func(c *Config) { c.MaxConns = -3 },
		func(c *Config) { c.Limits.MaxSessions = -1 },
		func(c *Config) { c.Limits.WriteTimeout = -time.Second },
		func(c *Config) { c.Limits.MaxStreamsPerTenant = -1 },
		func(c *Config) { c.Limits.AppendBytesPerSecPerTenant = -1 },
		func(c *Config) { c.Limits.AppendBurstBytesPerTenant = -1 },
	} {
		c := d
		bad(&c)
		if err := c.CheckLimits(); err == nil {
			t.Errorf("limits %+v %d %+v %+v accepted", c.Limits, c.MaxConns, c.SourceRate, c.GlobalRate)
		}
	}
}

// TestLookupLimitsReachTheServer: a node started with a global lookup
// burst of 3 refuses the fourth unknown token with resource_exhausted,
// without a metastore read, and serves HTTP/2 with its write timeout as
// the connection write bound; Start refuses a rate that cannot work.
func TestLookupLimitsReachTheServer(t *testing.T) {
	ctx := context.Background()
	cfg := star.Defaults()
	cfg.Express.Buckets = []objstore.Bucket{objstore.NewMem("x0"), objstore.NewMem("x1"), objstore.NewMem("x2")}
	base := Config{Star: cfg, Meta: metastore.NewMem(), Settled: objstore.NewMem("settled"), Addr: "127.0.0.1:0"}
	bad := base
	bad.GlobalRate = auth.Rate{PerSecond: 0, Burst: 3}
	if _, err := Start(ctx, bad); err == nil {
		t.Fatal("a node started with a global lookup rate of 0")
	}
	good := base
	good.GlobalRate = auth.Rate{PerSecond: 0.001, Burst: 3}
	good.Limits.WriteTimeout = 7 * time.Second
	n, err := Start(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	// --write-timeout reaches HTTP/2's connection write bound too (it was
	// the 30 s default whatever the setting).
	if got := n.api.HTTP2.WriteByteTimeout; got != good.Limits.WriteTimeout {
		t.Fatalf("HTTP/2 WriteByteTimeout %s, want the write timeout %s", got, good.Limits.WriteTimeout)
	}
	var codes []connect.Code
	for i := 0; i < 5; i++ {
		tok, err := auth.NewToken(crand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		// No retries: the test reads each answer's code (the client
		// retries resource_exhausted).
		c, err := client.New(n.Endpoint(), client.WithToken(tok), client.WithRetry(client.Retry{MaxAttempts: 1}))
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = c.ListStreams(ctx, "", "", 1)
		var ce *connect.Error
		if !errors.As(err, &ce) {
			t.Fatalf("unknown token %d: %v", i, err)
		}
		codes = append(codes, ce.Code())
	}
	if want := fmt.Sprint([]connect.Code{connect.CodeUnauthenticated, connect.CodeUnauthenticated, connect.CodeUnauthenticated,
		connect.CodeResourceExhausted, connect.CodeResourceExhausted}); fmt.Sprint(codes) != want {
		t.Fatalf("codes %v, want %s", codes, want)
	}
}
