package inject

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sds-proxy/sds-proxy/cmd/internal/cli"
)

// Run is `sds-proxy inject`: it reads Kubernetes YAML on stdin, adds the
// sds-proxy sidecar to every Deployment, StatefulSet, DaemonSet and Pod
// (List items included), and writes the documents to stdout; see YAML.
// fs is the command's flag set, which main made; its output is stderr. A
// refusal writes nothing to stdout: each problem goes to stderr as
// "sds-proxy inject: document N (Kind name): reason" and Run returns
// cli.ErrInvalid (exit 1). A missing or wrong flag (Options.check) is
// cli.ErrUsage (exit 2).
func Run(fs *flag.FlagSet, args []string, stdin io.Reader, stdout io.Writer) error {
	stderr := fs.Output()
	var o Options
	fs.StringVar(&o.Image, "image", "", "the sds-proxy image (required)")
	fs.StringVar(&o.ConfigMap, "configmap", "sds-proxy", "the ConfigMap holding sds.yaml, mounted as a directory at /etc/sds")
	fs.IntVar(&o.UpstreamPort, "upstream-port", 0, "the app's port, the upstream in sds.yaml (needed by -service-target)")
	fs.BoolVar(&o.Legacy, "legacy-sidecar", false, "add an ordinary container instead of a native sidecar (Kubernetes < 1.29)")
	fs.BoolVar(&o.ServiceTarget, "service-target", false, "repoint the targetPort of the Services that select an injected pod from -upstream-port to the proxy port (-proxy-port)")
	fs.IntVar(&o.ProxyPort, "proxy-port", defaultProxyPort, "the sidecar's proxy port, when the app already uses the default (passed as -listen 0.0.0.0:N)")
	fs.IntVar(&o.AdminPort, "admin-port", defaultAdminPort, "the sidecar's admin port, for its probes, metrics and /status (passed as -admin 0.0.0.0:N)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("inject: unexpected arguments %q (the YAML comes on stdin)", fs.Args())
	}
	if err := o.check(); err != nil {
		return cli.Usagef("inject: %s", strings.ReplaceAll(err.Error(), "\n", "\nsds-proxy: inject: "))
	}
	in, err := io.ReadAll(io.LimitReader(stdin, maxInput+1))
	if err != nil {
		return fmt.Errorf("inject: reading stdin: %w", err)
	}
	if len(in) > maxInput {
		return fmt.Errorf("inject: the input is larger than %d MiB", maxInput>>20)
	}
	out, warnings, err := YAML(in, o)
	for _, w := range warnings {
		fmt.Fprintln(stderr, "sds-proxy inject: warning:", w)
	}
	if err != nil {
		fmt.Fprintln(stderr, "sds-proxy inject:", strings.ReplaceAll(err.Error(), "\n", "\nsds-proxy inject: "))
		return cli.ErrInvalid
	}
	_, err = stdout.Write(out)
	return err
}

// maxInput bounds what inject reads from stdin, in bytes: far more
// than any set of manifests, far less than a runaway pipe.
const maxInput = 32 << 20

// Options are inject's flags. The zero value is not usable: Image is
// required, and the ports must be set (check).
type Options struct {
	Image         string // the sidecar's image
	ConfigMap     string // the ConfigMap mounted at /etc/sds
	UpstreamPort  int    // the app's port; 0 when not given
	Legacy        bool   // an ordinary container rather than a native sidecar
	ServiceTarget bool   // repoint Services from UpstreamPort to ProxyPort
	// ProxyPort and AdminPort are the sidecar's ports, 1 to 65535 and
	// distinct. At their defaults (defaultProxyPort, defaultAdminPort) the
	// sidecar takes them from sds.yaml, which must keep its default listen
	// and admin; a port moved off its default is passed as -listen or
	// -admin 0.0.0.0:N, which override the file.
	ProxyPort, AdminPort int
}

