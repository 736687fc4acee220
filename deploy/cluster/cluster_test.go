// Package cluster is the end-to-end test of sds-proxy on a real kubelet:
// deploy/cluster/cluster.sh e2e brings up etcd, kube-apiserver and a
// kubelet on containerd, then runs TestCluster against them with
// SDS_CLUSTER_DIR set. Without it the test is skipped.
package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const (
	namespace = "sds-e2e"
	podName   = "shop-e2e"
	sidecar   = "sds-proxy"
)

// env is one running cluster as the test drives it.
type env struct {
	t          *testing.T
	dir        string // the cluster's folder (cluster.sh up DIR)
	kubeconfig string
}

// kubectl runs kubectl on the cluster with stdin, at most 60 s, and
// returns its standard output; a failure ends the test.
func (e *env) kubectl(stdin []byte, args ...string) []byte {
	e.t.Helper()
	out, err := e.tryKubectl(stdin, args...)
	if err != nil {
		e.t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// apply is kubectl apply -f - of data; any warning the apiserver sends
// back (PodSecurity's "would violate", a deprecated API) fails the test.
func (e *env) apply(data []byte) {
	e.t.Helper()
	_, stderr, err := e.runKubectl(data, "apply", "-f", "-")
	if err != nil {
		e.t.Fatalf("kubectl apply: %v", err)
	}
	if strings.Contains(stderr, "Warning:") {
		e.t.Errorf("kubectl apply warned:\n%s", stderr)
	}
}

func (e *env) tryKubectl(stdin []byte, args ...string) ([]byte, error) {
	out, _, err := e.runKubectl(stdin, args...)
	return out, err
}

func (e *env) runKubectl(stdin []byte, args ...string) ([]byte, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", e.kubeconfig}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, stderr.String(), fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out, stderr.String(), nil
}

// poll calls f every interval until it returns true, at most d; on a
// time-out the test fails with what.
func poll(t *testing.T, d, interval time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		<-tick.C
	}
}

func (e *env) pod(name string) (*corev1.Pod, error) {
	out, err := e.tryKubectl(nil, "-n", namespace, "get", "pod", name, "-o", "json")
	if err != nil {
		return nil, err
	}
	var p corev1.Pod
	if err := json.Unmarshal(out, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// dumpOnFailure logs what a person would look at when a pod does not
// come up: kubectl describe, the events, each container's log.
func (e *env) dumpOnFailure() {
	if !e.t.Failed() {
		return
	}
	for _, args := range [][]string{
		{"-n", namespace, "describe", "pods"},
		{"-n", namespace, "get", "events", "--sort-by", ".lastTimestamp"},
		{"-n", namespace, "logs", podName, "-c", sidecar, "--tail", "40"},
		{"-n", namespace, "logs", podName, "-c", "app", "--tail", "20"},
	} {
		out, err := e.tryKubectl(nil, args...)
		e.t.Logf("kubectl %s:\n%s%v", strings.Join(args, " "), out, err)
	}
}

// podFromDeployment is the Pod a ReplicaSet would make of d, bound to the
// node: there is no scheduler or controller manager in this cluster.
func podFromDeployment(d *appsv1.Deployment, name, node string) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: *d.Spec.Template.ObjectMeta.DeepCopy(),
		Spec:       *d.Spec.Template.Spec.DeepCopy(),
	}
	p.Name, p.Namespace = name, d.Namespace
	p.Spec.NodeName = node
	return p
}

// TestCluster is what a user does, on a real kubelet: a namespace that
// enforces the restricted Pod Security Standard, the example overlay
// applied with kubectl, the pod Ready with its native sidecar, traffic
// through the proxy port, a ConfigMap edit the proxy applies, and a pod
// deletion under load in which no request fails that the drain promises
// to finish.
func TestCluster(t *testing.T) {
	dir := os.Getenv("SDS_CLUSTER_DIR")
	if dir == "" {
		t.Skip("SDS_CLUSTER_DIR unset: run deploy/cluster/cluster.sh e2e")
	}
	e := &env{t: t, dir: dir, kubeconfig: filepath.Join(dir, "admin.kubeconfig")}
	defer e.dumpOnFailure()

	e.kubectl([]byte(`apiVersion: v1
kind: Namespace
metadata:
  name: `+namespace+`
  labels:
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/enforce-version: latest
`), "apply", "-f", "-")
	// What the controller manager would make in a new namespace: the
	// default ServiceAccount and the kube-root-ca.crt ConfigMap that its
	// projected token volume mounts.
	ca, err := os.ReadFile(filepath.Join(dir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	caYAML, err := yaml.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "kube-root-ca.crt", "namespace": namespace},
		"data":     map[string]string{"ca.crt": string(ca)},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.kubectl(caYAML, "apply", "-f", "-")
	e.kubectl([]byte("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: default, namespace: "+namespace+"}\n"), "apply", "-f", "-")

	// The overlay, as users apply it.
	render := e.kubectl(nil, "kustomize", "e2e")
	e.apply(render)
	var deployment *appsv1.Deployment
	var configMap *corev1.ConfigMap
	for _, doc := range strings.Split(string(render), "\n---\n") {
		var head struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatal(err)
		}
		switch head.Kind {
		case "Deployment":
			deployment = &appsv1.Deployment{}
			if err := yaml.UnmarshalStrict([]byte(doc), deployment); err != nil {
				t.Fatal(err)
			}
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := yaml.UnmarshalStrict([]byte(doc), &cm); err != nil {
				t.Fatal(err)
			}
			if _, ok := cm.Data["sds.yaml"]; ok {
				configMap = &cm
			}
		}
	}
	if deployment == nil || configMap == nil {
		t.Fatalf("the render has no Deployment or no ConfigMap with sds.yaml:\n%s", render)
	}

	ready, took := e.createReady(t, podFromDeployment(deployment, podName, "localhost"))
	t.Logf("figure: pod created -> Ready in %v", took.Round(10*time.Millisecond))
	checkStartOrder(t, ready)
	for name, id := range e.processIDs(t, ready) {
		if id != [2]string{"65532", "65532"} {
			t.Errorf("%s runs as %s:%s, want 65532:65532", name, id[0], id[1])
		}
	}

	pf := e.portForward(t, "8080", "9901")
	proxyURL, adminURL := "http://127.0.0.1:"+pf["8080"], "http://127.0.0.1:"+pf["9901"]
	client := &http.Client{Timeout: 10 * time.Second}
	if code, body := get(t, client, proxyURL+"/"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("GET / through the proxy port: got %d %q, want 200 \"ok\\n\"", code, body)
	}

	e.configEdit(t, client, ready, configMap, adminURL)
	e.deleteUnderLoad(t, proxyURL)
	e.imageUser(t, deployment)
}

var (
	uidLine = regexp.MustCompile(`(?m)^Uid:\s+(\d+)`)
	gidLine = regexp.MustCompile(`(?m)^Gid:\s+(\d+)`)
)

// processIDs reads, on the node, the real UID and GID of each container's
// process in p, by container name.
func (e *env) processIDs(t *testing.T, p *corev1.Pod) map[string][2]string {
	t.Helper()
	pids := e.taskPIDs(t)
	ids := map[string][2]string{}
	for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		pid, ok := pids[strings.TrimPrefix(cs.ContainerID, "containerd://")]
		if !ok {
			t.Fatalf("%s: containerd runs no task %s", cs.Name, cs.ContainerID)
		}
		st, err := os.ReadFile("/proc/" + pid + "/status")
		if err != nil {
			t.Fatal(err)
		}
		uid, gid := uidLine.FindSubmatch(st), gidLine.FindSubmatch(st)
		if uid == nil || gid == nil {
			t.Fatalf("/proc/%s/status has no Uid or Gid line", pid)
		}
		ids[cs.Name] = [2]string{string(uid[1]), string(gid[1])}
	}
	return ids
}

