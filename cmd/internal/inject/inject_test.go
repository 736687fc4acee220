package inject

import (
	"bytes"
	"errors"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sds-proxy/sds-proxy/cmd/internal/cli"
	"github.com/sds-proxy/sds-proxy/config"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata")

// injectTestOptions are the flags every file under testdata is
// injected with (deploy/check's inject test uses the same).
var injectTestOptions = Options{
	Image:         "registry.example/sds-proxy:1.0",
	ConfigMap:     "sds-proxy",
	UpstreamPort:  9000,
	ServiceTarget: true,
	ProxyPort:     defaultProxyPort,
	AdminPort:     defaultAdminPort,
}

// optionVariants are injectTestOptions as a legacy sidecar, and with the
// sidecar's ports moved to 8081 and 9902.
func optionVariants() (legacy, moved Options) {
	legacy, moved = injectTestOptions, injectTestOptions
	legacy.Legacy = true
	moved.ProxyPort, moved.AdminPort = 8081, 9902
	return legacy, moved
}

// TestInjectGolden injects each NAME.in.yaml under testdata and
// compares the result with NAME.out.yaml (NAME.legacy.out.yaml with
// -legacy-sidecar); -update rewrites them. Injecting the output again
// gives the same bytes.
func TestInjectGolden(t *testing.T) {
	t.Parallel()
	legacy, moved := optionVariants()
	tests := []struct {
		in, out string
		o       Options
	}{
		{"deployment.in.yaml", "deployment.out.yaml", injectTestOptions},
		{"deployment.in.yaml", "deployment.legacy.out.yaml", legacy},
		{"deployment.in.yaml", "deployment.ports.out.yaml", moved},
		{"list.in.yaml", "list.out.yaml", injectTestOptions},
		{"statefulset.in.yaml", "statefulset.out.yaml", injectTestOptions},
		{"daemonset.in.yaml", "daemonset.out.yaml", injectTestOptions},
		{"pod.in.yaml", "pod.out.yaml", injectTestOptions},
	}
	for _, tt := range tests {
		t.Run(tt.out, func(t *testing.T) {
			t.Parallel()
			in, err := os.ReadFile(filepath.Join("testdata", tt.in))
			if err != nil {
				t.Fatal(err)
			}
			got, warnings, err := YAML(in, tt.o)
			if err != nil {
				t.Fatalf("inject: %v", err)
			}
			if len(warnings) > 0 {
				t.Errorf("warnings %q, want none", warnings)
			}
			golden := filepath.Join("testdata", tt.out)
			if *updateGolden {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("got:\n%s\nwant (%s):\n%s", got, golden, want)
			}
			again, warnings, err := YAML(got, tt.o)
			if err != nil || len(warnings) > 0 {
				t.Fatalf("injecting the output again: warnings %q, error %v", warnings, err)
			}
			if !bytes.Equal(again, got) {
				t.Errorf("injecting twice changed the output:\n%s\nafter once:\n%s", again, got)
			}
		})
	}
}

// TestInjectPassThrough: documents inject has nothing to do with, comments
// and odd separators included, come out byte for byte.
func TestInjectPassThrough(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"",
		"# only a comment\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n    k:   v   # spacing kept\n",
		"--- # a comment on the separator\napiVersion: batch/v1\nkind: CronJob\n---\n---\nkind: Secret\n",
		"apiVersion: v1\r\nkind: Service\r\nmetadata:\r\n  name: s\r\n",
		"no newline at the end: true",
	} {
		got, _, err := YAML([]byte(in), injectTestOptions)
		if err != nil || string(got) != in {
			t.Errorf("inject(%q) = %q, %v; want the input back", in, got, err)
		}
	}
}

// refusalDeployment is the head of a Deployment whose pod spec each
// injectRefusals row completes.
const refusalDeployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n"

