package bundle

import (
	"fmt"
	"path"
	"strings"
)

// ContextSources returns the paths of the build context the stages copy
// from (the sources of every COPY without --from, in order, without
// duplicates, a trailing slash dropped): all an image built from them can
// depend on. Sources with wildcards, absolute paths or a step out of the
// context (..) are refused with ErrDockerfile, since the list must name
// exactly what the build reads.
func ContextSources(stages []Stage) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, st := range stages {
		for _, in := range st.Instrs {
			if in.Cmd != "COPY" || in.Flags["from"] != "" {
				continue
			}
			var f []string
			if strings.HasPrefix(in.Args, "[") {
				var err error
				if f, err = jsonList(in); err != nil {
					return nil, err
				}
			} else {
				f = strings.Fields(in.Args)
			}
			if len(f) < 2 {
				return nil, fmt.Errorf("%w: line %d: COPY needs a source and a destination", ErrDockerfile, in.Line)
			}
			for _, src := range f[:len(f)-1] {
				clean := path.Clean(src)
				switch {
				case strings.ContainsAny(src, "*?[$"):
					return nil, fmt.Errorf("%w: line %d: COPY source %q: patterns and variables are not followed", ErrDockerfile, in.Line, src)
				case path.IsAbs(src), clean == ".", clean == "..", strings.HasPrefix(clean, "../"):
					return nil, fmt.Errorf("%w: line %d: COPY source %q is not a path inside the context", ErrDockerfile, in.Line, src)
				}
				if !seen[clean] {
					seen[clean] = true
					out = append(out, clean)
				}
			}
		}
	}
	return out, nil
}

// ContextExcludes returns docker-ignore patterns that reduce a build
// context to the sources (ContextSources) and the Dockerfile: everything
// is excluded, then each of them included again, then the files no image
// may ever carry (deny) excluded even inside an included directory. With
// them, a change anywhere else (docs, tests, a built binary, a token file)
// leaves the context, and so the image asset's hash, unchanged.
func ContextExcludes(sources []string, dockerfile string, deny []string) []string {
	out := []string{"*"}
	for _, s := range sources {
		out = append(out, "!"+s)
	}
	out = append(out, "!"+path.Clean(dockerfile))
	return append(out, deny...)
}
