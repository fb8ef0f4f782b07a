package node

import (
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/strandlog/strand/shared/kafka"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/star"
)

// TestKafkaLimitFlags: each --kafka-* limit flag parses into its field of
// Kafka.Limits (and STRAND_KAFKA_* into its own), the others keep
// kafka's defaults, and the result passes CheckLimits.
func TestKafkaLimitFlags(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		get  func(kafka.Limits) any
		want any
		with []string // what a smaller total needs (its tenant's share)
	}{
		{"--kafka-max-conns=300", func(l kafka.Limits) any { return l.MaxConns }, 300, []string{"--kafka-max-conns-per-tenant=150"}},
		{"--kafka-max-conns-per-source=7", func(l kafka.Limits) any { return l.MaxConnsPerSource }, 7, nil},
		{"--kafka-max-conns-per-tenant=100", func(l kafka.Limits) any { return l.MaxConnsPerTenant }, 100, nil},
		{"--kafka-max-held-bytes=1073741824", func(l kafka.Limits) any { return l.MaxHeldBytes }, 1 << 30, nil},
		{"--kafka-max-fetch-bytes=1048576", func(l kafka.Limits) any { return l.MaxFetchBytes }, 1 << 20, nil},
		{"--kafka-max-produce-bytes=2097152", func(l kafka.Limits) any { return l.MaxProduceBytes }, 2 << 20, nil},
		{"--kafka-idle-timeout=90s", func(l kafka.Limits) any { return l.IdleTimeout }, 90 * time.Second, nil},
		{"--kafka-auth-deadline=3s", func(l kafka.Limits) any { return l.AuthDeadline }, 3 * time.Second, nil},
		{"--kafka-max-groups=500", func(l kafka.Limits) any { return l.MaxGroups }, 500, []string{"--kafka-max-groups-per-tenant=250"}},
		{"--kafka-max-groups-per-tenant=20", func(l kafka.Limits) any { return l.MaxGroupsPerTenant }, 20, nil},
		{"--kafka-max-members=600", func(l kafka.Limits) any { return l.MaxMembers }, 600, []string{"--kafka-max-members-per-tenant=300"}},
		{"--kafka-max-members-per-tenant=30", func(l kafka.Limits) any { return l.MaxMembersPerTenant }, 30, nil},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			var c Config
			fs := flag.NewFlagSet("star", flag.ContinueOnError)
			c.BindLimitFlags(fs)
			if err := fs.Parse(append([]string{tc.arg}, tc.with...)); err != nil {
				t.Fatal(err)
			}
			if got := tc.get(c.Kafka.Limits); got != tc.want {
				t.Fatalf("%s: %v, want %v", tc.arg, got, tc.want)
			}
			var d Config
			d.BindLimitFlags(flag.NewFlagSet("dev", flag.ContinueOnError))
			if got := tc.get(d.Kafka.Limits); got == tc.want {
				t.Fatalf("%s: the default is already %v: the case shows nothing", tc.arg, got)
			}
			if err := c.CheckLimits(); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("env", func(t *testing.T) {
		var c Config
		fs := flag.NewFlagSet("star", flag.ContinueOnError)
		c.BindLimitFlags(fs)
		t.Setenv("STRAND_KAFKA_MAX_CONNS_PER_SOURCE", "9")
		t.Setenv("STRAND_KAFKA_IDLE_TIMEOUT", "2m")
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		if err := star.ApplyEnv(fs); err != nil {
			t.Fatal(err)
		}
		if c.Kafka.Limits.MaxConnsPerSource != 9 || c.Kafka.Limits.IdleTimeout != 2*time.Minute {
			t.Fatalf("STRAND_KAFKA_*: %+v", c.Kafka.Limits)
		}
	})
	var d Config
	d.BindLimitFlags(flag.NewFlagSet("dev", flag.ContinueOnError))
	if l := d.Kafka.Limits; l.MaxConnsPerTenant != 0 || l.MaxGroupsPerTenant != 0 || l.MaxMembersPerTenant != 0 {
		t.Fatalf("the tenants' shares are bound as %d, %d, %d: want 0 (their default follows the total)", l.MaxConnsPerTenant, l.MaxGroupsPerTenant, l.MaxMembersPerTenant)
	}
	if want := (kafka.Limits{}).WithDefaults(); d.Kafka.Limits.WithDefaults() != want {
		t.Fatalf("defaults %+v, want kafka's %+v", d.Kafka.Limits.WithDefaults(), want)
	}
	if l := d.Kafka.Limits.WithDefaults(); l.MaxConns != 1024 || l.MaxConnsPerSource != 256 || l.MaxConnsPerTenant != 512 || l.MaxHeldBytes != 256<<20 ||
		l.MaxFetchBytes != 55<<20 || l.MaxProduceBytes != 8<<20 || l.IdleTimeout != 10*time.Minute || l.AuthDeadline != 10*time.Second ||
		l.MaxGroups != 100_000 || l.MaxGroupsPerTenant != 10_000 || l.MaxMembers != 100_000 || l.MaxMembersPerTenant != 10_000 {
		t.Fatalf("defaults changed: %+v", l)
	}
}

