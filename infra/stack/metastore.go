package stack

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Metastore is the single DynamoDB table (shared/metastore's layout: string
// keys PK and SK, no indexes).
type Metastore struct {
	constructs.Construct
	Table awsdynamodb.Table
}

// NewMetastore creates the table: on-demand billing, point-in-time
// recovery, encryption at rest with the AWS owned key, and deletion
// protection (plus a retain policy) when cfg.DeletionProtection is set.
func NewMetastore(scope constructs.Construct, id string, cfg Config) *Metastore {
	m := &Metastore{Construct: constructs.NewConstruct(scope, jsii.String(id))}
	// Retain, not RetainExceptOnCreate as for the buckets: with deletion
	// protection on, CloudFormation could not delete the table on a failed
	// create anyway, and its generated name blocks no later deploy.
	removal := awscdk.RemovalPolicy_DESTROY
	if cfg.DeletionProtection {
		removal = awscdk.RemovalPolicy_RETAIN
	}
	m.Table = awsdynamodb.NewTable(m.Construct, jsii.String("Table"), &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("PK"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:      &awsdynamodb.Attribute{Name: jsii.String("SK"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: jsii.Bool(cfg.DeletionProtection),
		Encryption:         awsdynamodb.TableEncryption_DEFAULT,
		RemovalPolicy:      removal,
	})
	return m
}