// check returns what is wrong with the flags, for the user to fix on the
// command line: every problem, one a line.
func (o Options) check() error {
	var errs []error
	if o.Image == "" {
		errs = append(errs, errors.New("-image is required, such as -image registry.example/sds-proxy:1.0"))
	}
	if o.ConfigMap == "" {
		errs = append(errs, errors.New("-configmap must name the ConfigMap that holds sds.yaml"))
	}
	ports := []struct {
		flag string
		n    int
	}{{"-proxy-port", o.ProxyPort}, {"-admin-port", o.AdminPort}, {"-upstream-port", o.UpstreamPort}}
	for _, p := range ports {
		if p.n < 0 || p.n > 65535 || p.n == 0 && p.flag != "-upstream-port" {
			errs = append(errs, fmt.Errorf("%s %d: want a port from 1 to 65535", p.flag, p.n))
		}
	}
	switch {
	case o.ProxyPort == o.AdminPort:
		errs = append(errs, fmt.Errorf("-proxy-port and -admin-port are both %d: the sidecar needs two ports", o.ProxyPort))
	case o.UpstreamPort != 0 && (o.UpstreamPort == o.ProxyPort || o.UpstreamPort == o.AdminPort):
		which := "-proxy-port"
		if o.UpstreamPort == o.AdminPort {
			which = "-admin-port"
		}
		errs = append(errs, fmt.Errorf("-upstream-port %d is the sidecar's %s too; the app and the sidecar share the pod's ports: move the sidecar's with %s N", o.UpstreamPort, which, which))
	}
	if o.ServiceTarget && o.UpstreamPort == 0 {
		errs = append(errs, errors.New("-service-target needs -upstream-port, the app's port that Services target today"))
	}
	return errors.Join(errs...)
}

// The sidecar's names, and its default ports: sds.yaml's defaults for
// listen and admin (config.DefaultListen, config.DefaultAdmin).
const (
	sidecarName      = "sds-proxy"
	configVolume     = "sds-config"
	tmpVolume        = "sds-tmp"
	defaultProxyPort = 8080
	defaultAdminPort = 9901
)

// sidecarTemplate is the sidecar container, the same as the one that
// deploy/components/sidecar adds (deploy/check compares them): IMAGE
// becomes -image, -legacy-sidecar drops restartPolicy, and -proxy-port
// and -admin-port change the ports and add -listen and -admin to args.
// The probes name the admin port, so they follow it.
const sidecarTemplate = `name: sds-proxy
image: IMAGE
restartPolicy: Always
args: ["run", "-config", "/etc/sds/sds.yaml"]
ports:
  - {name: proxy, containerPort: 8080}
  - {name: admin, containerPort: 9901}
startupProbe:
  httpGet: {path: /readyz, port: admin}
  periodSeconds: 1
  failureThreshold: 30
readinessProbe:
  httpGet: {path: /readyz, port: admin}
  periodSeconds: 2
livenessProbe:
  httpGet: {path: /healthz, port: admin}
  periodSeconds: 10
env:
  # certmagic keeps ACME state under $HOME: the sds-tmp volume.
  - {name: HOME, value: /tmp}
  # GOMEMLIMIT follows this container's memory limit (see the README).
  - name: SDS_MEMORY_LIMIT
    valueFrom:
      resourceFieldRef: {containerName: sds-proxy, resource: limits.memory}
resources:
  requests: {cpu: 50m, memory: 32Mi}
  limits: {memory: 128Mi}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities: {drop: [ALL]}
  seccompProfile: {type: RuntimeDefault}
volumeMounts:
  # A directory, never a subPath: a subPath mount never sees an update.
  - {name: sds-config, mountPath: /etc/sds, readOnly: true}
  - {name: sds-tmp, mountPath: /tmp}
`

// sidecarPortNames are the names of the sidecar's ports, unique in a pod.
var sidecarPortNames = []string{"proxy", "admin"}