// TestKafkaLimitsRefused: each Kafka limit that cannot work is refused by
// CheckLimits with ErrKafkaLimit and a message naming its flags; zero
// fields (Go callers) are checked as the defaults they take.
func TestKafkaLimitsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kafka-max-conns=-1"}, "--kafka-max-conns must not be negative (0: the default), got -1"},
		{[]string{"--kafka-max-conns-per-source=-2"}, "--kafka-max-conns-per-source must not be negative"},
		{[]string{"--kafka-max-conns-per-tenant=-1"}, "--kafka-max-conns-per-tenant must not be negative"},
		{[]string{"--kafka-max-held-bytes=-1"}, "--kafka-max-held-bytes must not be negative"},
		{[]string{"--kafka-max-fetch-bytes=-1"}, "--kafka-max-fetch-bytes must not be negative"},
		{[]string{"--kafka-max-produce-bytes=-1"}, "--kafka-max-produce-bytes must not be negative"},
		{[]string{"--kafka-idle-timeout=-1s"}, "--kafka-idle-timeout must not be negative (0: the default), got -1s"},
		{[]string{"--kafka-auth-deadline=-5s"}, "--kafka-auth-deadline must not be negative"},
		{[]string{"--kafka-max-groups=-1"}, "--kafka-max-groups must not be negative"},
		{[]string{"--kafka-max-groups-per-tenant=-1"}, "--kafka-max-groups-per-tenant must not be negative"},
		{[]string{"--kafka-max-members=-1"}, "--kafka-max-members must not be negative"},
		{[]string{"--kafka-max-members-per-tenant=-1"}, "--kafka-max-members-per-tenant must not be negative"},
		// A share given above its total (a share left out follows it).
		{[]string{"--kafka-max-conns=100", "--kafka-max-conns-per-tenant=512"}, "--kafka-max-conns-per-tenant 512 is more than --kafka-max-conns 100 (one tenant holds at most half of it: give at most 50)"},
		{[]string{"--kafka-max-groups=10", "--kafka-max-groups-per-tenant=11"}, "--kafka-max-groups-per-tenant 11 is more than --kafka-max-groups 10"},
		{[]string{"--kafka-max-members=9000", "--kafka-max-members-per-tenant=10000"}, "--kafka-max-members-per-tenant 10000 is more than --kafka-max-members 9000"},
		{[]string{"--kafka-max-held-bytes=1000", "--kafka-max-fetch-bytes=1001", "--kafka-max-produce-bytes=100"}, "--kafka-max-fetch-bytes 1001 is more than --kafka-max-held-bytes 1000"},
		{[]string{"--kafka-max-held-bytes=1000", "--kafka-max-fetch-bytes=1000", "--kafka-max-produce-bytes=501"}, "--kafka-max-produce-bytes 501 is more than half of --kafka-max-held-bytes 1000"},
		// The default fetch cap (55 MiB) is more than a 32 MiB budget.
		{[]string{"--kafka-max-held-bytes=33554432"}, "--kafka-max-fetch-bytes 57671680 is more than --kafka-max-held-bytes 33554432"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var c Config
			fs := flag.NewFlagSet("star", flag.ContinueOnError)
			c.BindLimitFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := c.CheckLimits()
			if !errors.Is(err, ErrKafkaLimit) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckLimits: %v, want ErrKafkaLimit with %q", err, tc.want)
			}
		})
	}
	// At the bounds: accepted.
	var c Config
	fs := flag.NewFlagSet("star", flag.ContinueOnError)
	c.BindLimitFlags(fs)
	if err := fs.Parse([]string{"--kafka-max-conns=8", "--kafka-max-conns-per-tenant=8", "--kafka-max-held-bytes=1000",
		"--kafka-max-fetch-bytes=1000", "--kafka-max-produce-bytes=500", "--kafka-max-conns-per-source=0"}); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckLimits(); err != nil {
		t.Fatalf("limits at their bounds refused: %v", err)
	}
	// A total lowered alone is accepted: the shares left out follow it
	// (half of it, when that is less than their default), flag or Go.
	for _, tc := range []struct {
		args  []string
		share func(kafka.Limits) int
		want  int
	}{
		{[]string{"--kafka-max-conns=100"}, func(l kafka.Limits) int { return l.MaxConnsPerTenant }, 50},
		{[]string{"--kafka-max-groups=3"}, func(l kafka.Limits) int { return l.MaxGroupsPerTenant }, 1},
		{[]string{"--kafka-max-members=9000"}, func(l kafka.Limits) int { return l.MaxMembersPerTenant }, 4500},
		{[]string{"--kafka-max-conns=4096"}, func(l kafka.Limits) int { return l.MaxConnsPerTenant }, 512},
	} {
		var c Config
		fs := flag.NewFlagSet("star", flag.ContinueOnError)
		c.BindLimitFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := c.CheckLimits(); err != nil {
			t.Fatalf("%v alone refused: %v", tc.args, err)
		}
		if got := tc.share(c.Kafka.Limits.WithDefaults()); got != tc.want {
			t.Fatalf("%v: the tenant's share is %d, want %d", tc.args, got, tc.want)
		}
	}
	if err := (&Config{Kafka: KafkaConfig{Limits: kafka.Limits{MaxConns: 100}}}).CheckLimits(); err != nil {
		t.Fatalf("MaxConns 100 with the default share: %v", err)
	}
	if err := (&Config{Kafka: KafkaConfig{Limits: kafka.Limits{MaxConns: 100, MaxConnsPerTenant: 101}}}).CheckLimits(); !errors.Is(err, ErrKafkaLimit) {
		t.Fatalf("MaxConns 100 with a share of 101: %v", err)
	}
}

// TestStartRefusesKafkaLimits: Start refuses a Kafka limit that cannot
// work before it writes anything: the chain buckets and the settled
// bucket stay empty and the Kafka address is not bound.
func TestStartRefusesKafkaLimits(t *testing.T) {
	ctx := context.Background()
	cfg := star.Defaults()
	buckets := []objstore.Bucket{objstore.NewMem("x0"), objstore.NewMem("x1"), objstore.NewMem("x2")}
	cfg.Express.Buckets = buckets
	settled := objstore.NewMem("settled")
	_, err := Start(ctx, Config{Star: cfg, Meta: metastore.NewMem(), Settled: settled, Addr: "127.0.0.1:0",
		Kafka: KafkaConfig{Addr: "127.0.0.1:0", Limits: kafka.Limits{MaxHeldBytes: 1 << 20, MaxFetchBytes: 2 << 20}}})
	if !errors.Is(err, ErrKafkaLimit) {
		t.Fatalf("Start: %v, want ErrKafkaLimit", err)
	}
	for _, b := range append(buckets, settled) {
		keys, err := b.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 0 {
			t.Fatalf("a refused Start wrote %v", keys)
		}
	}
}
