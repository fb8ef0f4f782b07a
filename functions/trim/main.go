// Command trim is the trim Lambda: configuration from the environment
// (absorb.Config), S3 and DynamoDB adapters, the shared/trim handler. No
// protocol logic lives here.
package main

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/clock"
	"github.com/strandlog/strand/shared/lambdaenv"
	"github.com/strandlog/strand/shared/trim"
)

func main() {
	lambdaenv.Start("trim", func(ctx context.Context, log *slog.Logger) (any, error) {
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
		h := &trim.Handler{Trimmer: &trim.Trimmer{Meta: st.Meta, Sets: cfg.Sets(st.Bucket), Settled: st.Bucket(cfg.SettledBucket), Clock: clock.Real{}, Log: log, PassIndex: cfg.PassIndex,
			Window: cfg.Window(st.Meta, st.Bucket(cfg.SettledBucket), 0)},
			Chains: cfg.Chains(), Log: log}
		return lambdaenv.Metered("trim", cfg.PassIndex, h.Trimmer.Window, h.Handle), nil
	})
}
