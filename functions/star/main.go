// Command star is the ECS task of one star: it parses flags (or STRAND_*
// environment variables), opens the chain buckets on S3 and the DynamoDB
// metastore, and runs shared/node until SIGTERM; with --standby it runs
// as a shared/lease.Task (it leads only while it holds the star's lease,
// ADR 0051). No protocol logic lives here.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/strandlog/strand/shared/lease"
	"github.com/strandlog/strand/shared/metastore/dynamo"
	"github.com/strandlog/strand/shared/node"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/objstore/s3obj"
	"github.com/strandlog/strand/shared/server"
	"github.com/strandlog/strand/shared/star"
)

func main() {
	if err := run(os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "star:", err)
		os.Exit(1)
	}
}

// buildVersion is "star VERSION (REVISION) GOOS/GOARCH" from the build
// information the Go toolchain embeds.
func buildVersion() string {
	v, rev := "(devel)", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		v = bi.Main.Version
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = s.Value
			}
		}
	}
	return fmt.Sprintf("star %s (%s) %s/%s", v, rev, runtime.GOOS, runtime.GOARCH)
}

func run(args []string) error {
	cfg := star.Defaults()
	fs := flag.NewFlagSet("star", flag.ContinueOnError)
	cfg.BindFlags(fs)
	var limits node.Config // the API's abuse limits and the Kafka front end's only
	limits.BindLimitFlags(fs)
	var (
		table, settled, releaseQ, fenceQ string
		addr, admin, region, endpoint    string
		ddbEndpoint                      string
		peers, tlsCert, tlsKey, level    string
		pathStyle, createTable, version  bool
		drainBudget                      time.Duration
		passIndex                        bool
		readAheadMiB, windowCacheMiB     int
		standby                          bool
		leaseTTL                         time.Duration
		advertise                        string
		kafkaAddr, kafkaAdv, kafkaPeers  string
	)
	fs.StringVar(&table, "table", "", "DynamoDB metastore table (required)")
	fs.StringVar(&settled, "settled-bucket", "", "the settled bucket (required)")
	fs.StringVar(&releaseQ, "release-queue-url", "", "SQS FIFO queue for release events (the absorb Lambda's)")
	fs.StringVar(&fenceQ, "fence-queue-url", "", "SQS queue for fence events (the garbage probe's)")
	fs.StringVar(&addr, "addr", ":4780", "API listen address")
	fs.StringVar(&admin, "admin-addr", ":9090", "metrics (/metrics) and health (/healthz) listen address")
	fs.StringVar(&region, "region", "", "AWS region (default: the SDK's chain)")
	fs.StringVar(&endpoint, "aws-endpoint", "", "override the S3, DynamoDB and SQS endpoint (LocalStack, moto)")
	fs.StringVar(&ddbEndpoint, "dynamodb-endpoint", "", "override the DynamoDB endpoint alone (default: --aws-endpoint); for an emulator that serves no DynamoDB, as LocalStack's core without DynamoDB Local (localstack/core.sh)")
	fs.BoolVar(&pathStyle, "s3-path-style", false, "path-style S3 addressing (emulators; never with directory buckets)")
	fs.BoolVar(&createTable, "create-table", false, "create the metastore table if missing (emulators, first runs)")
	fs.StringVar(&peers, "peers", "", "other stars' API URLs: star-1=http://host:4780,...")
	fs.StringVar(&tlsCert, "tls-cert", "", "serve the API over TLS with this certificate (PEM)")
	fs.StringVar(&tlsKey, "tls-key", "", "the TLS key (PEM)")
	fs.StringVar(&level, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&drainBudget, "drain-budget", node.DefaultDrainBudget, "on SIGTERM, how long to drain (acks of admitted batches, sessions ended with unavailable) before exiting; keep the task's stop timeout above it")
	fs.BoolVar(&passIndex, "pass-index", true, "index absorb passes in the settled bucket instead of one ref per stream (design 014; the settlement Lambdas read STRAND_PASS_INDEX, on when unset); --pass-index=false keeps refs mode and refuses a chain once indexed")
	fs.IntVar(&readAheadMiB, "read-ahead-mib", node.DefaultReadAheadMiB, "read-ahead memory of all read sessions together, MiB")
	fs.IntVar(&windowCacheMiB, "window-cache-mib", node.DefaultWindowCacheMiB, "with --pass-index: the decoded pass index window the star caches, MiB (reads, tail recovery); a window larger than it is refetched in part by GET per walk. The task's memory plan counts it (strand:windowCacheMiB)")
	fs.BoolVar(&standby, "standby", false, "contend for the star's leadership lease in the table: serve only while holding it, relay the API port to the leader while standing by (ADR 0051); every task of the star must set it")
	fs.DurationVar(&leaseTTL, "lease-ttl", lease.DefaultTTL, "with --standby: how long a leader may go without renewing before a standby takes over (crash detection)")
	fs.StringVar(&advertise, "advertise-addr", "", "with --standby: host:port other tasks reach this task's API at (default: the first non-loopback IPv4 address and --addr's port)")
	fs.StringVar(&kafkaAddr, "kafka-addr", "", "Kafka front end listen address (docs/kafka.md; empty: none); clients authenticate with SASL/PLAIN, a strand token as the password")
	fs.StringVar(&kafkaAdv, "kafka-advertise", "", "the Kafka host:port clients reach this star at (empty: --kafka-addr as bound)")
	fs.StringVar(&kafkaPeers, "kafka-peers", "", "other stars' Kafka addresses: star-1=host:9092,... (the brokers Metadata names)")
	fs.BoolVar(&version, "version", false, "print the build's version and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if version {
		fmt.Println(buildVersion())
		return nil
	}
	if err := star.ApplyEnv(fs); err != nil {
		return err
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lv}))
	if table == "" || settled == "" {
		return fmt.Errorf("--table (STRAND_TABLE) and --settled-bucket (STRAND_SETTLED_BUCKET) are required")
	}
	peerMap, err := node.ParsePeers(peers)
	if err != nil {
		return err
	}
	kafkaBrokers, err := node.ParsePeers(kafkaPeers)
	if err != nil {
		return fmt.Errorf("--kafka-peers: %w", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var opts []func(*config.LoadOptions) error
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return fmt.Errorf("aws config: %w", err)
	}
	s3c, err := s3obj.NewClient(ctx, s3obj.Options{Region: region, Endpoint: endpoint, PathStyle: pathStyle})
	if err != nil {
		return err
	}
	open := func(names []string) []objstore.Bucket {
		var out []objstore.Bucket
		for _, n := range names {
			out = append(out, s3obj.New(s3c, n))
		}
		return out
	}
	cfg.Standard.Buckets = open(cfg.Standard.BucketNames)
	cfg.Express.Buckets = open(cfg.Express.BucketNames)
	if ddbEndpoint == "" {
		ddbEndpoint = endpoint
	}
	ddb := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		if ddbEndpoint != "" {
			o.BaseEndpoint = aws.String(ddbEndpoint)
		}
	})
	if createTable {
		if err := dynamo.CreateTable(ctx, ddb, table); err != nil {
			return err
		}
	}
	sq := sqs.NewFromConfig(awsCfg, func(o *sqs.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
	meta := dynamo.New(ddb, table)
	ncfg := node.Config{
		Star: cfg, Meta: meta, Settled: s3obj.New(s3c, settled),
		Addr: addr, AdminAddr: admin, TLSCert: tlsCert, TLSKey: tlsKey, Peers: peerMap,
		Remote:      &node.Remote{SQS: sq, ReleaseQueueURL: releaseQ, FenceQueueURL: fenceQ},
		Logger:      log,
		DrainBudget: drainBudget,
		Limits:      limits.Limits, MaxConns: limits.MaxConns, SourceRate: limits.SourceRate, GlobalRate: limits.GlobalRate,
		NoPassIndex: !passIndex, ReadAheadMiB: readAheadMiB, WindowCacheMiB: windowCacheMiB,
		Kafka: node.KafkaConfig{Addr: kafkaAddr, Advertise: kafkaAdv, Brokers: kafkaBrokers, Limits: limits.Kafka.Limits},
	}
	if standby {
		return runStandby(ctx, ncfg, meta, leaseTTL, advertise, log)
	}
	n, err := node.Start(ctx, ncfg)
	if err != nil {
		return err
	}
	defer n.Close()
	return n.Wait(ctx)
}

// runStandby runs the task in standby mode (lease.Task): the task serves
// the admin address itself, and starts the node without one once it leads.
func runStandby(ctx context.Context, ncfg node.Config, meta *dynamo.Store, ttl time.Duration, advertise string, log *slog.Logger) error {
	adv, err := lease.AdvertiseAddr(advertise, ncfg.Addr)
	if err != nil {
		return err
	}
	r, err := lease.NewRunner(lease.Config{Star: ncfg.Star.StarID, Holder: lease.ID(ncfg.Star.StarID), Addr: adv, TTL: ttl}, meta, nil, log)
	if err != nil {
		return err
	}
	admin := ncfg.AdminAddr
	ncfg.AdminAddr = ""
	var relay []string // the standby relays the Kafka port too (ADR 0052)
	if ncfg.Kafka.Addr != "" {
		relay = append(relay, ncfg.Kafka.Addr)
	}
	t := &lease.Task{Runner: r, Addr: ncfg.Addr, AdminAddr: admin, Relay: relay, Log: log,
		Lead: func(ctx context.Context) (lease.Serving, error) {
			n, err := node.Start(ctx, ncfg)
			if err != nil {
				return nil, err
			}
			return serving{n}, nil
		}}
	return t.Run(ctx)
}

// serving is a node as a lease.Serving.
type serving struct{ *node.Node }

func (s serving) Admin() http.Handler { return server.AdminHandler(s.Star) }