// taskPIDs maps the ID of each container containerd runs to its PID.
func (e *env) taskPIDs(t *testing.T) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ctr", "--address", filepath.Join(e.dir, "containerd", "containerd.sock"), "-n", "k8s.io", "tasks", "ls").Output()
	if err != nil {
		t.Fatalf("ctr tasks ls: %v", err)
	}
	pids := map[string]string{}
	for _, line := range strings.Split(string(out), "\n")[1:] {
		if f := strings.Fields(line); len(f) == 3 {
			pids[f[0]] = f[1]
		}
	}
	return pids
}

// createReady creates the pod and waits for it to be Ready; it returns
// the pod then and the time that took.
func (e *env) createReady(t *testing.T, pod *corev1.Pod) (*corev1.Pod, time.Duration) {
	t.Helper()
	podJSON, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	e.kubectl(podJSON, "create", "-f", "-")
	var ready *corev1.Pod
	poll(t, 120*time.Second, 250*time.Millisecond, pod.Name+" Ready", func() bool {
		p, err := e.pod(pod.Name)
		if err != nil {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = p
				return true
			}
		}
		return false
	})
	return ready, time.Since(created)
}

// imageUser: with runAsNonRoot and no runAsUser anywhere in the pod, the
// kubelet takes the user from each image's config and starts the
// container only if that user is numeric and not 0. The sds-proxy image
// follows the Dockerfile's USER (deploy/check holds the two together), so
// this is the kubelet's verdict on that USER; the processes run as 65532.
func (e *env) imageUser(t *testing.T, d *appsv1.Deployment) {
	pod := podFromDeployment(d, podName+"-image-user", "localhost")
	clear := func(sc *corev1.SecurityContext) {
		if sc != nil {
			sc.RunAsUser, sc.RunAsGroup = nil, nil
		}
	}
	if pod.Spec.SecurityContext != nil {
		pod.Spec.SecurityContext.RunAsUser, pod.Spec.SecurityContext.RunAsGroup = nil, nil
	}
	for i := range pod.Spec.InitContainers {
		clear(pod.Spec.InitContainers[i].SecurityContext)
	}
	for i := range pod.Spec.Containers {
		clear(pod.Spec.Containers[i].SecurityContext)
	}
	ready, _ := e.createReady(t, pod)
	for name, id := range e.processIDs(t, ready) {
		if id[0] != "65532" {
			t.Errorf("%s runs as user %s, want the image's 65532", name, id[0])
		}
		// The kubelet hands the runtime the image's UID alone; containerd
		// takes the group from the image's /etc/passwd (distroless has
		// nonroot 65532:65532; this image has none: group 0). Hence
		// runAsGroup in every manifest (deploy/check).
		t.Logf("figure: %s without runAsUser/runAsGroup runs as %s:%s (image USER 65532:65532)", name, id[0], id[1])
	}
	e.kubectl(nil, "-n", namespace, "delete", "pod", pod.Name, "--wait=false")
	poll(t, 60*time.Second, 100*time.Millisecond, pod.Name+" gone", func() bool {
		_, err := e.pod(pod.Name)
		return err != nil && strings.Contains(err.Error(), "NotFound")
	})
}

