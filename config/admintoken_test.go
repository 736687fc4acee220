package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseAdminTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const token = "0123456789abcdef-token"
	write("token", "  "+token+"\n")
	write("short", "0123456789abcde\n")
	write("spaced", "0123456789 abcdef\n")
	write("empty", "\n")
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o700); err != nil {
		t.Fatal(err)
	}
	parse := func(line string) (*File, []string) {
		t.Helper()
		src := line + "\n" + valid
		f, err := Parse(filepath.Join(dir, "sds.yaml"), []byte(src), Options{})
		if err == nil {
			return f, nil
		}
		var out []string
		for _, e := range err.(Errors) {
			out = append(out, strings.TrimPrefix(e.Error(), filepath.Join(dir, "sds.yaml")+":"))
		}
		return nil, out
	}

	f, problems := parse("adminTokenFile: token")
	if problems != nil {
		t.Fatalf("a good token file: %v", problems)
	}
	if string(f.AdminToken) != token {
		t.Errorf("AdminToken: got %q, want %q (white space trimmed)", f.AdminToken, token)
	}
	if want := filepath.Join(dir, "token"); f.AdminTokenFile != want {
		t.Errorf("AdminTokenFile: got %q, want %q (resolved against the config's directory)", f.AdminTokenFile, want)
	}
	if f, _ := parse("listen: 127.0.0.1:0"); f.AdminToken != nil || f.AdminTokenFile != "" {
		t.Errorf("no adminTokenFile: got token %q file %q, want none", f.AdminToken, f.AdminTokenFile)
	}

	for _, tc := range []struct{ line, want string }{
		{"adminTokenFile: missing", "1:17: adminTokenFile: " + filepath.Join(dir, "missing") + " does not exist"},
		{"adminTokenFile: short", "1:17: adminTokenFile: " + filepath.Join(dir, "short") + " holds a token of 15 characters; it needs at least 16"},
		{"adminTokenFile: spaced", "holds a token with ' ' in it"},
		{"adminTokenFile: empty", "holds a token of 0 characters"},
		{"adminTokenFile: adir", "is not a regular file"},
		{`adminTokenFile: ""`, "1:17: adminTokenFile is empty"},
		{"adminTokenFile: 5", "1:17: "},
		{"adminTokenFile: [a]", "1:17: "},
	} {
		_, problems := parse(tc.line)
		if len(problems) != 1 || !strings.Contains(problems[0], tc.want) {
			t.Errorf("%s: got problems %q, want one with %q", tc.line, problems, tc.want)
		}
	}

	// The same file with a new token is a change; the change names the
	// key, never the token.
	a, _ := parse("adminTokenFile: token")
	write("token", token+"-rotated\n")
	b, _ := parse("adminTokenFile: token")
	c := Diff(a, b)
	if got := c.String(); got != "settings changed [adminTokenFile]" {
		t.Errorf("a rotated token: got change %q, want settings changed [adminTokenFile]", got)
	}
	if again, _ := parse("adminTokenFile: token"); !Diff(b, again).Empty() {
		t.Errorf("the same token read twice: got change %q", Diff(b, again))
	}
}

// TestParseTextAdminTokenFile: ParseText keeps adminTokenFile's path as
// written and reads nothing.
func TestParseTextAdminTokenFile(t *testing.T) {
	text, err := ParseText("elsewhere/sds.yaml", []byte("adminTokenFile: secret/token\n"+valid), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if text.AdminTokenFile != "secret/token" || text.AdminToken != nil {
		t.Errorf("ParseText: got file %q token %q, want the path as written and no token", text.AdminTokenFile, text.AdminToken)
	}
}

// validate -diff shows a changed adminTokenFile by its path, never its
// token.
func TestFileSettingsAdminTokenFile(t *testing.T) {
	base, err := ParseText("sds.yaml", []byte(valid), Options{})
	if err != nil {
		t.Fatal(err)
	}
	next, err := ParseText("sds.yaml", []byte("adminTokenFile: secret/token\n"+valid), Options{})
	if err != nil {
		t.Fatal(err)
	}
	reload, _ := FileSettings(base, next)
	if len(reload) != 1 || reload[0].String() != `adminTokenFile: default -> "secret/token"` {
		t.Errorf("got %v, want the path from the default (none)", reload)
	}
	if c := Diff(base, next); len(c.Settings) != 1 || c.Settings[0] != "adminTokenFile" {
		t.Errorf("Diff: got %v", c.Settings)
	}
}
