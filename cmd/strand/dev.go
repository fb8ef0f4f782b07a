package main

import (
	"context"
	crand "crypto/rand"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/bolt"
	"github.com/strandlog/strand/shared/node"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/objstore/dir"
	"github.com/strandlog/strand/shared/star"
)

type devFlags struct {
	dataDir   string
	addr      string
	adminAddr string
	token     string
	tokenFile string
	starID    string
	peers     string
	tlsCert   string
	tlsKey    string
	logLevel  string
	drain     time.Duration
	readAhead int
	haltWait  time.Duration
	dedupe    int
	// passIndex: !node.Config.NoPassIndex (design 014).
	passIndex bool
	// windowCache: node.Config.WindowCacheMiB.
	windowCache int
	// limits holds the API's abuse limits and the Kafka front end's
	// (node.BindLimitFlags).
	limits node.Config
	// exitWithParent: exit when the parent process dies (default: under
	// go run; see parent.go).
	exitWithParent bool
	// standby: wait for the data directory's leader to stop, then lead
	// (docs/adr/0050).
	standby bool
	// kafkaAddr: the Kafka front end's address ("": none); kafkaSet: given
	// explicitly (then it must bind).
	kafkaAddr string
	kafkaSet  bool
	// adminGiven: --admin-addr was given (then it must bind).
	adminGiven bool
	// star: the star's configuration, devStarConfig with the flush flags.
	star star.Config
}

