package stack

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// TLS and zone placement (docs/deploy.md, "TLS" and "Zone placement").

func TestPublicAPIRefusesPlainText(t *testing.T) {
	_, err := FromContext(ctx(map[string]any{CtxPublicAPI: true}))
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("public API without a certificate: %v, want ErrConfig", err)
	}
	for _, key := range []string{CtxPublicAPI, CtxCertificateARN, CtxAllowPlaintextPublic, "clear text"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("refusal %q does not mention %q", err, key)
		}
	}
	// NewStrand validates too: a Config built by hand cannot slip by.
	cfg := DefaultConfig()
	cfg.PublicAPI = true
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	if _, err := NewStrand(app, "Refused", cfg, repoRoot); !errors.Is(err, ErrConfig) {
		t.Fatalf("NewStrand with a clear-text public API: %v, want ErrConfig", err)
	}
	// Explicit consent, or a certificate, or an internal load balancer.
	for _, ok := range []map[string]any{
		{CtxPublicAPI: true, CtxAllowPlaintextPublic: "true"},
		{CtxPublicAPI: "true", CtxCertificateARN: testCertificate, CtxAPIHostname: "api.example.com"},
		{CtxPublicAPI: false},
		{CtxCertificateARN: testCertificate, CtxAPIHostname: "strand.internal.example"},
	} {
		if _, err := FromContext(ctx(ok)); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	for i, bad := range []map[string]any{
		{CtxPublicAPI: true, CtxAllowPlaintextPublic: "false"},
		{CtxPublicAPI: true, CtxAllowPlaintextPublic: "perhaps"},
		{CtxCertificateARN: testCertificate},                                                                     // no host name to verify
		{CtxCertificateARN: "arn:aws:acm:eu-west-1:111111111111:certificate/ab-12", CtxAPIHostname: "a.example"}, // other region
		{CtxCertificateARN: "arn:aws:iam::111111111111:server-certificate/x", CtxAPIHostname: "a.example"},
	} {
		if _, err := FromContext(ctx(bad)); !errors.Is(err, ErrConfig) {
			t.Errorf("case %d %v: %v, want ErrConfig", i, bad, err)
		}
	}
}

func TestTLSListeners(t *testing.T) {
	s := withTLS(t)
	listeners := s.ofType("AWS::ElasticLoadBalancingV2::Listener")
	if len(listeners) != s.cfg.StarCount+1 {
		t.Fatalf("%d listeners, want %d", len(listeners), s.cfg.StarCount+1)
	}
	ports := map[float64]bool{}
	for id, r := range listeners {
		p := props(r)
		ports[p["Port"].(float64)] = true
		if p["Protocol"] != "TLS" || p["AlpnPolicy"] == nil || js(p["AlpnPolicy"]) != `["HTTP2Preferred"]` {
			t.Errorf("%s: protocol %v ALPN %v, want TLS with HTTP2Preferred", id, p["Protocol"], p["AlpnPolicy"])
		}
		if js(p["Certificates"]) != fmt.Sprintf(`[{"CertificateArn":%q}]`, testCertificate) {
			t.Errorf("%s: certificates %s", id, js(p["Certificates"]))
		}
		if p["SslPolicy"] != "ELBSecurityPolicy-TLS13-1-2-2021-06" {
			t.Errorf("%s: SSL policy %v", id, p["SslPolicy"])
		}
	}
	for _, port := range []int{APIPort, StarListenerPort(0), StarListenerPort(1)} {
		if !ports[float64(port)] {
			t.Errorf("no listener on %d", port)
		}
	}
	// TLS ends at the load balancer: the tasks get TCP.
	for id, r := range s.ofType("AWS::ElasticLoadBalancingV2::TargetGroup") {
		if p := props(r); p["Protocol"] != "TCP" || p["Port"] != float64(APIPort) {
			t.Errorf("%s: target group %v/%v, want TCP/%d", id, p["Protocol"], p["Port"], APIPort)
		}
	}
	assert(t, "public", func() {
		s.tmpl.HasResourceProperties(jsii.String("AWS::ElasticLoadBalancingV2::LoadBalancer"), map[string]any{"Scheme": "internet-facing"})
	})
	assert(t, "ApiUrl", func() {
		s.tmpl.HasOutput(jsii.String("ApiUrl"), map[string]any{
			"Value": "https://api.example.com:4780",
		})
	})
	// Without a certificate nothing changes: TCP passthrough.
	for _, d := range []*synthesized{defaults(t), threeStars(t)} {
		for id, r := range d.ofType("AWS::ElasticLoadBalancingV2::Listener") {
			if p := props(r); p["Protocol"] != "TCP" || p["Certificates"] != nil || p["AlpnPolicy"] != nil {
				t.Errorf("%d stars, %s: %v, want plain TCP", d.cfg.StarCount, id, p)
			}
		}
	}
}

