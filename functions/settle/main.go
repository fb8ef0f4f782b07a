// Command settle is the settle Lambda: configuration from the environment
// (absorb.Config), S3 and DynamoDB adapters, the shared/settle handler. No
// protocol logic lives here.
package main

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/lambdaenv"
	"github.com/strandlog/strand/shared/passindex"
	"github.com/strandlog/strand/shared/settle"
)

func main() {
	lambdaenv.Start("settle", func(ctx context.Context, log *slog.Logger) (any, error) {
		cfg, err := absorb.ConfigFromEnv(os.Getenv)
		if err != nil {
			return nil, err
		}
		if cfg.SettledBucket == "" {
			return nil, errors.New("STRAND_SETTLED_BUCKET is not set")
		}
		st, err := lambdaenv.Open(ctx, cfg)
		if err != nil {
			return nil, err
		}
		h := &settle.Handler{Settler: &settle.Settler{Meta: st.Meta, Sets: cfg.Sets(st.Bucket), Settled: st.Bucket(cfg.SettledBucket), Log: log, PassIndex: cfg.PassIndex,
			Window: cfg.Window(st.Meta, st.Bucket(cfg.SettledBucket), passindex.DefaultColdLoadParallel)},
			Chains: cfg.Chains(), Log: log}
		return lambdaenv.Metered("settle", cfg.PassIndex, h.Settler.Window, h.Handle), nil
	})
}
