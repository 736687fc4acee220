package check

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sds-proxy/sds-proxy/deploy/cluster/image"
)

// dockerfile is the parsed final stage of the repository's Dockerfile:
// its instructions, continuation lines joined, comments dropped.
type dockerfile struct {
	all   [][2]string // every instruction: keyword, rest
	final [][2]string // those after the last FROM
}

func parseDockerfile(t *testing.T, path string) dockerfile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var df dockerfile
	df.all, df.final = image.Instructions(string(data))
	return df
}

// TestDockerfile: the image runs as a numeric user (runAsNonRoot cannot
// check a name: the kubelet refuses the container), carries the OCI
// labels, stamps the version from a build arg, and puts its default config
// where the manifests' -config points.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	df := parseDockerfile(t, "../../Dockerfile")
	var user string
	var labels, copies []string
	for _, ins := range df.final {
		switch ins[0] {
		case "USER":
			user = ins[1]
		case "LABEL":
			labels = append(labels, ins[1])
		case "COPY":
			copies = append(copies, ins[1])
		}
	}
	if user != "65532:65532" {
		t.Errorf("final USER %q, want 65532:65532 (numeric, as the manifests' runAsUser)", user)
	}
	for _, key := range []string{"source", "version", "revision", "title", "description"} {
		if !regexp.MustCompile(`(^|\s)org\.opencontainers\.image\.` + key + `=`).MatchString(strings.Join(labels, " ")) {
			t.Errorf("no LABEL org.opencontainers.image.%s", key)
		}
	}
	stamped := slices.ContainsFunc(df.all, func(ins [2]string) bool {
		return ins[0] == "RUN" && strings.Contains(ins[1], "-X main.version=${VERSION}")
	})
	if !stamped {
		t.Error("no RUN go build with -ldflags -X main.version=${VERSION}")
	}

	data, err := render("../base")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeStrict("../base", data)
	if err != nil {
		t.Fatal(err)
	}
	var cfgPath string
	for _, o := range objs {
		if _, spec, ok := podTemplate(o); ok {
			if c := findContainer(spec, sidecarName); c != nil {
				cfgPath = configArg(c.Args)
			}
		}
	}
	if cfgPath == "" {
		t.Fatal("deploy/base: no sds-proxy with -config")
	}
	if !slices.Contains(copies, "sds.yaml "+cfgPath) {
		t.Errorf("final stage COPY %q, want sds.yaml copied to %s (the manifests' -config)", copies, cfgPath)
	}
}

// TestDockerignore: the build context leaves out what the image never
// needs (the repository's history, the deploy module).
func TestDockerignore(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for _, want := range []string{".git", "deploy"} {
		if !slices.Contains(lines, want) {
			t.Errorf(".dockerignore lacks %q", want)
		}
	}
}
