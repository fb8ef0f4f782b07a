package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// ImageConfig is the part of an OCI image configuration strand sets.
type ImageConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		Entrypoint   []string            `json:"Entrypoint,omitempty"`
		Cmd          []string            `json:"Cmd,omitempty"`
		Env          []string            `json:"Env,omitempty"`
		User         string              `json:"User,omitempty"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts,omitempty"`
		Labels       map[string]string   `json:"Labels,omitempty"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// BaseAnnotation names, on the image manifest, the base image of the final
// stage, which the offline build does not pull (docs/adr/0040).
const BaseAnnotation = "org.opencontainers.image.base.name"

// Image builds an image from the Dockerfile at repoRoot/dockerfile for
// platform ("linux/arm64") without a container engine, and writes it as an
// OCI image layout into out (docs/adr/0040):
//
//   - Every stage that the final stage copies from (COPY --from=<stage>) is
//     run on this machine in a scratch directory that stands for the
//     stage's file system: ARGs as BuildKit sets them (declareArg), WORKDIR,
//     COPY from the build context (repoRoot), and RUN with sh -c in the
//     working directory, the ARGs and ENVs in its environment. The stage's
//     FROM image is not used: its tools must be on this machine (the star's
//     stage needs only go). Absolute paths that the final stage copies out
//     (/out/star) are rewritten to the scratch directory in RUN commands.
//   - The final stage's FROM image is not pulled either: the layout holds
//     one layer with the files its COPYs put there, and the config
//     (platform, ENTRYPOINT, CMD, EXPOSE, ENV, USER, LABEL); the base's
//     name is recorded in the manifest's BaseAnnotation. That is what CI
//     can check offline: the binary's format and architecture, that it
//     starts, the entry point and ports. The base's own files (CA
//     certificates, tzdata, passwd) are not in it.
func Image(repoRoot, dockerfile, platform, out string) error {
	targetOS, targetArch, ok := strings.Cut(platform, "/")
	if !ok {
		return fmt.Errorf("bundle: platform %q is not os/arch", platform)
	}
	f, err := os.Open(filepath.Join(repoRoot, dockerfile))
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	stages, err := ParseDockerfile(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("bundle: %s: %w", dockerfile, err)
	}
	final := stages[len(stages)-1]
	auto := automaticArgs(runtime.GOOS, runtime.GOARCH, targetOS, targetArch)
	scratch, err := os.MkdirTemp("", "strand-image-")
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	defer os.RemoveAll(scratch)

	// Which stages' outputs the final stage takes, and which of their paths.
	wanted := map[string][]string{}
	for _, in := range final.Instrs {
		if from := in.Flags["from"]; in.Cmd == "COPY" && from != "" {
			f := strings.Fields(in.Args)
			wanted[from] = append(wanted[from], f[:len(f)-1]...)
		}
	}
	roots := map[string]string{}
	for i, st := range stages[:len(stages)-1] {
		if _, ok := wanted[st.Name]; !ok {
			continue
		}
		root := filepath.Join(scratch, fmt.Sprintf("stage%d", i))
		if err := runStage(repoRoot, root, st, auto, wanted[st.Name]); err != nil {
			return fmt.Errorf("bundle: %s: stage %q: %w", dockerfile, st.Name, err)
		}
		roots[st.Name] = root
	}

	cfg := ImageConfig{Architecture: targetArch, OS: targetOS}
	cfg.RootFS.Type = "layers"
	var files []layerFile
	args := map[string]string{}
	for _, in := range final.Instrs {
		switch in.Cmd {
		case "ARG", "ENV":
			if e := argOrEnv(in, args, auto); e != "" {
				cfg.Config.Env = append(cfg.Config.Env, e)
			}
		case "COPY":
			from := in.Flags["from"]
			root, ok := roots[from]
			if !ok {
				return fmt.Errorf("bundle: %s: line %d: the final stage copies only from build stages", dockerfile, in.Line)
			}
			f := strings.Fields(in.Args)
			dst := f[len(f)-1]
			for _, src := range f[:len(f)-1] {
				b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(src)))
				if err != nil {
					return fmt.Errorf("bundle: %s: line %d: %w", dockerfile, in.Line, err)
				}
				name := dst
				if strings.HasSuffix(dst, "/") {
					name = dst + path.Base(src)
				}
				files = append(files, layerFile{name: strings.TrimPrefix(name, "/"), body: b, mode: 0o755})
			}
		case "EXPOSE":
			if cfg.Config.ExposedPorts == nil {
				cfg.Config.ExposedPorts = map[string]struct{}{}
			}
			for _, p := range strings.Fields(in.Args) {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				cfg.Config.ExposedPorts[p] = struct{}{}
			}
		case "ENTRYPOINT", "CMD":
			l, err := jsonList(in)
			if err != nil {
				return err
			}
			if in.Cmd == "ENTRYPOINT" {
				cfg.Config.Entrypoint = l
			} else {
				cfg.Config.Cmd = l
			}
		case "USER":
			cfg.Config.User = in.Args
		case "LABEL":
			k, v, _ := strings.Cut(in.Args, "=")
			if cfg.Config.Labels == nil {
				cfg.Config.Labels = map[string]string{}
			}
			cfg.Config.Labels[k] = strings.Trim(v, `"`)
		default:
			return fmt.Errorf("%w: line %d: %s in the final stage (no shell there)", ErrDockerfile, in.Line, in.Cmd)
		}
	}
	return writeLayout(out, cfg, files, final.Base, platform)
}

