package stack

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3express"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Storage is every bucket strand writes: the Express set (K=3 or 2 S3 Express
// One Zone directory buckets, one per zone), the Standard chain bucket and
// the Standard settled bucket.
type Storage struct {
	constructs.Construct
	// Express are the directory buckets of the Express set, in the order of
	// Config.ExpressAZs; ExpressNames and ExpressArns match them.
	Express      []awss3express.CfnDirectoryBucket
	ExpressNames []*string
	ExpressArns  []*string
	// Chain is the Standard chain bucket (K=W=1 by default).
	Chain awss3.Bucket
	// Settled holds settled objects (streams/<id>/<first>-<last>).
	Settled awss3.Bucket
	// Logs receives the S3 server access logs of Chain and Settled, the
	// load balancer's access logs and the VPC flow logs (LogsPrefix*),
	// and expires them after Config.RetentionDays; nil when
	// Config.LogsBucket is false.
	Logs awss3.Bucket
}

// Key prefixes in the logs bucket.
const (
	LogsPrefixS3   = "s3-access/"
	LogsPrefixNLB  = "nlb"
	LogsPrefixFlow = "vpc-flow/"
)

// Key prefixes strand uses in each bucket (DESIGN.md, "Object format").
const (
	ChainPrefix   = "chains/"
	SettledPrefix = "streams/"
	// IndexPrefix holds the pass indexes in the settled bucket
	// (format.PassIndexKey: index/<star>/<class>/<epoch>/<first-slot>),
	// the runs and merged runs and the runs' command indexes
	// (format.CommandIndexKey: the run's key + ".cmdx"; settle puts them,
	// trim deletes them, readers get them: the grants on this prefix
	// cover them), with the pass index switched on (Config.PassIndex).
	IndexPrefix = "index/"
	// PacksPrefix holds the packs of the pass index's runs in the settled
	// bucket (format.PackKey: packs/<star>/<class>/<epoch>/<first>-<end>/<slot>):
	// small streams' records that settle copied into shared objects
	// (design 014, level 1), with the pass index switched on.
	PacksPrefix = "packs/"
	// OrphanMarkPrefix is where the probe marks settled objects no ref
	// points to, in the settled bucket (shared/probe MarkPrefix).
	OrphanMarkPrefix = "probe/orphans/"
)

// abortUploadsDays bounds how long an aborted multipart upload is billed.
const abortUploadsDays = 1

// ExpressBucketName is the name of the directory bucket in zone azID:
// <prefix>-<account>--<azid>--x-s3 (the suffix is required by S3).
func ExpressBucketName(prefix, azID string) *string {
	return awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String(prefix + "-"), awscdk.Aws_ACCOUNT_ID(), jsii.String("--" + azID + "--x-s3"),
	})
}

// dataRemoval is the removal policy of the buckets and the table. With
// deletion protection they are retained on delete and on replacement, but
// not when the stack's first create fails: CloudFormation then deletes them
// (RetainExceptOnCreate), so the directory buckets, whose names are
// fixed, do not survive a rolled-back create and block the next deploy with
// "already exists". A failed create has acknowledged no data.
func dataRemoval(cfg Config) awscdk.RemovalPolicy {
	if cfg.DeletionProtection {
		return awscdk.RemovalPolicy_RETAIN_ON_UPDATE_OR_DELETE
	}
	return awscdk.RemovalPolicy_DESTROY
}

