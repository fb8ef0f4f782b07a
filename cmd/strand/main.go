// Command strand is the strand CLI: `strand dev` runs every component in
// one process on embedded stores; the other commands are clients of a
// server (see docs/cli.md).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/strandlog/strand/shared/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "strand:", explain(err))
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "strand",
		Short: "strand: a durable, ordered stream store on object storage",
		Long: `strand is a durable, ordered stream store. Producers append records to named
streams and get an acknowledgement only once the batch is durable; readers read
any stream from any seq number and tail it live.

Start a local server with every component in one process:

  strand dev

then, in another shell, use the endpoint and token it prints:

  export STRAND_ENDPOINT=http://127.0.0.1:4780 STRAND_TOKEN=$(cat strand-data/token)
  strand create hello
  echo world | strand append hello
  strand read hello`,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("strand {{.Version}}\n")
	var cf clientFlags
	root.AddCommand(newDev())
	for _, c := range []*cobra.Command{newCreate(&cf), newLs(&cf), newRm(&cf), newAppend(&cf), newRead(&cf), newTail(&cf), newCheckTail(&cf), newDescribe(&cf), newFence(&cf), newTrim(&cf), newConfig(&cf), newMove(&cf), newRebalance(&cf)} {
		root.AddCommand(cf.register(c, c.Flags(), true))
	}
	tok, bench := newToken(&cf), newBench(&cf)
	root.AddCommand(tok, cf.register(bench, bench.Flags(), false))
	return root
}

// register adds the flags that find the server and the token to fs, a
// client command's own flags (so `strand dev --help` lists none of them,
// and `strand --endpoint URL ls` still works: cobra finds the command
// first, then parses every flag with its set).
// --trust-leader only where the command follows leaders (not bench).
func (f *clientFlags) register(cmd *cobra.Command, fs *pflag.FlagSet, leaders bool) *cobra.Command {
	fs.StringVar(&f.endpoint, "endpoint", envOr("STRAND_ENDPOINT", "http://127.0.0.1:4780"), "server URL, or a comma-separated list of a leader and its standbys (env STRAND_ENDPOINT)")
	// The token's default is resolved at use (clientFlags.bearer), never
	// shown by --help.
	fs.StringVar(&f.token, "token", "", "bearer token (default: --token-file, else env STRAND_TOKEN); it shows in the process list: prefer --token-file or STRAND_TOKEN")
	fs.StringVar(&f.tokenFile, "token-file", "", "read the bearer token from this file")
	fs.DurationVar(&f.retryFor, "retry-for", client.DefaultRetry.MaxElapsed, "how long one call retries retriable errors (a restart, a takeover, a dropped connection) with backoff; 0: no retries. Given, it also waits for a server not up yet (by default a server never reached fails the command at once)")
	f.sets = append(f.sets, fs)
	if leaders {
		fs.StringSliceVar(&f.trust, "trust-leader", nil, "host names a stream's leader may be at besides the endpoint's (*.example.com: its subdomains); the token goes to no other host")
	}
	return cmd
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
