// Command probe is the garbage-probe Lambda: it reads its configuration from
// the environment (see probe.Config), wires S3 (objstore/s3obj) and DynamoDB
// (metastore/dynamo) into the shared/probe handler, and starts the Lambda
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

	"github.com/strandlog/strand/shared/metastore/dynamo"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/objstore/s3obj"
	"github.com/strandlog/strand/shared/probe"
)

func fail(err error) {
	slog.Error("probe: start", "err", err)
	os.Exit(1)
}

func main() {
	ctx := context.Background()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	slog.SetDefault(log)
	cfg, err := probe.ConfigFromEnv(os.Getenv)
	if err != nil {
		fail(err)
	}
	s3c, err := s3obj.NewClient(ctx, s3obj.Options{PathStyle: cfg.PathStyle})
	if err != nil {
		fail(err)
	}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fail(fmt.Errorf("aws config: %w", err))
	}
	open := func(name string) objstore.Bucket { return s3obj.New(s3c, name) }
	h := &probe.Handler{
		Sets:        cfg.Sets(open),
		Meta:        dynamo.New(dynamodb.NewFromConfig(awsCfg), cfg.Table),
		Log:         log,
		SweepEpochs: cfg.SweepEpochs,
	}
	if cfg.SettledBucket != "" {
		h.Settled = open(cfg.SettledBucket)
	}
	lambda.Start(h.Handle)
}
