// Command probe is the garbage-probe Lambda: configuration from the
// environment (probe.Config), S3 and DynamoDB adapters, the shared/probe
// handler. No protocol logic lives here.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/strandlog/strand/shared/lambdaenv"
	"github.com/strandlog/strand/shared/probe"
)

func main() {
	lambdaenv.Start("probe", func(ctx context.Context, log *slog.Logger) (any, error) {
		cfg, err := probe.ConfigFromEnv(os.Getenv)
		if err != nil {
			return nil, err
		}
		st, err := lambdaenv.Open(ctx, cfg.Config)
		if err != nil {
			return nil, err
		}
		h := &probe.Handler{Sets: cfg.Sets(st.Bucket), Meta: st.Meta, Log: log, SweepEpochs: cfg.SweepEpochs, OrphanGrace: cfg.OrphanGrace, PassIndex: cfg.PassIndex}
		if cfg.SettledBucket != "" {
			h.Settled = st.Bucket(cfg.SettledBucket)
			h.Window = cfg.Window(st.Meta, h.Settled, 0)
		}
		return lambdaenv.Metered("probe", cfg.PassIndex, h.Window, h.Handle), nil
	})
}