func newDev() *cobra.Command {
	f := devFlags{star: devStarConfig()}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run every component in one process on embedded stores (local development)",
		Long: `Run a complete strand in one process: the star (sequencer, flusher, commit),
the API server, the absorb (on every release), and settle, trim and the
garbage probe on timers, on embedded stores
under --data-dir: directory buckets (buckets/express-0..2 with W=2,
buckets/standard-0, buckets/settled) and a bbolt metastore (meta.db).

It prints the endpoint and an admin token (kept in DATA_DIR/token with mode
0600, reused on restart unless --token or --token-file gives another, which
revokes the one it replaces, or it was revoked: then a new one is drawn).
The data directory (made 0700) and the token file must be this user's and
not writable by others: strand dev refuses them otherwise. It survives kill -9: on restart the star
fences its previous epoch, absorbs up to the cut and serves, with nothing
acknowledged lost.`,
		Example: "  strand dev\n  strand dev --data-dir /tmp/strand --addr 127.0.0.1:5000",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.exitWithParent {
				exitWithParent()
			}
			f.adminGiven = cmd.Flags().Changed("admin-addr")
			f.kafkaSet = cmd.Flags().Changed("kafka-addr")
			return runDev(cmd.Context(), f, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", "./strand-data", "directory holding the buckets, the metastore and the token")
	fl.StringVar(&f.addr, "addr", "127.0.0.1:4780", "API listen address (HOST:PORT)")
	fl.StringVar(&f.adminAddr, "admin-addr", devAdminAddr, "admin listen address for /metrics and /healthz (default taken: a free loopback port; empty: off)")
	fl.StringVar(&f.token, "token", "", "admin token to accept (default: --token-file, else DATA_DIR/token, else a new one); it shows in the process list: prefer --token-file")
	fl.StringVar(&f.tokenFile, "token-file", "", "read the admin token to accept from this file")
	fl.StringVar(&f.starID, "star-id", "star-0", "this star's id")
	fl.StringVar(&f.peers, "peers", "", "other stars' API URLs: star-1=http://host:4780,... (for leader redirects)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "serve TLS with this certificate (with --tls-key)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "serve TLS with this key (with --tls-cert)")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fl.DurationVar(&f.drain, "drain-budget", node.DefaultDrainBudget, "on SIGTERM or Ctrl-C, how long to drain (acks of admitted batches, sessions ended with unavailable) before exiting")
	fl.IntVar(&f.readAhead, "read-ahead-mib", node.DefaultReadAheadMiB, "read-ahead memory of all read sessions together, MiB")
	fl.BoolVar(&f.exitWithParent, "exit-with-parent", underGoRun(), "exit (in order, as on Ctrl-C) when the parent process dies; on by default under go run, so that killing go run stops the server")
	fl.DurationVar(&f.haltWait, "halt-wait", star.Defaults().HaltWait, "how long appends wait on a halted epoch (e.g. an unwritable --data-dir) before they fail with the halt's reason")
	fl.IntVar(&f.dedupe, "dedupe-max-producers", star.DefaultStarMaxProducers, "idempotent producers the star remembers over all streams (exactly-once appends; about 750 bytes each): past it the least recently used one is forgotten")
	fl.BoolVar(&f.passIndex, "pass-index", true, "index absorb passes in the settled bucket (one object per pass) instead of one metastore ref per stream (design 014); a data dir in refs mode switches at its next absorb pass; --pass-index=false keeps refs mode, and refuses a data dir once indexed")
	fl.BoolVar(&f.standby, "standby", false, "if another strand dev serves --data-dir, wait and take over when it stops or dies (kill -9 included), serving on this process's --addr and on --kafka-addr (give both the same: the leader's until it dies, bound again by the standby when it leads); clients list both API endpoints in STRAND_ENDPOINT")
	fl.IntVar(&f.windowCache, "window-cache-mib", node.DefaultWindowCacheMiB, "with --pass-index: the decoded pass index window cached, MiB (reads, tail recovery, settle); a window larger than it is refetched in part by GET per walk")
	fl.StringVar(&f.kafkaAddr, "kafka-addr", "127.0.0.1:9092", "Kafka listen address (docs/kafka.md; empty: no Kafka front end); clients on loopback need no SASL")
	bindDevFlushFlags(fl, &f.star)
	lim := flag.NewFlagSet("limits", flag.ContinueOnError)
	f.limits.BindLimitFlags(lim)
	fl.AddGoFlagSet(lim)
	return cmd
}

// setupDevToken picks the admin token (--token, else --token-file, else
// DATA_DIR/token unless it was revoked, else a new one), writes it to
// DATA_DIR/token with mode 0600 (fixed on every write, even when the file
// existed with another; never through a symlink), issues it, and revokes
// the token it replaces in DATA_DIR/token, so that restarting with a new
// token leaves the old one invalid. A token file that is a symlink or that
// another user could have written is refused (devdir.go), and so is a
// revoked --token: a restart never brings a revoked token back.
func setupDevToken(ctx context.Context, meta metastore.Store, f devFlags) (string, error) {
	path := filepath.Join(f.dataDir, "token")
	b, err := readSecretFile(path)
	if err != nil {
		return "", err
	}
	prev := strings.TrimSpace(b)
	tok := f.token
	if tok == "" && f.tokenFile != "" {
		var err error
		if tok, err = readTokenFile(f.tokenFile); err != nil {
			return "", err
		}
	}
	if tok != "" && auth.WellFormed(tok) && revoked(ctx, meta, tok) {
		return "", fmt.Errorf("the admin token given (hash %.8s...) was revoked: give another, or omit --token and --token-file to draw a new one", auth.Hash(tok))
	}
	if tok == "" && !(auth.WellFormed(prev) && revoked(ctx, meta, prev)) {
		tok = prev // DATA_DIR/token, unless revoked: then a new one
	}
	if tok == "" {
		var err error
		if tok, err = auth.NewToken(crand.Reader); err != nil {
			return "", err
		}
	}
	if !auth.WellFormed(tok) {
		return "", fmt.Errorf("token %q is malformed: a token is %s followed by 52 base32 characters; omit --token to generate one", "…", auth.TokenPrefix)
	}
	if err := writeSecret(path, tok+"\n"); err != nil {
		return "", err
	}
	if err := auth.Issue(ctx, meta, tok, "", []auth.Op{auth.Admin}); err != nil {
		return "", err
	}
	if prev != "" && prev != tok && auth.WellFormed(prev) {
		if err := revoke(ctx, meta, auth.Hash(prev)); err != nil {
			return "", fmt.Errorf("revoke the replaced admin token %.8s...: %w", auth.Hash(prev), err)
		}
	}
	return tok, nil
}

// revoked reports whether tok is issued and revoked.
func revoked(ctx context.Context, meta metastore.Store, tok string) bool {
	t, err := meta.GetToken(ctx, auth.Hash(tok))
	return err == nil && t.RevokedMs != 0
}

// revoke marks the token with this hash revoked now (a tombstone: its use
// is refused as revoked); a token never issued is nothing to revoke.
func revoke(ctx context.Context, meta metastore.Store, hash string) error {
	t, err := meta.GetToken(ctx, hash)
	if errors.Is(err, metastore.ErrNotFound) {
		return nil
	}
	if err != nil || t.RevokedMs != 0 {
		return err
	}
	t.RevokedMs = time.Now().UnixMilli()
	return meta.PutToken(ctx, t)
}

// devStores opens the embedded stores under the data directory: directory
// buckets (express-0..2 with W=2, standard-0, settled) and a bbolt
// metastore, opened by openMeta (bolt.Open, or a standby's wait).
func devStores(dataDir string, cfg *star.Config, openMeta func(string) (*bolt.Store, error)) (meta *bolt.Store, settled objstore.Bucket, err error) {
	root := filepath.Join(dataDir, "buckets")
	open := func(names ...string) ([]objstore.Bucket, error) {
		var out []objstore.Bucket
		for _, n := range names {
			b, err := dir.Open(root, n)
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		}
		return out, nil
	}
	cfg.Express.BucketNames = []string{"express-0", "express-1", "express-2"}
	cfg.Standard.BucketNames = []string{"standard-0"}
	if cfg.Express.Buckets, err = open(cfg.Express.BucketNames...); err != nil {
		return nil, nil, err
	}
	if cfg.Standard.Buckets, err = open(cfg.Standard.BucketNames...); err != nil {
		return nil, nil, err
	}
	s, err := open("settled")
	if err != nil {
		return nil, nil, err
	}
	meta, err = openMeta(filepath.Join(dataDir, "meta.db"))
	if err != nil {
		if errors.Is(err, bolt.ErrLocked) {
			return nil, nil, fmt.Errorf("%w: another strand dev serves %s (give this one --standby to take over when it stops)", err, dataDir)
		}
		return nil, nil, fmt.Errorf("%w (is another strand dev using %s?)", err, dataDir)
	}
	return meta, s[0], nil
}

// standbyPoll is how long each of a standby's attempts at the metastore's
// lock waits (bbolt retries within it every 50 ms).
const standbyPoll = 500 * time.Millisecond

// standbyKafkaBindWait is how long a standby that leads keeps trying to
// bind the Kafka address the leader it succeeds held (node.KafkaConfig.BindWait):
// the leader's exit releases its listening socket along with the
// metastore's lock, usually first, but nothing orders the two.
const standbyKafkaBindWait = 2 * time.Second

// standbyWaiting is what a standby prints while it waits to lead: where it
// will serve, and that until then the Kafka port is the leader's (both
// processes have the same --kafka-addr; the standby binds it when it leads).
func standbyWaiting(f devFlags) string {
	s := fmt.Sprintf("strand dev --standby: waiting to lead %s (will serve on %s", f.dataDir, f.addr)
	if f.kafkaAddr != "" {
		s += fmt.Sprintf("; Kafka on %s when it leads: until then the leader serves Kafka there", f.kafkaAddr)
	}
	return s + ")\n"
}

func runDev(ctx context.Context, f devFlags, out interface{ Write([]byte) (int, error) }) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", f.logLevel)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	peers, err := node.ParsePeers(f.peers)
	if err != nil {
		return err
	}
	if err := checkDataDir(f.dataDir); err != nil {
		return err
	}
	if err := os.MkdirAll(f.dataDir, 0o700); err != nil {
		return fmt.Errorf("create --data-dir: %w", err)
	}
	cfg := f.star
	if cfg.Standard.FlightKiB == 0 { // devFlags made without newDev (tests)
		cfg = devStarConfig()
	}
	cfg.StarID = f.starID
	cfg.HaltWait = f.haltWait
	cfg.StarMaxProducers = f.dedupe
	openMeta := bolt.Open
	if f.standby {
		// The metastore's file lock is the data directory's leadership:
		// the leader holds it while it runs, and the operating system
		// releases it when the leader exits, however it exits.
		openMeta = func(path string) (*bolt.Store, error) {
			fmt.Fprint(out, standbyWaiting(f))
			return bolt.OpenWhenFree(ctx, path, standbyPoll)
		}
	}
	meta, settled, err := devStores(f.dataDir, &cfg, openMeta)
	if f.standby && ctx.Err() != nil {
		if meta != nil {
			meta.Close()
		}
		return nil // stopped while waiting: nothing to drain
	}
	if err != nil {
		return err
	}
	defer meta.Close()
	token, err := setupDevToken(ctx, meta, f)
	if err != nil {
		return err
	}
	kafkaCfg := node.KafkaConfig{Addr: f.kafkaAddr, AnonymousLoopback: true, AutoCreateTopics: true, Optional: !f.kafkaSet, Limits: f.limits.Kafka.Limits}
	if f.standby {
		kafkaCfg.BindWait = standbyKafkaBindWait
	}
	n, err := node.Start(ctx, node.Config{Star: cfg, Meta: meta, Settled: settled, Addr: f.addr, AdminAddr: f.adminAddr, AdminFallback: devAdminFallback(f.adminAddr, f.adminGiven),
		TLSCert: f.tlsCert, TLSKey: f.tlsKey, Peers: peers, Logger: log, DrainBudget: f.drain,
		Limits: f.limits.Limits, MaxConns: f.limits.MaxConns, SourceRate: f.limits.SourceRate, GlobalRate: f.limits.GlobalRate,
		NoPassIndex: !f.passIndex, ReadAheadMiB: f.readAhead, WindowCacheMiB: f.windowCache,
		Kafka: kafkaCfg})
	if err != nil {
		return err
	}
	defer n.Close()
	fmt.Fprintf(out, "strand dev is serving on %s (data in %s)\n\n  export STRAND_ENDPOINT=%s\n  export STRAND_TOKEN=%s\n\n", n.Endpoint(), f.dataDir, n.Endpoint(), token)
	if u := n.AdminURL(); u != "" {
		fmt.Fprintf(out, "Metrics: %s/metrics (health: %s/healthz)\n", u, u)
	}
	if k := n.KafkaAddr(); k != "" {
		fmt.Fprintf(out, "Kafka clients: bootstrap server %s (docs/kafka.md)\n\n", k)
	}
	err = n.Wait(ctx)
	fmt.Fprintf(out, "strand dev: stopping: draining for up to %s (the acks of admitted batches; open sessions such as a tail end with unavailable)\n", f.drain)
	return err
}
