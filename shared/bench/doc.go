// Package bench measures the star: ack latency, throughput, requests per
// GB, the metastore bill and memory, under a latency model of S3, and the
// star's own overhead above the quorum floor that model imposes. `strand
// bench` is its command line; docs/performance.md reports a run.
//
// # What runs
//
// A run is one point of the matrix producers x streams x record size x
// class x rate x flush deadline (Config lists each dimension; Run runs the
// product; a class's flush deadlines apply to its runs only). Modes:
//
//   - inproc: a star (shared/star) over memory buckets (objstore.NewMemSet:
//     the K buckets hold one body per slot, as S3 keeps the copies out of
//     the star's process) behind the fault wrapper, one Injector per bucket with the class's
//     PUT latency model, behind a recording wrapper (see below); the
//     metastore is metastore.Mem behind metacount; release events wake the
//     absorb in-process (wake.Local), so refs and checkpoints are real
//     metastore traffic. Producers call star.Submit and wait in order.
//   - api: the same stores under a whole node (node.Start: API server,
//     in-process absorb) on 127.0.0.1, driven through the Go client over
//     loopback with one pipelined AppendSession per producer.
//   - remote: the Go client against --endpoint; only latency and
//     throughput are known there.
//
// # Latency without coordinated omission
//
// At a fixed offered rate (--rate) each producer's sends are scheduled
// interval apart (pacer); a batch's latency counts from its scheduled send
// time, not from when a producer that fell behind (blocked on its
// in-flight limit or on admission) finally sent it, so a stall shows in
// the tail of every batch that was due during it. Result.SendLag is how
// late the sends went. Unthrottled runs are closed loops: there the
// schedule is the send. Latencies are recorded in HdrHistograms (1 ns to
// 1 h, 3 significant digits), not sorted raw samples.
//
// Settlement: in refs mode (and with a negative Config.SettleEvery) it is
// kept out of the measured window: in place of trim, a bench janitor
// deletes chain slots below the absorb's checkpoint (reading the head from
// the unwrapped metastore, so it is not billed) so that the memory buckets
// hold only the backlog. On the pass index in-process, settle and trim
// run in the window every SettleEvery (DefaultSettleEvery, 1 s), counted;
// the write workload's settled bucket keeps a large per-stream settled
// object as its size only (settledSink: settle never reads one back, S3
// holds them, not the star's process; a read fails with errNotKept).
//
// Every in-process and api write run reports the whole process's CPU time
// over the window, per GiB acked, and the machine's load average
// (Result.CPUSeconds, CPUSecondsPerGB, LoadAvg): on a shared machine a
// run's throughput follows its CPU per GiB (ADR 0068). An in-process
// write run also reports how long goroutines waited runnable for a
// processor over the window and the GC's stop-the-world pauses
// (Result.SchedWait, GCPause: the runtime's sampled histograms, sched.go),
// and Config.WriteWindow (`strand bench --trace`) brackets the window for
// an execution trace: where the star's overhead goes when settle, trim
// and the producers share its processors (ADR 0077). The in-process
// settle runs its CPU work in one goroutine at a time, as the node's
// (settle.Settler.CPUWorkers).
//
// # The floor and the overhead
//
// Every PutIfAbsent of a chain slot is timed by the recording wrapper
// (start and end, around the fault wrapper, so the modelled latency is
// inside). The modelled latency is the whole S3 PUT: the memory bucket's
// copy of the body runs inside it, not after it
// (objstore.Injector.SetPutLatencyCoversCall), so a copy into new memory
// (the default mode's growing heap) is not S3 latency (issue 36). Config.Trace on the star reports each flight's cut time, slot
// and batches, and its release time. For a batch submitted at s, cut into
// slot k at c(k), whose slot's W-th fastest PUT took L_W(k), acked to the
// producer at a and released by the star at r(k):
//
//	floor(batch)        = (c(k) - s) + L_W(k)   the wait for the cut + the W-th PUT
//	overhead(batch)     = (a - s) - floor = a - c(k) - L_W(k)
//	release overhead(k) = r(k) - c(k) - L_W(k)  the same, at the star's release
//	ordered floor F(k)  = max(c(k) + L_W(k), F(k-1))  (acks release in slot order)
//	ordered overhead    = a - F(k)
//
// overhead is the definition: all the star adds after the cut
// besides the quorum PUT (rendering, goroutine hand-offs, waiting for
// earlier slots, waking the producer). The ordered overhead removes the
// head-of-line wait that in-order acks impose by design (a slow earlier
// slot), leaving what an ideal in-order star would not spend. The wait for
// the cut (flush deadline, flight size, pipeline window) is policy and is
// in the floor.
//
// # The baseline
//
// With Config.Baseline each run is repeated for the same duration with the
// same producers and batches against the naive design: one PUT per append
// to one bucket (the class's latency model) and one metastore item write
// per append (a lognormal DynamoDB latency model, counted). The report
// gives requests per GB, metastore writes per second and throughput, and
// their ratios against strand. Where the naive design costs less per GB
// (Express at high rates: one copy in one zone against strand's copies in
// several, each paying the upload charge and the remote ones cross-zone
// transfer), the report says so and lists what strand pays above it, by
// line item (costGap).
//
// # Reads
//
// Config.Workloads adds read workloads (readwork.go), in-process (a
// read.Reader on the run's star and stores) or through the API (the Go
// client's ReadSession), with every GET of the chain buckets and of the
// settled bucket behind a GetModel (a lognormal first byte plus the body
// at a per-request bandwidth):
//
//   - tail: Readers sessions per stream follow the tail from seq 0 while
//     the producers append at TailRateMBps; each batch's scheduled send
//     time is stamped in its bodies' first 8 bytes, and each reader records
//     the time from it to each record's delivery (end-to-end), reported
//     next to the same run's ack latency.
//   - catchup: the producers write BacklogMB, SettledPct of it absorbed and
//     settled (settle.Settler) before the rest; then Readers sessions per
//     stream read from seq 0 to the tail. Reported: MB/s and records/s
//     (aggregate, per reader), chain and settled GETs per GiB, bytes
//     fetched per byte read, metastore read units per GiB, process CPU
//     per GiB, and the read cost per GiB (Prices.readCost).
//   - fanout: tail and catchup on one stream at each FanoutReaders count.
//
// Every reader checks, against its own count and not the store's, that it
// receives every record of its stream once, in order, up to the tail; a
// skip or a repeat fails the run (ErrOrder). The janitor does not run in
// read workloads, so the backlog stays readable.
//
// # Cost
//
// Cost turns the counted requests and bytes into dollars per GB ingested
// with the prices in Prices (defaults and their dates in
// docs/performance/cost.md): chain PUTs and, for Express, per-GB upload on
// every copy, cross-zone transfer of the remote copies and transit
// storage; the metastore's measured operations as DynamoDB request units;
// absorb Lambda invocations; and the later settle PUTs as a modelled line.
//
// The metastore is billed by item, not by call (metacount.Units): every
// item a call puts, updates, deletes or checks is an item write, and
// request units follow DynamoDB's rules by item size (1 WRU per KB written,
// 2 per KB in a transaction; 1 RRU per 4 KB read strongly consistent, a
// Query's items summed). A run reports item writes, WRU and RRU per
// second, the metastore's dollars per hour and its share of the cost per
// GB.
//
// # Many streams
//
// Runs that differ only in their stream count (--streams 1000,10000,...)
// are grouped: WriteText ends with a table, one row per count (metastore
// item writes, request units and $/h, the metastore's share of $/GiB,
// chain PUTs per GiB, the heap in use, ack p99), and with a plot
// directory Run writes <name with -streams- for the count>.svg against the
// count. The heap is read after a GC before the star starts, once every
// stream is created and opened, and at the window's end (HeapFigures): it
// is the whole process's, memory buckets and metastore included. Stream
// names carry their index, so they are unique at any count. Producers take
// the streams in turn (Config.StreamOrder sweep: a short window touches few
// streams) or at random (random: up to one stream per batch, the absorb's
// worst case for ref writes).
package bench
