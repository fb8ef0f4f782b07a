// Command settle is the settle Lambda: it reads its configuration from the
// environment (see absorb.Config), wires S3 (objstore/s3obj) and DynamoDB
// (metastore/dynamo) into the shared/settle handler, and starts the Lambda
// runtime. No protocol logic lives here.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/metastore/dynamo"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/objstore/s3obj"
	"github.com/strandlog/strand/shared/settle"
)

func fail(err error) {
	slog.Error("settle: start", "err", err)
	os.Exit(1)
}

func main() {
	ctx := context.Background()
	slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, nil)))
	cfg, err := absorb.ConfigFromEnv(os.Getenv)
	if err != nil {
		fail(err)
	}
	if cfg.SettledBucket == "" {
		fail(fmt.Errorf("STRAND_SETTLED_BUCKET is not set"))
	}
	s3c, err := s3obj.NewClient(ctx, s3obj.Options{PathStyle: cfg.PathStyle})
	if err != nil {
		fail(err)
	}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fail(fmt.Errorf("aws config: %w", err))
	}
	meta := dynamo.New(dynamodb.NewFromConfig(awsCfg), cfg.Table)
	open := func(name string) objstore.Bucket { return s3obj.New(s3c, name) }
	h := &settle.Handler{Settler: &settle.Settler{Meta: meta, Sets: cfg.Sets(open), Settled: open(cfg.SettledBucket)}, Chains: cfg.Chains()}
	lambda.Start(h.Handle)
}