// sidecar returns the sidecar container with the options' image and
// ports; a native sidecar (restartPolicy: Always, for initContainers)
// unless o.Legacy. Each call returns new nodes.
func sidecar(o Options) *yaml.Node {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(sidecarTemplate), &doc); err != nil {
		panic(err) // a constant: covered by every inject test
	}
	c := doc.Content[0]
	img := mapGet(c, "image")
	img.Value, img.Style, img.Tag = o.Image, 0, "!!str"
	args := mapGet(c, "args")
	for _, p := range []struct {
		name, flag  string
		n, standard int
	}{{"proxy", "-listen", o.ProxyPort, defaultProxyPort}, {"admin", "-admin", o.AdminPort, defaultAdminPort}} {
		if p.n == p.standard {
			continue
		}
		for _, a := range []string{p.flag, "0.0.0.0:" + strconv.Itoa(p.n)} {
			n := str(a)
			n.Style = yaml.DoubleQuotedStyle // as the template's args
			args.Content = append(args.Content, n)
		}
		for _, port := range seq(mapGet(c, "ports")) {
			if scalar(mapGet(port, "name")) == p.name {
				mapGet(port, "containerPort").Value = strconv.Itoa(p.n)
			}
		}
	}
	if o.Legacy {
		c.Content = append(c.Content[:4], c.Content[6:]...) // restartPolicy: Always
	}
	return c
}

// sidecarPorts returns the containerPorts of a sidecar container's ports
// named proxy and admin; 0 for one it lacks.
func sidecarPorts(c *yaml.Node) (proxy, admin int) {
	for _, port := range seq(mapGet(c, "ports")) {
		n, _ := strconv.Atoi(scalar(mapGet(port, "containerPort")))
		switch scalar(mapGet(port, "name")) {
		case sidecarPortNames[0]:
			proxy = n
		case sidecarPortNames[1]:
			admin = n
		}
	}
	return proxy, admin
}

// sidecarVolume returns the pod volume the sidecar mounts as name.
func sidecarVolume(name string, o Options) *yaml.Node {
	v := mapping("name", str(name), "emptyDir", mapping())
	if name == configVolume {
		v = mapping("name", str(name), "configMap", mapping("name", str(o.ConfigMap)))
	}
	v.Content[3].Style = yaml.FlowStyle
	return v
}

