package bundle

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrDockerfile is returned (wrapped) for a Dockerfile this package cannot
// follow: an instruction outside the subset below, or a malformed one.
var ErrDockerfile = errors.New("bundle: unsupported Dockerfile")

// Instr is one Dockerfile instruction: its keyword (upper case), its flags
// (--from=build, --platform=...) and the rest of the line.
type Instr struct {
	Line  int
	Cmd   string
	Flags map[string]string
	Args  string
}

// Stage is one FROM ... [AS name] and its instructions.
type Stage struct {
	Name, Base, Platform string
	Instrs               []Instr
}

// supported are the instructions Image can follow. Anything else (ADD,
// ONBUILD, SHELL, HEALTHCHECK, VOLUME, ...) is refused rather than ignored,
// so that a Dockerfile change the offline build would misread fails loudly.
var supported = map[string]bool{
	"FROM": true, "ARG": true, "ENV": true, "WORKDIR": true, "COPY": true, "RUN": true,
	"EXPOSE": true, "ENTRYPOINT": true, "CMD": true, "USER": true, "LABEL": true,
}

// ParseDockerfile reads the stages of a Dockerfile: comments dropped, line
// continuations joined, instructions before the first FROM refused (global
// ARGs are not supported).
func ParseDockerfile(r io.Reader) ([]Stage, error) {
	var stages []Stage
	sc := bufio.NewScanner(r)
	var buf strings.Builder
	start, n := 0, 0
	flush := func() error {
		line := strings.TrimSpace(buf.String())
		buf.Reset()
		if line == "" {
			return nil
		}
		cmd, rest, _ := strings.Cut(line, " ")
		cmd = strings.ToUpper(cmd)
		if !supported[cmd] {
			return fmt.Errorf("%w: line %d: %s", ErrDockerfile, start, cmd)
		}
		in := Instr{Line: start, Cmd: cmd, Flags: map[string]string{}}
		rest = strings.TrimSpace(rest)
		for strings.HasPrefix(rest, "--") {
			var f string
			f, rest, _ = strings.Cut(rest, " ")
			k, v, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
			in.Flags[k] = v
			rest = strings.TrimSpace(rest)
		}
		in.Args = rest
		if cmd == "FROM" {
			f := strings.Fields(rest)
			st := Stage{Platform: in.Flags["platform"]}
			switch {
			case len(f) == 1:
				st.Base = f[0]
			case len(f) == 3 && strings.EqualFold(f[1], "AS"):
				st.Base, st.Name = f[0], f[2]
			default:
				return fmt.Errorf("%w: line %d: FROM %s", ErrDockerfile, start, rest)
			}
			stages = append(stages, st)
			return nil
		}
		if len(stages) == 0 {
			return fmt.Errorf("%w: line %d: %s before the first FROM", ErrDockerfile, start, cmd)
		}
		stages[len(stages)-1].Instrs = append(stages[len(stages)-1].Instrs, in)
		return nil
	}
	for sc.Scan() {
		n++
		line := sc.Text()
		if buf.Len() == 0 {
			if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
				continue
			}
			start = n
		} else if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue // a comment inside a continuation
		}
		if s, ok := strings.CutSuffix(strings.TrimRight(line, " \t"), `\`); ok {
			buf.WriteString(s + " ")
			continue
		}
		buf.WriteString(line)
		if err := flush(); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if len(stages) == 0 {
		return nil, fmt.Errorf("%w: no FROM", ErrDockerfile)
	}
	return stages, nil
}

// jsonList parses the exec form ["a", "b"] of ENTRYPOINT and CMD; the
// shell form is refused (the image has no shell).
func jsonList(in Instr) ([]string, error) {
	var out []string
	if err := json.Unmarshal([]byte(in.Args), &out); err != nil {
		return nil, fmt.Errorf("%w: line %d: %s needs the exec form [\"...\"]: %v", ErrDockerfile, in.Line, in.Cmd, err)
	}
	return out, nil
}

// automaticArgs are BuildKit's automatic platform arguments for a build on
// host (os/arch) for target (os/arch).
func automaticArgs(hostOS, hostArch, targetOS, targetArch string) map[string]string {
	return map[string]string{
		"BUILDPLATFORM": hostOS + "/" + hostArch, "BUILDOS": hostOS, "BUILDARCH": hostArch,
		"TARGETPLATFORM": targetOS + "/" + targetArch, "TARGETOS": targetOS, "TARGETARCH": targetArch,
	}
}

// declareArg applies ARG name[=default] as BuildKit does for a build with
// no --build-arg: a default is the value, even for an automatic platform
// argument (BuildKit then treats it as set by the user, so --platform no
// longer overrides it); without a default an automatic argument takes the
// platform's value and any other is empty.
func declareArg(args, auto map[string]string, decl string) {
	name, def, hasDef := strings.Cut(decl, "=")
	switch {
	case hasDef:
		args[name] = strings.Trim(def, `"`)
	default:
		args[name] = auto[name]
	}
}

// expand substitutes $NAME and ${NAME} from vars (unknown names: empty).
func expand(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		j := i + 1
		var name string
		if s[j] == '{' {
			end := strings.IndexByte(s[j:], '}')
			if end < 0 {
				b.WriteByte(s[i])
				continue
			}
			name, i = s[j+1:j+end], j+end
		} else {
			k := j
			for k < len(s) && (s[k] == '_' || s[k] >= 'A' && s[k] <= 'Z' || s[k] >= 'a' && s[k] <= 'z' || s[k] >= '0' && s[k] <= '9') {
				k++
			}
			if k == j {
				b.WriteByte(s[i])
				continue
			}
			name, i = s[j:k], k-1
		}
		b.WriteString(vars[name])
	}
	return b.String()
}
