package config

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The golden corpus: a few hundred config files, each one mistake (or one
// harmless change) away from a valid base, and what validate prints for
// each. It pins every message, position and explanation, so that a change
// of how the package is built provably changes none of them.
//
//	go test ./config/ -run TestGolden -generate   writes the inputs again (from the bases below)
//	go test ./config/ -run TestGolden -update     writes the expected output again
var (
	generateGolden = flag.Bool("generate", false, "rewrite the golden corpus's inputs under testdata/golden")
	updateGolden   = flag.Bool("update", false, "rewrite the golden corpus's expected output")
)

const (
	goldenDir  = "testdata/golden"
	goldenWant = goldenDir + "/want.txt"
)

// TestGolden loads each testdata/golden/*.yaml and compares what validate
// would print (the problems as FILE:LINE:COL: message lines, or the
// warnings and OK) and, for a file that loads, what it changes against
// the base it was made from (Diff, FileSettings, PointSettings, as
// validate -diff prints them), with want.txt.
func TestGolden(t *testing.T) {
	if *generateGolden {
		writeCorpus(t)
	}
	inputs, err := filepath.Glob(goldenDir + "/*.yaml")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden inputs (go test -run TestGolden -generate writes them): %v", err)
	}
	bases := map[string]*File{}
	var b strings.Builder
	for _, path := range inputs {
		fmt.Fprintf(&b, "== %s\n", filepath.Base(path))
		b.WriteString(validateOutput(t, path, bases))
	}
	// Paths of the files a config names are absolute: the test's own
	// directory is left out, so that the output is the same in any checkout.
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.ReplaceAll(b.String(), wd+string(filepath.Separator), "")
	if *updateGolden || *generateGolden {
		if err := os.WriteFile(goldenWant, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(goldenWant)
	if err != nil {
		t.Fatalf("%v (go test -run TestGolden -update writes it)", err)
	}
	if got == string(want) {
		return
	}
	gotCases, wantCases := splitCases(got), splitCases(string(want))
	n := 0
	for name, w := range wantCases {
		if g := gotCases[name]; g != w && n < 20 {
			n++
			t.Errorf("%s: got\n%swant\n%s", name, g, w)
		}
	}
	if len(gotCases) != len(wantCases) {
		t.Errorf("got %d cases, want %d", len(gotCases), len(wantCases))
	}
}

// splitCases splits want.txt by case.
func splitCases(s string) map[string]string {
	out := map[string]string{}
	for _, c := range strings.Split(s, "== ")[1:] {
		name, body, _ := strings.Cut(c, "\n")
		out[name] = body
	}
	return out
}

// validateOutput returns what validate prints for the file at path and,
// when it loads, what it changes against its base (base-NAME-... cases
// compare with base-NAME.yaml).
func validateOutput(t *testing.T, path string, bases map[string]*File) string {
	f, err := Load(path, Options{})
	if err != nil {
		return err.Error() + "\n"
	}
	var b strings.Builder
	if len(f.Warnings) > 0 {
		b.WriteString(f.Warnings.Error() + "\n")
	}
	b.WriteString("OK\n")
	name := strings.TrimSuffix(filepath.Base(path), ".yaml")
	baseName, _, mutated := strings.Cut(strings.TrimPrefix(name, "base-"), "--")
	if !mutated || !strings.HasPrefix(name, "base-") {
		return b.String()
	}
	base := bases[baseName]
	if base == nil {
		if base, err = Load(filepath.Join(goldenDir, "base-"+baseName+".yaml"), Options{}); err != nil {
			t.Fatalf("base %s: %v", baseName, err)
		}
		bases[baseName] = base
	}
	c := Diff(base, f)
	fmt.Fprintf(&b, "diff: %s\n", c)
	for _, name := range c.Changed {
		for _, s := range PointSettings(base.Point(name), f.Point(name)) {
			fmt.Fprintf(&b, "  point %s: %s\n", name, s)
		}
	}
	reload, restart := FileSettings(base, f)
	for _, s := range reload {
		fmt.Fprintf(&b, "  reload: %s\n", s)
	}
	for _, s := range restart {
		fmt.Fprintf(&b, "  restart: %s\n", s)
	}
	for _, e := range RoutesDiff(base.Routes, f.Routes) {
		fmt.Fprintf(&b, "  route: %v\n", e)
	}
	return b.String()
}

// goldenFiles are the files the bases name, under testdata/golden/files.
var goldenFiles = map[string]string{
	"admin-token":     "0123456789abcdef0123456789abcdef\n",
	"redis-password":  "secret\n",
	"ca.pem":          "not read, only checked to exist\n",
	"client.pem":      "not read, only checked to exist\n",
	"client-key.pem":  "not read, only checked to exist\n",
	"cert.pem":        "not read, only checked to exist\n",
	"key.pem":         "not read, only checked to exist\n",
	"body.json":       `{"error":"busy"}` + "\n",
	"not-a-directory": "a file where storage wants a directory\n",
}

// richBase sets every key that sds.yaml leaves out, with a valid value.
const richBase = `listen: 127.0.0.1:8080
h2c: true
upstream: h2c://127.0.0.1:9000
admin: 127.0.0.1:9901
forwardedHeaders: false
window: 20s
buckets: 20
pressureTestHeader: X-Load-Test
accessLog: true
drainTimeout: 5s
maxConnections: 2048
adminTokenFile: files/admin-token
cluster:
  addresses: [127.0.0.1:6379]
  username: sds
  passwordFile: files/redis-password
  tls:
    caFile: files/ca.pem
    certFile: files/client.pem
    keyFile: files/client-key.pem
    serverName: redis.internal
  db: 1
  keyPrefix: "sds:"
  timeout: 500ms
  replicas: 3
routes:
  - point: api
    match:
      methods: [GET, POST]
      pathPrefix: /api
      host: shop.example
    priority: sheddable
  - point: rest
    match:
      path: /health
    priority: critical
points:
  api:
    timeoutThreshold: 250
    timeoutCountThreshold: 5
    visitThreshold: 1000
    concurrentThreshold: 64
    exceptionThreshold: 20
    exceptionRateThreshold: 40
    exceptionRateStart: 20
    tokenBucketGeneratedTokensInSecond: 100
    tokenBucketSize: 200
    downgradeRate: 90
    delayTime: 30s
    retryInterval: 2s
    recoveryTime: 10s
    recoveryStart: 20
    sheddableShare: 60
    pressureTestDowngrade: true
    mode: shadow
    upstreamTimeout: 2s
    fallbackOnError: true
    adaptiveConcurrency:
      minLimit: 2
      maxLimit: 100
      interval: 200ms
      tolerance: 20
      minLatencyInterval: 30s
    clusterTokenBucket:
      tokensPerSecond: 100
      size: 300
    fallback:
      status: 503
      headers:
        Content-Type: application/json
        Vary: [Accept, Accept-Encoding]
      bodyFile: files/body.json
      grpcStatus: 8
      grpcMessage: busy
  rest:
    visitThreshold: 10
`

// tlsBase has a certificate pair and the ACME keys in a second base.
const tlsBase = `upstream: https://127.0.0.1:9443
tls:
  certFile: files/cert.pem
  keyFile: files/key.pem
routes:
  - point: all
    match: {}
points:
  all:
    visitThreshold: 100
`

const acmeBase = `upstream: http://127.0.0.1:9000
tls:
  acme:
    domains: [shop.example, www.shop.example]
    email: ops@shop.example
    ca: https://acme.internal/directory
    storage: files
    httpListen: 0.0.0.0:8081
routes:
  - point: all
    match: {}
points:
  all:
    visitThreshold: 100
`

// keyLine is a line that sets a key: indentation, an optional "- ", the
// key, and the rest.
var keyLine = regexp.MustCompile(`^( *)(- )?([A-Za-z][A-Za-z0-9-]*):( .*)?$`)

// goldenCase is one input of the corpus.
type goldenCase struct{ name, text string }

// writeCorpus writes the corpus's inputs and the files they name, after
// removing the previous inputs.
func writeCorpus(t *testing.T) {
	old, _ := filepath.Glob(goldenDir + "/*.yaml")
	for _, p := range old {
		os.Remove(p)
	}
	if err := os.MkdirAll(filepath.Join(goldenDir, "files"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range goldenFiles {
		if err := os.WriteFile(filepath.Join(goldenDir, "files", name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for _, c := range corpus(t) {
		if seen[c.name] {
			t.Fatalf("two cases named %s", c.name)
		}
		seen[c.name] = true
		if err := os.WriteFile(filepath.Join(goldenDir, c.name+".yaml"), []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// corpus returns every case: the bases, each base's mutations, and whole
// files.
func corpus(t *testing.T) []goldenCase {
	example, err := os.ReadFile("../sds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bases := []goldenCase{
		{"example", stripComments(string(example))},
		{"rich", richBase},
		{"tls", tlsBase},
		{"acme", acmeBase},
	}
	var out []goldenCase
	for _, b := range bases {
		out = append(out, goldenCase{"base-" + b.name, b.text})
		for _, m := range lineMutations(b.text, b.name != "example") {
			out = append(out, goldenCase{"base-" + b.name + "--" + m.name, m.text})
		}
	}
	return append(out, wholeFiles(bases[0].text)...)
}

// stripComments drops the lines that hold only a comment or nothing.
func stripComments(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if trimmed := strings.TrimSpace(line); trimmed != "" && !strings.HasPrefix(trimmed, "#") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// lineMutations returns the cases made by changing one line of base: a
// typo of each key and, when full, the key unknown, given twice, removed,
// a line of broken YAML, and values of the wrong type or out of range.
func lineMutations(base string, full bool) []goldenCase {
	lines := slices.Collect(strings.Lines(base))
	var out []goldenCase
	for i, line := range lines {
		m := keyLine.FindStringSubmatch(strings.TrimRight(line, "\n"))
		if m == nil {
			continue
		}
		indent, dash, key := m[1], m[2], m[3]
		value, _, _ := strings.Cut(strings.TrimSpace(m[4]), " #")
		value = strings.TrimSpace(value)
		prefix := fmt.Sprintf("%03d-%s", i+1, key)
		with := func(name string, replacement ...string) {
			text := strings.Join(lines[:i], "") + strings.Join(replacement, "") + strings.Join(lines[i+1:], "")
			out = append(out, goldenCase{prefix + "-" + name, text})
		}
		set := func(v string) string { return indent + dash + key + ": " + v + "\n" }
		rest := strings.TrimPrefix(line, indent+dash+key+":")
		switch {
		case len(key) > 3 && i%2 == 0:
			with("drop", indent+dash+key[:len(key)/2]+key[len(key)/2+1:]+":"+rest)
		case len(key) > 3:
			with("swap", indent+dash+key[:1]+key[2:3]+key[1:2]+key[3:]+":"+rest)
		default:
			with("upper", indent+dash+strings.ToUpper(key[:1])+key[1:]+":"+rest)
		}
		if !full {
			continue
		}
		// end is past the block of lines under a key whose value is a
		// mapping or a list on the lines below.
		end := i + 1
		for end < len(lines) && indentOf(lines[end]) > len(indent)+len(dash) {
			end++
		}
		replaceBlock := func(name, replacement string) {
			text := strings.Join(lines[:i], "") + replacement + strings.Join(lines[end:], "")
			out = append(out, goldenCase{prefix + "-" + name, text})
		}
		switch {
		case dash != "":
			with("removed", indent+dash+"\n")
		case i > 0 && indentOf(lines[i-1]) < len(indent):
			with("unknown", line, indent+"colour: red\n")
		}
		if dash == "" {
			with("removed-line", "")
		}
		switch i % 6 {
		case 0:
			with("tab", strings.Replace(line, indent, "\t", 1))
		case 1:
			with("duplicate", line, indent+key+": "+value+"\n")
		case 2:
			with("unclosed-quote", set(`"`+value))
		case 3:
			if indent != "" {
				with("indent", " "+line)
			}
		}
		if value == "" {
			replaceBlock("scalar", set("5"))
			replaceBlock("list", set("[a, b]"))
			replaceBlock("empty", set("{}"))
		}
		values := wrongValues(value)
		names := strings.NewReplacer(`"`, "q", ",", "", "-", "minus", ".", "dot", "[", "list", "]", "", "{", "map", "}", "", ":", "", " ", "-", "/", "slash")
		for _, v := range values {
			with("value-"+names.Replace(v), set(v))
		}
	}
	return out
}

// wrongValues returns values of another type, or out of range, for a key
// whose value is value.
func wrongValues(value string) []string {
	switch {
	case value == "":
		return nil
	case strings.HasPrefix(value, "["):
		return []string{"{a: b}", "GET", "[]", "[[a], 7]"}
	case regexp.MustCompile(`^-?[0-9]+$`).MatchString(value):
		return []string{`"12"`, "-5", "0", "101", "99999999999999999999", "1.5"}
	case regexp.MustCompile(`^[0-9]+(ms|s|m|h)$`).MatchString(value):
		return []string{"10", "-2s", "0", "5 seconds", "10000h"}
	case value == "true" || value == "false":
		return []string{"yes", `"true"`}
	}
	return []string{`""`, "[a, b]", "12", "/x.json"}
}

// indentOf returns the number of spaces before the first other character
// of line; a line of blanks counts as deeper than any.
func indentOf(line string) int {
	trimmed := strings.TrimLeft(line, " ")
	if strings.TrimSpace(trimmed) == "" {
		return 1 << 20
	}
	if strings.HasPrefix(trimmed, "- ") {
		return len(line) - len(trimmed) + 1
	}
	return len(line) - len(trimmed)
}

// goldenHead starts a config with one route and one point, p, whose
// settings follow (onePoint).
const goldenHead = "upstream: http://127.0.0.1:9000\nroutes:\n  - point: p\n    match: {pathPrefix: /p}\npoints:\n  p:\n"

// onePoint returns goldenHead with the settings of p, one a line.
func onePoint(settings ...string) string {
	var b strings.Builder
	b.WriteString(goldenHead)
	for _, s := range settings {
		b.WriteString("    " + s + "\n")
	}
	return b.String()
}

// wholeFiles returns the cases about the file as a whole: its shape, its
// documents, and the rules between keys and between points and routes.
func wholeFiles(example string) []goldenCase {
	return slices.Concat(shapeCases(example), fileCases(), pointCases())
}

// shapeCases are files of the wrong shape: empty, several documents,
// broken YAML, keys that are not names.
func shapeCases(example string) []goldenCase {
	const head = goldenHead
	point := onePoint
	return []goldenCase{
		{"file-empty", ""},
		{"file-comments-only", "# nothing here\n"},
		{"file-null", "null\n"},
		{"file-tilde", "~\n"},
		{"file-list", "- a\n- b\n"},
		{"file-scalar", "hello\n"},
		{"file-second-document", example + "---\nlisten: 0.0.0.0:1\n"},
		{"file-second-document-empty", example + "---\n"},
		{"file-document-start", "---\n" + example},
		{"file-unknown-only", "colour: red\n"},
		{"file-tab-top", "upstream: http://127.0.0.1:9000\n\tlisten: x\n"},
		{"file-bad-indent", "upstream: http://127.0.0.1:9000\npoints:\n  p:\n    visitThreshold: 1\n   concurrentThreshold: 2\n"},
		{"file-unclosed-flow", "upstream: http://127.0.0.1:9000\nroutes: [{point: p\n"},
		{"file-unclosed-quote-end", example + "listen: \"0.0.0.0:1\n"},
		{"file-merge-key", "upstream: http://127.0.0.1:9000\ndefaults: &d {visitThreshold: 1}\n"},
		{"file-merge-in-point", point("<<: {visitThreshold: 1}")},
		{"file-alias-point", head + "    visitThreshold: 1\n  q: *missing\n"},
		{"file-anchored-point", "upstream: http://127.0.0.1:9000\nroutes:\n  - {point: p, match: {path: /p}}\n  - {point: q, match: {}}\npoints:\n  p: &s {visitThreshold: 1}\n  q: *s\n"},
		{"file-key-list", "[a]: 1\nupstream: http://127.0.0.1:9000\n"},
		{"file-key-null", "~: 1\nupstream: http://127.0.0.1:9000\n"},
	}
}

// fileCases are the rules of the top level, routes, TLS and addresses.
func fileCases() []goldenCase {
	point := onePoint
	return []goldenCase{
		{"file-no-upstream", "routes: []\npoints: {}\n"},
		{"file-no-points", "upstream: http://127.0.0.1:9000\n"},
		{"file-route-no-point", "upstream: http://127.0.0.1:9000\nroutes:\n  - match: {}\n"},
		{"file-route-empty-point", "upstream: http://127.0.0.1:9000\nroutes:\n  - {point: \"\", match: {}}\n"},
		{"file-route-missing-point", "upstream: http://127.0.0.1:9000\nroutes:\n  - {point: nowhere, match: {}}\n"},
		{"file-route-scalar", "upstream: http://127.0.0.1:9000\nroutes:\n  - p\n"},
		{"file-point-unnamed", "upstream: http://127.0.0.1:9000\nroutes:\n  - {point: p, match: {}}\npoints:\n  p: {}\n  q: {visitThreshold: 1}\n"},
		{"file-point-bad-name", "upstream: http://127.0.0.1:9000\nroutes:\n  - {point: \"a b\", match: {}}\npoints:\n  \"a b\": {visitThreshold: 1}\n"},
		{"file-point-scalar", point()[:len(point())-1] + " 5\n"},
		{"file-point-null", point()},
		{"file-routes-shadowed", "upstream: http://127.0.0.1:9000\nroutes:\n  - {point: p, match: {}}\n  - {point: p, match: {path: /x}}\npoints:\n  p: {visitThreshold: 1}\n"},
		{"file-path-and-prefix", "upstream: http://127.0.0.1:9000\nroutes:\n  - {point: p, match: {path: /a, pathPrefix: /a}}\npoints:\n  p: {visitThreshold: 1}\n"},
		{"file-path-relative", "upstream: http://127.0.0.1:9000\nroutes:\n  - {point: p, match: {path: a}}\npoints:\n  p: {visitThreshold: 1}\n"},
		{"file-prefix-file-name", "upstream: http://127.0.0.1:9000\nroutes:\n  - {point: p, match: {pathPrefix: /api/orders.json}}\n  - {point: p, match: {pathPrefix: /index.html}}\n  - {point: p, match: {pathPrefix: /api/v1.2}}\npoints:\n  p: {visitThreshold: 1}\n"},
		{"file-method-lower", "upstream: http://127.0.0.1:9000\nroutes:\n  - {point: p, match: {methods: [get, POST, POST]}}\npoints:\n  p: {visitThreshold: 1}\n"},
		{"file-h2c-http-upstream", "h2c: true\n" + point("visitThreshold: 1")},
		{"file-h2c-with-tls", "h2c: true\ntls: {certFile: files/cert.pem, keyFile: files/key.pem}\n" + point("visitThreshold: 1")},
		{"file-tls-half-pair", "tls: {certFile: files/cert.pem}\n" + point("visitThreshold: 1")},
		{"file-tls-missing-files", "tls: {certFile: files/none.pem, keyFile: files/none-key.pem}\n" + point("visitThreshold: 1")},
		{"file-tls-both", "tls: {certFile: files/cert.pem, keyFile: files/key.pem, acme: {domains: [a.example]}}\n" + point("visitThreshold: 1")},
		{"file-acme-no-domains", "tls: {acme: {email: a@b.c}}\n" + point("visitThreshold: 1")},
		{"file-acme-wildcard", "tls: {acme: {domains: [\"*.a.example\", a.example, a.example]}}\n" + point("visitThreshold: 1")},
		{"file-acme-storage-file", "tls: {acme: {domains: [a.example], storage: files/not-a-directory}}\n" + point("visitThreshold: 1")},
		{"file-acme-caroot-bad", "tls: {acme: {domains: [a.example], caRoot: files/ca.pem}}\n" + point("visitThreshold: 1")},
		{"file-acme-caroot-missing", "tls: {acme: {domains: [a.example], caRoot: files/none.pem}}\n" + point("visitThreshold: 1")},
		{"file-upstream-path", "upstream: http://127.0.0.1:9000/api\npoints: {}\n"},
		{"file-upstream-scheme", "upstream: ftp://127.0.0.1:9000\npoints: {}\n"},
		{"file-upstream-no-host", "upstream: http://\npoints: {}\n"},
		{"file-listen-bad", "listen: nowhere\nadmin: 0.0.0.0:99999\n" + point("visitThreshold: 1")},
		{"file-listen-same-as-admin", "listen: 0.0.0.0:8080\nadmin: 0.0.0.0:8080\n" + point("visitThreshold: 1")},
	}
}

// pointCases are the rules of a point's keys, alone and together.
func pointCases() []goldenCase {
	point := onePoint
	return []goldenCase{
		{"file-window-uneven", "window: 10s\nbuckets: 3\n" + point("visitThreshold: 1")},
		{"file-window-tiny-buckets", "window: 5ms\nbuckets: 10\n" + point("visitThreshold: 1")},
		{"file-buckets-too-many", "buckets: 100000\n" + point("visitThreshold: 1")},
		{"file-timeout-count-alone", point("timeoutCountThreshold: 3")},
		{"file-timeout-alone", point("timeoutThreshold: 250ms")},
		{"file-timeout-off-count", point("timeoutThreshold: -1", "timeoutCountThreshold: 3")},
		{"file-retry-alone", point("visitThreshold: 1", "retryInterval: 2s")},
		{"file-retry-longer", point("visitThreshold: 1", "delayTime: 2s", "retryInterval: 5s")},
		{"file-rate-start-alone", point("exceptionRateStart: 10")},
		{"file-rate-over", point("exceptionRateThreshold: 150")},
		{"file-bucket-size-alone", point("tokenBucketSize: 10")},
		{"file-recovery-alone", point("visitThreshold: 1", "recoveryTime: 10s")},
		{"file-recovery-start-alone", point("visitThreshold: 1", "recoveryStart: 30")},
		{"file-sheddable-no-route", point("visitThreshold: 10", "sheddableShare: 50")},
		{"file-sheddable-no-threshold", "upstream: http://127.0.0.1:9000\nroutes:\n  - {point: p, match: {}, priority: sheddable}\npoints:\n  p: {sheddableShare: 50}\n"},
		{"file-priority-bad", "upstream: http://127.0.0.1:9000\nroutes:\n  - {point: p, match: {}, priority: urgent}\npoints:\n  p: {visitThreshold: 1}\n"},
		{"file-no-strategy", point("mode: shadow")},
		{"file-fallback-body-and-file", point("visitThreshold: 1", "fallback: {body: x, bodyFile: files/body.json}")},
		{"file-fallback-body-file-missing", point("visitThreshold: 1", "fallback: {bodyFile: files/none.json}")},
		{"file-fallback-body-file-empty", point("visitThreshold: 1", "fallback: {bodyFile: \"\"}")},
		{"file-fallback-status", point("visitThreshold: 1", "fallback: {status: 99, grpcStatus: 17, grpcMessage: \"\"}")},
		{"file-fallback-headers", point("visitThreshold: 1", "fallback: {headers: {\"Bad Name\": x, Content-Length: 3, X: [a, [b]], Y: ~, Z: {a: b}}}")},
		{"file-fallback-headers-list", point("visitThreshold: 1", "fallback: {headers: [a]}")},
		{"file-fallback-on-error-only", point("fallbackOnError: true")},
		{"file-adaptive-defaults", point("adaptiveConcurrency: {}")},
		{"file-adaptive-min-over-max", point("adaptiveConcurrency: {minLimit: 50, maxLimit: 10}")},
		{"file-adaptive-interval-order", point("adaptiveConcurrency: {interval: 2s, minLatencyInterval: 1s}")},
		{"file-adaptive-with-concurrent", point("concurrentThreshold: 5", "adaptiveConcurrency: {}")},
		{"file-cluster-bucket-alone", point("clusterTokenBucket: {tokensPerSecond: 10}")},
		{"file-cluster-no-addresses", "cluster: {replicas: 2}\n" + point("clusterTokenBucket: {tokensPerSecond: 10}")},
		{"file-cluster-unused", "cluster: {addresses: [127.0.0.1:6379]}\n" + point("visitThreshold: 1")},
		{"file-cluster-addresses-bad", "cluster: {addresses: [redis, \"redis:0\", \"a:1\", \"a:1\"], db: 2}\n" + point("clusterTokenBucket: {tokensPerSecond: 10}")},
		{"file-cluster-password-missing", "cluster: {addresses: [127.0.0.1:6379], passwordFile: files/none}\n" + point("clusterTokenBucket: {tokensPerSecond: 10}")},
		{"file-cluster-tls-half", "cluster: {addresses: [127.0.0.1:6379], tls: {certFile: files/client.pem}}\n" + point("clusterTokenBucket: {tokensPerSecond: 10}")},
		{"file-cluster-sentinel", "cluster: {addresses: [\"a:1\", \"b:1\"], masterName: m, db: 2}\n" + point("clusterTokenBucket: {tokensPerSecond: 10, size: 5}")},
		{"file-admin-token-missing", "adminTokenFile: files/none\n" + point("visitThreshold: 1")},
		{"file-admin-token-short", "adminTokenFile: files/redis-password\n" + point("visitThreshold: 1")},
		{"file-admin-token-empty", "adminTokenFile: \"\"\n" + point("visitThreshold: 1")},
		{"file-drain-negative", "drainTimeout: -1s\n" + point("visitThreshold: 1")},
		{"file-bare-millis", "window: 10\ndrainTimeout: 30\n" + point("visitThreshold: 1", "delayTime: 5", "retryInterval: 1", "recoveryTime: 20")},
		{"file-pressure-downgrade-no-header", point("visitThreshold: 1", "pressureTestDowngrade: true")},
		{"file-pressure-header-bad", "pressureTestHeader: \"X Bad\"\n" + point("visitThreshold: 1")},
		{"file-thresholds-negative", point("visitThreshold: -5", "concurrentThreshold: -1", "delayTime: -1", "delayTime2: 1")},
		{"file-downgrade-negative", point("visitThreshold: 1", "downgradeRate: -1")},
		{"file-many-problems", "lisen: x\nupstream: ftp://x\nwindow: 10\nbuckets: 0\nroutes:\n  - {point: q, match: {path: a, pathPrefix: b}}\npoints:\n  p:\n    visitThresold: 1\n    timeoutCountThreshold: 2\n    downgradeRate: 101\n    fallback: {status: 700}\n"},
		{"file-deep-alias", "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\nupstream: http://127.0.0.1:9000\n"},
		{"file-crlf", strings.ReplaceAll(point("visitThreshold: x"), "\n", "\r\n")},
		{"file-bom", "\ufeff" + point("visitThreshold: 1")},
	}
}
