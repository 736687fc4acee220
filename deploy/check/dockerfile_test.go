package check

import (
	"os"
	"regexp"
	"slices"
	"strconv"
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

// TestDockerfileDocumentationLink: the image's documentation label links
// a heading that exists: the URL is the repository's, or one of its
// Markdown files under /blob/main/, and its #anchor is the GitHub anchor
// of a heading of that file (the README without a path).
func TestDockerfileDocumentationLink(t *testing.T) {
	t.Parallel()
	const repo = "https://github.com/sds-proxy/sds-proxy"
	df := parseDockerfile(t, "../../Dockerfile")
	label := regexp.MustCompile(`(?:^|\s)org\.opencontainers\.image\.documentation="([^"]*)"`)
	var link string
	for _, ins := range df.final {
		if m := label.FindStringSubmatch(ins[1]); ins[0] == "LABEL" && m != nil {
			link = m[1]
		}
	}
	page, anchor, _ := strings.Cut(link, "#")
	file := "README.md"
	if path, ok := strings.CutPrefix(page, repo+"/blob/main/"); ok {
		file = path
	} else if page != repo {
		t.Fatalf("documentation label %q: want %s or %s/blob/main/FILE.md, with an optional #anchor", link, repo, repo)
	}
	if anchor == "" {
		return
	}
	data, err := os.ReadFile("../../" + file)
	if err != nil {
		t.Fatalf("documentation label %q: %v", link, err)
	}
	anchors := headingAnchors(string(data))
	if !slices.Contains(anchors, anchor) {
		t.Errorf("documentation label %q: %s has no heading with the anchor #%s; its anchors: %s", link, file, anchor, strings.Join(anchors, " "))
	}
}

// headingAnchors returns the anchors GitHub gives the ATX headings (# to
// ######) of a Markdown text, outside fenced code: the heading's text in
// lower case, without the characters other than letters, digits, spaces,
// hyphens and underscores, spaces made hyphens. A repeated anchor gets
// -1, -2... as on GitHub.
func headingAnchors(markdown string) []string {
	heading := regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	seen := map[string]int{}
	var anchors []string
	fenced := false
	for _, line := range strings.Split(markdown, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		m := heading.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		a := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")
		if n := seen[a]; n > 0 {
			anchors = append(anchors, a+"-"+strconv.Itoa(n))
		} else {
			anchors = append(anchors, a)
		}
		seen[a]++
	}
	return anchors
}

// TestHeadingAnchors: GitHub's anchors, on the shapes of this repository's
// headings.
func TestHeadingAnchors(t *testing.T) {
	t.Parallel()
	got := headingAnchors("# sds-proxy\n## Quick start\n```sh\n# a comment\n```\n## On a real kubelet: `deploy/cluster`\n### Termination order: why a rollout gives no 502\n## Quick start\n")
	want := []string{"sds-proxy", "quick-start", "on-a-real-kubelet-deploycluster", "termination-order-why-a-rollout-gives-no-502", "quick-start-1"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
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