// NewStorage creates the buckets. Every bucket is encrypted (SSE-S3),
// blocks public access (directory buckets always do), refuses non-TLS
// requests by bucket policy, and aborts incomplete multipart uploads after
// a day. No lifecycle rule expires data: trim is the only deleter.
func NewStorage(scope constructs.Construct, id string, cfg Config) *Storage {
	s := &Storage{Construct: constructs.NewConstruct(scope, jsii.String(id))}
	removal := dataRemoval(cfg)
	for i, az := range cfg.ExpressAZs {
		name := ExpressBucketName(cfg.BucketPrefix, az)
		b := awss3express.NewCfnDirectoryBucket(s.Construct, jsii.String(fmt.Sprintf("Express%d", i)), &awss3express.CfnDirectoryBucketProps{
			BucketName:     name,
			DataRedundancy: jsii.String("SingleAvailabilityZone"),
			LocationName:   jsii.String(az),
			BucketEncryption: &awss3express.CfnDirectoryBucket_BucketEncryptionProperty{
				ServerSideEncryptionConfiguration: &[]any{
					&awss3express.CfnDirectoryBucket_ServerSideEncryptionRuleProperty{
						ServerSideEncryptionByDefault: &awss3express.CfnDirectoryBucket_ServerSideEncryptionByDefaultProperty{
							SseAlgorithm: jsii.String("AES256"),
						},
					},
				},
			},
			LifecycleConfiguration: &awss3express.CfnDirectoryBucket_LifecycleConfigurationProperty{
				Rules: &[]any{
					&awss3express.CfnDirectoryBucket_RuleProperty{
						Id:     jsii.String("abort-incomplete-uploads"),
						Status: jsii.String("Enabled"),
						AbortIncompleteMultipartUpload: &awss3express.CfnDirectoryBucket_AbortIncompleteMultipartUploadProperty{
							DaysAfterInitiation: jsii.Number(abortUploadsDays),
						},
					},
				},
			},
		})
		b.ApplyRemovalPolicy(removal, nil)
		// Directory buckets authorize data access through CreateSession;
		// denying every s3express action without TLS covers them all. A
		// Deny may use a wildcard: it only takes permissions away.
		awss3express.NewCfnBucketPolicy(s.Construct, jsii.String(fmt.Sprintf("Express%dTLSOnly", i)), &awss3express.CfnBucketPolicyProps{
			Bucket: b.Ref(),
			PolicyDocument: map[string]any{
				"Version": "2012-10-17",
				"Statement": []any{map[string]any{
					"Sid":       "DenyInsecureTransport",
					"Effect":    "Deny",
					"Principal": map[string]any{"AWS": "*"},
					"Action":    "s3express:*",
					"Resource":  b.AttrArn(),
					"Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
				}},
			},
		})
		s.Express = append(s.Express, b)
		s.ExpressNames = append(s.ExpressNames, b.Ref())
		s.ExpressArns = append(s.ExpressArns, b.AttrArn())
	}
	if cfg.LogsBucket() {
		// SSE-S3: load balancer access logs cannot be written to a
		// KMS-encrypted bucket. Logs are not data: they expire, and the
		// bucket goes with the stack's data policy.
		s.Logs = awss3.NewBucket(s.Construct, jsii.String("Logs"), &awss3.BucketProps{
			BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
			Encryption:        awss3.BucketEncryption_S3_MANAGED,
			EnforceSSL:        jsii.Bool(true),
			MinimumTLSVersion: jsii.Number(1.2),
			ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
			RemovalPolicy:     removal,
			LifecycleRules: &[]*awss3.LifecycleRule{{
				Id:                                  jsii.String("expire-logs"),
				Enabled:                             jsii.Bool(true),
				Expiration:                          awscdk.Duration_Days(jsii.Number(cfg.RetentionDays)),
				AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(abortUploadsDays)),
			}},
		})
	}
	standard := func(id string) awss3.Bucket {
		var logs awss3.IBucket
		var logsPrefix *string
		if cfg.S3AccessLogs {
			logs, logsPrefix = s.Logs, jsii.String(LogsPrefixS3+id+"/")
		}
		return awss3.NewBucket(s.Construct, jsii.String(id), &awss3.BucketProps{
			ServerAccessLogsBucket: logs,
			ServerAccessLogsPrefix: logsPrefix,
			BlockPublicAccess:      awss3.BlockPublicAccess_BLOCK_ALL(),
			Encryption:             awss3.BucketEncryption_S3_MANAGED,
			EnforceSSL:             jsii.Bool(true),
			MinimumTLSVersion:      jsii.Number(1.2),
			ObjectOwnership:        awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
			Versioned:              jsii.Bool(false),
			RemovalPolicy:          removal,
			LifecycleRules: &[]*awss3.LifecycleRule{{
				Id:                                  jsii.String("abort-incomplete-uploads"),
				Enabled:                             jsii.Bool(true),
				AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(abortUploadsDays)),
			}},
		})
	}
	s.Chain = standard("Chain")
	s.Settled = standard("Settled")
	if !cfg.S3AccessLogs {
		for _, b := range []awss3.Bucket{s.Chain, s.Settled} {
			suppress(b, switchedOff("AwsSolutions-S1", CtxS3AccessLogs))
		}
	}
	return s
}
