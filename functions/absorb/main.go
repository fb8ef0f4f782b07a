// Command absorb is the absorb Lambda: it reads its configuration from the
// environment (see absorb.Config), wires S3 (objstore/s3obj) and DynamoDB
// (metastore/dynamo) into the shared/absorb handler, and starts the Lambda
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
)

func fail(err error) {
	slog.Error("absorb: start", "err", err)
	os.Exit(1)
}

func main() {
	ctx := context.Background()
	slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, nil)))
	cfg, err := absorb.ConfigFromEnv(os.Getenv)
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
	meta := dynamo.New(dynamodb.NewFromConfig(awsCfg), cfg.Table)
	open := func(name string) objstore.Bucket { return s3obj.New(s3c, name) }
	h := &absorb.Handler{Absorber: &absorb.Absorber{Meta: meta, Sets: cfg.Sets(open)}, Chains: cfg.Chains()}
	lambda.Start(h.Handle)
}