// checkStartOrder: the sidecar is an init container that the kubelet
// started (and whose startup probe passed) before the app.
func checkStartOrder(t *testing.T, p *corev1.Pod) {
	t.Helper()
	if len(p.Status.InitContainerStatuses) != 1 || p.Status.InitContainerStatuses[0].Name != sidecar {
		t.Fatalf("init container statuses: got %+v, want one for %s", p.Status.InitContainerStatuses, sidecar)
	}
	sc := p.Status.InitContainerStatuses[0]
	if sc.State.Running == nil || sc.Started == nil || !*sc.Started || !sc.Ready || sc.RestartCount != 0 {
		t.Fatalf("%s: got state %+v started %v ready %v restarts %d, want running, started, ready, no restart",
			sidecar, sc.State, sc.Started, sc.Ready, sc.RestartCount)
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil || c.RestartCount != 0 {
			t.Fatalf("%s: got state %+v restarts %d, want running, no restart", c.Name, c.State, c.RestartCount)
		}
		if c.State.Running.StartedAt.Before(&sc.State.Running.StartedAt) {
			t.Fatalf("%s started at %v, before the sidecar (%v)", c.Name, c.State.Running.StartedAt, sc.State.Running.StartedAt)
		}
	}
}

var forwarding = regexp.MustCompile(`^Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)$`)

