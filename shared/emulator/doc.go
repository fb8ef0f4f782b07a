// Package emulator gives tests an AWS endpoint (S3, DynamoDB, SQS) to run the
// AWS adapters and the conformance suites against. It is test support: import
// it from _test.go files only.
//
// # Endpoint selection
//
// Endpoint(t) returns, in order of preference:
//
//  1. the value of STRAND_AWS_ENDPOINT when it is set (for example LocalStack
//     at http://localhost:4566), used as is; nothing is started;
//  2. otherwise the URL of one moto server shared by every test in the test
//     binary, started on first use (sync.Once) on an ephemeral loopback port.
//
// DynamoDBEndpoint(t) is the endpoint for DynamoDB clients:
// STRAND_AWS_ENDPOINT_DYNAMODB when it is set, otherwise Endpoint(t). It is
// set where the emulator serves no DynamoDB (LocalStack's open-source core:
// localstack/core.sh runs moto's DynamoDB beside it).
//
// When moto cannot be started (no python3, moto or werkzeug not importable,
// the server does not answer within StartTimeout), a test that asked for the
// endpoint fails with the reason when the environment variable CI is "true",
// and otherwise is skipped with a message that names what is missing and how
// to install it. A start failure is remembered: later tests fail or skip at
// once without retrying.
//
// # Why moto's requests run one at a time
//
// moto's own `moto_server` serves each request on its own thread and its
// conditional writes (S3 PutObject If-None-Match, DynamoDB ConditionExpression
// and TransactWriteItems) are check-then-act without a lock: two concurrent
// writers of a new key can both win. Every strand protocol rests on
// put-if-absent being atomic, so the package embeds a small python program
// (moto_server.py) that serves moto's DomainDispatcherApplication with
// werkzeug's server under one global lock: each request, response included,
// runs alone, so each is atomic with respect to every other. Connections are
// accepted and read on their own threads: a fully single-threaded server
// (threaded=false) is blocked by any idle connection it accepted, and Go's
// HTTP transport keeps a connection it dialed for a request that was
// cancelled (hedged reads cancel their losers), which stalled the server for
// the transport's idle timeout. (It uses
// werkzeug.serving.make_server, which run_simple wraps, to bind port 0 and
// report the port it got: no race for a "free" port.) The package's own tests
// prove it: 48 concurrent conditional writers of one key, exactly one wins, for
// S3 If-None-Match, DynamoDB ConditionExpression and TransactWriteItems.
//
// # Lifetime
//
// The server runs in its own process group. Stop ends it (SIGTERM to the
// group, then SIGKILL); Main(m) runs the tests and then calls Stop, so a
// package that uses the emulator declares
//
//	func TestMain(m *testing.M) { emulator.Main(m) }
//
// As a backstop the server also exits when its stdin reaches end of file,
// which happens when the test binary exits in any way (including a panic or a
// kill) without calling Stop, and on Linux it gets SIGKILL when its parent
// dies.
//
// # Clients
//
// Config(t) builds an aws.Config for the endpoint with static test
// credentials ("test"/"test") and region us-east-1 (ConfigFor does the same for
// a given URL). S3 clients built from it must use path-style addressing
// (s3.Options.UsePathStyle), which emulators need. Name(t, prefix) returns a
// fresh lowercase name valid as both an S3 bucket and a DynamoDB table name, unique
// across test binaries sharing one endpoint.
package emulator
