package check

import (
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

// sidecarName is the sds-proxy container's name in every manifest.
const sidecarName = "sds-proxy"

// renders are the kustomizations a user builds. native: sds-proxy is a
// native sidecar (an init container with restartPolicy Always) rather
// than an ordinary container. networkPolicy: the render must admit only
// the proxy and admin ports to the proxied pods.
var renders = []struct {
	dir                   string
	native, networkPolicy bool
}{
	{dir: "../base", native: true, networkPolicy: true},
	{dir: "../overlays/example", native: true, networkPolicy: true},
	{dir: "../overlays/pre-1.29", native: false, networkPolicy: true},
	{dir: "../overlays/fleet", native: true, networkPolicy: true},
	{dir: "testdata/component", native: true},
}

// manifestDirs hold the hand-written manifests (deploy/prometheus and
// deploy/grafana hold other kinds and have tests of their own).
var manifestDirs = []string{"../base", "../components", "../injector", "../overlays", "testdata/component"}

// TestManifestFilesDecodeStrictly: every YAML file under deploy/'s
// kustomize tree is a strict k8s.io/api document, a strict kustomization
// or a JSON 6902 patch, and no kustomization generates a ConfigMap with a
// hash suffix (which would roll the pods on every edit instead of the
// proxy hot-reloading).
func TestManifestFilesDecodeStrictly(t *testing.T) {
	t.Parallel()
	files := 0
	for _, root := range manifestDirs {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
				return err
			}
			files++
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			switch {
			case d.Name() == "kustomization.yaml":
				checkKustomization(t, path, data)
			case strings.HasPrefix(strings.TrimSpace(stripComments(data)), "- "):
				var ops []struct {
					Op    string `json:"op"`
					Path  string `json:"path"`
					From  string `json:"from,omitempty"`
					Value any    `json:"value,omitempty"`
				}
				if err := yaml.UnmarshalStrict(data, &ops); err != nil {
					t.Errorf("%s: not a JSON 6902 patch: %v", path, err)
				}
			default:
				if _, err := decodeStrict(path, data); err != nil {
					t.Error(err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 10 {
		t.Errorf("checked %d files, want the whole tree (10 or more)", files)
	}
}

// stripComments drops the comment lines of a YAML file.
func stripComments(data []byte) string {
	var b strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// checkKustomization decodes a kustomization strictly and refuses a
// ConfigMap generator with a hash suffix.
func checkKustomization(t *testing.T, path string, data []byte) {
	t.Helper()
	var k types.Kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	noHash := k.GeneratorOptions != nil && k.GeneratorOptions.DisableNameSuffixHash
	for _, g := range k.ConfigMapGenerator {
		if !noHash && (g.Options == nil || !g.Options.DisableNameSuffixHash) {
			t.Errorf("%s: configMapGenerator %q adds a hash suffix: an edit rolls the pods instead of hot-reloading; set options.disableNameSuffixHash", path, g.Name)
		}
	}
}

// TestRenders: each kustomization builds, decodes strictly, passes the
// restricted Pod Security Standard (latest version) with no violation,
// and runs sds-proxy as the proxy needs (see checkProxiedPod).
func TestRenders(t *testing.T) {
	t.Parallel()
	for _, r := range renders {
		t.Run(r.dir, func(t *testing.T) {
			t.Parallel()
			data, err := render(r.dir)
			if err != nil {
				t.Fatalf("kustomize build %s: %v", r.dir, err)
			}
			objs, err := decodeStrict(r.dir, data)
			if err != nil {
				t.Fatal(err)
			}
			proxied := 0
			for _, o := range objs {
				meta, spec, ok := podTemplate(o)
				if !ok {
					continue
				}
				checkRestricted(t, o.Kind+"/"+o.Name, meta, spec)
				if findContainer(spec, sidecarName) == nil {
					continue
				}
				proxied++
				checkProxiedPod(t, o.Kind+"/"+o.Name, objs, meta, spec, r.native, r.networkPolicy)
			}
			if proxied == 0 {
				t.Errorf("no pod runs %s", sidecarName)
			}
		})
	}
}

// checkRestricted evaluates a pod with pod-security-admission's checks at
// level restricted, latest version.
func checkRestricted(t *testing.T, name string, meta *metav1.ObjectMeta, spec *corev1.PodSpec) {
	t.Helper()
	ev, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	lv := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	res := policy.AggregateCheckResults(ev.EvaluatePod(lv, meta, spec))
	if !res.Allowed {
		t.Errorf("%s violates restricted:latest: %s: %s", name, res.ForbiddenReason(), res.ForbiddenDetail())
	}
}

// findContainer returns the container or init container called name.
func findContainer(spec *corev1.PodSpec, name string) *corev1.Container {
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// proxyConfig is what these tests read of the embedded sds.yaml (the main
// module's deploy test validates all of it with the proxy's own parser).
type proxyConfig struct {
	Listen, Admin, Upstream, DrainTimeout string
}

// port returns the port of a host:port address, or def when addr is empty.
func port(t *testing.T, addr string, def int32) int32 {
	t.Helper()
	if addr == "" {
		return def
	}
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return int32(n)
}

// checkProxiedPod holds a pod running sds-proxy to what the decoder and
// the Pod Security Standard cannot check.
func checkProxiedPod(t *testing.T, name string, objs []object, meta *metav1.ObjectMeta, spec *corev1.PodSpec, native, wantNetworkPolicy bool) {
	t.Helper()
	proxy := findContainer(spec, sidecarName)

	// Native sidecar, or (old clusters) an ordinary container.
	isInit := slices.ContainsFunc(spec.InitContainers, func(c corev1.Container) bool { return c.Name == sidecarName })
	always := proxy.RestartPolicy != nil && *proxy.RestartPolicy == corev1.ContainerRestartPolicyAlways
	if native && (!isInit || !always) {
		t.Errorf("%s: %s is init container %v with restartPolicy Always %v, want a native sidecar (both)", name, sidecarName, isInit, always)
	}
	if !native && (isInit || proxy.RestartPolicy != nil) {
		t.Errorf("%s: %s is an init container (%v) or has a restartPolicy (%v), want an ordinary container for clusters before 1.29", name, sidecarName, isInit, proxy.RestartPolicy != nil)
	}

	// A numeric user wherever runAsNonRoot, and 65532 (the image's) for the proxy.
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		nonRoot, uid := effectiveUser(spec, &c)
		if nonRoot && (uid == nil || *uid == 0) {
			t.Errorf("%s: container %s has runAsNonRoot and no numeric non-zero runAsUser: the kubelet cannot check a named image user", name, c.Name)
		}
		if c.Name == sidecarName && (uid == nil || *uid != 65532) {
			t.Errorf("%s: %s runs as %v, want 65532 (the image's USER)", name, sidecarName, uid)
		}
		// Found on a real kubelet (deploy/cluster): it hands the runtime the
		// image's UID alone, and containerd takes the group from the image's
		// /etc/passwd, 0 where it has none; USER 65532:65532 loses its group.
		// The proxy's group is ours to set (the app's is the user's).
		if gid := effectiveGroup(spec, &c); c.Name == sidecarName && (gid == nil || *gid != 65532) {
			t.Errorf("%s: %s runs in group %v, want runAsGroup 65532 (without it, the group the image's /etc/passwd gives, root's in an image without one)", name, sidecarName, gid)
		}
	}

	// The config: a ConfigMap directory mount (no subPath), the ConfigMap in the render.
	cfgPath := configArg(proxy.Args)
	if cfgPath == "" {
		t.Fatalf("%s: %s args %q have no -config", name, sidecarName, proxy.Args)
	}
	var cm *corev1.ConfigMap
	for _, m := range proxy.VolumeMounts {
		if m.MountPath != filepath.Dir(cfgPath) {
			continue
		}
		if m.SubPath != "" || m.SubPathExpr != "" {
			t.Errorf("%s: the config is mounted with subPath %q: it never updates, hot reload breaks", name, m.SubPath+m.SubPathExpr)
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				cm = findConfigMap(objs, v.ConfigMap.Name)
			}
		}
	}
	if cm == nil {
		t.Fatalf("%s: no ConfigMap of the render is mounted at %s (the directory of -config %s)", name, filepath.Dir(cfgPath), cfgPath)
	}
	var cfg proxyConfig
	if err := yaml.Unmarshal([]byte(cm.Data[filepath.Base(cfgPath)]), &cfg); err != nil {
		t.Fatalf("%s: ConfigMap %s: %v", name, cm.Name, err)
	}
	// The command line overrides the file, as in sds-proxy run.
	if a := flagArg(proxy.Args, "listen"); a != "" {
		cfg.Listen = a
	}
	if a := flagArg(proxy.Args, "admin"); a != "" {
		cfg.Admin = a
	}
	listen, admin := port(t, cfg.Listen, 8080), port(t, cfg.Admin, 9901)
	// The kubelet probes from the node to the pod's IP (on a real kubelet,
	// deploy/cluster: GET http://10.88.0.x:9901/readyz), and Services send
	// there too: neither port may listen on loopback alone.
	for _, a := range []struct{ key, addr string }{{"listen", cfg.Listen}, {"admin", cfg.Admin}} {
		if host, _, err := net.SplitHostPort(a.addr); err == nil && (host == "localhost" || net.ParseIP(host).IsLoopback()) {
			t.Errorf("%s: sds.yaml %s %q is on loopback: the kubelet's probes and the Service reach the pod's IP", name, a.key, a.addr)
		}
	}

	// The app is reachable only through the proxy: it listens on loopback.
	if u, err := url.Parse(cfg.Upstream); err != nil || !slices.Contains([]string{"127.0.0.1", "localhost", "::1"}, u.Hostname()) {
		t.Errorf("%s: upstream %q is not on loopback: the app would be reachable past the proxy", name, cfg.Upstream)
	}

	// Container ports match sds.yaml's listen and admin.
	ports := map[string]int32{}
	for _, p := range proxy.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["proxy"] != listen || ports["admin"] != admin {
		t.Errorf("%s: container ports proxy %d admin %d, want %d %d (sds.yaml's listen and admin)", name, ports["proxy"], ports["admin"], listen, admin)
	}

	// Probes on the admin port.
	for _, p := range []struct {
		kind, path string
		probe      *corev1.Probe
	}{
		{"startupProbe", "/readyz", proxy.StartupProbe},
		{"readinessProbe", "/readyz", proxy.ReadinessProbe},
		{"livenessProbe", "/healthz", proxy.LivenessProbe},
	} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: %s has no HTTP %s", name, sidecarName, p.kind)
			continue
		}
		if got := resolvePort(p.probe.HTTPGet.Port, ports); got != admin || p.probe.HTTPGet.Path != p.path {
			t.Errorf("%s: %s on port %d path %s, want %d %s", name, p.kind, got, p.probe.HTTPGet.Path, admin, p.path)
		}
	}

	// GOMEMLIMIT: SDS_MEMORY_LIMIT from the downward API, and a memory limit.
	wired := false
	for _, e := range proxy.Env {
		if e.Name == "SDS_MEMORY_LIMIT" && e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil &&
			e.ValueFrom.ResourceFieldRef.Resource == "limits.memory" &&
			(e.ValueFrom.ResourceFieldRef.ContainerName == "" || e.ValueFrom.ResourceFieldRef.ContainerName == sidecarName) {
			wired = true
		}
	}
	if !wired {
		t.Errorf("%s: %s has no SDS_MEMORY_LIMIT from resourceFieldRef limits.memory", name, sidecarName)
	}
	if proxy.Resources.Limits.Memory().IsZero() {
		t.Errorf("%s: %s has no memory limit: SDS_MEMORY_LIMIT would be the node's memory", name, sidecarName)
	}

	checkTermination(t, name, spec, proxy, cfg, native)

	// Services to the pod target the proxy port.
	podLabels := labels.Set(meta.Labels)
	for _, o := range objs {
		svc, ok := o.Obj.(*corev1.Service)
		if !ok || len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
			continue
		}
		for _, p := range svc.Spec.Ports {
			if got := resolvePort(p.TargetPort, ports); got != listen {
				t.Errorf("%s: Service %s port %d targets %s (%d), want the proxy port %d", name, svc.Name, p.Port, p.TargetPort.String(), got, listen)
			}
		}
	}

	// NetworkPolicies admit only the proxy and admin ports.
	policies := 0
	for _, o := range objs {
		np, ok := o.Obj.(*networkingv1.NetworkPolicy)
		if !ok {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || !sel.Matches(podLabels) {
			continue
		}
		policies++
		if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			t.Errorf("%s: NetworkPolicy %s has no Ingress policy type", name, np.Name)
		}
		for i, rule := range np.Spec.Ingress {
			if len(rule.Ports) == 0 {
				t.Errorf("%s: NetworkPolicy %s ingress rule %d admits every port", name, np.Name, i)
			}
			for _, p := range rule.Ports {
				if p.Port == nil || p.EndPort != nil {
					t.Errorf("%s: NetworkPolicy %s ingress rule %d admits a port range or every port", name, np.Name, i)
					continue
				}
				if got := resolvePort(*p.Port, ports); got != listen && got != admin {
					t.Errorf("%s: NetworkPolicy %s admits port %s, want only %d and %d", name, np.Name, p.Port.String(), listen, admin)
				}
			}
		}
	}
	if wantNetworkPolicy && policies == 0 {
		t.Errorf("%s: no NetworkPolicy selects the pod", name)
	}
}

// effectiveUser returns runAsNonRoot and runAsUser as the kubelet sees
// them: the container's, else the pod's.
func effectiveUser(spec *corev1.PodSpec, c *corev1.Container) (bool, *int64) {
	var nonRoot *bool
	var uid *int64
	if psc := spec.SecurityContext; psc != nil {
		nonRoot, uid = psc.RunAsNonRoot, psc.RunAsUser
	}
	if csc := c.SecurityContext; csc != nil {
		if csc.RunAsNonRoot != nil {
			nonRoot = csc.RunAsNonRoot
		}
		if csc.RunAsUser != nil {
			uid = csc.RunAsUser
		}
	}
	return nonRoot != nil && *nonRoot, uid
}

// effectiveGroup returns runAsGroup as the kubelet sees it: the
// container's, else the pod's.
func effectiveGroup(spec *corev1.PodSpec, c *corev1.Container) *int64 {
	if c.SecurityContext != nil && c.SecurityContext.RunAsGroup != nil {
		return c.SecurityContext.RunAsGroup
	}
	if spec.SecurityContext != nil {
		return spec.SecurityContext.RunAsGroup
	}
	return nil
}

// configArg returns the value of -config in args.
func configArg(args []string) string { return flagArg(args, "config") }

// flagArg returns the value of the flag -name (or --name) in args, as
// -name V or -name=V; "" when args do not give it.
func flagArg(args []string, name string) string {
	for i, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// findConfigMap returns the ConfigMap called name in objs, or nil.
func findConfigMap(objs []object, name string) *corev1.ConfigMap {
	for _, o := range objs {
		if cm, ok := o.Obj.(*corev1.ConfigMap); ok && cm.Name == name {
			return cm
		}
	}
	return nil
}

// resolvePort returns a port number, looking a name up in the
// container's named ports (0 if unknown).
func resolvePort(p intstr.IntOrString, named map[string]int32) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	return named[p.StrVal]
}

// checkTermination holds the pod to the termination order the README
// explains, so that a rollout causes no 502 through the proxy.
//
// Native sidecar: the app's preStop keeps it serving while the endpoints
// drop the pod; the proxy is stopped only after the app has exited, so it
// needs no preStop (one would only keep it listening with no app behind
// it). The grace period covers the app's preStop and the proxy's drain.
//
// Ordinary container (before 1.29): both are stopped at once, so the app's
// preStop must outlast the proxy's drain, and the grace period the app's
// preStop.
func checkTermination(t *testing.T, name string, spec *corev1.PodSpec, proxy *corev1.Container, cfg proxyConfig, native bool) {
	t.Helper()
	drain := 25 * time.Second
	if cfg.DrainTimeout != "" {
		d, err := time.ParseDuration(cfg.DrainTimeout)
		if err != nil {
			t.Fatalf("%s: drainTimeout %q: %v", name, cfg.DrainTimeout, err)
		}
		drain = d
	}
	grace := 30 * time.Second
	if spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	}
	if native && proxy.Lifecycle != nil && proxy.Lifecycle.PreStop != nil {
		t.Errorf("%s: the native sidecar has a preStop: it stops after the app, so a delay only keeps it listening with no app behind it", name)
	}
	for _, c := range spec.Containers {
		if c.Name == sidecarName {
			continue
		}
		delay := preStopDelay(c.Lifecycle)
		if delay == 0 {
			t.Errorf("%s: app container %s has no preStop delay: it stops while the endpoints still send it traffic", name, c.Name)
		}
		if native && grace < delay+drain {
			t.Errorf("%s: terminationGracePeriodSeconds %v < the app's preStop %v + drainTimeout %v", name, grace, delay, drain)
		}
		if !native && delay < drain {
			t.Errorf("%s: app container %s's preStop %v < drainTimeout %v: the proxy's in-flight requests lose their app", name, c.Name, delay, drain)
		}
		if !native && grace <= delay {
			t.Errorf("%s: terminationGracePeriodSeconds %v <= the app's preStop %v", name, grace, delay)
		}
	}
}

