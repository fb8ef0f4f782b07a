package stack

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// nagReport reads cdk-nag's AwsSolutions report from the synthesized
// stack's cloud assembly: rule, resource, compliance, exception reason.
func nagReport(t *testing.T, s *synthesized) [][]string {
	t.Helper()
	reports, err := filepath.Glob(filepath.Join(s.outdir, "AwsSolutions-*NagReport.csv"))
	if err != nil || len(reports) != 1 {
		t.Fatalf("cdk-nag reports %v (%v), want one: is the AwsSolutions aspect applied?", reports, err)
	}
	f, err := os.Open(reports[0])
	if err != nil {
		t.Fatalf("no cdk-nag report (is the AwsSolutions aspect applied?): %v", err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) < 2 || rows[0][0] != "Rule ID" || rows[0][2] != "Compliance" {
		t.Fatalf("cdk-nag report has %d rows, header %v", len(rows), rows[0])
	}
	return rows[1:]
}

// TestNagAwsSolutions: every synthesized configuration passes cdk-nag's
// AwsSolutions pack. Each suppression sits in the stack code next to its
// resource, with its reason (nag.go); a suppression without a reason of
// substance fails here too.
func TestNagAwsSolutions(t *testing.T) {
	seen := map[string]int{}
	for _, s := range []*synthesized{defaults(t), threeStars(t), withTLS(t), aligned(t)} {
		var bad []string
		for _, r := range nagReport(t, s) {
			rule, res, comp, reason := r[0], r[1], r[2], r[3]
			seen[comp]++
			switch comp {
			case "Compliant", "N/A":
			case "Suppressed":
				if len(reason) < 40 {
					bad = append(bad, rule+" "+res+": suppressed with a thin reason: "+reason)
				}
			default:
				bad = append(bad, rule+" "+res+": "+comp+": "+r[len(r)-1])
			}
		}
		sort.Strings(bad)
		for _, b := range bad {
			t.Errorf("%d stars: %s", s.cfg.StarCount, b)
		}
	}
	if seen["Compliant"] < 100 {
		t.Errorf("cdk-nag judged only %d rules compliant (%v): is the pack running?", seen["Compliant"], seen)
	}
	t.Logf("cdk-nag AwsSolutions: %v", seen)
}