// YAML injects the sidecar into every pod of in, a stream of YAML
// documents separated by "---" lines, as kubectl splits them. A document
// that needs no change is written back byte for byte (so injecting twice
// changes nothing); one that changes is re-encoded by yaml.v3, which keeps
// its order and comments but not always its spacing. Warnings are things
// that were left alone that the user may want to know about; err joins
// every refusal, each naming its document (1-based) and kind/name, and out
// is nil then.
func YAML(in []byte, o Options) (out []byte, warnings []string, err error) {
	docs := splitDocuments(in)
	parsed, errs := parseDocuments(docs)
	changed := make([]bool, len(docs))
	var pods []podTemplate
	for i, n := range parsed {
		for j, obj := range objects(n) {
			where := fmt.Sprintf("document %d", i+1)
			if kind(n) == "List" {
				where = fmt.Sprintf("%s, item %d", where, j+1)
			}
			p, ch, err := injectObject(obj, where, o)
			changed[i] = changed[i] || ch
			pods = append(pods, p...)
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	if o.UpstreamPort != 0 {
		for _, p := range pods {
			if !p.declares(o.UpstreamPort) {
				warnings = append(warnings, fmt.Sprintf("%s: no container declares the upstream port %d", p.where, o.UpstreamPort))
			}
			warnings = append(warnings, p.warnings...)
		}
	}
	if o.ServiceTarget {
		for i, n := range parsed {
			for _, obj := range objects(n) {
				ch, w := retargetService(obj, fmt.Sprintf("document %d", i+1), pods, o.UpstreamPort, o.ProxyPort)
				changed[i] = changed[i] || ch
				warnings = append(warnings, w...)
			}
		}
	}
	if len(errs) > 0 {
		return nil, warnings, errors.Join(errs...)
	}
	out, err = encodeDocuments(docs, parsed, changed)
	return out, warnings, err
}

// parseDocuments parses each document: the root node of each, nil for a
// document of comments or nothing, or for one that is malformed, which
// errs reports with its line in the stream.
func parseDocuments(docs []document) (parsed []*yaml.Node, errs []error) {
	parsed = make([]*yaml.Node, len(docs))
	for i, d := range docs {
		var n yaml.Node
		if err := yaml.Unmarshal(d.body, &n); err != nil {
			// Parsed again after as many empty lines as come before it, the
			// document's error names the line of the stream.
			err = yaml.Unmarshal(append(bytes.Repeat([]byte("\n"), d.line-1), d.body...), &n)
			errs = append(errs, fmt.Errorf("document %d: malformed YAML: %v", i+1, err))
			continue
		}
		if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
			parsed[i] = n.Content[0]
		}
	}
	return parsed, errs
}

// objects returns the objects of a parsed document: the items of a List,
// or the document's object itself; none for nil.
func objects(n *yaml.Node) []*yaml.Node {
	if n == nil {
		return nil
	}
	if kind(n) != "List" {
		return []*yaml.Node{n}
	}
	if items := mapGet(n, "items"); items != nil && items.Kind == yaml.SequenceNode {
		return items.Content
	}
	return nil
}

// encodeDocuments writes the stream again: each document as it came unless
// changed, when it is encoded from its parsed node.
func encodeDocuments(docs []document, parsed []*yaml.Node, changed []bool) ([]byte, error) {
	var buf bytes.Buffer
	for i, d := range docs {
		buf.Write(d.separator)
		if !changed[i] {
			buf.Write(d.body)
			continue
		}
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		if err := enc.Encode(parsed[i]); err != nil {
			return nil, fmt.Errorf("document %d: %v", i+1, err)
		}
		if err := enc.Close(); err != nil {
			return nil, fmt.Errorf("document %d: %v", i+1, err)
		}
	}
	return buf.Bytes(), nil
}

// document is one YAML document of a stream: its "---" line (empty for a
// first document without one) and what follows up to the next.
type document struct {
	separator []byte
	body      []byte
	line      int // the line of body's first byte, 1-based
}

// splitDocuments splits a stream at the lines that begin with "---", as
// Kubernetes' YAML reader does. Concatenating the separators and bodies
// gives back in.
func splitDocuments(in []byte) []document {
	var docs []document
	cur := document{line: 1}
	line := 1
	for len(in) > 0 {
		end := bytes.IndexByte(in, '\n') + 1
		if end == 0 {
			end = len(in)
		}
		l := in[:end]
		if isSeparator(l) {
			if len(cur.separator) > 0 || len(cur.body) > 0 {
				docs = append(docs, cur)
			}
			cur = document{separator: l, line: line + 1}
		} else {
			cur.body = append(cur.body, l...)
		}
		in = in[end:]
		line++
	}
	if len(cur.separator) > 0 || len(cur.body) > 0 || len(docs) == 0 {
		docs = append(docs, cur)
	}
	return docs
}

func isSeparator(l []byte) bool {
	l = bytes.TrimRight(l, "\r\n")
	return bytes.HasPrefix(l, []byte("---")) && (len(l) == 3 || l[3] == ' ' || l[3] == '\t')
}

// podTemplate is an injected pod's labels, for matching Services, and the
// ports its containers declare.
type podTemplate struct {
	where     string
	namespace string
	labels    map[string]string
	ports     map[string]int // containerPort by name; unnamed ones under ""+port
	warnings  []string       // about the containers that serve the upstream port
}

func (p podTemplate) declares(port int) bool {
	for _, v := range p.ports {
		if v == port {
			return true
		}
	}
	return false
}

// injectObject injects the sidecar into obj when it is a kind that holds a
// pod, and reports whether it changed obj. where names the document for
// errors.
func injectObject(obj *yaml.Node, where string, o Options) ([]podTemplate, bool, error) {
	if obj.Kind != yaml.MappingNode {
		return nil, false, nil
	}
	k := kind(obj)
	meta := mapGet(obj, "metadata")
	name := scalar(mapGet(meta, "name"))
	if name == "" {
		name = scalar(mapGet(meta, "generateName"))
	}
	where = fmt.Sprintf("%s (%s %s)", where, k, name)
	var spec, labels *yaml.Node
	switch k {
	case "Pod":
		spec, labels = mapGet(obj, "spec"), mapGet(meta, "labels")
	case "Deployment", "StatefulSet", "DaemonSet":
		tmpl := mapGet(mapGet(obj, "spec"), "template")
		spec, labels = mapGet(tmpl, "spec"), mapGet(mapGet(tmpl, "metadata"), "labels")
	default:
		return nil, false, nil
	}
	if spec == nil || spec.Kind != yaml.MappingNode {
		return nil, false, fmt.Errorf("%s: no pod spec to inject into", where)
	}
	changed, err := injectPod(spec, o)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", where, err)
	}
	p := podTemplate{where: where, namespace: scalar(mapGet(meta, "namespace")), labels: stringMap(labels), ports: map[string]int{}}
	for _, list := range []string{"initContainers", "containers"} {
		for _, c := range seq(mapGet(spec, list)) {
			upstream := false
			for _, port := range seq(mapGet(c, "ports")) {
				n, _ := strconv.Atoi(scalar(mapGet(port, "containerPort")))
				key := scalar(mapGet(port, "name"))
				if key == "" {
					key = strconv.Itoa(n)
				}
				p.ports[key] = n
				upstream = upstream || (n == o.UpstreamPort && n != 0)
			}
			if upstream && list == "containers" && mapGet(mapGet(c, "lifecycle"), "preStop") == nil {
				p.warnings = append(p.warnings, fmt.Sprintf("%s: container %s has no preStop: in a rollout it can exit while the Service still sends it traffic, and the proxy answers 502 (see the README)", where, scalar(mapGet(c, "name"))))
			}
		}
	}
	return []podTemplate{p}, changed, nil
}