func TestWithDefaultAccount(t *testing.T) {
	env := func(string) string { return "222222222222" }
	names := []any{"us-east-1a", "us-east-1b", "us-east-1c"}
	c, err := FromContext(WithDefaultAccount(ctx(map[string]any{CtxExpressAZNames: names}), env))
	if err != nil || c.Account != "222222222222" {
		t.Fatalf("names without strand:account: account %q, %v; want the CLI's", c.Account, err)
	}
	c, err = FromContext(WithDefaultAccount(ctx(map[string]any{CtxExpressAZNames: names, CtxAccount: "333333333333"}), env))
	if err != nil || c.Account != "333333333333" {
		t.Fatalf("strand:account wins: %q, %v", c.Account, err)
	}
	// No names: the stack stays account-agnostic as before.
	if c, err := FromContext(WithDefaultAccount(ctx(nil), env)); err != nil || c.Account != "" {
		t.Fatalf("no names: account %q, %v; want none", c.Account, err)
	}
	// Names and no account anywhere: refused, saying what to set.
	_, err = FromContext(WithDefaultAccount(ctx(map[string]any{CtxExpressAZNames: names}), func(string) string { return "" }))
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), CtxAccount) {
		t.Fatalf("names without any account: %v", err)
	}
}

// subnetZones maps subnet logical ids to their AZ name, by subnet group
// ("public", "private").
func subnetZones(s *synthesized) map[string]string {
	out := map[string]string{}
	for id, r := range s.ofType("AWS::EC2::Subnet") {
		out[id] = js(props(r)["AvailabilityZone"])
	}
	return out
}

// serviceSubnets returns each star's task subnets (logical ids).
func serviceSubnets(t *testing.T, s *synthesized) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for id, r := range s.ofType("AWS::ECS::Service") {
		p := props(r)
		nc := p["NetworkConfiguration"].(map[string]any)["AwsvpcConfiguration"].(map[string]any)
		var ids []string
		for _, sn := range nc["Subnets"].([]any) {
			ref, ok := sn.(map[string]any)["Ref"].(string)
			if !ok {
				t.Fatalf("%s: subnet %v is not a Ref", id, sn)
			}
			ids = append(ids, ref)
		}
		out[fmt.Sprint(p["ServiceName"])] = ids
	}
	return out
}

