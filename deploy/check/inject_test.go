package check

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// injectTestdata holds the real-world manifests of the main module's
// inject tests (NAME.in.yaml), injected here with injectArgs, the flags
// those tests use.
const injectTestdata = "../../cmd/internal/inject/testdata"

var injectArgs = []string{"inject", "-image", "registry.example/sds-proxy:1.0", "-configmap", "sds-proxy", "-upstream-port", "9000", "-service-target"}

// buildSDSProxy builds the main module's sds-proxy into a temporary
// directory of t and returns its path.
func buildSDSProxy(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sds-proxy")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/sds-proxy")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building sds-proxy: %v\n%s", err, out)
	}
	return bin
}

// runInject runs `bin args` (an inject command line) on in and returns
// its stdout; a warning on stderr is an error.
func runInject(t *testing.T, bin string, in []byte, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sds-proxy %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("sds-proxy %s warned:\n%s", strings.Join(args, " "), stderr.String())
	}
	return stdout.Bytes()
}

// asYAML renders v for a failure message.
func asYAML(v any) string {
	out, err := yaml.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(out)
}

// componentConfigMap returns the component's sds-proxy ConfigMap, the one
// an injected pod mounts (-configmap sds-proxy).
func componentConfigMap(t *testing.T) object {
	t.Helper()
	data, err := os.ReadFile("../components/sidecar/configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeStrict("configmap.yaml", data)
	if err != nil || len(objs) != 1 {
		t.Fatalf("the component's ConfigMap: %d objects, %v", len(objs), err)
	}
	return objs[0]
}

// TestInjectOutputs: `sds-proxy inject` on each real-world manifest, as a
// native and as a legacy sidecar, writes documents that decode strictly,
// whose every pod passes the restricted Pod Security Standard and runs
// sds-proxy as the proxy needs (checkProxiedPod, for native sidecars;
// legacy ones are held to less, as their app's preStop must outlast the
// drain), whose Services no longer reach the app's port past the proxy,
// and that inject leaves byte for byte as they are.
func TestInjectOutputs(t *testing.T) {
	t.Parallel()
	inputs, err := filepath.Glob(filepath.Join(injectTestdata, "*.in.yaml"))
	if err != nil || len(inputs) < 5 {
		t.Fatalf("found %d inputs under %s (%v), want 5 or more", len(inputs), injectTestdata, err)
	}
	cm := componentConfigMap(t)
	bin := buildSDSProxy(t)
	for _, in := range inputs {
		for _, native := range []bool{true, false} {
			name := filepath.Base(in)
			args := injectArgs
			if !native {
				name += " legacy"
				args = append(args[:len(args):len(args)], "-legacy-sidecar")
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				src, err := os.ReadFile(in)
				if err != nil {
					t.Fatal(err)
				}
				out := runInject(t, bin, src, args...)
				if again := runInject(t, bin, out, args...); !bytes.Equal(again, out) {
					t.Errorf("injecting twice changed the output:\n%s\nafter once:\n%s", again, out)
				}
				objs, err := decodeStrict(name, out)
				if err != nil {
					t.Fatal(err)
				}
				objs = append(objs, cm)
				var others []object // what checkProxiedPod sees: no Service, checked below
				for _, o := range objs {
					if o.Kind != "Service" {
						others = append(others, o)
					}
				}
				pods := 0
				for _, o := range objs {
					meta, spec, ok := podTemplate(o)
					if !ok {
						continue
					}
					pods++
					who := o.Kind + "/" + o.Name
					checkRestricted(t, who, meta, spec)
					if findContainer(spec, sidecarName) == nil {
						t.Errorf("%s: no %s container", who, sidecarName)
						continue
					}
					if native {
						checkProxiedPod(t, who, others, meta, spec, true, false)
					} else {
						checkLegacySidecar(t, who, spec)
					}
					checkNoBypass(t, who, objs, meta, spec)
				}
				if pods == 0 {
					t.Errorf("no pod in the output")
				}
			})
		}
	}
}

// checkLegacySidecar: with -legacy-sidecar, sds-proxy is an ordinary
// container with no restartPolicy.
func checkLegacySidecar(t *testing.T, name string, spec *corev1.PodSpec) {
	t.Helper()
	for _, c := range spec.InitContainers {
		if c.Name == sidecarName {
			t.Errorf("%s: %s is an init container, want an ordinary container", name, sidecarName)
		}
	}
	if c := findContainer(spec, sidecarName); c.RestartPolicy != nil {
		t.Errorf("%s: %s has restartPolicy %s, want none (clusters before 1.29 refuse it)", name, sidecarName, *c.RestartPolicy)
	}
}

