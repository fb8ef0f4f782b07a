package dynamo

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

var (
	// ErrNoTable: DynamoDB has no table of that name in the region.
	ErrNoTable = errors.New("dynamo: no such table")
	// ErrNotMetastore: the table's keys are not a strand metastore's (a
	// string partition key PK and a string sort key SK).
	ErrNotMetastore = errors.New("dynamo: not a strand metastore table")
	// ErrNoRegion: no region was given and the SDK's configuration names
	// none.
	ErrNoRegion = errors.New("dynamo: no AWS region")
)

// Where says where a metastore table is: its name, the AWS region (""
// for the one the SDK's configuration names: AWS_REGION, the profile) and
// the DynamoDB endpoint ("" for AWS itself; LocalStack's or moto's URL
// otherwise).
type Where struct {
	Table, Region, Endpoint string
}

// Open returns the store in w.Table, reached with the SDK's default
// credentials (environment, shared profile, SSO, instance or task role),
// once Check found it a strand metastore: the way tools outside a
// deployed star (strand token bootstrap, localstack/token) reach a
// deployment's table. It makes one request, DescribeTable, and writes
// nothing.
func Open(ctx context.Context, w Where) (*Store, error) {
	var opts []func(*config.LoadOptions) error
	if w.Region != "" {
		opts = append(opts, config.WithRegion(w.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("dynamo: aws config: %w", err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("%w: give one (the stack's region) or set AWS_REGION", ErrNoRegion)
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if w.Endpoint != "" {
			o.BaseEndpoint = aws.String(w.Endpoint)
		}
	})
	st := New(client, w.Table)
	if err := st.Check(ctx); err != nil {
		return nil, fmt.Errorf("%w (region %s)", err, cfg.Region)
	}
	return st, nil
}

// Check asks DynamoDB for the table's description and returns nil when its
// keys are a strand metastore's, ErrNotMetastore (wrapped) when they are
// not, ErrNoTable when there is no such table. It does not tell a strand
// table from another one keyed by strings PK and SK.
func (st *Store) Check(ctx context.Context) error {
	out, err := st.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(st.table)})
	var missing *types.ResourceNotFoundException
	switch {
	case errors.As(err, &missing):
		return fmt.Errorf("%w: %s", ErrNoTable, st.table)
	case err != nil:
		return fmt.Errorf("dynamo: describe table %s: %w", st.table, translate(err))
	}
	return checkSchema(st.table, out.Table)
}