// injectPod adds the sidecar, its volume and a pod-level seccompProfile to
// a pod spec, each only if absent, and reports whether it changed spec. It
// changes nothing when it returns an error.
func injectPod(spec *yaml.Node, o Options) (bool, error) {
	if err := checkPodShape(spec, o); err != nil {
		return false, err
	}
	existing, want, err := findSidecar(spec, o)
	if err != nil {
		return false, err
	}
	missing, err := missingVolumes(spec, o)
	if err != nil {
		return false, err
	}
	changed := false
	if existing == nil {
		l := mapGet(spec, want)
		if l == nil || l.Kind != yaml.SequenceNode {
			l = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			mapSet(spec, want, l)
		}
		l.Content = append(l.Content, sidecar(o))
		changed = true
	}
	volumes := mapGet(spec, "volumes")
	for _, name := range missing {
		if volumes == nil || volumes.Kind != yaml.SequenceNode {
			volumes = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			mapSet(spec, "volumes", volumes)
		}
		volumes.Content = append(volumes.Content, sidecarVolume(name, o))
		changed = true
	}
	sc := mapGet(spec, "securityContext")
	if sc == nil || sc.Kind != yaml.MappingNode {
		sc = mapping()
		mapSet(spec, "securityContext", sc)
	}
	if mapGet(sc, "seccompProfile") == nil {
		mapSet(sc, "seccompProfile", mapping("type", str("RuntimeDefault")))
		changed = true
	}
	return changed, nil
}

