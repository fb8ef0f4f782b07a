// Command natspeer measures strand dev and NATS JetStream side by side on
// one machine: each writes the same records (1 KiB by default) and reads
// them back from the start through its Go client, in interleaved rounds,
// with the server in its own process so that its CPU time is its own
// (/proc/PID/stat). It is a separate module so that NATS stays out of
// strand's go.mod; run.sh builds both servers and runs it.
//
// Setups: nats-server with JetStream on a file store, sync_interval
// always (an fsync for every write), one stream, publishes async with up
// to 4096 unacknowledged, read by an ordered consumer. strand dev with its
// directory buckets and bbolt metastore (every flight fsynced before its
// ack), one stream of each class in -classes (by default Standard, then
// Express: each a system of its own), appended through an append
// session with up to 128 batches of 64 records unacknowledged, read by one
// read session from seq 0 to the tail. Both servers are left to go idle
// after the write (strand settles what it wrote) before the read is timed.
//
// Before the write, each system runs a latency phase (latency.go, on a
// stream of its own): one record per publish or append at -latency-rate
// MB/s for -latency, a consumer tailing the stream; ack and end-to-end
// latency count from each record's due time on the schedule.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/strandlog/strand/shared/client"
)

type result struct {
	System       string  `json:"system"`
	Round        int     `json:"round"`
	MB           float64 `json:"mb"`
	WriteMBps    float64 `json:"write_mb_per_s"`
	WriteCPUPerG float64 `json:"write_server_cpu_s_per_gb"`
	SettleCPU    float64 `json:"after_write_server_cpu_s"`
	ReadMBps     float64 `json:"read_mb_per_s"`
	ReadCPUPerG  float64 `json:"read_server_cpu_s_per_gb"`
	// The latency phase (latency.go), in ms from each record's due time.
	LatencyRateMBps float64 `json:"latency_rate_mb_per_s"`
	AckP50          float64 `json:"ack_p50_ms"`
	AckP99          float64 `json:"ack_p99_ms"`
	E2EP50          float64 `json:"end_to_end_p50_ms"`
	E2EP99          float64 `json:"end_to_end_p99_ms"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "natspeer:", err)
		os.Exit(1)
	}
}

func run() error {
	mb := flag.Int("mb", 1024, "MiB written and read back per system per round")
	size := flag.Int("record", 1024, "record body bytes (at least 8)")
	rounds := flag.Int("rounds", 2, "interleaved rounds (the order alternates)")
	strandBin := flag.String("strand", "strand", "the strand binary")
	natsBin := flag.String("nats-server", "nats-server", "the nats-server binary")
	dir := flag.String("dir", "", "scratch directory (default: a temporary one)")
	jsonOut := flag.String("json-out", "", "also write the results as JSON here")
	classes := flag.String("classes", "standard,express", "strand stream classes, each measured as a system of its own (comma-separated)")
	latRate := flag.Float64("latency-rate", 0.5, "the latency phase's offered MB/s, one record per publish or append (latency.go)")
	latFor := flag.Duration("latency", 10*time.Second, "how long the latency phase offers records (0: no latency phase)")
	per := flag.Int("batch", 64, "strand's records per append in the write (JetStream publishes one at a time; 1: per-record calls)")
	flag.Parse()
	if *size < 8 {
		return fmt.Errorf("-record %d: at least 8 bytes", *size)
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "natspeer")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	n := int(int64(*mb) << 20 / int64(*size))
	if *latRate <= 0 && *latFor > 0 {
		return fmt.Errorf("-latency-rate %v: want a positive rate", *latRate)
	}
	ln := int(*latRate * 1e6 * latFor.Seconds() / float64(*size))
	if *per < 1 || *per > 1000 {
		return fmt.Errorf("-batch %d: want 1 to 1000 records per append", *per)
	}
	ph := phases{n: n, latN: ln, size: *size, latRate: *latRate, per: *per}
	var results []result
	for r := 1; r <= *rounds; r++ {
		order := []string{"nats"}
		for _, c := range strings.Split(*classes, ",") {
			if c = strings.TrimSpace(c); c != "" {
				order = append(order, "strand-"+c)
			}
		}
		if r%2 == 0 {
			slices.Reverse(order)
		}
		for _, sys := range order {
			d := filepath.Join(*dir, fmt.Sprintf("%s-%d", sys, r))
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
			var res result
			var err error
			if sys == "nats" {
				res, err = runNATS(*natsBin, d, ph)
			} else {
				res, err = runStrand(*strandBin, d, strings.TrimPrefix(sys, "strand-"), ph)
			}
			if err != nil {
				return fmt.Errorf("%s round %d: %w", sys, r, err)
			}
			res.Round, res.MB = r, float64(int64(n)*int64(*size))/1e6
			results = append(results, res)
			if ln > 0 {
				fmt.Printf("%-15s round %d: at %.1f MB/s, ack p50 %.2f p99 %.2f ms, end to end p50 %.2f p99 %.2f ms (from the schedule)\n",
					sys, r, res.LatencyRateMBps, res.AckP50, res.AckP99, res.E2EP50, res.E2EP99)
			}
			fmt.Printf("%-15s round %d: write %.1f MB/s (%.2f server CPU-s/GB, %.2f CPU-s after), read %.1f MB/s (%.2f server CPU-s/GB)\n",
				sys, r, res.WriteMBps, res.WriteCPUPerG, res.SettleCPU, res.ReadMBps, res.ReadCPUPerG)
			_ = os.RemoveAll(d)
		}
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(results, "", "  ")
		return os.WriteFile(*jsonOut, append(b, '\n'), 0o644)
	}
	return nil
}

// server is a server process whose CPU time is read from /proc.
type server struct{ cmd *exec.Cmd }

func start(log, name string, args ...string) (*server, error) {
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child has its own descriptor
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &server{cmd: cmd}, nil
}

func (s *server) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// cpu is the process's user and system CPU seconds so far.
func (s *server) cpu() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// idle waits until the server has used under 2% of a core in each of 6
// consecutive seconds (strand settles every 2 s and trims every 5), at
// most 180 s, and returns the CPU seconds it used meanwhile.
func (s *server) idle() float64 {
	c0 := s.cpu()
	last, quiet := c0, 0
	for range 180 {
		time.Sleep(time.Second)
		c := s.cpu()
		if c-last < 0.02 {
			quiet++
		} else {
			quiet = 0
		}
		last = c
		if quiet >= 6 {
			break
		}
	}
	return last - c0
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func body(i, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint64(b, uint64(i))
	for j := 8; j < size; j++ {
		b[j] = byte(i + j)
	}
	return b
}

// check: record i must carry index i.
func check(i int, b []byte) error {
	if len(b) < 8 || binary.BigEndian.Uint64(b) != uint64(i) {
		return fmt.Errorf("record %d out of order or damaged", i)
	}
	return nil
}

// phases are what each system runs: the latency phase (latN records, at
// latRate MB/s; none when latN is 0), then n records written as fast as
// the server takes them (strand: per records an append) and read back;
// size bytes a record.
type phases struct {
	n, latN, size, per int
	latRate            float64
}

func runNATS(bin, dir string, ph phases) (result, error) {
	n, size := ph.n, ph.size
	res := result{System: "nats"}
	port, err := freePort()
	if err != nil {
		return res, err
	}
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "listen: 127.0.0.1:%d\nmax_payload: 8MB\njetstream {\n  store_dir: %q\n  sync_interval: always\n  max_file_store: 64GB\n}\n", port, filepath.Join(dir, "js")), 0o644); err != nil {
		return res, err
	}
	srv, err := start(filepath.Join(dir, "..", "nats.log"), bin, "-c", conf)
	if err != nil {
		return res, err
	}
	defer srv.stop()
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	var nc *nats.Conn
	for range 100 {
		if nc, err = nats.Connect(url); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return res, err
	}
	defer nc.Close()
	ctx := context.Background()
	pubErrs := 0
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096),
		jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { pubErrs++ }))
	if err != nil {
		return res, err
	}
	if ph.latN > 0 {
		l, err := natsLatency(ctx, js, ph.latN, size, ph.latRate)
		if err != nil {
			return res, fmt.Errorf("latency phase: %w", err)
		}
		l.into(&res, ph.latRate)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH", Subjects: []string{"bench"}, Storage: jetstream.FileStorage}); err != nil {
		return res, err
	}
	c0, t0 := srv.cpu(), time.Now()
	for i := range n {
		if _, err := js.PublishAsync("bench", body(i, size), jetstream.WithStallWait(time.Minute)); err != nil {
			return res, err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(10 * time.Minute):
		return res, errors.New("publishes not acked in 10 minutes")
	}
	if pubErrs > 0 {
		return res, fmt.Errorf("%d publishes failed", pubErrs)
	}
	gb := float64(int64(n)*int64(size)) / 1e9
	res.WriteMBps = gb * 1e3 / time.Since(t0).Seconds()
	res.WriteCPUPerG = (srv.cpu() - c0) / gb
	res.SettleCPU = srv.idle()

	cons, err := js.OrderedConsumer(ctx, "BENCH", jetstream.OrderedConsumerConfig{})
	if err != nil {
		return res, err
	}
	c0, t0 = srv.cpu(), time.Now()
	it, err := cons.Messages()
	if err != nil {
		return res, err
	}
	for i := range n {
		m, err := it.Next()
		if err != nil {
			return res, err
		}
		if err := check(i, m.Data()); err != nil {
			return res, err
		}
	}
	it.Stop()
	res.ReadMBps = gb * 1e3 / time.Since(t0).Seconds()
	res.ReadCPUPerG = (srv.cpu() - c0) / gb
	return res, nil
}

func runStrand(bin, dir, class string, ph phases) (result, error) {
	n, size := ph.n, ph.size
	res := result{System: "strand dev " + class}
	port, err := freePort()
	if err != nil {
		return res, err
	}
	data := filepath.Join(dir, "data")
	srv, err := start(filepath.Join(dir, "..", "strand.log"), bin, "dev", "--data-dir", data, "--addr", fmt.Sprintf("127.0.0.1:%d", port), "--log-level", "warn")
	if err != nil {
		return res, err
	}
	defer srv.stop()
	var token []byte
	for range 100 { // strand dev writes the admin token it made
		if token, err = os.ReadFile(filepath.Join(data, "token")); err == nil && len(token) > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return res, fmt.Errorf("strand dev's token: %w", err)
	}
	c, err := client.New(fmt.Sprintf("http://127.0.0.1:%d", port), client.WithToken(strings.TrimSpace(string(token))))
	if err != nil {
		return res, err
	}
	ctx := context.Background()
	for range 100 {
		if _, err = c.CreateStream(ctx, "bench", client.CreateOptions{Class: class}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return res, err
	}
	if ph.latN > 0 {
		l, err := strandLatency(ctx, c, class, ph.latN, size, ph.latRate)
		if err != nil {
			return res, fmt.Errorf("latency phase: %w", err)
		}
		l.into(&res, ph.latRate)
	}
	const window = 128
	per := ph.per
	c0, t0 := srv.cpu(), time.Now()
	s, err := c.OpenAppendSession(ctx, "bench")
	if err != nil {
		return res, err
	}
	recs := make([]client.Record, 0, per)
	sent, acked := 0, 0
	wait := func() error {
		a, ok := <-s.Acks()
		if !ok {
			return errors.New("append session ended")
		}
		acked++
		return a.Err
	}
	for i := 0; i < n; {
		recs = recs[:0]
		for ; len(recs) < per && i < n; i++ {
			recs = append(recs, client.Record{Body: body(i, size)})
		}
		if sent-acked >= window {
			if err := wait(); err != nil {
				return res, err
			}
		}
		if err := s.Submit(recs, client.AppendOptions{}); err != nil {
			return res, err
		}
		sent++
	}
	for acked < sent {
		if err := wait(); err != nil {
			return res, err
		}
	}
	s.Close()
	gb := float64(int64(n)*int64(size)) / 1e9
	res.WriteMBps = gb * 1e3 / time.Since(t0).Seconds()
	res.WriteCPUPerG = (srv.cpu() - c0) / gb
	res.SettleCPU = srv.idle()

	c0, t0 = srv.cpu(), time.Now()
	rs, err := c.OpenReadSession(ctx, "bench", client.FromSeq(0), client.SessionOptions{NoTail: true})
	if err != nil {
		return res, err
	}
	i := 0
	for rs.Next() {
		for _, r := range rs.Batch().Records {
			if r.Seq != uint64(i) {
				return res, fmt.Errorf("seq %d where %d was due", r.Seq, i)
			}
			if err := check(i, r.Body); err != nil {
				return res, err
			}
			i++
		}
	}
	if err := rs.Err(); err != nil {
		return res, err
	}
	rs.Close()
	if i != n {
		return res, fmt.Errorf("read %d records of %d", i, n)
	}
	res.ReadMBps = gb * 1e3 / time.Since(t0).Seconds()
	res.ReadCPUPerG = (srv.cpu() - c0) / gb
	return res, nil
}