// argOrEnv applies an ARG to args, or returns an ENV's KEY=value with the
// ARGs expanded.
func argOrEnv(in Instr, args, auto map[string]string) string {
	if in.Cmd == "ARG" {
		for _, d := range strings.Fields(in.Args) {
			declareArg(args, auto, d)
		}
		return ""
	}
	k, v, _ := strings.Cut(in.Args, "=")
	return k + "=" + expand(v, args)
}

// runStage runs a build stage's instructions with root standing for its
// file system; keep are the absolute paths later stages copy out of it.
func runStage(repoRoot, root string, st Stage, auto map[string]string, keep []string) error {
	args := map[string]string{}
	env := []string{}
	workdir := "/"
	host := func(p string) string { return filepath.Join(root, filepath.FromSlash(p)) }
	for _, in := range st.Instrs {
		switch in.Cmd {
		case "ARG", "ENV":
			if e := argOrEnv(in, args, auto); e != "" {
				env = append(env, e)
			}
		case "WORKDIR":
			workdir = path.Join(workdir, expand(in.Args, args))
			if err := os.MkdirAll(host(workdir), 0o755); err != nil {
				return err
			}
		case "COPY":
			if in.Flags["from"] != "" {
				return fmt.Errorf("%w: line %d: COPY --from in a build stage", ErrDockerfile, in.Line)
			}
			f := strings.Fields(in.Args)
			dst := f[len(f)-1]
			if !path.IsAbs(dst) {
				dst = path.Join(workdir, dst)
			}
			for _, src := range f[:len(f)-1] {
				if err := copyTree(filepath.Join(repoRoot, filepath.FromSlash(src)), host(dst), strings.HasSuffix(f[len(f)-1], "/")); err != nil {
					return fmt.Errorf("line %d: COPY %s: %w", in.Line, src, err)
				}
			}
		case "RUN":
			cmdline := in.Args
			for _, k := range keep {
				// /out/star -> <root>/out/star, and make its directory.
				dir := path.Dir(k)
				if err := os.MkdirAll(host(dir), 0o755); err != nil {
					return err
				}
				cmdline = strings.ReplaceAll(cmdline, " "+dir+"/", " "+host(dir)+"/")
			}
			cmd := exec.Command("sh", "-c", cmdline)
			cmd.Dir = host(workdir)
			cmd.Env = append(os.Environ(), env...)
			for k, v := range args {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			var outb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &outb, &outb
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("line %d: RUN %s: %w\n%s", in.Line, in.Args, err, outb.String())
			}
		case "LABEL", "EXPOSE", "USER", "CMD", "ENTRYPOINT":
			// No effect on what the stage builds.
		default:
			return fmt.Errorf("%w: line %d: %s in a build stage", ErrDockerfile, in.Line, in.Cmd)
		}
	}
	return nil
}

// copyTree copies a file or a directory tree from src to dst (COPY
// semantics: a directory's contents go into dst; a file goes to dst, or
// into dst when dst ends in "/").
func copyTree(src, dst string, intoDir bool) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		if intoDir {
			dst = filepath.Join(dst, filepath.Base(src))
		}
		return copyFile(src, dst, fi.Mode())
	}
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		return copyFile(p, target, info.Mode())
	})
}

func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, mode.Perm())
}

type layerFile struct {
	name string
	body []byte
	mode int64
}