// portForward runs kubectl port-forward to the pod's ports on free local
// ports of 127.0.0.1 (all the test's traffic is on loopback: kubectl, the
// apiserver, the kubelet and containerd's stream server, which dials the
// port inside the pod's network namespace). It returns the local port of
// each pod port and stops with the test.
func (e *env) portForward(t *testing.T, ports ...string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	args := []string{"--kubeconfig", e.kubeconfig, "-n", namespace, "port-forward", "--address", "127.0.0.1", "pod/" + podName}
	for _, p := range ports {
		args = append(args, ":"+p)
	}
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	found := make(chan map[string]string, 1)
	go func() {
		defer close(done)
		local := map[string]string{}
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := forwarding.FindStringSubmatch(sc.Text()); m != nil {
				local[m[2]] = m[1]
				if len(local) == len(ports) {
					found <- local
				}
			}
		}
		_ = cmd.Wait()
	}()
	select {
	case local := <-found:
		return local
	case <-time.After(30 * time.Second):
		t.Fatalf("kubectl port-forward: no ports within 30s: %s", stderr.String())
	case <-done:
		t.Fatalf("kubectl port-forward ended: %s", stderr.String())
	}
	return nil
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

// status is the part of the admin port's /status the test reads. The
// document's one definition is admin.Status (proxy/admin/status.go in the
// main module); this module does not require the main module (its go.mod
// keeps Kubernetes' dependencies apart from the proxy's), so it cannot
// import it and reads the few fields it needs, by the same JSON names.
type status struct {
	Config struct {
		Hash       string    `json:"hash"`
		LoadedAt   time.Time `json:"loadedAt"`
		LastReload *struct {
			At    time.Time `json:"at"`
			OK    bool      `json:"ok"`
			Error string    `json:"error"`
		} `json:"lastReload"`
	} `json:"config"`
	Points []struct {
		Name       string `json:"name"`
		Thresholds struct {
			ConcurrentThreshold *int64 `json:"concurrentThreshold"`
		} `json:"thresholds"`
	} `json:"points"`
}

func readStatus(t *testing.T, c *http.Client, adminURL string) status {
	t.Helper()
	code, body := get(t, c, adminURL+"/status")
	if code != http.StatusOK {
		t.Fatalf("GET /status: got %d, want 200: %s", code, body)
	}
	var s status
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("/status: %v", err)
	}
	return s
}

// concurrentThreshold of the first point in force, or -1.
func (s status) concurrentThreshold() int64 {
	if len(s.Points) == 0 || s.Points[0].Thresholds.ConcurrentThreshold == nil {
		return -1
	}
	return *s.Points[0].Thresholds.ConcurrentThreshold
}

