package check

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sds-proxy/sds-proxy/deploy/cluster/image"
)

// TestClusterImageMatchesDockerfile: the image the test cluster runs
// (deploy/cluster/mkimage, built without a Docker engine) has the user,
// entrypoint, cmd, env and files that the Dockerfile's final stage gives,
// read here by this package's own Dockerfile parser, through the tarball
// that ctr imports.
func TestClusterImageMatchesDockerfile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "sds-proxy")
	if err := os.WriteFile(bin, []byte("#!binary\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec, err := image.FromDockerfile("../../Dockerfile", "../..", map[string]string{"/out/sds-proxy": bin})
	if err != nil {
		t.Fatal(err)
	}
	img, err := image.Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image.tar")
	if err := image.Write(img, "sds-e2e.local/sds-proxy:check", out); err != nil {
		t.Fatal(err)
	}
	back, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := back.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}

	df := parseDockerfile(t, "../../Dockerfile")
	var user string
	var entrypoint, cmd, env, copies []string
	for _, ins := range df.final {
		switch ins[0] {
		case "USER":
			user = ins[1]
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(ins[1]), &entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT %s: %v", ins[1], err)
			}
		case "CMD":
			if err := json.Unmarshal([]byte(ins[1]), &cmd); err != nil {
				t.Fatalf("CMD %s: %v", ins[1], err)
			}
		case "ENV":
			env = append(env, ins[1])
		case "COPY":
			f := strings.Fields(ins[1])
			copies = append(copies, f[len(f)-1])
		}
	}
	if cf.Config.User != user || user == "" {
		t.Errorf("image user %q, Dockerfile USER %q", cf.Config.User, user)
	}
	if !slices.Equal(cf.Config.Entrypoint, entrypoint) || len(entrypoint) == 0 {
		t.Errorf("image entrypoint %q, Dockerfile ENTRYPOINT %q", cf.Config.Entrypoint, entrypoint)
	}
	if !slices.Equal(cf.Config.Cmd, cmd) {
		t.Errorf("image cmd %q, Dockerfile CMD %q", cf.Config.Cmd, cmd)
	}
	if !slices.Equal(cf.Config.Env, env) {
		t.Errorf("image env %q, Dockerfile ENV %q", cf.Config.Env, env)
	}
	if cf.OS != "linux" || cf.Architecture == "" {
		t.Errorf("image platform %s/%s, want linux and an architecture (ctr import matches it)", cf.OS, cf.Architecture)
	}

	layers, err := back.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: got %d (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files["/"+h.Name] = h
	}
	for _, dst := range copies {
		h, ok := files[dst]
		if !ok {
			t.Errorf("the Dockerfile copies %s; the image lacks it", dst)
			continue
		}
		// COPY without --chown: root-owned, readable (and for the
		// entrypoint executable) by the image's non-root user.
		if h.Uid != 0 || h.Gid != 0 || h.Mode&0o004 == 0 {
			t.Errorf("%s: owner %d:%d mode %o, want root-owned and world-readable", dst, h.Uid, h.Gid, h.Mode)
		}
	}
	if len(entrypoint) == 0 {
		return
	}
	if h, ok := files[entrypoint[0]]; !ok || h.Mode&0o001 == 0 {
		t.Errorf("the entrypoint %s is not an executable file of the image", entrypoint[0])
	}
	if len(files) == 0 || len(copies) == 0 {
		t.Fatalf("files %v, copies %v: want both", files, copies)
	}
}
