// Package bundle builds strand's deployable binaries for AWS's arm64
// (Graviton) runtimes and checks what it built, without Docker:
//
//   - Bootstrap builds functions/<name> into infra/build/<name>/bootstrap
//     for Lambda's provided.al2023 runtime on arm64: CGO_ENABLED=0
//     GOOS=linux GOARCH=arm64 go build -tags lambda.norpc -trimpath
//     -buildvcs=false -ldflags='-s -w' (reproducible: a commit that
//     changes no Go source builds the same bytes). The CDK app calls it for every function before it
//     makes the function's asset, so `cdk synth`/`cdk deploy` never ship a
//     missing or stale bootstrap: the go command rebuilds whatever changed
//     (its build cache makes an unchanged build a check, not a compile), and
//     a function that does not build stops synthesis with the compiler's
//     error. Each (repository, function) is built once per process.
//   - ContextSources lists what a Dockerfile's COPY instructions read
//     from the build context, and ContextExcludes turns that list into
//     docker-ignore patterns that keep only it and the Dockerfile: the
//     star image's asset (infra/stack NewStarImage) then changes only when
//     something the image is built from changes.
//   - CheckELF refuses a file that is not a linux/arm64 (EM_AARCH64)
//     executable ELF; Bootstrap applies it to what it built.
//   - Image builds an image from a Dockerfile (the star's,
//     functions/star/Dockerfile) for a platform into an OCI image layout,
//     offline: it runs the build stages the final stage copies from on this
//     machine (ARGs as BuildKit sets them: a default wins over the automatic
//     platform value), and writes the final stage's copied files as one
//     layer with its config; the base image is named, not pulled
//     (docs/adr/0040). ParseDockerfile reads the subset of instructions it
//     follows and refuses the rest (ErrDockerfile). ReadLayout reads a
//     layout back, checking every blob against its digest and size.
//
// Errors are wrapped with the function or file they concern; ErrNotArm64
// marks a binary of the wrong architecture or format.
package bundle
