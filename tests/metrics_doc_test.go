package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/strandlog/strand/shared/api/strandv1"
	"github.com/strandlog/strand/shared/api/strandv1/strandv1connect"
	"github.com/strandlog/strand/shared/metastore"
	assembly "github.com/strandlog/strand/shared/node"
	"github.com/strandlog/strand/shared/objstore"
	"github.com/strandlog/strand/shared/star"
)

// docSeries is one row of docs/operations.md's metrics table.
type docSeries struct {
	name, typ string
	labels    []string // sorted
	awsOnly   bool     // "(AWS star only)": absent from a star without SQS
}

// wildcard reports whether the row names a family of series (go_*).
func (d docSeries) wildcard() bool { return strings.HasSuffix(d.name, "*") }

// operationsMetrics reads the metrics table of docs/operations.md: rows of
// | `series` | type | `label`, ... (or -) | what it tells |; a series
// ending in * (go_*) is every series of that prefix, of type mixed.
func operationsMetrics(t *testing.T) []docSeries {
	t.Helper()
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Metrics\n")
	if !ok {
		t.Fatal("docs/operations.md has no ## Metrics section")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	row := regexp.MustCompile("^\\| `([a-z_*]+)` \\| (counter|gauge|histogram|mixed) \\| ([^|]*) \\| (.*) \\|$")
	var out []docSeries
	for _, line := range strings.Split(sec, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		m := row.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("docs/operations.md: a metrics row not of the form | `series` | type | labels | what |: %q", line)
		}
		d := docSeries{name: m[1], typ: m[2], awsOnly: strings.Contains(m[4], "(AWS star only)")}
		for _, l := range strings.Split(m[3], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" && l != "-" {
				d.labels = append(d.labels, l)
			}
		}
		sort.Strings(d.labels)
		out = append(out, d)
	}
	if len(out) == 0 {
		t.Fatal("docs/operations.md: no metrics rows")
	}
	return out
}

// scraped is one family of an exposition: its type and label names.
type scraped struct {
	typ    string
	labels map[string]bool
}

// families reads the families of a text exposition.
func families(exp string) map[string]*scraped {
	out := map[string]*scraped{}
	var cur *scraped
	var curName string
	for _, line := range strings.Split(exp, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			curName, cur = f[2], &scraped{typ: f[3], labels: map[string]bool{}}
			out[curName] = cur
			continue
		}
		if cur == nil || line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		_, ls, ok := strings.Cut(line, "{")
		if !ok {
			continue
		}
		ls, _, _ = strings.Cut(ls, "}")
		for _, kv := range regexp.MustCompile(`([a-zA-Z_]+)="`).FindAllStringSubmatch(ls, -1) {
			if kv[1] != "le" || cur.typ != "histogram" {
				cur.labels[kv[1]] = true
			}
		}
	}
	return out
}

// TestMetricsMatchTheDocs scrapes a node's /metrics after appends (one
// bucket down for a while: PUT errors), reads, a read session and a
// refused call, and checks that every series docs/operations.md lists is
// there with its type and labels, and that every series there is listed.
func TestMetricsMatchTheDocs(t *testing.T) {
	ctx := context.Background()
	inj := objstore.NewInjector(1)
	var exp []objstore.Bucket
	for i := range 3 {
		b := objstore.Bucket(objstore.NewMem(fmt.Sprintf("x%d", i)))
		if i == 2 {
			b = objstore.WithFaults(b, inj)
		}
		exp = append(exp, b)
	}
	cfg := star.Defaults()
	cfg.Express.Buckets, cfg.Standard.Buckets = exp, []objstore.Bucket{objstore.NewMem("s0")}
	cfg.Standard.FlushDeadline = time.Millisecond
	n, err := assembly.Start(ctx, assembly.Config{Star: cfg, Meta: metastore.NewMem(), Settled: objstore.NewMem("settled"),
		Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", NoAuth: true,
		Kafka: assembly.KafkaConfig{Addr: "127.0.0.1:0"}}) // the Kafka front end's series too
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c := strandv1connect.NewStrandServiceClient(http.DefaultClient, n.Endpoint())
	if _, err := c.CreateStream(ctx, connect.NewRequest(&strandv1.CreateStreamRequest{Name: "m", StorageClass: strandv1.StorageClass_STORAGE_CLASS_EXPRESS})); err != nil {
		t.Fatal(err)
	}
	inj.SetDown(true)
	for i := range 3 {
		rec := &strandv1.AppendRecord{Body: []byte(fmt.Sprint(i))}
		if _, err := c.Append(ctx, connect.NewRequest(&strandv1.AppendRequest{Stream: "m", Records: []*strandv1.AppendRecord{rec}})); err != nil {
			t.Fatal(err)
		}
	}
	inj.SetDown(false)
	if _, err := c.Read(ctx, connect.NewRequest(&strandv1.ReadRequest{Stream: "m"})); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	ss, err := c.ReadSession(sctx, connect.NewRequest(&strandv1.ReadSessionRequest{Stream: "m"}))
	if err != nil {
		t.Fatal(err)
	}
	if !ss.Receive() {
		t.Fatal(ss.Err())
	}
	cancel()
	_ = ss.Close()
	if _, err := c.GetStream(ctx, connect.NewRequest(&strandv1.GetStreamRequest{Name: "missing"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("GetStream of a missing stream: %v", err)
	}

	res, err := http.Get(n.AdminURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s %v", res.Status, err)
	}
	got := families(string(body))
	docs := operationsMetrics(t)
	documented := func(name string) *docSeries {
		for i, d := range docs {
			if d.name == name || (d.wildcard() && strings.HasPrefix(name, strings.TrimSuffix(d.name, "*"))) {
				return &docs[i]
			}
		}
		return nil
	}
	names := make([]string, 0, len(got))
	for name := range got {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		f := got[name]
		d := documented(name)
		if d == nil {
			t.Errorf("%s (%s) is served but docs/operations.md does not list it", name, f.typ)
			continue
		}
		if d.wildcard() {
			continue
		}
		if f.typ != d.typ {
			t.Errorf("%s is a %s; docs/operations.md says %s", name, f.typ, d.typ)
		}
		var labels []string
		for l := range f.labels {
			labels = append(labels, l)
		}
		sort.Strings(labels)
		if !slices.Equal(labels, d.labels) {
			t.Errorf("%s has labels %v; docs/operations.md says %v", name, labels, d.labels)
		}
	}
	for _, d := range docs {
		present := false
		for name := range got {
			if name == d.name || (d.wildcard() && strings.HasPrefix(name, strings.TrimSuffix(d.name, "*"))) {
				present = true
			}
		}
		// The process collector's series are Linux's (others serve fewer or none).
		if !present && !d.awsOnly && (d.name != "process_*" || runtime.GOOS == "linux") {
			t.Errorf("docs/operations.md lists %s, which is not served", d.name)
		}
	}
}
