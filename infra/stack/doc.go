// Package stack is strand's AWS deployment as CDK constructs, one per
// concern:
//
//   - Storage: the Express set (three, or two in a two-zone region, S3
//     Express One Zone directory buckets,
//     one per availability zone id, named <prefix>-<account>--<azid>--x-s3),
//     the Standard chain bucket and the settled bucket. All are encrypted
//     (SSE-S3), block public access, deny non-TLS requests by bucket policy
//     and abort incomplete multipart uploads after a day. Nothing expires
//     data by lifecycle: trim is the only deleter.
//   - Metastore: the one DynamoDB table (PK/SK strings, on demand,
//     point-in-time recovery, deletion protection per config).
//   - Star: a VPC with S3, S3 Express and DynamoDB gateway endpoints, an ECS
//     cluster, one Fargate service (desired count 1) per star id, and a
//     Network Load Balancer: port 4780 reaches any star, port 4781+i only
//     star-i (a stream's leader). Without a certificate the listeners pass
//     TCP through, which keeps cleartext HTTP/2 (gRPC and Connect
//     streaming) end to end; with strand:certificateArn they terminate TLS
//     (ALPN h2 preferred) and forward TCP. A public API in clear text is
//     refused unless strand:allowPlaintextPublicApi says otherwise. With
//     strand:kafka (and a certificate) the stars' Kafka front end is
//     behind TLS listeners too: 9092 any star, 9093+i only star-i (what
//     star-i advertises), health-checked by a TCP connect to the task's
//     Kafka port, which a standby relays to its leader (docs/kafka.md). With
//     strand:expressAzNames (and an account) the VPC spans exactly the
//     Express zones and star-i runs in zone i mod K, so one of the W=2
//     copies an ack waits for is in the task's zone; without them the
//     stack warns that placement is not aligned. The image is built from
//     functions/star/Dockerfile; the container is configured entirely by
//     STRAND_* environment variables, one per flag of functions/star
//     (StarEnv), including STRAND_PEERS for the other stars.
//   - Settlement: the release queue (FIFO, a message group per chain) that
//     triggers absorb, the fence-event queue that triggers probe, a
//     dead-letter queue each, partial-batch responses, and schedules that
//     sweep absorb, settle, trim and probe. Lambdas are provided.al2023 on
//     arm64 with a bootstrap the app builds from functions/<name> into
//     infra/build/<name> (package bundle: never a placeholder or stale).
//   - Operations: alarms on backlog age (never rate), stalls by cause, DLQ
//     depth, Lambda errors, stopped stars and stars without their standby
//     (Container Insights' running task count), an SNS topic whose policy lets
//     this account's CloudWatch alarms publish, a dashboard.
//   - Observability extras, each on by default and switched by a context
//     key: Container Insights, load balancer access logs, S3 server access
//     logs of the Standard buckets and VPC flow logs, the last three into
//     one expiring logs bucket (Storage.Logs).
//
// Data buckets are retained on delete with deletion protection, except
// when the first create fails (RetainExceptOnCreate). The Express set is
// checked against the region's S3 Express zones (regions.go): K=3, or K=2
// in a two-zone region. Each star task splits its memory by hard limits
// between the star (with GOMEMLIMIT and a backlog bound derived from its
// share) and the CloudWatch agent sidecar (a pinned release). Every
// synthesized configuration passes cdk-nag's AwsSolutions pack in the
// tests; accepted findings are suppressed next to their resources (nag.go).
//
// IAM is least privilege: every identity policy names its actions (no
// wildcard action) and resources; directory-bucket readers get ReadOnly
// sessions. Config comes from CDK context keys (strand:*) over defaults.
package stack
