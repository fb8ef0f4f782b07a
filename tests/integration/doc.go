// Package integration runs the real star process (functions/star, built
// with go build) against AWS endpoints and drives it the way production
// does: through the Go client, with the settlement handlers fed from the
// real SQS release queue as the Lambdas would be.
//
// The endpoint comes from the environment: STRAND_AWS_ENDPOINT (for
// example LocalStack at http://localhost:4566, see localstack/test.sh and
// docs/localstack.md) or, when it is unset, a moto server that
// shared/emulator starts; DynamoDB's is STRAND_AWS_ENDPOINT_DYNAMODB when
// set (moto's beside LocalStack's core, localstack/core.sh), passed to the
// star as --dynamodb-endpoint. Every run creates its own uniquely named
// buckets, table and queues, so runs sharing one endpoint do not collide.
//
// The Express set is three general-purpose buckets (W=2): emulators have
// no S3 directory buckets, and the star's protocols need only
// put-if-absent, which it proves on every bucket at start-up.
//
// The package has no non-test code but this file.
package integration
