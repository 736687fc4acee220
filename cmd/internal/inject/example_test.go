package inject_test

import (
	"fmt"

	"github.com/sds-proxy/sds-proxy/cmd/internal/inject"
)

// ExampleYAML adds the sidecar to a Pod: a native sidecar (an init
// container that keeps running) with its probes, and the ConfigMap and
// scratch volumes it mounts. The warning asks for a preStop hook.
func ExampleYAML() {
	pod := `apiVersion: v1
kind: Pod
metadata: {name: shop}
spec:
  containers: [{name: app, image: shop:1, ports: [{containerPort: 9000}]}]
`
	out, warnings, err := inject.YAML([]byte(pod), inject.Options{Image: "registry.example/sds-proxy:1.0",
		ConfigMap: "sds-proxy", UpstreamPort: 9000, ProxyPort: 8080, AdminPort: 9901})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(out))
	for _, w := range warnings {
		fmt.Println("warning:", w)
	}
	// Output:
	// apiVersion: v1
	// kind: Pod
	// metadata: {name: shop}
	// spec:
	//   containers: [{name: app, image: 'shop:1', ports: [{containerPort: 9000}]}]
	//   initContainers:
	//     - name: sds-proxy
	//       image: registry.example/sds-proxy:1.0
	//       restartPolicy: Always
	//       args: ["run", "-config", "/etc/sds/sds.yaml"]
	//       ports:
	//         - {name: proxy, containerPort: 8080}
	//         - {name: admin, containerPort: 9901}
	//       startupProbe:
	//         httpGet: {path: /readyz, port: admin}
	//         periodSeconds: 1
	//         failureThreshold: 30
	//       readinessProbe:
	//         httpGet: {path: /readyz, port: admin}
	//         periodSeconds: 2
	//       livenessProbe:
	//         httpGet: {path: /healthz, port: admin}
	//         periodSeconds: 10
	//       env:
	//         # certmagic keeps ACME state under $HOME: the sds-tmp volume.
	//         - {name: HOME, value: /tmp}
	//         # GOMEMLIMIT follows this container's memory limit (see the README).
	//         - name: SDS_MEMORY_LIMIT
	//           valueFrom:
	//             resourceFieldRef: {containerName: sds-proxy, resource: limits.memory}
	//       resources:
	//         requests: {cpu: 50m, memory: 32Mi}
	//         limits: {memory: 128Mi}
	//       securityContext:
	//         runAsNonRoot: true
	//         runAsUser: 65532
	//         runAsGroup: 65532
	//         allowPrivilegeEscalation: false
	//         readOnlyRootFilesystem: true
	//         capabilities: {drop: [ALL]}
	//         seccompProfile: {type: RuntimeDefault}
	//       volumeMounts:
	//         # A directory, never a subPath: a subPath mount never sees an update.
	//         - {name: sds-config, mountPath: /etc/sds, readOnly: true}
	//         - {name: sds-tmp, mountPath: /tmp}
	//   volumes:
	//     - name: sds-config
	//       configMap: {name: sds-proxy}
	//     - name: sds-tmp
	//       emptyDir: {}
	//   securityContext:
	//     seccompProfile:
	//       type: RuntimeDefault
	// warning: document 1 (Pod shop): container app has no preStop: in a rollout it can exit while the Service still sends it traffic, and the proxy answers 502 (see the README)
}
