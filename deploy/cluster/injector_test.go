package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The injector's namespace and objects, as deploy/injector names them.
const (
	injectorNS      = "sds-system"
	injectorName    = "sds-proxy-injector"
	injectedMarker  = "sds-proxy.io/injected"
	notInjectedWhy  = "SidecarNotInjected"
	upstreamImage   = "sds-e2e.local/upstream:e2e"
	sidecarConfig   = "listen: 0.0.0.0:8080\nupstream: http://127.0.0.1:9000\nadmin: 0.0.0.0:9901\ndrainTimeout: 20s\nroutes:\n  - point: everything\n    match: {}\npoints:\n  everything:\n    concurrentThreshold: 256\n"
	appTermination  = 30
	appPreStopDelay = 5
)

// clusterEnv is the running cluster of cluster.sh e2e, or a skip.
func clusterEnv(t *testing.T) *env {
	t.Helper()
	dir := os.Getenv("SDS_CLUSTER_DIR")
	if dir == "" {
		t.Skip("SDS_CLUSTER_DIR unset: run deploy/cluster/cluster.sh e2e")
	}
	return &env{t: t, dir: dir, kubeconfig: filepath.Join(dir, "admin.kubeconfig")}
}

// figure appends a line to the figures cluster.sh e2e prints last.
func (e *env) figure(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	e.t.Log(line)
	f, err := os.OpenFile(filepath.Join(e.dir, "figures"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}

// installInjector applies deploy/injector with this machine's image
// (deploy/cluster/e2e-injector), once, and waits until its Deployment is
// available and its caBundle written.
func (e *env) installInjector(t *testing.T) {
	t.Helper()
	e.apply(e.kubectl(nil, "kustomize", "e2e-injector"))
	e.kubectl(nil, "-n", injectorNS, "rollout", "status", "deployment/"+injectorName, "--timeout", "50s")
	poll(t, 60*time.Second, 200*time.Millisecond, "the injector's caBundle written", func() bool {
		out, err := e.tryKubectl(nil, "get", "mutatingwebhookconfiguration", injectorName, "-o", "jsonpath={.webhooks[*].clientConfig.caBundle}")
		fields := strings.Fields(string(out))
		return err == nil && len(fields) == 2 && fields[0] != "" && fields[0] == fields[1]
	})
}

// labelledNamespace makes a namespace under the restricted Pod Security
// Standard, labelled for injection, with the sidecar's ConfigMap.
func (e *env) labelledNamespace(name string) {
	e.apply([]byte(`apiVersion: v1
kind: Namespace
metadata:
  name: ` + name + `
  labels:
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/enforce-version: latest
    sds-proxy.io/inject: enabled
---
apiVersion: v1
kind: ConfigMap
metadata: {name: sds-proxy, namespace: ` + name + `}
data:
  sds.yaml: |
` + indent(sidecarConfig, "    ")))
}

func indent(s, by string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(strings.TrimSuffix(s, "\n"), "\n") {
		b.WriteString(by + line + "\n")
	}
	return b.String()
}

// plainDeployment is a Deployment written as if sds-proxy did not exist:
// the tiny upstream on 127.0.0.1:9000, a preStop that outlasts the
// endpoints' update, restricted. templateAnnotations go on its pods.
func plainDeployment(namespace, name string, replicas int, templateAnnotations string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  replicas: %[3]d
  selector: {matchLabels: {app: %[2]s}}
  strategy: {rollingUpdate: {maxUnavailable: 0, maxSurge: 1}}
  template:
    metadata:
      labels: {app: %[2]s}
      annotations: {%[4]s}
    spec:
      terminationGracePeriodSeconds: %[5]d
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        seccompProfile: {type: RuntimeDefault}
      containers:
        - name: app
          image: %[6]s
          args: ["-listen", "127.0.0.1:9000"]
          lifecycle:
            preStop:
              sleep: {seconds: %[7]d}
          resources:
            requests: {cpu: 10m, memory: 16Mi}
            limits: {memory: 64Mi}
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities: {drop: [ALL]}
`, namespace, name, replicas, templateAnnotations, appTermination, upstreamImage, appPreStopDelay))
}

// pods returns the pods of namespace whose label app is app.
func (e *env) pods(namespace, app string) []corev1.Pod {
	e.t.Helper()
	var list corev1.PodList
	if err := json.Unmarshal(e.kubectl(nil, "-n", namespace, "get", "pods", "-l", "app="+app, "-o", "json"), &list); err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

// hasSidecar reports whether p has the sds-proxy container, and whether
// as a native sidecar (an init container that restarts always).
func hasSidecar(p *corev1.Pod) (has, native bool) {
	for _, c := range p.Spec.InitContainers {
		if c.Name == sidecar {
			return true, c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		}
	}
	return slices.ContainsFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == sidecar }), false
}

// TestInjectionWebhook: deploy/injector on a real control plane. A plain
// Deployment in a labelled namespace comes up Ready with the sidecar the
// webhook injected (a native sidecar, the namespace's restricted Pod
// Security passed); a pod annotated disabled has none; with the injector
// scaled to zero a pod is still created (the webhook fails open), without
// the sidecar, and once the injector is back it records a
// SidecarNotInjected event on that pod that says why.
func TestInjectionWebhook(t *testing.T) {
	e := clusterEnv(t)
	defer e.dumpInjectorOnFailure("inject-e2e")
	e.installInjector(t)
	const ns = "inject-e2e"
	e.labelledNamespace(ns)
	e.apply(plainDeployment(ns, "web", 2, ""))
	e.apply(plainDeployment(ns, "opted", 1, `sds-proxy.io/inject: disabled`))
	for _, d := range []string{"web", "opted"} {
		e.kubectl(nil, "-n", ns, "rollout", "status", "deployment/"+d, "--timeout", "50s")
	}
	injected, optedOut := 0, 0
	for _, p := range e.pods(ns, "web") {
		has, native := hasSidecar(&p)
		if !has || !native || p.Annotations[injectedMarker] == "" {
			t.Errorf("pod %s: sidecar %v (native %v), annotations %v; want the native sidecar the webhook injected", p.Name, has, native, p.Annotations)
			continue
		}
		injected++
	}
	for _, p := range e.pods(ns, "opted") {
		if has, _ := hasSidecar(&p); has || p.Annotations[injectedMarker] != "" {
			t.Errorf("pod %s, annotated disabled, has the sidecar", p.Name)
			continue
		}
		optedOut++
	}

	// The injector down: a pod is created all the same, without it.
	e.kubectl(nil, "-n", injectorNS, "scale", "deployment/"+injectorName, "--replicas", "0")
	poll(t, 60*time.Second, 200*time.Millisecond, "the injector's pods gone", func() bool {
		out, err := e.tryKubectl(nil, "-n", injectorNS, "get", "pods", "-l", "app.kubernetes.io/name="+injectorName, "-o", "name")
		return err == nil && strings.TrimSpace(string(out)) == ""
	})
	e.apply(plainDeployment(ns, "late", 1, ""))
	e.kubectl(nil, "-n", ns, "rollout", "status", "deployment/late", "--timeout", "50s")
	late := e.pods(ns, "late")
	if len(late) != 1 {
		t.Fatalf("deployment late: %d pods, want 1", len(late))
	}
	if has, _ := hasSidecar(&late[0]); has {
		t.Fatalf("pod %s has the sidecar though the injector was down", late[0].Name)
	}
	e.kubectl(nil, "-n", injectorNS, "scale", "deployment/"+injectorName, "--replicas", "2")
	e.kubectl(nil, "-n", injectorNS, "rollout", "status", "deployment/"+injectorName, "--timeout", "50s")
	var event corev1.Event
	poll(t, 60*time.Second, 500*time.Millisecond, "the SidecarNotInjected event on "+late[0].Name, func() bool {
		var list corev1.EventList
		out, err := e.tryKubectl(nil, "-n", ns, "get", "events", "--field-selector", "reason="+notInjectedWhy+",involvedObject.name="+late[0].Name, "-o", "json")
		if err != nil || json.Unmarshal(out, &list) != nil || len(list.Items) == 0 {
			return false
		}
		event = list.Items[0]
		return true
	})
	if event.Type != corev1.EventTypeWarning || !strings.Contains(event.Message, "did not answer") || !strings.Contains(event.Message, "rollout restart") {
		t.Errorf("the event: %s %q, want a Warning that says why and what to do", event.Type, event.Message)
	}
	t.Logf("the event on %s: %s: %s", late[0].Name, event.Reason, event.Message)
	// A new pod of the same Deployment, now that the injector is back,
	// gets the sidecar.
	e.kubectl(nil, "-n", ns, "rollout", "restart", "deployment/late")
	e.kubectl(nil, "-n", ns, "rollout", "status", "deployment/late", "--timeout", "50s")
	poll(t, 30*time.Second, 200*time.Millisecond, "late's restarted pod injected", func() bool {
		pods := e.pods(ns, "late")
		if len(pods) != 1 || pods[0].DeletionTimestamp != nil {
			return false
		}
		has, _ := hasSidecar(&pods[0])
		return has
	})
	injected++
	e.figure("injected: %d pods by the webhook, %d opted out", injected, optedOut)
}

// dumpInjectorOnFailure logs the injector's state and namespace's events
// when the test failed.
func (e *env) dumpInjectorOnFailure(ns string) {
	if !e.t.Failed() {
		return
	}
	for _, args := range [][]string{
		{"-n", injectorNS, "get", "pods,endpointslices", "-o", "wide"},
		{"-n", injectorNS, "logs", "-l", "app.kubernetes.io/name=" + injectorName, "--tail", "30", "--prefix"},
		{"-n", ns, "get", "pods", "-o", "wide"},
		{"-n", ns, "get", "events", "--sort-by", ".lastTimestamp"},
	} {
		out, err := e.tryKubectl(nil, args...)
		e.t.Logf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