func TestZonePlacementAligned(t *testing.T) {
	s := aligned(t)
	zones := subnetZones(s)
	// The VPC spans exactly the Express zones: public and private
	// subnet in each.
	count := map[string]int{}
	for _, z := range zones {
		count[z]++
	}
	if len(count) != 3 {
		t.Fatalf("subnets in zones %v, want the three Express zones", count)
	}
	for _, n := range s.cfg.ExpressAZNames {
		if count[fmt.Sprintf("%q", n)] != 2 {
			t.Errorf("zone %s has %d subnets, want 2 (public, private): %v", n, count[fmt.Sprintf("%q", n)], count)
		}
	}
	// star-i in Express zone i mod 3 and, for its standby, the next
	// Express zone, in private subnets: ECS spreads the two tasks over
	// the two zones.
	subnets := serviceSubnets(t, s)
	for i := range s.cfg.StarCount {
		got := subnets[StarID(i)]
		want := fmt.Sprintf("%q", s.cfg.ExpressAZNames[i%3])
		next := fmt.Sprintf("%q", s.cfg.ExpressAZNames[(i+1)%3])
		if len(got) != 2 || zones[got[0]] == zones[got[1]] || !strings.Contains(got[0], "private") || !strings.Contains(got[1], "private") ||
			(zones[got[0]] != want && zones[got[1]] != want) || (zones[got[0]] != next && zones[got[1]] != next) {
			t.Errorf("%s: subnets %v (zones %v), want the private subnets in %s and %s", StarID(i), got, zones, want, next)
			continue
		}
		if zones[got[0]] != want { // the star's own zone first below
			got[0], got[1] = got[1], got[0]
		}
		// An output reports the zone id CloudFormation found, to
		// compare with the Express zone the name stood for.
		assert(t, fmt.Sprintf("Star%dZoneId", i), func() {
			s.tmpl.HasOutput(jsii.String(fmt.Sprintf("Star%dZoneId", i)), map[string]any{
				"Value":       map[string]any{"Fn::GetAtt": []any{got[0], "AvailabilityZoneId"}},
				"Description": assertions.Match_StringLikeRegexp(jsii.String("must be " + s.cfg.ExpressAZs[i%3])),
			})
		})
	}
	if subnets[StarID(0)][0] != subnets[StarID(3)][0] {
		t.Errorf("star-3 not in star-0's zone: %v", subnets)
	}
	assert(t, "ZonePlacement", func() {
		s.tmpl.HasOutput(jsii.String("ZonePlacement"), map[string]any{
			"Value": "aligned: star-0 in us-east-1c (use1-az4), star-1 in us-east-1a (use1-az5), star-2 in us-east-1d (use1-az6), star-3 in us-east-1c (use1-az4)",
		})
	})
	warnings := assertions.Annotations_FromStack(s.stack).FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("not aligned")))
	if warnings != nil && len(*warnings) > 0 {
		t.Errorf("aligned stack warns: %v", *warnings)
	}
	// The load balancer spans all three zones (cross-zone on).
	for _, r := range s.ofType("AWS::ElasticLoadBalancingV2::LoadBalancer") {
		if n := len(props(r)["Subnets"].([]any)); n != 3 {
			t.Errorf("load balancer in %d subnets, want 3", n)
		}
	}
}

func TestZonePlacementNotAligned(t *testing.T) {
	s := defaults(t)
	assert(t, "warning", func() {
		assertions.Annotations_FromStack(s.stack).HasWarning(jsii.String("/Strand"),
			assertions.Match_StringLikeRegexp(jsii.String("not aligned.*"+CtxExpressAZNames)))
	})
	assert(t, "ZonePlacement", func() {
		s.tmpl.HasOutput(jsii.String("ZonePlacement"), map[string]any{
			"Value": assertions.Match_StringLikeRegexp(jsii.String("^not aligned: ")),
		})
	})
	// Today's behaviour: an account-agnostic stack, a 2-zone VPC from
	// Fn::GetAZs, the task in any private subnet, no zone-id outputs.
	zones := subnetZones(s)
	if len(zones) != 4 {
		t.Errorf("%d subnets, want 4 (2 zones x public, private)", len(zones))
	}
	for id, z := range zones {
		if !strings.Contains(z, "Fn::GetAZs") {
			t.Errorf("%s: zone %s, want Fn::GetAZs", id, z)
		}
	}
	got := serviceSubnets(t, s)[StarID(0)]
	slices.Sort(got)
	if len(got) != 2 || !strings.Contains(got[0], "private") || !strings.Contains(got[1], "private") {
		t.Errorf("star-0 subnets %v, want both private subnets", got)
	}
	if outs := s.tmpl.FindOutputs(jsii.String("Star0ZoneId"), nil); outs != nil && len(*outs) > 0 {
		t.Errorf("zone-id output without placement: %v", *outs)
	}
}

// CDK checks the names against the account's zone lookup: a name the
// account does not have fails synthesis.
func TestZoneNamesCheckedAgainstAccount(t *testing.T) {
	cfg, err := FromContext(ctx(map[string]any{
		CtxAccount: "111111111111", CtxExpressAZNames: "us-east-1a,us-east-1b,us-east-1c",
	}))
	if err != nil {
		t.Fatal(err)
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &map[string]any{
		azLookup: []any{"us-east-1a", "us-east-1b", "us-east-1d"},
	}})
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), "must be a subset") {
			t.Fatalf("us-east-1c, which the account lacks: recovered %v, want the VPC's zone check", r)
		}
	}()
	if _, err := NewStrand(app, "Unknown", cfg, repoRoot); err != nil {
		t.Fatal(err)
	}
}
