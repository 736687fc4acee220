// Package image builds the test cluster's container images without a
// Docker engine: one layer of files on an empty OCI base, the way
// `crane append --oci-empty-base -f layer.tar` does, plus the config that
// a Dockerfile's final stage gives (user, entrypoint, cmd, env), written as
// a tarball that `ctr images import` loads.
package image

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one regular file of the layer: Src on this machine, Dst in the
// image (absolute), owned by UID:GID with Mode. The zero owner is root,
// as a Dockerfile COPY without --chown gives.
type File struct {
	Src, Dst string
	UID, GID int
	Mode     int64
}

// Spec is an image: its files and its config. Nil fields stay unset.
type Spec struct {
	Files      []File
	Entrypoint []string
	Cmd        []string
	Env        []string // KEY=value
	User       string
	WorkingDir string
	Exposed    []string // "8080/tcp"
}

// Build makes the image: an empty OCI base, one layer holding Files (and
// their parent directories, 0755 root), and the config of s.
func Build(s Spec) (v1.Image, error) {
	layerData, err := layerTar(s.Files)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerData)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = s.Entrypoint
	cf.Config.Cmd = s.Cmd
	cf.Config.Env = s.Env
	cf.Config.User = s.User
	cf.Config.WorkingDir = s.WorkingDir
	if len(s.Exposed) > 0 {
		cf.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range s.Exposed {
			cf.Config.ExposedPorts[p] = struct{}{}
		}
	}
	return mutate.ConfigFile(img, cf)
}

func layerTar(files []File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{"/": true}
	for _, f := range files {
		if !path.IsAbs(f.Dst) {
			return nil, fmt.Errorf("%s: the destination must be absolute", f.Dst)
		}
		var parents []string
		for d := path.Dir(f.Dst); !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
			dirs[d] = true
		}
		slices.Reverse(parents)
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755}); err != nil {
				return nil, err
			}
		}
		data, err := os.ReadFile(f.Src)
		if err != nil {
			return nil, err
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		h := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.Dst, "/"), Mode: mode, Size: int64(len(data)), Uid: f.UID, Gid: f.GID}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Write saves img as a tarball tagged tag (docker save's layout, which
// `ctr -n k8s.io images import` reads).
func Write(img v1.Image, tag, out string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(out, ref, img)
}

// FromDockerfile reads the final stage of a Dockerfile into a Spec. A COPY
// from the build context takes its file from contextDir; a COPY --from
// another stage takes it from built, keyed by the path in that stage (the
// binary the caller built the way that stage does). Files keep the mode
// of their source and are owned by root unless --chown says otherwise.
// ARG, LABEL and comments are ignored; any instruction that needs a build
// engine (RUN, ADD, ...) is an error, so the image cannot silently differ.
func FromDockerfile(dockerfile, contextDir string, built map[string]string) (Spec, error) {
	data, err := os.ReadFile(dockerfile)
	if err != nil {
		return Spec{}, err
	}
	var s Spec
	var errs []error
	_, final := Instructions(string(data))
	for _, ins := range final {
		kw, rest := ins[0], ins[1]
		switch kw {
		case "ARG", "LABEL":
		case "USER":
			s.User = rest
		case "WORKDIR":
			s.WorkingDir = rest
		case "EXPOSE":
			for _, p := range strings.Fields(rest) {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				s.Exposed = append(s.Exposed, p)
			}
		case "ENV":
			k, v, ok := strings.Cut(rest, "=")
			if !ok || strings.ContainsAny(k, " \t") || strings.ContainsAny(v, " \t\"'$") {
				errs = append(errs, fmt.Errorf("ENV %s: only the KEY=value form of one plain value is read", rest))
				continue
			}
			s.Env = append(s.Env, k+"="+v)
		case "ENTRYPOINT", "CMD":
			var argv []string
			if err := json.Unmarshal([]byte(rest), &argv); err != nil {
				errs = append(errs, fmt.Errorf("%s %s: only the JSON (exec) form is read: %v", kw, rest, err))
				continue
			}
			if kw == "ENTRYPOINT" {
				s.Entrypoint = argv
			} else {
				s.Cmd = argv
			}
		case "COPY":
			f, err := copyFile(rest, contextDir, built)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			s.Files = append(s.Files, f)
		default:
			errs = append(errs, fmt.Errorf("%s: not supported without a build engine", kw))
		}
	}
	return s, errors.Join(errs...)
}

func copyFile(rest, contextDir string, built map[string]string) (File, error) {
	var from string
	var f File
	fields := strings.Fields(rest)
	for len(fields) > 0 && strings.HasPrefix(fields[0], "--") {
		k, v, _ := strings.Cut(strings.TrimPrefix(fields[0], "--"), "=")
		switch k {
		case "from":
			from = v
		case "chown":
			u, g, _ := strings.Cut(v, ":")
			var err1, err2 error
			f.UID, err1 = strconv.Atoi(u)
			f.GID, err2 = strconv.Atoi(g)
			if err1 != nil || err2 != nil {
				return File{}, fmt.Errorf("COPY %s: --chown must be numeric UID:GID", rest)
			}
		default:
			return File{}, fmt.Errorf("COPY %s: --%s is not supported", rest, k)
		}
		fields = fields[1:]
	}
	if len(fields) != 2 || !path.IsAbs(fields[1]) || strings.HasSuffix(fields[1], "/") {
		return File{}, fmt.Errorf("COPY %s: only one file to an absolute file path is supported", rest)
	}
	src, dst := fields[0], fields[1]
	if from != "" {
		local, ok := built[src]
		if !ok {
			return File{}, fmt.Errorf("COPY --from=%s %s: no built file given for it", from, src)
		}
		f.Src = local
	} else {
		f.Src = path.Join(contextDir, src)
	}
	st, err := os.Stat(f.Src)
	if err != nil {
		return File{}, fmt.Errorf("COPY %s: %v", rest, err)
	}
	if !st.Mode().IsRegular() {
		return File{}, fmt.Errorf("COPY %s: %s is not a regular file", rest, f.Src)
	}
	f.Dst, f.Mode = dst, int64(st.Mode().Perm())
	return f, nil
}

// Instructions splits a Dockerfile into its instructions, each as
// keyword (upper case) and the rest of its line, continuation lines
// joined and comments dropped: all of them, and those of the final stage
// (after the last FROM).
func Instructions(text string) (all, final [][2]string) {
	var cur string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if l, ok := strings.CutSuffix(strings.TrimRight(line, " "), "\\"); ok {
			cur += l + " "
			continue
		}
		cur += line
		if kw, rest, ok := strings.Cut(strings.TrimSpace(cur), " "); ok {
			ins := [2]string{strings.ToUpper(kw), strings.TrimSpace(rest)}
			all = append(all, ins)
			if ins[0] == "FROM" {
				final = nil
			} else {
				final = append(final, ins)
			}
		}
		cur = ""
	}
	return all, final
}