// preStopDelay returns how long a preStop hook waits: a sleep action, or
// an exec of sleep N.
func preStopDelay(l *corev1.Lifecycle) time.Duration {
	if l == nil || l.PreStop == nil {
		return 0
	}
	if s := l.PreStop.Sleep; s != nil {
		return time.Duration(s.Seconds) * time.Second
	}
	if e := l.PreStop.Exec; e != nil && len(e.Command) == 2 && filepath.Base(e.Command[0]) == "sleep" {
		if n, err := strconv.Atoi(e.Command[1]); err == nil {
			return time.Duration(n) * time.Second
		}
	}
	return 0
}

// TestComponentAddsOnlyToLabelled: the component adds sds-proxy to the
// labelled Deployment and keeps its containers and volumes, and leaves a
// Deployment without the label alone.
func TestComponentAddsOnlyToLabelled(t *testing.T) {
	t.Parallel()
	data, err := render("testdata/component")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeStrict("testdata/component", data)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, o := range objs {
		_, spec, ok := podTemplate(o)
		if !ok {
			continue
		}
		seen[o.Name] = true
		var names []string
		for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
			names = append(names, c.Name)
		}
		var vols []string
		for _, v := range spec.Volumes {
			vols = append(vols, v.Name)
		}
		switch o.Name {
		case "web":
			if want := []string{sidecarName, "web", "worker"}; !slices.Equal(names, want) {
				t.Errorf("web: containers %q, want %q", names, want)
			}
			if !slices.Contains(vols, "cache") || !slices.Contains(vols, "sds-config") {
				t.Errorf("web: volumes %q, want its own cache and sds-config", vols)
			}
		case "batch":
			if want := []string{"batch"}; !slices.Equal(names, want) {
				t.Errorf("batch (no label): containers %q, want %q", names, want)
			}
		}
	}
	if !seen["web"] || !seen["batch"] {
		t.Errorf("rendered %v, want web and batch", seen)
	}
}
