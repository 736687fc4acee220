package main_test

import (
	"strings"
	"testing"
)

// TestInjectMovesPortsE2E: the real binary, on a Deployment whose app
// already listens on 8080, refuses by default and says which flag moves
// the sidecar; with -proxy-port 8081 -admin-port 9902 it injects a sidecar
// on those ports (its -listen and -admin, its containerPorts; the probes
// name the admin port) and points the Service at 8081. A port out of
// range or shared is a wrong command line (exit 2).
func TestInjectMovesPortsE2E(t *testing.T) {
	t.Parallel()
	needBinaries(t)
	const app = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: registry.example/web:1.0
          ports: [{containerPort: 8080}]
          lifecycle: {preStop: {sleep: {seconds: 5}}}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
`
	for _, tc := range []struct {
		args     []string
		code     int
		stdout   []string // each in stdout
		stderr   string   // in stderr
		noStdout bool
	}{
		{args: []string{"-image", "i"}, code: 1, noStdout: true,
			stderr: "sds-proxy inject: document 1 (Deployment web): container web already uses port 8080, one of the sidecar's (8080, 9901): move the sidecar's with -proxy-port N or -admin-port N\n"},
		{args: []string{"-image", "i", "-proxy-port", "8081", "-admin-port", "9902", "-upstream-port", "8080", "-service-target"}, code: 0,
			stdout: []string{
				`args: ["run", "-config", "/etc/sds/sds.yaml", "-listen", "0.0.0.0:8081", "-admin", "0.0.0.0:9902"]`,
				"- {name: proxy, containerPort: 8081}",
				"- {name: admin, containerPort: 9902}",
				"httpGet: {path: /readyz, port: admin}",
				"ports: [{port: 80, targetPort: 8081}]",
			}},
		{args: []string{"-image", "i", "-proxy-port", "70000"}, code: 2, noStdout: true, stderr: "sds-proxy: inject: -proxy-port 70000: want a port from 1 to 65535\n"},
		{args: []string{"-image", "i", "-admin-port", "8080"}, code: 2, noStdout: true, stderr: "sds-proxy: inject: -proxy-port and -admin-port are both 8080: the sidecar needs two ports\n"},
	} {
		stdout, stderr, code := runCLIInput(t, strings.NewReader(app), append([]string{"inject"}, tc.args...)...)
		if code != tc.code || (tc.stderr != "" && stderr != tc.stderr) || (tc.noStdout && stdout != "") {
			t.Errorf("inject %q: got exit code %d, stdout %q, stderr %q; want %d, stderr %q", tc.args, code, stdout, stderr, tc.code, tc.stderr)
		}
		for _, want := range tc.stdout {
			if !strings.Contains(stdout, want) {
				t.Errorf("inject %q: stdout lacks %q:\n%s", tc.args, want, stdout)
			}
		}
	}
}