// checkPodShape refuses a pod spec the sidecar cannot join: one on the
// node's network, one whose lists are of the wrong type, one with no
// containers.
func checkPodShape(spec *yaml.Node, o Options) error {
	if scalar(mapGet(spec, "hostNetwork")) == "true" {
		return fmt.Errorf("hostNetwork pods share the node's ports: the sidecar's %d and %d would collide across pods; inject only pods with their own network", o.ProxyPort, o.AdminPort)
	}
	for _, f := range []struct {
		name, what string
		kind       yaml.Kind
	}{
		{"containers", "list", yaml.SequenceNode},
		{"initContainers", "list", yaml.SequenceNode},
		{"volumes", "list", yaml.SequenceNode},
		{"securityContext", "mapping", yaml.MappingNode},
	} {
		if v := mapGet(spec, f.name); v != nil && v.Kind != f.kind && v.Tag != "!!null" {
			return fmt.Errorf("its %s is neither a %s nor null", f.name, f.what)
		}
	}
	if len(seq(mapGet(spec, "containers"))) == 0 {
		return errors.New("the pod has no containers: nothing for the sidecar to stand in front of")
	}
	return nil
}

// findSidecar returns the pod's sds-proxy container (nil when it has none)
// and the list it belongs in, refusing a pod whose sidecar is in the other
// list or has another image or other ports, and one whose containers use
// the sidecar's ports (o.ProxyPort, o.AdminPort) or port names.
func findSidecar(spec *yaml.Node, o Options) (existing *yaml.Node, want string, err error) {
	want, other := "initContainers", "containers"
	if o.Legacy {
		want, other = other, want
	}
	for _, list := range []string{"initContainers", "containers"} {
		for _, c := range seq(mapGet(spec, list)) {
			if scalar(mapGet(c, "name")) == sidecarName {
				if list == other {
					return nil, "", fmt.Errorf("it already has %s in %s; as a %s it belongs in %s (remove it to inject anew)", sidecarName, other, sidecarKind(o.Legacy), want)
				}
				existing = c
				continue
			}
			for _, port := range seq(mapGet(c, "ports")) {
				if n := scalar(mapGet(port, "containerPort")); n == strconv.Itoa(o.ProxyPort) || n == strconv.Itoa(o.AdminPort) {
					return nil, "", fmt.Errorf("container %s already uses port %s, one of the sidecar's (%d, %d): move the sidecar's with -proxy-port N or -admin-port N", scalar(mapGet(c, "name")), n, o.ProxyPort, o.AdminPort)
				}
				if n := scalar(mapGet(port, "name")); slices.Contains(sidecarPortNames, n) {
					return nil, "", fmt.Errorf("container %s already names a port %q, as the sidecar does: port names are unique in a pod; rename it", scalar(mapGet(c, "name")), n)
				}
			}
		}
	}
	if existing != nil {
		if img := scalar(mapGet(existing, "image")); img != o.Image {
			return nil, "", fmt.Errorf("it already has a container %s with image %q, not %q (remove it to inject anew)", sidecarName, img, o.Image)
		}
		if proxy, admin := sidecarPorts(existing); proxy != o.ProxyPort || admin != o.AdminPort {
			return nil, "", fmt.Errorf("it already has a container %s on ports %d and %d, not %d and %d (remove it to inject anew)", sidecarName, proxy, admin, o.ProxyPort, o.AdminPort)
		}
	}
	return existing, want, nil
}

// missingVolumes returns the sidecar's volumes the pod lacks, refusing a
// pod that has one of their names for another volume.
func missingVolumes(spec *yaml.Node, o Options) ([]string, error) {
	missing := []string{configVolume, tmpVolume}
	for _, v := range seq(mapGet(spec, "volumes")) {
		name := scalar(mapGet(v, "name"))
		switch {
		case name == configVolume && scalar(mapGet(mapGet(v, "configMap"), "name")) != o.ConfigMap:
			return nil, fmt.Errorf("it already has a volume %s that is not the ConfigMap %s (remove it to inject anew)", configVolume, o.ConfigMap)
		case name == tmpVolume && mapGet(v, "emptyDir") == nil:
			return nil, fmt.Errorf("it already has a volume %s that is not an emptyDir (remove it to inject anew)", tmpVolume)
		}
		missing = slices.DeleteFunc(missing, func(m string) bool { return m == name })
	}
	return missing, nil
}

