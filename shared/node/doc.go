// Package node assembles one star process from its parts: the star (write
// core), reads, the API server and the admin endpoint, and the settlement
// wiring. Two mains use it and stay thin: functions/star (the ECS task, on
// S3 and DynamoDB, with settlement in Lambdas fed by SQS) and `strand dev`
// (one process on the embedded stores, with absorb, settle, trim and the
// garbage probe running in-process on timers).
//
// Settlement modes:
//
//   - InProcess: release events wake an in-process absorb (wake.Local),
//     which reports the checkpoint straight back to the star; settle, trim
//     and the probe's sweep run on timers; a fence runs the probe at once.
//   - Remote: release events go to an SQS FIFO queue (wake.SQS) for the
//     absorb Lambda; the star learns the checkpoint by polling the chain
//     heads (wake.Poller); fence events go to the probe's SQS queue.
//
// Start returns once the API listens; Close drains gracefully within
// Config.DrainBudget (stop admitting, let the star quiesce so admitted
// batches are acknowledged, end every session with unavailable) and then
// shuts everything down in order (API, settlement loops, star). See
// drain.go and docs/operations.md, "Deploys and restarts".
package node