// checkNoBypass: no Service that selects the pod targets the app's port
// (9000, the upstream) any more, by number or by name.
func checkNoBypass(t *testing.T, name string, objs []object, meta *metav1.ObjectMeta, spec *corev1.PodSpec) {
	t.Helper()
	named := map[string]int32{}
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		for _, p := range c.Ports {
			if p.Name != "" {
				named[p.Name] = p.ContainerPort
			}
		}
	}
	for _, o := range objs {
		svc, ok := o.Obj.(*corev1.Service)
		if !ok || len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(meta.Labels)) {
			continue
		}
		for _, p := range svc.Spec.Ports {
			target := p.TargetPort
			if target == (intstr.IntOrString{}) {
				target = intstr.FromInt32(p.Port)
			}
			if resolvePort(target, named) == 9000 {
				t.Errorf("%s: Service %s port %d still targets the app's port 9000, past the proxy", name, svc.Name, p.Port)
			}
		}
	}
}

// TestInjectMatchesComponent: inject and the kustomize component add the
// same sidecar container and volumes to the same Deployment, for the same
// image, and point its Service at the same port: there is one sidecar,
// whichever way a user adds it. With the sidecar's ports moved (the
// component with the patches docs/kubernetes.md shows, inject with
// -proxy-port and -admin-port), both pods pass checkProxiedPod: the
// ports, the -listen and -admin args, the probes and the Service agree.
func TestInjectMatchesComponent(t *testing.T) {
	t.Parallel()
	bin := buildSDSProxy(t)
	for _, tc := range []struct {
		dir  string // a kustomization with the component; its deployment.yaml is injected
		args []string
	}{
		{"testdata/component", nil},
		{"testdata/component-ports", []string{"-proxy-port", "8081", "-admin-port", "9902", "-upstream-port", "8080", "-service-target"}},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			t.Parallel()
			rendered, err := render(tc.dir)
			if err != nil {
				t.Fatal(err)
			}
			fromComponent, err := decodeStrict("component", rendered)
			if err != nil {
				t.Fatal(err)
			}
			src, err := os.ReadFile(filepath.Join(tc.dir, "deployment.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			args := append([]string{"inject", "-image", "registry.example/sds-proxy:latest", "-configmap", "sds-proxy"}, tc.args...)
			fromInject, err := decodeStrict("inject", runInject(t, bin, src, args...))
			if err != nil {
				t.Fatal(err)
			}
			want := podSpecOf(t, fromComponent, "web")
			got := podSpecOf(t, fromInject, "web")
			wantC, gotC := findContainer(want, sidecarName), findContainer(got, sidecarName)
			if wantC == nil || gotC == nil {
				t.Fatalf("sidecar from the component %v, from inject %v; want both", wantC != nil, gotC != nil)
			}
			if !equality.Semantic.DeepEqual(gotC, wantC) {
				t.Errorf("inject's container differs from the component's:\ninject:\n%s\ncomponent:\n%s", asYAML(gotC), asYAML(wantC))
			}
			for _, m := range wantC.VolumeMounts {
				gv, wv := findVolume(got, m.Name), findVolume(want, m.Name)
				if gv == nil || wv == nil || !equality.Semantic.DeepEqual(gv, wv) {
					t.Errorf("volume %s differs:\ninject:\n%s\ncomponent:\n%s", m.Name, asYAML(gv), asYAML(wv))
				}
			}
			if gs, ws := findService(fromInject, "web"), findService(fromComponent, "web"); !equality.Semantic.DeepEqual(gs, ws) {
				t.Errorf("Service web differs:\ninject:\n%s\ncomponent:\n%s", asYAML(gs), asYAML(ws))
			}
			var cm []object // the render's ConfigMap, which inject leaves to the user
			for _, o := range fromComponent {
				if o.Kind == "ConfigMap" {
					cm = append(cm, o)
				}
			}
			for name, objs := range map[string][]object{"component": fromComponent, "inject": append(fromInject, cm...)} {
				for _, o := range objs {
					if meta, spec, ok := podTemplate(o); ok && o.Name == "web" {
						checkProxiedPod(t, name+" "+o.Kind+"/"+o.Name, objs, meta, spec, true, false)
					}
				}
			}
		})
	}
}

// TestComponentPortsDocumented: the patches that move the component's
// sidecar ports in docs/kubernetes.md are those of
// testdata/component-ports, which TestInjectMatchesComponent renders.
func TestComponentPortsDocumented(t *testing.T) {
	t.Parallel()
	fixture, err := os.ReadFile("testdata/component-ports/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(fixture), "  # The sidecar's ports: 8081 and 9902.\n")
	if !ok {
		t.Fatal("testdata/component-ports/kustomization.yaml: no line \"  # The sidecar's ports: 8081 and 9902.\"")
	}
	doc, err := os.ReadFile("../../docs/kubernetes.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "patches:\n"+block) {
		t.Errorf("docs/kubernetes.md lacks the patches of testdata/component-ports:\npatches:\n%s", block)
	}
}

func findService(objs []object, name string) *corev1.Service {
	for _, o := range objs {
		if svc, ok := o.Obj.(*corev1.Service); ok && svc.Name == name {
			return svc
		}
	}
	return nil
}

func podSpecOf(t *testing.T, objs []object, name string) *corev1.PodSpec {
	t.Helper()
	for _, o := range objs {
		if _, spec, ok := podTemplate(o); ok && o.Name == name {
			return spec
		}
	}
	t.Fatalf("no pod template %s", name)
	return nil
}

func findVolume(spec *corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}
