package inject

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// podOf returns the pod (metadata and spec) of the first object of a YAML
// stream that holds one: a Pod's own, or a workload's template, as
// JSON-shaped values.
func podOf(t *testing.T, stream []byte) (meta, spec any) {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(string(stream)))
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			t.Fatalf("no pod in the stream: %v", err)
		}
		switch obj["kind"] {
		case "Pod":
			return normalize(t, obj["metadata"]), normalize(t, obj["spec"])
		case "Deployment", "StatefulSet", "DaemonSet":
			tmpl := obj["spec"].(map[string]any)["template"].(map[string]any)
			return normalize(t, tmpl["metadata"]), normalize(t, tmpl["spec"])
		}
	}
}

// normalize returns v as encoding/json decodes its JSON: numbers as
// float64, maps as map[string]any.
func normalize(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// applyPodPatch applies PodPatch's two operations to pod (JSON-shaped):
// the spec replaced, the annotation added. A patch of another shape fails
// the test (deploy/check applies it with the apiserver's own JSON Patch
// library).
func applyPodPatch(t *testing.T, pod map[string]any, patch []byte) {
	t.Helper()
	var ops []patchOp
	if err := json.Unmarshal(patch, &ops); err != nil {
		t.Fatal(err)
	}
	if len(ops) != 2 || ops[0].Op != "replace" || ops[0].Path != "/spec" || ops[1].Op != "add" {
		t.Fatalf("patch %s: want the spec replaced and the annotation added", patch)
	}
	pod["spec"] = ops[0].Value
	meta := pod["metadata"].(map[string]any)
	switch ops[1].Path {
	case "/metadata/annotations":
		meta["annotations"] = ops[1].Value
	case "/metadata/annotations/sds-proxy.io~1injected":
		meta["annotations"].(map[string]any)[AnnotationInjected] = ops[1].Value
	default:
		t.Fatalf("patch %s: the annotation's path %q", patch, ops[1].Path)
	}
}

// TestPodPatchIsInject: the webhook's transform (PodPatch, on a pod in
// JSON) and inject's (YAML, on a manifest) give the same pod spec for
// every workload under testdata and every option set; the patched pod
// needs no second patch; the annotation is added whether the pod has
// annotations or not.
func TestPodPatchIsInject(t *testing.T) {
	t.Parallel()
	legacy, moved := optionVariants()
	for _, in := range []string{"pod.in.yaml", "deployment.in.yaml", "statefulset.in.yaml", "daemonset.in.yaml"} {
		for name, o := range map[string]Options{"default": injectTestOptions, "legacy": legacy, "moved ports": moved} {
			src, err := os.ReadFile(filepath.Join("testdata", in))
			if err != nil {
				t.Fatal(err)
			}
			o.ServiceTarget, o.UpstreamPort = false, 0 // a pod has no Services
			out, _, err := YAML(src, o)
			if err != nil {
				t.Fatalf("%s, %s: inject: %v", in, name, err)
			}
			meta, spec := podOf(t, src)
			_, want := podOf(t, out)
			for _, withAnnotations := range []bool{false, true} {
				m := map[string]any{"name": "p"}
				if mm, ok := meta.(map[string]any); ok {
					for k, v := range mm {
						m[k] = v
					}
				}
				delete(m, "annotations")
				if withAnnotations {
					m["annotations"] = map[string]any{"team": "search"}
				}
				pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": m, "spec": spec}
				podJSON, _ := json.Marshal(pod)
				patch, err := PodPatch(podJSON, o, "v1.2.3")
				if err != nil || patch == nil {
					t.Fatalf("%s, %s: PodPatch: %v, %s", in, name, err, patch)
				}
				applyPodPatch(t, pod, patch)
				if got := normalize(t, pod["spec"]); !reflect.DeepEqual(got, want) {
					g, _ := json.MarshalIndent(got, "", " ")
					w, _ := json.MarshalIndent(want, "", " ")
					t.Errorf("%s, %s: the webhook's spec differs from inject's:\n%s\nwant\n%s", in, name, g, w)
				}
				annotations := pod["metadata"].(map[string]any)["annotations"].(map[string]any)
				if annotations[AnnotationInjected] != "v1.2.3" || withAnnotations && annotations["team"] != "search" {
					t.Errorf("%s, %s: annotations %v, want %s added to what was there", in, name, annotations, AnnotationInjected)
				}
				again, _ := json.Marshal(pod)
				if p, err := PodPatch(again, o, "v1.2.3"); p != nil || err != nil {
					t.Errorf("%s, %s: a patched pod patched again: %s, %v", in, name, p, err)
				}
			}
		}
	}
}

// TestPodOptions: a pod's annotations override the injector's options,
// and a wrong one is named by its annotation.
func TestPodOptions(t *testing.T) {
	t.Parallel()
	o, err := PodOptions(injectTestOptions, map[string]string{AnnotationConfigMap: "search-sds", AnnotationProxyPort: " 8081 ", AnnotationImage: "r/sds:2"})
	if err != nil || o.ConfigMap != "search-sds" || o.ProxyPort != 8081 || o.Image != "r/sds:2" || o.AdminPort != defaultAdminPort {
		t.Errorf("PodOptions = %+v, %v", o, err)
	}
	for _, tc := range []struct {
		annotations map[string]string
		want        string
	}{
		{map[string]string{AnnotationProxyPort: "http"}, `annotation sds-proxy.io/proxy-port: "http" is not a port number`},
		{map[string]string{AnnotationAdminPort: "70000"}, "sds-proxy.io/admin-port 70000: want a port from 1 to 65535"},
		{map[string]string{AnnotationAdminPort: "8080"}, "sds-proxy.io/proxy-port and sds-proxy.io/admin-port are both 8080"},
		{map[string]string{AnnotationConfigMap: ""}, "sds-proxy.io/configmap must name the ConfigMap"},
	} {
		if _, err := PodOptions(injectTestOptions, tc.annotations); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("PodOptions(%v): %v, want %q", tc.annotations, err, tc.want)
		}
	}
}

// TestPodPatchRefuses: what inject refuses, the webhook refuses, with the
// same reason; a document that is not a pod is an error.
func TestPodPatchRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ pod, want string }{
		{`{"metadata":{"name":"p"},"spec":{"containers":[{"name":"app","ports":[{"containerPort":8080}]}]}}`, "already uses port 8080"},
		{`{"metadata":{"name":"p"},"spec":{"containers":[]}}`, "no containers"},
		{`{"metadata":{"name":"p"}}`, "no spec"},
		{`[1, 2]`, "no spec"},
		{`{"spec": `, "not a pod in JSON"},
	} {
		if p, err := PodPatch([]byte(tc.pod), injectTestOptions, "v"); err == nil || p != nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("PodPatch(%s) = %s, %v; want the error %q", tc.pod, p, err, tc.want)
		}
	}
}