// configEdit: kubectl apply of the ConfigMap with a new threshold; the
// kubelet swaps the mounted ..data symlink (measured on the node, from the
// symlink's own mtime) and the proxy applies it (from its /status). Then
// two more swaps: an invalid file, which the proxy rejects and keeps the
// config in force, and a valid one after it, which it applies (a watch on
// the file itself would have lost track after the first swap). The
// kubelet swaps a ConfigMap volume on the pod's next sync, every
// syncFrequency (1 min) plus up to half of it of jitter: 60 to 90 s after
// an edit here, sometimes sooner. So the last two edits are followed by
// an annotation on the pod, which makes the kubelet sync it at once.
func (e *env) configEdit(t *testing.T, c *http.Client, p *corev1.Pod, cm *corev1.ConfigMap, adminURL string) {
	before := readStatus(t, c, adminURL)
	old := before.concurrentThreshold()
	if old <= 3 {
		t.Fatalf("the first point's concurrentThreshold before the edit: got %d, want > 3", old)
	}
	oldLine := fmt.Sprintf("concurrentThreshold: %d", old)
	if !strings.Contains(cm.Data["sds.yaml"], oldLine) {
		t.Fatalf("the ConfigMap's sds.yaml has no %q", oldLine)
	}
	with := func(line string) string { return strings.Replace(cm.Data["sds.yaml"], oldLine, line, 1) }
	dataLink := filepath.Join(e.dir, "kubelet", "pods", string(p.UID), "volumes", "kubernetes.io~configmap", "sds-config", "..data")

	want := old / 2
	applied, swapped := e.applyConfig(t, cm, with(fmt.Sprintf("concurrentThreshold: %d", want)), dataLink, false)
	var after status
	poll(t, 30*time.Second, 50*time.Millisecond, "the proxy applying the edit", func() bool {
		after = readStatus(t, c, adminURL)
		return after.concurrentThreshold() == want
	})
	t.Logf("figure: kubectl apply -> kubelet swapped ..data in %v; swap -> proxy applied in %v",
		swapped.Sub(applied).Round(10*time.Millisecond), after.Config.LoadedAt.Sub(swapped).Round(time.Millisecond))
	if after.Config.Hash == before.Config.Hash {
		t.Fatalf("config hash unchanged after the edit: %s", after.Config.Hash)
	}

	applied, swapped = e.applyConfig(t, cm, with("concurrentThreshold: many"), dataLink, true)
	poll(t, 30*time.Second, 50*time.Millisecond, "the proxy rejecting the invalid edit", func() bool {
		after = readStatus(t, c, adminURL)
		r := after.Config.LastReload
		return r != nil && !r.At.Before(swapped.Truncate(time.Second)) && !r.OK
	})
	if got := after.concurrentThreshold(); got != want {
		t.Fatalf("after an invalid file: concurrentThreshold %d, want %d still in force", got, want)
	}
	t.Logf("figure: kubectl apply of an invalid sds.yaml -> swapped in %v; rejected, %d kept: %s",
		swapped.Sub(applied).Round(10*time.Millisecond), want, after.Config.LastReload.Error)

	want = old / 4
	applied, swapped = e.applyConfig(t, cm, with(fmt.Sprintf("concurrentThreshold: %d", want)), dataLink, true)
	poll(t, 30*time.Second, 50*time.Millisecond, "the proxy applying the edit after the invalid one", func() bool {
		after = readStatus(t, c, adminURL)
		return after.concurrentThreshold() == want
	})
	t.Logf("figure: kubectl apply of a valid one after it -> swapped in %v; swap -> proxy applied in %v",
		swapped.Sub(applied).Round(10*time.Millisecond), after.Config.LoadedAt.Sub(swapped).Round(time.Millisecond))
}

