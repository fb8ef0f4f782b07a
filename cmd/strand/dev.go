package main

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/auth"
	"github.com/strandlog/strand/shared/chain"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/bolt"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/objstore/dir"
	"github.com/strandlog/strand/shared/probe"
	"github.com/strandlog/strand/shared/read"
	"github.com/strandlog/strand/shared/server"
	"github.com/strandlog/strand/shared/settle"
	"github.com/strandlog/strand/shared/star"
	"github.com/strandlog/strand/shared/trim"
	"github.com/strandlog/strand/shared/wake"
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
	return cmd
}

func parsePeers(s string) (map[string]string, error) {
	peers := map[string]string{}
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		id, u, ok := strings.Cut(p, "=")
		if !ok || id == "" || u == "" {
			return nil, fmt.Errorf("--peers %q: want star-id=URL pairs separated by commas", p)
		}
		peers[id] = u
	}
	return peers, nil
}

func every(ctx context.Context, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
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

func runDev(ctx context.Context, f devFlags, out interface{ Write([]byte) (int, error) }) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", f.logLevel)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	peers, err := parsePeers(f.peers)
	if err != nil {
		return err
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return errors.New("give both --tls-cert and --tls-key, or neither")
	}
	if err := os.MkdirAll(f.dataDir, 0o755); err != nil {
		return fmt.Errorf("create --data-dir: %w", err)
	}
	meta, err := bolt.Open(filepath.Join(f.dataDir, "meta.db"))
	if err != nil {
		return fmt.Errorf("%w (is another strand dev using %s?)", err, f.dataDir)
	}
	defer meta.Close()
	token, err := loadToken(f)
	if err != nil {
		return err
	}
	if err := auth.Issue(ctx, meta, token, "", []auth.Op{auth.Admin}); err != nil {
		return err
	}

	root := filepath.Join(f.dataDir, "buckets")
	open := func(name string) (objstore.Bucket, error) { return dir.Open(root, name) }
	var exp []objstore.Bucket
	var expNames []string
	for i := range 3 {
		name := fmt.Sprintf("express-%d", i)
		b, err := open(name)
		if err != nil {
			return err
		}
		exp, expNames = append(exp, b), append(expNames, name)
	}
	std, err := open("standard-0")
	if err != nil {
		return err
	}
	settled, err := open("settled")
	if err != nil {
		return err
	}
	sets := absorb.Sets{
		Standard: chain.Set{Buckets: []objstore.Bucket{std}, W: 1},
		Express:  chain.Set{Buckets: exp, W: 2},
	}

	cfg := star.Defaults()
	cfg.StarID = f.starID
	cfg.Logger = log
	cfg.Standard.Buckets, cfg.Standard.BucketNames = []objstore.Bucket{std}, []string{"standard-0"}
	cfg.Standard.FlushDeadline = 10 * time.Millisecond
	cfg.Standard.MemoryBufferMiB = 64
	cfg.Express.Buckets, cfg.Express.BucketNames = exp, expNames
	// The absorb runs in-process: wake.Local runs it on every release (and
	// a sweep each second) and tells the star the checkpoint; the star also
	// uses it to catch up to a fenced cut on restart (AbsorbTo).
	abs := &absorb.Absorber{Meta: meta, Sets: sets, Log: log}
	waker := wake.NewLocal(abs, nil, log)
	st, err := star.New(cfg, meta, star.Options{
		Waker:    waker,
		Absorber: abs,
		NewFencer: func(id string, cc star.ClassConfig) star.Fencer {
			return chain.Set{Star: id, Buckets: cc.Buckets, W: cc.W}
		},
	})
	if err != nil {
		return err
	}
	waker.SetObserver(st)
	st.SetAbsorbHealth(waker.Health)
	if err := st.Start(ctx); err != nil {
		return fmt.Errorf("start the star: %w", err)
	}
	defer st.Close()

	runCtx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	chains := st.Chains()
	wg.Add(1)
	go func() { defer wg.Done(); waker.Run(runCtx, time.Second) }()
	for _, c := range chains {
		// Tell the waker of every chain at once, so the sweep covers them
		// before the first release.
		waker.Released(runCtx, c, st.Released(c))
	}
	settler := &settle.Settler{Meta: meta, Sets: sets, Settled: settled, Log: log}
	trimmer := &trim.Trimmer{Meta: meta, Sets: sets, Settled: settled, Log: log}
	probeSets := map[metastore.ChainID]chain.Set{}
	for _, c := range chains {
		set := sets.Standard
		if c.Class == metastore.Express {
			set = sets.Express
		}
		set.Star = c.Star
		probeSets[c] = set
	}
	prober := &probe.Handler{Sets: probeSets, Meta: meta, Settled: settled, Log: log}
	wg.Add(3)
	go func() {
		defer wg.Done()
		every(runCtx, 30*time.Second, func() {
			rep, err := prober.Sweep(runCtx)
			if err != nil && runCtx.Err() == nil {
				log.Warn("probe sweep failed; retrying", "err", err.Error())
			}
			if rep.OrphanCount > 0 {
				log.Info("probe found settled objects no ref points to", "count", rep.OrphanCount)
			}
		})
	}()
	go func() {
		defer wg.Done()
		every(runCtx, 2*time.Second, func() {
			for _, c := range chains {
				if _, err := settler.Run(runCtx, c); err != nil && runCtx.Err() == nil {
					log.Warn("settle failed; retrying", "chain", c.String(), "err", err.Error())
				}
			}
		})
	}()
	go func() {
		defer wg.Done()
		every(runCtx, 5*time.Second, func() {
			for _, c := range chains {
				if _, err := trimmer.Run(runCtx, c); err != nil && runCtx.Err() == nil {
					log.Warn("trim failed; retrying", "chain", c.String(), "err", err.Error())
				}
			}
			if _, err := trimmer.Streams(runCtx); err != nil && runCtx.Err() == nil {
				log.Warn("trim of streams failed; retrying", "err", err.Error())
			}
		})
	}()

	rd := &read.Reader{Star: st, Meta: meta, Sets: map[metastore.Class]chain.Set{
		metastore.Standard: sets.Standard, metastore.Express: sets.Express}, Settled: settled}
	srv, err := server.New(server.Config{Star: st, Meta: meta, Reader: rd, Auth: &auth.Checker{Meta: meta}, Peers: peers, Logger: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("listen on --addr %s: %w (is another server running there? pick another with --addr)", f.addr, err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, Protocols: new(http.Protocols)}
	hs.Protocols.SetHTTP1(true)
	hs.Protocols.SetHTTP2(true)
	hs.Protocols.SetUnencryptedHTTP2(true)
	scheme := "http"
	if f.tlsCert != "" {
		scheme = "https"
	}
	endpoint := scheme + "://" + ln.Addr().String()
	errc := make(chan error, 2)
	go func() {
		if f.tlsCert != "" {
			errc <- hs.ServeTLS(ln, f.tlsCert, f.tlsKey)
			return
		}
		errc <- hs.Serve(ln)
	}()
	var admin *http.Server
	if f.adminAddr != "" {
		admin = &http.Server{Addr: f.adminAddr, Handler: server.AdminHandler(st), ReadHeaderTimeout: 10 * time.Second}
		go func() { errc <- admin.ListenAndServe() }()
	}
	fmt.Fprintf(out, "strand dev is serving on %s (data in %s)\n\n  export STRAND_ENDPOINT=%s\n  export STRAND_TOKEN=%s\n\n", endpoint, f.dataDir, endpoint, token)
	log.Info("serving", "endpoint", endpoint, "star", f.starID, "data_dir", f.dataDir)

	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
	}
	log.Info("shutting down")
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	_ = hs.Shutdown(sctx)
	if admin != nil {
		_ = admin.Shutdown(sctx)
	}
	return nil
}
