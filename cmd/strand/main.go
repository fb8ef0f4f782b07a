// Command strand is the strand CLI: `strand dev` runs every component in
// one process on embedded stores; the other commands are clients of a
// server (see docs/cli.md).
package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/strandlog/strand/shared/client"
	"os"
	"os/signal"
	"syscall"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
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

// explain turns an API error into advice.
func explain(err error) string {
	msg := err.Error()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return msg
	}
	switch ce.Code() {
	case connect.CodeUnauthenticated:
		return msg + "\n  hint: pass --token or set STRAND_TOKEN (strand dev prints a token and writes it to DATA_DIR/token)"
	case connect.CodePermissionDenied:
		return msg + "\n  hint: this token's prefix or operations do not cover the request; use a token that does (an admin of a wider prefix can create one: strand token create)"
	case connect.CodeUnavailable:
		return msg + "\n  hint: is the server running? check --endpoint / STRAND_ENDPOINT (strand dev serves http://127.0.0.1:4780)"
	case connect.CodeNotFound:
		return msg + "\n  hint: list streams with `strand ls`; create one with `strand create NAME`"
	}
	return msg
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
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	var cf clientFlags
	root.PersistentFlags().StringVar(&cf.endpoint, "endpoint", envOr("STRAND_ENDPOINT", "http://127.0.0.1:4780"), "server URL (env STRAND_ENDPOINT)")
	root.PersistentFlags().StringVar(&cf.token, "token", os.Getenv("STRAND_TOKEN"), "bearer token (env STRAND_TOKEN)")
	root.PersistentFlags().DurationVar(&cf.retryFor, "retry-for", client.DefaultRetry.MaxElapsed, "how long one call retries retriable errors (a restart, a takeover, a dropped connection) with backoff; 0: no retries")
	root.AddCommand(newDev(), newCreate(&cf), newLs(&cf), newRm(&cf), newAppend(&cf), newRead(&cf), newTail(&cf), newCheckTail(&cf), newToken(&cf), newBench(&cf))
	return root
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