func sidecarKind(legacy bool) string {
	if legacy {
		return "legacy sidecar (-legacy-sidecar)"
	}
	return "native sidecar"
}

// retargetService points the ports of a Service that selects one of pods
// at proxyPort, where they target port (by number, by the name of a
// container port with that number, or by default through port itself).
func retargetService(obj *yaml.Node, where string, pods []podTemplate, port, proxyPort int) (changed bool, warnings []string) {
	if kind(obj) != "Service" {
		return false, nil
	}
	meta := mapGet(obj, "metadata")
	where = fmt.Sprintf("%s (Service %s)", where, scalar(mapGet(meta, "name")))
	spec := mapGet(obj, "spec")
	selector := stringMap(mapGet(spec, "selector"))
	if len(selector) == 0 {
		return false, nil
	}
	ns := scalar(mapGet(meta, "namespace"))
	var matched []podTemplate
	for _, p := range pods {
		if (ns == p.namespace || ns == "" || p.namespace == "") && selects(selector, p.labels) {
			matched = append(matched, p)
		}
	}
	if len(matched) == 0 {
		return false, nil
	}
	for _, sp := range seq(mapGet(spec, "ports")) {
		target := mapGet(sp, "targetPort")
		t := scalar(target)
		if target == nil {
			t = scalar(mapGet(sp, "port"))
		}
		hit := t == strconv.Itoa(port)
		for _, p := range matched {
			if n, ok := p.ports[t]; ok && n == port && t != strconv.Itoa(n) {
				hit = true
			}
		}
		if !hit {
			continue
		}
		if target == nil {
			target = &yaml.Node{Kind: yaml.ScalarNode}
			mapSet(sp, "targetPort", target)
		}
		target.Value, target.Tag, target.Style = strconv.Itoa(proxyPort), "!!int", 0
		changed = true
	}
	if !changed && !serviceTargets(spec, proxyPort) {
		warnings = append(warnings, fmt.Sprintf("%s selects an injected pod but no port targets %d; left unchanged", where, port))
	}
	return changed, warnings
}

// serviceTargets reports whether a Service's spec already targets port.
func serviceTargets(spec *yaml.Node, port int) bool {
	for _, sp := range seq(mapGet(spec, "ports")) {
		if t := scalar(mapGet(sp, "targetPort")); t == strconv.Itoa(port) || t == sidecarPortNames[0] {
			return true
		}
	}
	return false
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if lv, ok := labels[k]; !ok || lv != v {
			return false
		}
	}
	return true
}

// The yaml.Node helpers. Each accepts nil and follows aliases where it reads.

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// mapGet returns the value of key in mapping m, or nil.
func mapGet(m *yaml.Node, key string) *yaml.Node {
	m = resolve(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return resolve(m.Content[i+1])
		}
	}
	return nil
}

// mapSet sets key in mapping m to v, replacing its value or appending it.
func mapSet(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, str(key), v)
}

func mapping(kv ...any) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Content = append(m.Content, str(kv[i].(string)), kv[i+1].(*yaml.Node))
	}
	return m
}

func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

func scalar(n *yaml.Node) string {
	if n = resolve(n); n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

func seq(n *yaml.Node) []*yaml.Node {
	if n = resolve(n); n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	return n.Content
}

func kind(obj *yaml.Node) string { return scalar(mapGet(obj, "kind")) }

func stringMap(n *yaml.Node) map[string]string {
	n = resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	m := make(map[string]string, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		m[n.Content[i].Value] = scalar(n.Content[i+1])
	}
	return m
}
