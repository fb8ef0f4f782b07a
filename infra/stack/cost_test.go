package stack

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Monthly list prices (us-east-1, arm64) of docs/deploy.md's price table,
// and 730 hours a month.
const (
	hoursPerMonth   = 730.0
	fargateVCPUHour = 0.03238
	fargateGBHour   = 0.00356
	nlbHour         = 0.0225
	natHour         = 0.045
	ipv4Hour        = 0.005
	alarmMonth      = 0.10
	dashboardMonth  = 3.0
	metricMonth     = 0.30
	ddbWriteUnit    = 0.625 / 1e6
	ddbReadUnit     = 0.125 / 1e6
)

// The lease's calls at its defaults (shared/lease: TTL 3 s, a renewal every
// TTL/4, a standby read every TTL/10), one write or read unit each.
const (
	leaseRenewSeconds = 0.75
	leasePollSeconds  = 0.3
)

// Idle estimates docs/deploy.md gives for what the template does not fix:
// Lambda sweeps and SQS polling, storage at rest, the agent's log ingest,
// and the observability defaults (Container Insights' metrics and
// performance log, flow logs).
const (
	idleLambdaSQS     = 1.0
	idleStorage       = 0.10
	idleAgentLogs     = 0.10
	idleObservability = 7.0
)

// idleCost is the monthly cost of a stack with no traffic, from its
// template: Fargate tasks by their size and count, load balancers, NAT
// gateways, public IPv4 addresses (Elastic IPs, and tasks with public
// IPs), alarms, dashboards, and the custom metrics the agent publishes.
func idleCost(s *synthesized) (total float64, rows map[string]float64) {
	rows = map[string]float64{}
	for _, r := range s.ofType("AWS::ECS::Service") {
		p := props(r)
		td := s.res[p["TaskDefinition"].(map[string]any)["Ref"].(string)]
		cpu, _ := strconv.ParseFloat(props(td)["Cpu"].(string), 64)
		mem, _ := strconv.ParseFloat(props(td)["Memory"].(string), 64)
		n := p["DesiredCount"].(float64)
		rows["fargate"] += n * hoursPerMonth * (cpu/1024*fargateVCPUHour + mem/1024*fargateGBHour)
		if strings.Contains(js(p["NetworkConfiguration"]), `"AssignPublicIp":"ENABLED"`) {
			rows["ipv4"] += n * hoursPerMonth * ipv4Hour
		}
	}
	if s.cfg.Standby {
		rows["lease"] = float64(s.cfg.StarCount) * hoursPerMonth * 3600 * (ddbWriteUnit/leaseRenewSeconds + ddbReadUnit/leasePollSeconds)
	}
	rows["nlb"] = float64(len(s.ofType("AWS::ElasticLoadBalancingV2::LoadBalancer"))) * hoursPerMonth * nlbHour
	rows["nat"] = float64(len(s.ofType("AWS::EC2::NatGateway"))) * hoursPerMonth * natHour
	rows["ipv4"] += float64(len(s.ofType("AWS::EC2::EIP"))) * hoursPerMonth * ipv4Hour
	// The agent publishes backlog age per star, and stalls per cause and
	// per star and cause (agentConfig).
	metrics := s.cfg.StarCount + len(StallCauses)*(1+s.cfg.StarCount)
	dashboards := len(s.ofType("AWS::CloudWatch::Dashboard"))
	rows["cloudwatch"] = float64(len(s.ofType("AWS::CloudWatch::Alarm")))*alarmMonth + float64(dashboards)*dashboardMonth +
		float64(metrics)*metricMonth + idleAgentLogs
	rows["estimates"] = idleLambdaSQS + idleStorage + idleObservability
	for _, v := range rows {
		total += v
	}
	return total, rows
}

// TestIdleCostMatchesDocs: docs/deploy.md's "Per month idle" rows for the
// template's resources and its total are what the defaults' template costs
// at the page's prices (the page said $95 with a 2 GiB task; the template
// sizes 3 GiB).
func TestIdleCostMatchesDocs(t *testing.T) {
	s := defaults(t)
	total, rows := idleCost(s)
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"fargate":    fmt.Sprintf("| $%.2f |", rows["fargate"]),
		"nlb":        fmt.Sprintf("| Network Load Balancer | $%.2f |", rows["nlb"]),
		"nat":        fmt.Sprintf("| NAT gateway | $%.2f |", rows["nat"]),
		"lease":      fmt.Sprintf("read units) | $%.2f |", rows["lease"]),
		"cloudwatch": fmt.Sprintf("about $%.2f", rows["cloudwatch"]),
		"total":      fmt.Sprintf("| **total** | **about $%d** |", int(math.Round(total))),
	}
	for k, w := range want {
		if !strings.Contains(string(doc), w) {
			t.Errorf("docs/deploy.md lacks the %s figure %q (rows %v)", k, w, rows)
		}
	}
	t.Logf("idle: $%.2f a month: %v", total, rows)
}
