// Command absorb is the absorb Lambda: configuration from the environment
// (absorb.Config), S3 and DynamoDB adapters, the shared/absorb handler. No
// protocol logic lives here.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/lambdaenv"
)

func main() {
	lambdaenv.Start("absorb", func(ctx context.Context, log *slog.Logger) (any, error) {
		cfg, err := absorb.ConfigFromEnv(os.Getenv)
		if err != nil {
			return nil, err
		}
		st, err := lambdaenv.Open(ctx, cfg)
		if err != nil {
			return nil, err
		}
		a := &absorb.Absorber{Meta: st.Meta, Sets: cfg.Sets(st.Bucket), Log: log}
		if cfg.PassIndex {
			a.Index = st.Bucket(cfg.SettledBucket)
		}
		h := &absorb.Handler{Absorber: a, Chains: cfg.Chains(), Log: log, Visibility: st.Visibility}
		return h.Handle, nil
	})
}
