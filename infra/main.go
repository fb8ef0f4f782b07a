// Command infra is strand's CDK app; cdk.json at the repository root runs
// it (`go run -C infra .`). See docs/deploy.md.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/strandlog/strand/infra/stack"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		os.Exit(1)
	}
}

func run() error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	root, err := stack.FindRepoRoot(wd)
	if err != nil {
		return err
	}
	if err := stack.SetupEnv(root); err != nil {
		return err
	}
	// The CLI runs the app from the repository root (cdk.json) and passes a
	// relative output dir; `go run -C infra` moved us, so anchor it.
	if out := os.Getenv("CDK_OUTDIR"); out != "" && !filepath.IsAbs(out) {
		if err := os.Setenv("CDK_OUTDIR", filepath.Join(root, out)); err != nil {
			return err
		}
	}
	// The jsii kernel client is created (with the environment of that
	// moment) while packages initialise; close it so the next call starts
	// a kernel that sees the settings above.
	jsii.Close()
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	get := func(k string) any { return app.Node().TryGetContext(jsii.String(k)) }
	cfg, err := stack.FromContext(stack.WithDefaultAccount(get, os.Getenv))
	if err != nil {
		return err
	}
	if _, err := stack.NewStrand(app, cfg.StackName, cfg, root); err != nil {
		return err
	}
	app.Synth(nil)
	return nil
}
