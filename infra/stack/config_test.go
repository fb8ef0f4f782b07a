package stack

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func ctx(m map[string]any) Lookup { return func(k string) any { return m[k] } }

func TestFromContextDefaults(t *testing.T) {
	c, err := FromContext(ctx(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.StackName != DefaultStackName || c.Region != "us-east-1" || len(c.ExpressAZs) != 3 || c.StarCount != 1 || !c.DeletionProtection {
		t.Fatalf("defaults: %+v", c)
	}
	if c.MemoryBufferMiB != 256 || c.ExpressMemoryBufferMiB != 32 {
		t.Fatalf("memory budgets: %d/%d, want 256/32 (the star's flag defaults)", c.MemoryBufferMiB, c.ExpressMemoryBufferMiB)
	}
	// Pools 256+32, overhead 512, window cache 1536, dedupe tables 192
	// (262,144 producers x 768 B), agent 256, backlog 2x64 = 2912 MiB:
	// the smallest 1 vCPU size that holds it is 3 GiB.
	if c.WindowCacheMiB != DefaultWindowCacheMiB || c.DedupeMaxProducers != 262144 || DedupeMiB(c) != 192 {
		t.Fatalf("window cache %d MiB, dedupe %d producers (%d MiB)", c.WindowCacheMiB, c.DedupeMaxProducers, DedupeMiB(c))
	}
	if c.TaskMemoryMiB != 3072 {
		t.Fatalf("derived task memory %d, want 3072", c.TaskMemoryMiB)
	}
}

func TestFromContextOverrides(t *testing.T) {
	// cdk.json gives JSON types; `-c key=value` gives strings.
	c, err := FromContext(ctx(map[string]any{
		CtxRegion:               "eu-north-1",
		CtxExpressAZs:           "eun1-az1, eun1-az2,eun1-az3",
		CtxStarCount:            "3",
		CtxMemoryBufferMiB:      float64(2048),
		CtxTaskCPU:              "2048",
		CtxDeletionProtection:   "false",
		CtxRetentionDays:        float64(7),
		CtxNatGateways:          "0",
		CtxPublicAPI:            true,
		CtxAllowPlaintextPublic: "true",
		CtxPassIndex:            "true",
		CtxDedupeMaxProducers:   "1000000",
		CtxStackName:            "Strand-Staging",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.StackName != "Strand-Staging" || c.Region != "eu-north-1" || c.ExpressAZs[1] != "eun1-az2" || c.StarCount != 3 || c.DeletionProtection ||
		c.RetentionDays != 7 || c.NatGateways != 0 || !c.PublicAPI || !c.AllowPlaintextPublicAPI || !c.PassIndex {
		t.Fatalf("overrides not applied: %+v", c)
	}
	// 2048+32+512+1536+733 (1,000,000 producers x 768 B)+256+128 =
	// 5245 MiB -> 6 GiB is the smallest 2 vCPU size above it.
	if DedupeMiB(c) != 733 || c.TaskMemoryMiB != 6144 {
		t.Fatalf("dedupe %d MiB, task memory %d, want 733 and 6144", DedupeMiB(c), c.TaskMemoryMiB)
	}
	c, err = FromContext(ctx(map[string]any{CtxExpressAZs: []any{"use1-az6", "use1-az5", "use1-az4"}}))
	if err != nil || c.ExpressAZs[2] != "use1-az4" {
		t.Fatalf("list form: %v %v", c.ExpressAZs, err)
	}
}

func TestFromContextRejects(t *testing.T) {
	bad := []map[string]any{
		{CtxExpressAZs: "use1-az4,use1-az5"},
		{CtxExpressAZs: "use1-az4,use1-az4,use1-az5"},
		{CtxExpressAZs: "us-east-1a,us-east-1b,us-east-1c"},
		{CtxStarCount: 0},
		{CtxStarCount: float64(MaxStars + 1)},
		{CtxStarCount: "two"},
		{CtxMemoryBufferMiB: float64(1.5)},
		{CtxTaskCPU: 1000},
		{CtxTaskCPU: 256, CtxMemoryBufferMiB: float64(4096)}, // fits no 256-CPU size
		{CtxTaskMemoryMiB: 2048, CtxMemoryBufferMiB: 2000},
		// 256+32+512 fit 1 GiB, but not with the 256 MiB agent sidecar
		// and 2x64 MiB of backlog.
		{CtxTaskCPU: 256, CtxTaskMemoryMiB: 1024},
		{CtxRetentionDays: 10},
		{CtxDeletionProtection: "maybe"},
		{CtxPassIndex: "on"},
		{CtxBucketPrefix: "Strand_Prod"},
		{CtxRegion: "mars"},
		{CtxNatGateways: 4},
		{CtxAlarmEmail: "nobody"},
		{CtxAccount: "12345"},
		{CtxAPIHostname: "API.example.com"},
		{CtxExpressAZNames: "us-east-1a,us-east-1b", CtxAccount: "111111111111"},
		{CtxExpressAZNames: "us-east-1a,us-east-1b,us-west-2c", CtxAccount: "111111111111"},
		{CtxExpressAZNames: "use1-az4,use1-az5,use1-az6", CtxAccount: "111111111111"},
		{CtxExpressAZNames: "us-east-1a,us-east-1b,us-east-1a", CtxAccount: "111111111111"},
		{CtxStackName: "1strand"}, {CtxStackName: "strand_prod"}, {CtxStackName: ""}, {CtxStackName: "S" + strings.Repeat("x", 128)},
	}
	for i, m := range bad {
		_, err := FromContext(ctx(m))
		if !errors.Is(err, ErrConfig) {
			t.Errorf("case %d %v: got %v, want ErrConfig", i, m, err)
		}
	}
}

func TestFargateSizes(t *testing.T) {
	for _, tc := range []struct {
		cpu, need, want int
		ok              bool
	}{
		{256, 800, 1024, true}, {512, 800, 1024, true}, {1024, 800, 2048, true},
		{1024, 2049, 3072, true}, {4096, 8000, 8192, true}, {256, 3000, 0, false}, {300, 1, 0, false},
		// 8 vCPU: 4 GiB steps; 16 vCPU: 8 GiB steps.
		{8192, 16385, 20480, true}, {8192, 61440, 61440, true}, {8192, 61441, 0, false},
		{16384, 32769, 40960, true}, {16384, 122880, 122880, true}, {16384, 122881, 0, false},
	} {
		got, err := SmallestFargateMemory(tc.cpu, tc.need)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("SmallestFargateMemory(%d, %d) = %d, %v; want %d ok=%v", tc.cpu, tc.need, got, err, tc.want, tc.ok)
		}
		if tc.ok && !ValidFargateSize(tc.cpu, got) {
			t.Errorf("%d/%d not valid", tc.cpu, got)
		}
	}
	for _, bad := range [][2]int{{8192, 17408}, {8192, 60416}, {16384, 33792}, {16384, 39936}, {4096, 31744}} {
		if ValidFargateSize(bad[0], bad[1]) {
			t.Errorf("%d/%d accepted: not a Fargate task size", bad[0], bad[1])
		}
	}
}

func TestAgentConfig(t *testing.T) {
	cw, prom := agentConfig("star-2", "/strand/metrics")
	var doc struct {
		Logs struct {
			MetricsCollected struct {
				Prometheus struct {
					LogGroup string `json:"log_group_name"`
					EMF      struct {
						Namespace string `json:"metric_namespace"`
						Decls     []struct {
							Dimensions [][]string `json:"dimensions"`
							Selectors  []string   `json:"metric_selectors"`
						} `json:"metric_declaration"`
					} `json:"emf_processor"`
				} `json:"prometheus"`
			} `json:"metrics_collected"`
		} `json:"logs"`
	}
	if err := json.Unmarshal([]byte(cw), &doc); err != nil {
		t.Fatalf("agent config is not JSON: %v\n%s", err, cw)
	}
	p := doc.Logs.MetricsCollected.Prometheus
	if p.LogGroup != "/strand/metrics" || p.EMF.Namespace != MetricsNamespace || len(p.EMF.Decls) != 2 {
		t.Fatalf("agent config: %+v", p)
	}
	// The alarms read backlog age by star and stalls by cause: the agent
	// must publish exactly those dimension sets.
	if p.EMF.Decls[0].Selectors[0] != "^"+MetricBacklogAge+"$" || p.EMF.Decls[0].Dimensions[0][0] != "star" {
		t.Fatalf("backlog declaration: %+v", p.EMF.Decls[0])
	}
	if p.EMF.Decls[1].Selectors[0] != "^"+MetricStalls+"$" || p.EMF.Decls[1].Dimensions[0][0] != "cause" {
		t.Fatalf("stall declaration: %+v", p.EMF.Decls[1])
	}
	for _, want := range []string{"job_name: strand", "localhost:9090", "star: star-2"} {
		if !strings.Contains(prom, want) {
			t.Fatalf("prometheus config lacks %q:\n%s", want, prom)
		}
	}
}
