package main

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strandlog/strand/shared/auth"
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
	starID    string
	peers     string
	tlsCert   string
	tlsKey    string
	logLevel  string
	drain     time.Duration
}

func newDev() *cobra.Command {
	var f devFlags
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run every component in one process on embedded stores (local development)",
		Long: `Run a complete strand in one process: the star (sequencer, flusher, commit),
the API server, the absorb (on every release), and settle, trim and the
garbage probe on timers, on embedded stores
under --data-dir: directory buckets (buckets/express-0..2 with W=2,
buckets/standard-0, buckets/settled) and a bbolt metastore (meta.db).

It prints the endpoint and an admin token (kept in DATA_DIR/token, reused on
restart unless --token is given). It survives kill -9: on restart the star
fences its previous epoch, absorbs up to the cut and serves, with nothing
acknowledged lost.`,
		Example: "  strand dev\n  strand dev --data-dir /tmp/strand --addr 127.0.0.1:5000",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDev(cmd.Context(), f, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", "./strand-data", "directory holding the buckets, the metastore and the token")
	fl.StringVar(&f.addr, "addr", "127.0.0.1:4780", "API listen address (HOST:PORT)")
	fl.StringVar(&f.adminAddr, "admin-addr", "", "admin listen address for /metrics and /healthz (empty: off)")
	fl.StringVar(&f.token, "token", "", "admin token to accept (default: DATA_DIR/token, else a new one)")
	fl.StringVar(&f.starID, "star-id", "star-0", "this star's id")
	fl.StringVar(&f.peers, "peers", "", "other stars' API URLs: star-1=http://host:4780,... (for leader redirects)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "serve TLS with this certificate (with --tls-key)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "serve TLS with this key (with --tls-cert)")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fl.DurationVar(&f.drain, "drain-budget", node.DefaultDrainBudget, "on SIGTERM or Ctrl-C, how long to drain (acks of admitted batches, sessions ended with unavailable) before exiting")
	return cmd
}

func loadToken(f devFlags) (string, error) {
	path := filepath.Join(f.dataDir, "token")
	tok := f.token
	if tok == "" {
		if b, err := os.ReadFile(path); err == nil {
			tok = strings.TrimSpace(string(b))
		}
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
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return tok, nil
}

// devStores opens the embedded stores under the data directory: directory
// buckets (express-0..2 with W=2, standard-0, settled) and a bbolt
// metastore.
func devStores(dataDir string, cfg *star.Config) (meta *bolt.Store, settled objstore.Bucket, err error) {
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
	meta, err = bolt.Open(filepath.Join(dataDir, "meta.db"))
	if err != nil {
		return nil, nil, fmt.Errorf("%w (is another strand dev using %s?)", err, dataDir)
	}
	return meta, s[0], nil
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
	if err := os.MkdirAll(f.dataDir, 0o755); err != nil {
		return fmt.Errorf("create --data-dir: %w", err)
	}
	cfg := star.Defaults()
	cfg.StarID = f.starID
	cfg.Standard.FlushDeadline = 10 * time.Millisecond
	cfg.Standard.MemoryBufferMiB = 64
	meta, settled, err := devStores(f.dataDir, &cfg)
	if err != nil {
		return err
	}
	defer meta.Close()
	token, err := loadToken(f)
	if err != nil {
		return err
	}
	if err := auth.Issue(ctx, meta, token, "", []auth.Op{auth.Admin}); err != nil {
		return err
	}
	n, err := node.Start(ctx, node.Config{Star: cfg, Meta: meta, Settled: settled, Addr: f.addr, AdminAddr: f.adminAddr,
		TLSCert: f.tlsCert, TLSKey: f.tlsKey, Peers: peers, Logger: log, DrainBudget: f.drain})
	if err != nil {
		return err
	}
	defer n.Close()
	fmt.Fprintf(out, "strand dev is serving on %s (data in %s)\n\n  export STRAND_ENDPOINT=%s\n  export STRAND_TOKEN=%s\n\n", n.Endpoint(), f.dataDir, n.Endpoint(), token)
	err = n.Wait(ctx)
	log.Info("shutting down: draining", "budget", f.drain.String())
	return err
}