// writeLayout writes an OCI image layout (oci-layout, index.json,
// blobs/sha256/...) with one layer of files and the config.
func writeLayout(out string, cfg ImageConfig, files []layerFile, base, platform string) error {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	slices.SortFunc(files, func(a, b layerFile) int { return strings.Compare(a.name, b.name) })
	for _, f := range files {
		// Deterministic: no times, root-owned.
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.body)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		if _, err := tw.Write(f.body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	cfg.RootFS.DiffIDs = []string{digest(raw.Bytes())}
	if err := os.MkdirAll(filepath.Join(out, "blobs", "sha256"), 0o755); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	put := func(b []byte) (string, error) {
		d := digest(b)
		return d, os.WriteFile(filepath.Join(out, "blobs", "sha256", strings.TrimPrefix(d, "sha256:")), b, 0o644)
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	cfgDigest, err := put(cfgJSON)
	if err != nil {
		return err
	}
	layerDigest, err := put(gz.Bytes())
	if err != nil {
		return err
	}
	manifest := ociManifest{
		SchemaVersion: 2, MediaType: mediaManifest,
		Config:      descriptor{MediaType: mediaConfig, Digest: cfgDigest, Size: int64(len(cfgJSON))},
		Layers:      []descriptor{{MediaType: mediaLayer, Digest: layerDigest, Size: int64(gz.Len())}},
		Annotations: map[string]string{BaseAnnotation: base},
	}
	mJSON, err := json.Marshal(manifest)
	if err != nil {
		return err
	}
	mDigest, err := put(mJSON)
	if err != nil {
		return err
	}
	os_, arch, _ := strings.Cut(platform, "/")
	index := ociIndex{SchemaVersion: 2, MediaType: mediaIndex, Manifests: []descriptor{{
		MediaType: mediaManifest, Digest: mDigest, Size: int64(len(mJSON)),
		Platform: &ociPlatform{OS: os_, Architecture: arch},
	}}}
	iJSON, err := json.Marshal(index)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "index.json"), iJSON, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
}

func digest(b []byte) string {
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

type descriptor struct {
	MediaType string       `json:"mediaType"`
	Digest    string       `json:"digest"`
	Size      int64        `json:"size"`
	Platform  *ociPlatform `json:"platform,omitempty"`
}

type ociPlatform struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
}

type ociManifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Config        descriptor        `json:"config"`
	Layers        []descriptor      `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

type ociIndex struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

// LoadedImage is an image read back from an OCI layout: its config, its
// base annotation and the regular files of its layers by path.
type LoadedImage struct {
	Config ImageConfig
	Base   string
	Files  map[string][]byte
	Modes  map[string]int64
}

// maxBlob bounds what ReadLayout reads of any blob.
const maxBlob = 512 << 20

// ReadLayout reads the single image of an OCI layout, checking every
// blob's digest and size against its descriptor.
func ReadLayout(dir string) (*LoadedImage, error) {
	var index ociIndex
	if err := readJSON(filepath.Join(dir, "index.json"), &index); err != nil {
		return nil, err
	}
	if len(index.Manifests) != 1 {
		return nil, fmt.Errorf("bundle: %s: %d manifests, want 1", dir, len(index.Manifests))
	}
	blob := func(d descriptor) ([]byte, error) {
		if d.Size < 0 || d.Size > maxBlob {
			return nil, fmt.Errorf("bundle: blob %s: size %d out of bounds", d.Digest, d.Size)
		}
		b, err := os.ReadFile(filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(d.Digest, "sha256:")))
		if err != nil {
			return nil, fmt.Errorf("bundle: %w", err)
		}
		if int64(len(b)) != d.Size || digest(b) != d.Digest {
			return nil, fmt.Errorf("bundle: blob %s: content does not match its descriptor", d.Digest)
		}
		return b, nil
	}
	mb, err := blob(index.Manifests[0])
	if err != nil {
		return nil, err
	}
	var m ociManifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return nil, fmt.Errorf("bundle: manifest: %w", err)
	}
	cb, err := blob(m.Config)
	if err != nil {
		return nil, err
	}
	img := &LoadedImage{Base: m.Annotations[BaseAnnotation], Files: map[string][]byte{}, Modes: map[string]int64{}}
	if err := json.Unmarshal(cb, &img.Config); err != nil {
		return nil, fmt.Errorf("bundle: config: %w", err)
	}
	if len(m.Layers) != len(img.Config.RootFS.DiffIDs) {
		return nil, fmt.Errorf("bundle: %d layers but %d diff ids", len(m.Layers), len(img.Config.RootFS.DiffIDs))
	}
	for i, l := range m.Layers {
		lb, err := blob(l)
		if err != nil {
			return nil, err
		}
		zr, err := gzip.NewReader(bytes.NewReader(lb))
		if err != nil {
			return nil, fmt.Errorf("bundle: layer %s: %w", l.Digest, err)
		}
		raw, err := io.ReadAll(io.LimitReader(zr, maxBlob))
		if err != nil {
			return nil, fmt.Errorf("bundle: layer %s: %w", l.Digest, err)
		}
		if digest(raw) != img.Config.RootFS.DiffIDs[i] {
			return nil, fmt.Errorf("bundle: layer %s: uncompressed content does not match diff id", l.Digest)
		}
		tr := tar.NewReader(bytes.NewReader(raw))
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("bundle: layer %s: %w", l.Digest, err)
			}
			if h.Typeflag != tar.TypeReg {
				continue
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, err
			}
			img.Files["/"+strings.TrimPrefix(h.Name, "/")] = b
			img.Modes["/"+strings.TrimPrefix(h.Name, "/")] = h.Mode
		}
	}
	return img, nil
}

func readJSON(p string, v any) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("bundle: %s: %w", p, err)
	}
	return nil
}