// injectRefusals are TestInjectRefusals' rows: an input inject must
// refuse, the options it is injected with (only Legacy and the ports
// are read, over injectTestOptions), and the refusal.
var injectRefusals = []struct {
	name, in string
	o        Options
	want     []string // each a line of the error, in order
}{
	{
		name: "other image",
		in:   "kind: ConfigMap\n---\n" + refusalDeployment + "      initContainers:\n        - {name: sds-proxy, image: registry.example/sds-proxy:0.9, restartPolicy: Always}\n      containers: [{name: app, image: app}]\n",
		want: []string{`document 2 (Deployment web): it already has a container sds-proxy with image "registry.example/sds-proxy:0.9", not "registry.example/sds-proxy:1.0" (remove it to inject anew)`},
	},
	{
		name: "hostNetwork",
		in:   "apiVersion: v1\nkind: Pod\nmetadata: {name: agent}\nspec:\n  hostNetwork: true\n  containers: [{name: app, image: app}]\n",
		want: []string{"document 1 (Pod agent): hostNetwork pods share the node's ports: the sidecar's 8080 and 9901 would collide across pods; inject only pods with their own network"},
	},
	{
		name: "no containers",
		in:   refusalDeployment + "      containers: []\n",
		want: []string{"document 1 (Deployment web): the pod has no containers: nothing for the sidecar to stand in front of"},
	},
	{
		name: "no template",
		in:   "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec: {replicas: 1}\n",
		want: []string{"document 1 (StatefulSet db): no pod spec to inject into"},
	},
	{
		name: "malformed",
		in:   "kind: ConfigMap\n---\nkind: Pod\nspec: [unclosed\n",
		want: []string{"document 2: malformed YAML: yaml: line 3: did not find expected ',' or ']'"},
	},
	{
		name: "port taken",
		in:   refusalDeployment + "      containers:\n        - name: app\n          image: app\n          ports: [{containerPort: 8080}]\n",
		want: []string{"document 1 (Deployment web): container app already uses port 8080, one of the sidecar's (8080, 9901): move the sidecar's with -proxy-port N or -admin-port N"},
	},
	{
		name: "moved port taken",
		in:   refusalDeployment + "      containers:\n        - name: app\n          image: app\n          ports: [{containerPort: 9902}]\n",
		o:    Options{ProxyPort: 8081, AdminPort: 9902},
		want: []string{"document 1 (Deployment web): container app already uses port 9902, one of the sidecar's (8081, 9902): move the sidecar's with -proxy-port N or -admin-port N"},
	},
	{
		name: "sidecar already there on other ports",
		in:   refusalDeployment + "      initContainers:\n        - name: sds-proxy\n          image: registry.example/sds-proxy:1.0\n          restartPolicy: Always\n          ports: [{name: proxy, containerPort: 8080}, {name: admin, containerPort: 9901}]\n      containers: [{name: app, image: app}]\n",
		o:    Options{ProxyPort: 8081, AdminPort: 9902},
		want: []string{"document 1 (Deployment web): it already has a container sds-proxy on ports 8080 and 9901, not 8081 and 9902 (remove it to inject anew)"},
	},
	{
		name: "port name taken",
		in:   refusalDeployment + "      containers:\n        - name: app\n          image: app\n          ports: [{name: admin, containerPort: 9090}]\n",
		want: []string{`document 1 (Deployment web): container app already names a port "admin", as the sidecar does: port names are unique in a pod; rename it`},
	},
	{
		name: "legacy sidecar already there",
		in:   refusalDeployment + "      containers:\n        - {name: app, image: app}\n        - {name: sds-proxy, image: registry.example/sds-proxy:1.0}\n",
		want: []string{"document 1 (Deployment web): it already has sds-proxy in containers; as a native sidecar it belongs in initContainers (remove it to inject anew)"},
	},
	{
		name: "native sidecar already there",
		in:   refusalDeployment + "      initContainers: [{name: sds-proxy, image: registry.example/sds-proxy:1.0, restartPolicy: Always}]\n      containers: [{name: app, image: app}]\n",
		o:    Options{Legacy: true},
		want: []string{"document 1 (Deployment web): it already has sds-proxy in initContainers; as a legacy sidecar (-legacy-sidecar) it belongs in containers (remove it to inject anew)"},
	},
	{
		name: "other ConfigMap",
		in:   refusalDeployment + "      containers: [{name: app, image: app}]\n      volumes: [{name: sds-config, configMap: {name: old}}]\n",
		want: []string{"document 1 (Deployment web): it already has a volume sds-config that is not the ConfigMap sds-proxy (remove it to inject anew)"},
	},
	{
		name: "other tmp volume",
		in:   refusalDeployment + "      containers: [{name: app, image: app}]\n      volumes: [{name: sds-tmp, hostPath: {path: /tmp}}]\n",
		want: []string{"document 1 (Deployment web): it already has a volume sds-tmp that is not an emptyDir (remove it to inject anew)"},
	},
	{
		name: "volumes not a list",
		in:   refusalDeployment + "      containers: [{name: app, image: app}]\n      volumes: {name: data}\n",
		want: []string{"document 1 (Deployment web): its volumes is neither a list nor null"},
	},
	{
		name: "every problem, List items named",
		in:   "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a}\n  spec: {hostNetwork: true, containers: [{name: app}]}\n- apiVersion: v1\n  kind: Pod\n  metadata: {generateName: b-}\n  spec: {containers: []}\n",
		want: []string{
			"document 1, item 1 (Pod a): hostNetwork pods share the node's ports: the sidecar's 8080 and 9901 would collide across pods; inject only pods with their own network",
			"document 1, item 2 (Pod b-): the pod has no containers: nothing for the sidecar to stand in front of",
		},
	},
}

