// Package lambdaenv is what the four settlement Lambda mains
// (functions/{absorb,settle,trim,probe}) share: JSON logging, opening S3 and
// DynamoDB from the environment's configuration (absorb.Config), starting
// the Lambda runtime, and logging the pass index window cache's figures
// after each invocation in CloudWatch's embedded metric format (emf.go).
// It keeps those mains to their wiring.
package lambdaenv

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/strandlog/strand/shared/absorb"
	"github.com/strandlog/strand/shared/metastore"
	"github.com/strandlog/strand/shared/metastore/dynamo"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/objstore/s3obj"
)

// Stores are the AWS adapters a settlement function uses.
type Stores struct {
	Meta metastore.Store
	// Bucket opens a bucket by name (S3 general purpose or directory).
	Bucket func(name string) objstore.Bucket
	// Visibility changes received SQS messages' visibility.
	Visibility *Visibility
}

// Open builds the DynamoDB metastore on cfg.Table, an S3 bucket opener and
// an SQS visibility changer, from the SDK's default configuration chain.
func Open(ctx context.Context, cfg absorb.Config) (Stores, error) {
	s3c, err := s3obj.NewClient(ctx, s3obj.Options{PathStyle: cfg.PathStyle})
	if err != nil {
		return Stores{}, err
	}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return Stores{}, fmt.Errorf("aws config: %w", err)
	}
	return Stores{
		Meta:       dynamo.New(dynamodb.NewFromConfig(awsCfg), cfg.Table),
		Bucket:     func(name string) objstore.Bucket { return s3obj.New(s3c, name) },
		Visibility: &Visibility{Client: sqs.NewFromConfig(awsCfg)},
	}, nil
}

// Start sets JSON logging, builds the handler with build, and starts the
// Lambda runtime with it. A build error is logged and exits the process:
// the only place a settlement function exits.
func Start(name string, build func(ctx context.Context, log *slog.Logger) (any, error)) {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("function", name)
	slog.SetDefault(log)
	h, err := build(context.Background(), log)
	if err != nil {
		log.Error(name+": start", "err", err.Error())
		os.Exit(1)
	}
	lambda.Start(h)
}