// applyConfig applies cm with sds.yaml set to text and waits for the
// kubelet to swap dataLink; it returns when kubectl was run and when the
// new ..data symlink was made (its mtime).
func (e *env) applyConfig(t *testing.T, cm *corev1.ConfigMap, text, dataLink string, nudge bool) (applied, swapped time.Time) {
	t.Helper()
	edited := cm.DeepCopy()
	edited.Data["sds.yaml"] = text
	edited.Namespace = namespace
	data, err := json.Marshal(edited)
	if err != nil {
		t.Fatal(err)
	}
	oldTarget, err := os.Readlink(dataLink)
	if err != nil {
		t.Fatalf("the sidecar's ConfigMap volume on the node: %v", err)
	}
	applied = time.Now()
	e.apply(data)
	if nudge {
		// Any change to the pod makes the kubelet sync it now, and a sync
		// remounts its ConfigMap volumes (docs/kubernetes.md).
		e.kubectl(nil, "-n", namespace, "annotate", "pod", podName, "--overwrite",
			"sds-proxy.io/config-applied="+applied.UTC().Format("20060102T150405.000Z"))
	}
	// The kubelet rewrites a changed ConfigMap volume at the latest on the
	// pod's next sync (syncFrequency, cluster.sh's SDS_CLUSTER_SYNC, plus
	// up to half of it).
	sync, err := time.ParseDuration(os.Getenv("SDS_CLUSTER_SYNC"))
	if err != nil {
		sync = time.Minute
	}
	poll(t, sync*3/2+30*time.Second, 50*time.Millisecond, "the kubelet's swap of ..data", func() bool {
		target, err := os.Readlink(dataLink)
		if err != nil || target == oldTarget {
			return false
		}
		fi, err := os.Lstat(dataLink)
		if err != nil {
			return false
		}
		swapped = fi.ModTime()
		return true
	})
	return applied, swapped
}

// result is one request of the load: when it started and ended, how.
type result struct {
	start, end time.Time
	long       bool
	code       int
	err        error
}

// exit is containerd's /tasks/exit event of one container.
type exit struct {
	at     time.Time
	status uint32
}

// watchExits runs `ctr events` on the node's containerd and sends each
// task exit, keyed by container ID, until the test ends. The pod object
// is gone the moment its last container stops, so the stop order and exit
// codes are read here, not from the API.
func (e *env) watchExits(t *testing.T) <-chan map[string]exit {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "ctr", "--address", filepath.Join(e.dir, "containerd", "containerd.sock"), "-n", "k8s.io", "events")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := make(chan map[string]exit, 16)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			_, payload, ok := strings.Cut(sc.Text(), " /tasks/exit ")
			if !ok {
				continue
			}
			var ev struct {
				ContainerID string    `json:"container_id"`
				ID          string    `json:"id"`
				ExitStatus  uint32    `json:"exit_status"`
				ExitedAt    time.Time `json:"exited_at"`
			}
			if json.Unmarshal([]byte(payload), &ev) != nil || ev.ID != ev.ContainerID {
				continue // an exec'd process, not the container's own
			}
			select {
			case out <- map[string]exit{ev.ContainerID: {at: ev.ExitedAt, status: ev.ExitStatus}}:
			default:
			}
		}
		_ = cmd.Wait()
	}()
	return out
}