// TestInjectRefusals: what inject cannot inject is refused with the
// document's index, kind and name, and nothing is written.
func TestInjectRefusals(t *testing.T) {
	t.Parallel()
	for _, tt := range injectRefusals {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := injectTestOptions
			o.Legacy = tt.o.Legacy
			if tt.o.ProxyPort != 0 {
				o.ProxyPort, o.AdminPort = tt.o.ProxyPort, tt.o.AdminPort
			}
			out, _, err := YAML([]byte(tt.in), o)
			if err == nil {
				t.Fatalf("inject succeeded with:\n%s\nwant the refusal %q", out, tt.want)
			}
			if got := strings.Split(err.Error(), "\n"); !equalStrings(got, tt.want) {
				t.Errorf("got the refusal\n%s\nwant\n%s", err, strings.Join(tt.want, "\n"))
			}
			if out != nil {
				t.Errorf("a refusal wrote %q, want nothing", out)
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestInjectWarnings: what inject leaves alone that the user may want to
// know about.
func TestInjectWarnings(t *testing.T) {
	t.Parallel()
	in := "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {app: p}}\nspec:\n  containers: [{name: app, image: app, ports: [{containerPort: 3000}]}]\n" +
		"---\napiVersion: v1\nkind: Service\nmetadata: {name: p}\nspec:\n  selector: {app: p}\n  ports: [{port: 80, targetPort: 3000}]\n" +
		"---\napiVersion: v1\nkind: Pod\nmetadata: {name: q}\nspec:\n  containers: [{name: app, image: app, ports: [{containerPort: 9000}]}]\n"
	out, warnings, err := YAML([]byte(in), injectTestOptions)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"document 1 (Pod p): no container declares the upstream port 9000",
		"document 3 (Pod q): container app has no preStop: in a rollout it can exit while the Service still sends it traffic, and the proxy answers 502 (see the README)",
		"document 2 (Service p) selects an injected pod but no port targets 9000; left unchanged",
	}
	if !equalStrings(warnings, want) {
		t.Errorf("got warnings\n%s\nwant\n%s", strings.Join(warnings, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(string(out), "\n---\napiVersion: v1\nkind: Service\nmetadata: {name: p}\nspec:\n  selector: {app: p}\n  ports: [{port: 80, targetPort: 3000}]\n---\n") {
		t.Errorf("the Service changed:\n%s", out)
	}
}

// TestInjectCommand: the command's flags, a wrong one cli.ErrUsage (exit 2),
// its output on stdout, and its refusals on stderr with cli.ErrInvalid (exit 1).
func TestInjectCommand(t *testing.T) {
	t.Parallel()
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  hostNetwork: true\n  containers: [{name: app, image: app}]\n"
	tests := []struct {
		name       string
		args       []string
		in         string
		wantErr    string // "" for none
		wantStderr string
		usage      bool // wantErr is cli.ErrUsage: a wrong command line
	}{
		{name: "no image", args: nil, wantErr: "inject: -image is required, such as -image registry.example/sds-proxy:1.0", usage: true},
		{name: "service target without port", args: []string{"-image", "i", "-service-target"}, wantErr: "inject: -service-target needs -upstream-port, the app's port that Services target today", usage: true},
		{name: "upstream is the proxy", args: []string{"-image", "i", "-upstream-port", "8080"}, wantErr: "inject: -upstream-port 8080 is the sidecar's -proxy-port too; the app and the sidecar share the pod's ports: move the sidecar's with -proxy-port N", usage: true},
		{name: "upstream is the admin port", args: []string{"-image", "i", "-upstream-port", "9902", "-admin-port", "9902"}, wantErr: "inject: -upstream-port 9902 is the sidecar's -admin-port too; the app and the sidecar share the pod's ports: move the sidecar's with -admin-port N", usage: true},
		{name: "proxy port 0", args: []string{"-image", "i", "-proxy-port", "0"}, wantErr: "inject: -proxy-port 0: want a port from 1 to 65535", usage: true},
		{name: "admin port 65536", args: []string{"-image", "i", "-admin-port", "65536"}, wantErr: "inject: -admin-port 65536: want a port from 1 to 65535", usage: true},
		{name: "ports the same", args: []string{"-image", "i", "-proxy-port", "9901"}, wantErr: "inject: -proxy-port and -admin-port are both 9901: the sidecar needs two ports", usage: true},
		{name: "every problem", args: []string{"-proxy-port", "-1", "-service-target"},
			wantErr: "inject: -image is required, such as -image registry.example/sds-proxy:1.0\nsds-proxy: inject: -proxy-port -1: want a port from 1 to 65535\nsds-proxy: inject: -service-target needs -upstream-port, the app's port that Services target today", usage: true},
		{name: "app on 8080, sidecar moved", args: []string{"-image", "i", "-proxy-port", "8081", "-admin-port", "9902", "-upstream-port", "8080"},
			in: "kind: Pod\nspec: {containers: [{name: app, ports: [{containerPort: 8080}], lifecycle: {preStop: {sleep: {seconds: 5}}}}]}\n"},
		{name: "arguments", args: []string{"-image", "i", "in.yaml"}, wantErr: `inject: unexpected arguments ["in.yaml"] (the YAML comes on stdin)`, usage: true},
		{name: "refused", args: []string{"-image", "i"}, in: pod, wantErr: cli.ErrInvalid.Error(),
			wantStderr: "sds-proxy inject: document 1 (Pod p): hostNetwork pods share the node's ports: the sidecar's 8080 and 9901 would collide across pods; inject only pods with their own network\n"},
		{name: "warned", args: []string{"-image", "i", "-upstream-port", "9000"}, in: "kind: Pod\nspec: {containers: [{name: app}]}\n",
			wantStderr: "sds-proxy inject: warning: document 1 (Pod ): no container declares the upstream port 9000\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			fs := flag.NewFlagSet("inject", flag.ContinueOnError)
			fs.SetOutput(&stderr)
			err := Run(fs, tt.args, strings.NewReader(tt.in), &stdout)
			if got := errString(err); got != tt.wantErr {
				t.Errorf("got error %q, want %q", got, tt.wantErr)
			}
			if tt.wantErr != "" && stdout.Len() > 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
			if tt.wantErr == "" && !strings.Contains(stdout.String(), "name: sds-proxy") {
				t.Errorf("stdout %q has no sidecar", stdout.String())
			}
			if tt.wantStderr != "" && stderr.String() != tt.wantStderr {
				t.Errorf("stderr %q, want %q", stderr.String(), tt.wantStderr)
			}
			if tt.wantErr == cli.ErrInvalid.Error() && !errors.Is(err, cli.ErrInvalid) {
				t.Errorf("got %v, want cli.ErrInvalid (exit 1, nothing more printed)", err)
			}
			if got := errors.Is(err, cli.ErrUsage); got != tt.usage {
				t.Errorf("errors.Is(%v, cli.ErrUsage): got %v, want %v (exit 2 for a wrong command line)", err, got, tt.usage)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzInject: whatever the input, inject does not panic, and what it
// writes, injected again, comes back byte for byte.
func FuzzInject(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		in, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, _, err := YAML(in, injectTestOptions)
		if err != nil {
			return
		}
		again, _, err := YAML(out, injectTestOptions)
		if err != nil {
			t.Fatalf("injecting the output again: %v\noutput:\n%s", err, out)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("injecting twice changed the output:\n%s\nafter once:\n%s", again, out)
		}
	})
}

// TestInjectDefaultPorts: the sidecar's default ports are sds.yaml's
// default listen and admin ports, so that a sidecar at its defaults
// takes them from the file and agrees with it.
func TestInjectDefaultPorts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr string
		port int
	}{{config.DefaultListen, defaultProxyPort}, {config.DefaultAdmin, defaultAdminPort}} {
		_, p, err := net.SplitHostPort(tc.addr)
		if err != nil || p != strconv.Itoa(tc.port) {
			t.Errorf("the sidecar's default port %d; sds.yaml's default address %q (%v)", tc.port, tc.addr, err)
		}
	}
}
