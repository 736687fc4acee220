package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// testRoot is a CA certificate (Pebble's minica root) for caRoot.
const testRoot = `-----BEGIN CERTIFICATE-----
MIIDPzCCAiegAwIBAgIIU0Xm9UFdQxUwDQYJKoZIhvcNAQELBQAwIDEeMBwGA1UE
AxMVbWluaWNhIHJvb3QgY2EgNTM0NWU2MCAXDTI1MDkwMzIzNDAwNVoYDzIxMjUw
OTAzMjM0MDA1WjAgMR4wHAYDVQQDExVtaW5pY2Egcm9vdCBjYSA1MzQ1ZTYwggEi
MA0GCSqGSIb3DQEBAQUAA4IBDwAwggEKAoIBAQC5WgZNoVJandj43kkLyU50vzCZ
alozvdRo3OFiKoDtmqKPNWRNO2hC9AUNxTDJco51Yc42u/WV3fPbbhSznTiOOVtn
Ajm6iq4I5nZYltGGZetGDOQWr78y2gWY+SG078MuOO2hyDIiKtVc3xiXYA+8Hluu
9F8KbqSS1h55yxZ9b87eKR+B0zu2ahzBCIHKmKWgc6N13l7aDxxY3D6uq8gtJRU0
toumyLbdzGcupVvjbjDP11nl07RESDWBLG1/g3ktJvqIa4BWgU2HMh4rND6y8OD3
Hy3H8MY6CElL+MOCbFJjWqhtOxeFyZZV9q3kYnk9CAuQJKMEGuN4GU6tzhW1AgMB
AAGjezB5MA4GA1UdDwEB/wQEAwIChDATBgNVHSUEDDAKBggrBgEFBQcDATASBgNV
HRMBAf8ECDAGAQH/AgEAMB0GA1UdDgQWBBSu8RGpErgYUoYnQuwCq+/ggTiEjDAf
BgNVHSMEGDAWgBSu8RGpErgYUoYnQuwCq+/ggTiEjDANBgkqhkiG9w0BAQsFAAOC
AQEAXDVYov1+f6EL7S41LhYQkEX/GyNNzsEvqxE9U0+3Iri5JfkcNOiA9O9L6Z+Y
bqcsXV93s3vi4r4WSWuc//wHyJYrVe5+tK4nlFpbJOvfBUtnoBDyKNxXzZCxFJVh
f9uc8UejRfQMFbDbhWY/x83y9BDufJHHq32OjCIN7gp2UR8rnfYvlz7Zg4qkJBsn
DG4dwd+pRTCFWJOVIG0JoNhK3ZmE7oJ1N4H38XkZ31NPcMksKxpsLLIS9+mosZtg
4olL7tMPJklx5ZaeMFaKRDq4Gdxkbw4+O4vRgNm3Z8AXWKknOdfgdpqLUPPhRcP4
v1lhy71EhBuXXwRQJry0lTdF+w==
-----END CERTIFICATE-----
`

// TestACMEFields: caRoot, storage and httpListen decode, resolve against
// the config file's directory, and are refused with their positions.
func TestACMEFields(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"root.pem":  testRoot,
		"key.pem":   "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
		"empty.pem": "not PEM\n",
		"file":      "x",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	acme := func(fields string) string {
		return "tls:\n  acme:\n    domains: [a.example]\n" + fields + "\n" + valid + "    visitThreshold: 1\n"
	}
	path := filepath.Join(dir, "sds.yaml")
	f, err := Parse(path, []byte(acme("    caRoot: root.pem\n    storage: acme\n    httpListen: 0.0.0.0:8081")), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := ACME{Domains: []string{"a.example"}, CARoot: filepath.Join(dir, "root.pem"), Storage: filepath.Join(dir, "acme"), HTTPListen: "0.0.0.0:8081"}
	if !reflect.DeepEqual(*f.TLS.ACME, want) {
		t.Errorf("got %+v, want %+v", *f.TLS.ACME, want)
	}

	tests := []struct {
		name, fields string
		want         []string
	}{
		{"caRoot missing", "    caRoot: nope.pem", []string{"4:13: tls.acme.caRoot: " + filepath.Join(dir, "nope.pem") + " does not exist"}},
		{"caRoot not PEM", "    caRoot: empty.pem", []string{"4:13: tls.acme.caRoot: " + filepath.Join(dir, "empty.pem") + " holds no PEM certificate"}},
		{"caRoot a key", "    caRoot: key.pem", []string{`4:13: tls.acme.caRoot: ` + filepath.Join(dir, "key.pem") + ` holds a "PRIVATE KEY" PEM block`}},
		{"caRoot a directory", "    caRoot: .", []string{"4:13: tls.acme.caRoot: " + dir + " is not a regular file"}},
		{"caRoot empty", "    caRoot: ''", []string{"4:13: tls.acme.caRoot is empty"}},
		{"storage a file", "    storage: file", []string{"4:14: tls.acme.storage: " + filepath.Join(dir, "file") + " is not a directory"}},
		{"storage empty", "    storage: ''", []string{"4:14: tls.acme.storage is empty"}},
		{"storage missing is created later", "    storage: not/yet", nil},
		{"httpListen not an address", "    httpListen: localhost", []string{`4:17: tls.acme.httpListen: "localhost" is not a host:port address`}},
		{"httpListen on the proxy port", "    httpListen: 0.0.0.0:8080", []string{"4:17: tls.acme.httpListen: 0.0.0.0:8080 is the same port as listen"}},
		{"httpListen on the admin port", "    httpListen: 127.0.0.1:9901", []string{"4:17: tls.acme.httpListen: 127.0.0.1:9901 is the same port as admin"}},
		{"httpListen empty", "    httpListen: ''", []string{"4:17: tls.acme.httpListen is empty"}},
		{"unknown key", "    storge: x", []string{`4:5: unknown key "storge" in tls.acme; did you mean "storage"?`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(path, []byte(acme(tt.fields)), Options{})
			var got []string
			if err != nil {
				for line := range strings.SplitSeq(err.Error(), "\n") {
					got = append(got, strings.TrimPrefix(line, path+":"))
				}
			}
			checkProblems(t, got, tt.want)
		})
	}
}

// TestRelativeConfigPathNoRestart: a config file named by a relative path
// (-config sds.yaml, as at start-up) and the same file named by its
// absolute path (as the watcher reads it) give the same TLS paths, so a
// reload does not report that tls needs a restart.
func TestRelativeConfigPathNoRestart(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"cert.pem", "key.pem", "root.pem"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(testRoot), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	for _, tlsSrc := range []string{
		"tls: {certFile: cert.pem, keyFile: ./key.pem}",
		"tls: {acme: {domains: [a.example], caRoot: root.pem, storage: acme}}",
	} {
		src := []byte(tlsSrc + "\n" + valid + "    visitThreshold: 1\n")
		if err := os.WriteFile("sds.yaml", src, 0o644); err != nil {
			t.Fatal(err)
		}
		rel, err := Load("sds.yaml", Options{})
		if err != nil {
			t.Fatal(err)
		}
		abs, err := Load(filepath.Join(dir, "sds.yaml"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := Diff(rel, abs).NeedsRestart; got != nil {
			t.Errorf("%s: reload from the absolute path needs a restart of %v, want none", tlsSrc, got)
		}
		for _, p := range []string{rel.TLS.CertFile, rel.TLS.KeyFile} {
			if p != "" && !filepath.IsAbs(p) {
				t.Errorf("%s: got relative path %q", tlsSrc, p)
			}
		}
	}
}