// deleteUnderLoad deletes the pod while a bounded load runs through the
// proxy port. Termination, as docs/kubernetes.md promises it: the app's
// preStop sleep runs while the proxy and the app serve; then the app gets
// SIGTERM and finishes its calls in flight, whose answers flow back
// through the proxy; only after the app has exited does the kubelet stop
// the native sidecar, which drains and exits 0. In a cluster the
// endpoints drop the pod within the preStop sleep, so the load starts no
// request past the deletion + preStop - 1 s: every request it sent must
// be answered 200. One in ten takes 2.5 s, so that some are in flight
// when the app gets SIGTERM.
func (e *env) deleteUnderLoad(t *testing.T, proxyURL string) {
	p, err := e.pod(podName)
	if err != nil {
		t.Fatal(err)
	}
	var preStop time.Duration
	for _, ct := range p.Spec.Containers {
		if ct.Lifecycle != nil && ct.Lifecycle.PreStop != nil && ct.Lifecycle.PreStop.Sleep != nil {
			preStop = time.Duration(ct.Lifecycle.PreStop.Sleep.Seconds) * time.Second
		}
	}
	if preStop < 2*time.Second {
		t.Fatalf("the app's preStop sleep: got %v, want at least 2s", preStop)
	}
	ids := map[string]string{} // container ID -> name
	for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		ids[strings.TrimPrefix(cs.ContainerID, "containerd://")] = cs.Name
	}
	exits := e.watchExits(t)

	const (
		workers = 8
		maxReqs = 2000
		maxTime = 30 * time.Second
	)
	var (
		mu       sync.Mutex
		results  []result
		deleted  time.Time // zero until the deletion
		wg       sync.WaitGroup
		begun    = time.Now()
		lc       = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
		lastSent = func() bool { // under mu
			return len(results) >= maxReqs || time.Since(begun) > maxTime ||
				(!deleted.IsZero() && time.Since(deleted) > preStop-time.Second)
		}
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				mu.Lock()
				if lastSent() {
					mu.Unlock()
					return
				}
				mu.Unlock()
				r := result{start: time.Now(), long: (n+w)%10 == 0}
				ms := 100
				if r.long {
					ms = 2500
				}
				resp, err := lc.Get(fmt.Sprintf("%s/slow?ms=%d", proxyURL, ms))
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					r.code = resp.StatusCode
				}
				r.end, r.err = time.Now(), err
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			}
		}()
	}
	// Load before the deletion, so that it is in flight when it comes.
	poll(t, 20*time.Second, 50*time.Millisecond, "the load running", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(results) >= 4*workers
	})
	e.kubectl(nil, "-n", namespace, "delete", "pod", podName, "--wait=false")
	mu.Lock()
	deleted = time.Now()
	mu.Unlock()
	poll(t, 60*time.Second, 100*time.Millisecond, "the pod gone", func() bool {
		_, err := e.pod(podName)
		return err != nil && strings.Contains(err.Error(), "NotFound")
	})
	gone := time.Since(deleted)
	wg.Wait()

	stopped := map[string]exit{}
	poll(t, 10*time.Second, 50*time.Millisecond, "containerd's exit events of app and sidecar", func() bool {
		for {
			select {
			case m := <-exits:
				for id, x := range m {
					if name, ok := ids[id]; ok {
						stopped[name] = x
					}
				}
			default:
				_, a := stopped["app"]
				_, s := stopped[sidecar]
				return a && s
			}
		}
	})
	app, proxy := stopped["app"], stopped[sidecar]
	t.Logf("figure: deletion -> app exited %v (status %d), sidecar exited %v (status %d), pod gone %v",
		app.at.Sub(deleted).Round(time.Millisecond), app.status, proxy.at.Sub(deleted).Round(time.Millisecond), proxy.status, gone.Round(10*time.Millisecond))
	if !app.at.Before(proxy.at) {
		t.Errorf("the sidecar exited at %v, not after the app (%v): native-sidecar stop order broken", proxy.at, app.at)
	}
	if app.status != 0 || proxy.status != 0 {
		t.Errorf("exit statuses: app %d, sidecar %d; want 0 and 0 (a drained sds-proxy exits 0)", app.status, proxy.status)
	}

	sigterm := deleted.Add(preStop)
	var answered, failed, longDuringDrain int
	var firstFailures []string
	for _, r := range results {
		if r.err == nil && r.code == http.StatusOK {
			answered++
			if r.long && r.start.Before(sigterm) && r.end.After(sigterm) {
				longDuringDrain++
			}
			continue
		}
		failed++
		if len(firstFailures) < 5 {
			firstFailures = append(firstFailures, fmt.Sprintf("started %v after the deletion: code %d err %v",
				r.start.Sub(deleted).Round(time.Millisecond), r.code, r.err))
		}
	}
	t.Logf("figure: deletion under load: %d requests sent, %d answered 200, %d failed; %d of the 2.5 s ones were in flight at deletion + preStop (%v)",
		len(results), answered, failed, longDuringDrain, preStop)
	if failed > 0 {
		t.Errorf("%d requests failed that the drain promises to finish; first: %s", failed, strings.Join(firstFailures, "; "))
	}
}
